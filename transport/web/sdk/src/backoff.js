// Exponential backoff with full jitter: the pause before attempt n (from 0) is drawn uniformly
// between 0 and min(maxMs, initialMs * 2^n), so clients of a restarted node spread out instead of
// coming back together.

/**
 * @typedef {object} BackoffOptions
 * @property {number} [initialMs] the cap of the first pause; default 500
 * @property {number} [maxMs] the largest cap; default 15000
 * @property {() => number} [random] a uniform draw from [0, 1); default Math.random
 */

/**
 * backoffDelay returns the pause in milliseconds before attempt (0 for the first retry).
 *
 * @param {number} attempt
 * @param {BackoffOptions} [options]
 * @returns {number}
 */
export function backoffDelay(attempt, options = {}) {
  const initial = options.initialMs ?? 500;
  const max = options.maxMs ?? 15000;
  const random = options.random ?? Math.random;
  const cap = Math.min(max, initial * Math.pow(2, Math.max(0, Math.min(attempt, 30))));
  return Math.floor(random() * cap);
}

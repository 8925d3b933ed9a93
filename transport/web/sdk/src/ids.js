// Ids and seqs. Seqs are decimal strings on the wire; the SDK compares them as numbers, which are
// exact up to 2^53 (9e15 messages in one topic).

/**
 * randomId returns 24 random hex digits (crypto.getRandomValues, available in browsers on plain
 * HTTP too, and in Node).
 *
 * @returns {string}
 */
export function randomId() {
  const b = new Uint8Array(12);
  globalThis.crypto.getRandomValues(b);
  return Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
}

/**
 * seqNumber parses a seq ("42") into a number; anything that is not canonical digits within 2^53
 * is NaN.
 *
 * @param {unknown} seq
 * @returns {number}
 */
export function seqNumber(seq) {
  if (typeof seq === 'number') {
    return Number.isSafeInteger(seq) && seq >= 0 ? seq : NaN;
  }
  if (typeof seq !== 'string' || !/^(0|[1-9][0-9]{0,15})$/.test(seq)) {
    return NaN;
  }
  const n = Number(seq);
  return Number.isSafeInteger(n) ? n : NaN;
}

/**
 * directTopic returns the 1:1 topic of two user ids: p2p<lower id>_<higher id>.
 *
 * @param {string} a
 * @param {string} b
 * @returns {string}
 */
export function directTopic(a, b) {
  const x = BigInt(a);
  const y = BigInt(b);
  return x < y ? 'p2p' + a + '_' + b : 'p2p' + b + '_' + a;
}

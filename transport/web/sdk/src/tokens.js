// The token of the Client's logins: which one to log in with, when to ask refreshToken for a new
// one (the server refused the last, it is past its expiry, or it is about to expire), and the
// refusals no new token cures. Internal to the Client.

import { ConnectionLostError, ImledgerError } from './errors.js';

/** A login refused for a reason a new connection cannot fix; the client closes with it. */
export class AuthFailure extends ImledgerError {
  /** @param {string} reason */
  constructor(reason) {
    super('login refused: ' + reason);
    this.name = 'AuthFailure';
    /** @type {string} */
    this.reason = reason;
  }
}

/**
 * @typedef {object} TokenOptions
 * @property {string | (() => string | Promise<string>)} token
 * @property {(info: {reason: string}) => (string | null | undefined | Promise<string | null | undefined>)} [refreshToken]
 * @property {number} [refreshMarginMs]
 */

/** TokenKeeper holds the Client's token state; see the module comment. */
export class TokenKeeper {
  /**
   * @param {TokenOptions} options
   * @param {(err: Error) => void} onError reports a refreshToken hook that threw
   */
  constructor(options, onError) {
    this._o = options;
    this._onError = onError;
    /** @type {string|undefined} the token of the next login (a string option, set() or a refresh) */
    this._token = typeof options.token === 'string' ? options.token : undefined;
    this._loginToken = '';
    this._expiresAt = 0;
    /** @type {string|null} a reason a new token must cure before the next login */
    this._due = null;
    /** @type {ReturnType<typeof setTimeout>|undefined} */
    this._timer = undefined;
  }

  /** Whether there is a refreshToken hook. */
  get canRefresh() { return !!this._o.refreshToken; }

  /** @param {string} token the token of the next login */
  set(token) { this._token = token; }

  /**
   * differs reports whether token is not the one the live session logged in with.
   *
   * @param {string} token
   */
  differs(token) { return token !== this._loginToken; }

  /**
   * due makes the next login ask refreshToken first (the server said reason of the last token).
   *
   * @param {string} reason
   */
  due(reason) { this._due = reason; }

  /**
   * forLogin is the token of the next login: a new one from refreshToken when the server said the
   * last one is no good or it is past its expiry; the token option otherwise (a function is asked).
   *
   * @returns {Promise<string>}
   */
  async forLogin() {
    if (this._due) {
      const token = await this.refreshOrFail(this._due); // a hook that threw leaves it due
      this._due = null;
      return token;
    }
    let token = this._token;
    if (typeof this._o.token === 'function') {
      token = await this._o.token();
      this._token = token;
    }
    if (token && token === this._loginToken && this._expiresAt && Date.now() >= this._expiresAt && this.canRefresh) {
      return this.refreshOrFail('expired'); // known to be past its expiry: not worth a refused login
    }
    if (!token) { throw new AuthFailure('no_token'); }
    return token;
  }

  /**
   * refreshOrFail asks refreshToken for a new token; without one the login cannot go on.
   *
   * @param {string} reason
   * @returns {Promise<string>}
   */
  async refreshOrFail(reason) {
    const token = await this.refresh(reason);
    if (!token) { throw new AuthFailure(reason); }
    return token;
  }

  /**
   * refresh asks refreshToken for a new token; null when there is no hook or it gave none. A hook
   * that throws (the network is down, say) is reported and fails the attempt with a
   * ConnectionLostError, so the client tries again later rather than giving up.
   *
   * @param {string} reason
   * @returns {Promise<string|null>}
   */
  async refresh(reason) {
    if (!this._o.refreshToken) { return null; }
    /** @type {string|null|undefined} */
    let token;
    try {
      token = await this._o.refreshToken({ reason });
    } catch (err) {
      this._onError(err instanceof Error ? err : new ImledgerError(String(err)));
      throw new ConnectionLostError('token refresh failed');
    }
    if (typeof token !== 'string' || !token) { return null; }
    this._token = token;
    return token;
  }

  /**
   * loggedIn records a login with token that expires at expires, and schedules renew with a fresh
   * token from refreshToken (reason "expiring") shortly before then: refreshMarginMs (60 s), or
   * half the time left when that is shorter.
   *
   * @param {string} token
   * @param {string} expires RFC 3339
   * @param {(token: string) => Promise<void>} renew
   */
  loggedIn(token, expires, renew) {
    this._loginToken = token;
    this._expiresAt = Date.parse(expires) || 0;
    this.stop();
    if (!this.canRefresh || !this._expiresAt) { return; }
    const left = this._expiresAt - Date.now();
    const margin = Math.min(this._o.refreshMarginMs ?? 60000, left / 2);
    this._timer = setTimeout(async () => {
      const fresh = await this.refresh('expiring').catch(() => null);
      if (fresh) { await renew(fresh).catch(() => {}); }
    }, Math.min(Math.max(0, left - margin), 0x7fffffff));
  }

  /** stop cancels the scheduled renewal. */
  stop() {
    clearTimeout(this._timer);
    this._timer = undefined;
  }
}

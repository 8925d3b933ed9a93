// Errors of the SDK. Every failure a caller sees is an ImledgerError: a refusal by the server
// (ProtocolError over WebSocket, ApiError over REST), a lost connection, or a closed client.

/** The base class of every error the SDK rejects or reports with. */
export class ImledgerError extends Error {
  /**
   * @param {string} message
   * @param {{cause?: unknown}} [options]
   */
  constructor(message, options) {
    super(message, options);
    this.name = 'ImledgerError';
  }
}

/**
 * A ctrl frame that refused a request: `code` is the HTTP-like status, `reason` the stable reason
 * of the protocol (see /asyncapi.json, message ctrlError), `params` its params. Nothing was written.
 */
export class ProtocolError extends ImledgerError {
  /**
   * @param {number} code
   * @param {string} reason
   * @param {string} text
   * @param {Record<string, unknown>} [params]
   */
  constructor(code, reason, text, params) {
    super(text || reason || ('error ' + code));
    this.name = 'ProtocolError';
    /** @type {number} */
    this.code = code;
    /** @type {string} */
    this.reason = reason;
    /** @type {Record<string, unknown>} */
    this.params = params || {};
  }

  /** Whether the same request may succeed when sent again (the server said so, or the refusal is temporary). */
  get retryable() {
    return this.params.retryable === true || this.code === 429 || this.code === 503 ||
      this.reason === 'in_progress' || this.reason === 'conflict';
  }
}

/** The connection ended before the server answered; the request may or may not have been done. */
export class ConnectionLostError extends ImledgerError {
  /** @param {string} [message] */
  constructor(message) {
    super(message || 'connection lost');
    this.name = 'ConnectionLostError';
  }
}

/** The client was closed (close() or a refusal that a new connection cannot fix); `reason` says which. */
export class ClientClosedError extends ImledgerError {
  /** @param {string} reason */
  constructor(reason) {
    super('client closed: ' + reason);
    this.name = 'ClientClosedError';
    /** @type {string} */
    this.reason = reason;
  }
}

/**
 * A refused REST request: `status` is the HTTP status, `reason` the envelope's stable reason,
 * `details` its details (e.g. {field, reason} for invalid input), `requestId` the server's id of
 * the request (for its logs).
 */
export class ApiError extends ImledgerError {
  /**
   * @param {number} status
   * @param {string} reason
   * @param {string} message
   * @param {Record<string, unknown>} [details]
   * @param {string} [requestId]
   */
  constructor(status, reason, message, details, requestId) {
    super(message || reason || ('HTTP ' + status));
    this.name = 'ApiError';
    /** @type {number} */
    this.status = status;
    /** @type {string} */
    this.reason = reason;
    /** @type {Record<string, unknown>} */
    this.details = details || {};
    /** @type {string} */
    this.requestId = requestId || '';
  }
}

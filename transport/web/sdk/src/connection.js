// One WebSocket session with the gateway. It matches each ctrl answer to its request by frame id,
// collects the history frames of a get, and hands every other frame to its owner. It never
// reconnects: the Client makes a new Connection for every attempt.

import { ConnectionLostError, ProtocolError } from './errors.js';

/** @typedef {import('./types.js').ServerFrame} ServerFrame */
/** @typedef {import('./types.js').CtrlFrame} CtrlFrame */
/** @typedef {import('./types.js').DataFrame} DataFrame */
/** @typedef {import('./types.js').MeFrame} MeFrame */

/**
 * @typedef {object} ConnectionHooks
 * @property {(frame: ServerFrame) => void} onFrame every frame that answers no request of this connection
 * @property {(info: {code: number, reason: string}) => void} onClose the connection ended (once); pending requests were rejected
 * @property {(type: string) => void} onTimeout a request of type went unanswered for its timeout: the connection is taken for dead
 * @property {number} requestTimeoutMs
 * @property {number} connectTimeoutMs a socket not open by then is closed
 */

/**
 * @typedef {object} Pending
 * @property {(ctrl: CtrlFrame) => void} resolve
 * @property {(err: Error) => void} reject
 * @property {ReturnType<typeof setTimeout>} timer
 */

const OPEN = 1;

/** Connection wraps one WebSocket; see the module comment. */
export class Connection {
  /**
   * @param {WebSocket} ws a socket being opened
   * @param {ConnectionHooks} hooks
   */
  constructor(ws, hooks) {
    this._ws = ws;
    this._hooks = hooks;
    this._nextId = 0;
    /** @type {Map<string, Pending>} */
    this._pending = new Map();
    /** @type {Map<string, DataFrame[]>} topic -> the history frames of the get in flight */
    this._collecting = new Map();
    /** @type {MeFrame[]|null} the items of the get of the channel in flight */
    this._collectingMe = null;
    /** @type {Map<string, Promise<unknown>>} topic -> the last get queued, so gets of a topic run one at a time */
    this._gets = new Map();
    this._closed = false;
    /** When the last frame arrived (ms since the epoch). */
    this.lastReceivedAt = Date.now();
    /** @type {Promise<void>} resolves when the socket opened */
    this.opened = new Promise((resolve, reject) => {
      ws.addEventListener('open', () => resolve());
      ws.addEventListener('close', () => reject(new ConnectionLostError('connection refused or closed before it opened')));
    });
    this.opened.catch(() => {}); // the close handler reports it too
    // A socket that neither opens nor fails (a silent network) ends after connectTimeoutMs.
    const connecting = setTimeout(() => this.close(4003, 'connect timeout'), hooks.connectTimeoutMs);
    ws.addEventListener('open', () => clearTimeout(connecting));
    ws.addEventListener('message', (ev) => this._receive(ev.data));
    ws.addEventListener('close', (ev) => {
      clearTimeout(connecting);
      this._detach({ code: ev.code, reason: ev.reason || '' });
    });
    // An error is followed by a close event in browsers, but not always in Node 20's WebSocket
    // (a refused connection stays CONNECTING): the connection ends at the error.
    ws.addEventListener('error', () => {
      clearTimeout(connecting);
      if (!this._closed) { this.close(1006, 'connection error'); }
    });
  }

  /** Whether the socket is open and not detached. */
  get isOpen() {
    return !this._closed && this._ws.readyState === OPEN;
  }

  /**
   * request sends a frame of type with a fresh id and resolves with the ctrl answering it (code
   * below 300), or rejects with a ProtocolError (the server refused) or a ConnectionLostError (no
   * answer: the connection ended or the request timed out, which also ends the connection).
   *
   * @param {string} type
   * @param {Record<string, unknown>} body
   * @param {number} [timeoutMs]
   * @returns {Promise<CtrlFrame>}
   */
  request(type, body, timeoutMs) {
    return new Promise((resolve, reject) => {
      if (!this.isOpen) {
        reject(new ConnectionLostError('not connected'));
        return;
      }
      const id = String(++this._nextId);
      const timer = setTimeout(() => {
        if (this._pending.delete(id)) {
          reject(new ConnectionLostError(type + ' unanswered'));
          this._hooks.onTimeout(type);
        }
      }, timeoutMs ?? this._hooks.requestTimeoutMs);
      this._pending.set(id, { resolve, reject, timer });
      this._ws.send(JSON.stringify({ [type]: { id, ...body } }));
    });
  }

  /**
   * get sends a history query for topic and resolves with the data frames answering it and the
   * ctrl that ends them. Gets of one topic run one at a time, so their frames cannot mix.
   *
   * @param {string} topic
   * @param {Record<string, unknown>} query
   * @returns {Promise<{frames: DataFrame[], ctrl: CtrlFrame}>}
   */
  get(topic, query) {
    const previous = this._gets.get(topic) || Promise.resolve();
    const run = previous.catch(() => {}).then(async () => {
      /** @type {DataFrame[]} */
      const frames = [];
      this._collecting.set(topic, frames);
      try {
        const ctrl = await this.request('get', { topic, ...query });
        return { frames, ctrl };
      } finally {
        this._collecting.delete(topic);
      }
    });
    this._gets.set(topic, run);
    run.finally(() => {
      if (this._gets.get(topic) === run) {
        this._gets.delete(topic);
      }
    }).catch(() => {});
    return run;
  }

  /**
   * getChannel reads the per-user channel's log (a get of topic "me") and resolves with the items
   * that came while it was answered (in any order; live ones may be among them) and the ctrl that
   * ends them: 200 with count, epoch, last_seq and has_more, or 205 resync.
   *
   * @param {Record<string, unknown>} query
   * @returns {Promise<{frames: MeFrame[], ctrl: CtrlFrame}>}
   */
  getChannel(query) {
    const previous = this._gets.get('me') || Promise.resolve();
    const run = previous.catch(() => {}).then(async () => {
      /** @type {MeFrame[]} */
      const frames = [];
      this._collectingMe = frames;
      try {
        const ctrl = await this.request('get', { topic: 'me', ...query });
        return { frames, ctrl };
      } finally {
        this._collectingMe = null;
      }
    });
    this._gets.set('me', run);
    run.finally(() => {
      if (this._gets.get('me') === run) {
        this._gets.delete('me');
      }
    }).catch(() => {});
    return run;
  }

  /**
   * notify sends a frame that gets no answer when it succeeds (a note); false when the connection
   * is not open.
   *
   * @param {Record<string, unknown>} frame
   * @returns {boolean}
   */
  notify(frame) {
    if (!this.isOpen) {
      return false;
    }
    this._ws.send(JSON.stringify(frame));
    return true;
  }

  /**
   * close ends the connection at once: pending requests are rejected and onClose runs now, without
   * waiting for the closing handshake (which a dead network never finishes).
   *
   * @param {number} code
   * @param {string} reason
   */
  close(code, reason) {
    if (this._closed) {
      return;
    }
    this._detach({ code, reason }); // first: the socket's own events may come back at once
    if (this._ws.readyState < 2) { // CONNECTING or OPEN
      try {
        this._ws.close(code >= 3000 && code <= 4999 ? code : 1000, reason);
      } catch {
        // a socket that cannot close any more is gone already
      }
    }
  }

  /** @param {unknown} data */
  _receive(data) {
    if (this._closed || typeof data !== 'string') {
      return;
    }
    this.lastReceivedAt = Date.now();
    /** @type {ServerFrame} */
    let frame;
    try {
      frame = JSON.parse(data);
    } catch {
      return;
    }
    const ctrl = frame.ctrl;
    if (ctrl && ctrl.id) {
      const p = this._pending.get(ctrl.id);
      if (p) {
        this._pending.delete(ctrl.id);
        clearTimeout(p.timer);
        if (ctrl.code < 300) {
          p.resolve(ctrl);
        } else {
          p.reject(new ProtocolError(ctrl.code, ctrl.reason || '', ctrl.text, ctrl.params));
        }
        return;
      }
    }
    if (frame.me && frame.me.seq !== undefined && this._collectingMe) {
      this._collectingMe.push(frame.me);
      return;
    }
    const data_ = frame.data;
    if (data_ && data_.message_id === undefined) {
      const frames = this._collecting.get(data_.topic);
      if (frames) {
        frames.push(data_);
        return;
      }
    }
    this._hooks.onFrame(frame);
  }

  /** @param {{code: number, reason: string}} info */
  _detach(info) {
    if (this._closed) {
      return;
    }
    this._closed = true;
    const pending = this._pending;
    this._pending = new Map();
    for (const p of pending.values()) {
      clearTimeout(p.timer);
      p.reject(new ConnectionLostError());
    }
    this._hooks.onClose(info);
  }
}

// The outbox: messages sent but not yet acked. Each is sent, and after a lost connection or a
// temporary refusal sent again, with the same client_msg_id, so the server stores it once. Sends
// to one topic go one at a time in the order they were made, so they are stored in that order.

import { ClientClosedError, ConnectionLostError, ImledgerError, ProtocolError } from './errors.js';
import { backoffDelay } from './backoff.js';
import { randomId } from './ids.js';

/** @typedef {import('./types.js').SendAck} SendAck */
/** @typedef {import('./types.js').SendOptions} SendOptions */
/** @typedef {import('./types.js').OutboxEntry} OutboxEntry */
/** @typedef {import('./connection.js').Connection} Connection */

/**
 * What an Outbox needs from its client.
 *
 * @typedef {object} OutboxHost
 * @property {() => Connection|null} connection the logged-in connection, or null
 * @property {(topic: string) => boolean} mayPublish false while the topic has a subscription that is not active yet
 * @property {(entry: OutboxEntry) => void} changed an entry changed status
 */

/**
 * @typedef {object} Entry
 * @property {OutboxEntry} pub the caller's view
 * @property {Record<string, unknown>} frame the pub body (without id)
 * @property {(ack: SendAck) => void} resolve
 * @property {(err: Error) => void} reject
 * @property {number} notBefore not sent again before this time (ms since the epoch)
 * @property {number} retries temporary refusals so far
 */

const CLIENT_MSG_ID = /^[A-Za-z0-9._:-]{1,64}$/;
const MAX_INTERNAL_RETRIES = 5;

/** Outbox queues sends per topic; see the module comment. */
export class Outbox {
  /** @param {OutboxHost} host */
  constructor(host) {
    this._host = host;
    /** @type {Map<string, Entry[]>} topic -> its unsent entries, oldest first */
    this._queues = new Map();
    /** @type {Set<string>} topics with a pub in flight */
    this._busy = new Set();
    /** @type {ReturnType<typeof setTimeout>|undefined} */
    this._timer = undefined;
    this._closed = false;
  }

  /**
   * add queues a message and resolves with its ack.
   *
   * @param {string} topic
   * @param {unknown} content
   * @param {SendOptions} [options]
   * @returns {Promise<SendAck>}
   */
  add(topic, content, options = {}) {
    if (this._closed) { return Promise.reject(new ClientClosedError('closed')); }
    const clientMsgId = options.clientMsgId ?? 'c-' + randomId();
    if (!CLIENT_MSG_ID.test(clientMsgId)) {
      return Promise.reject(new ImledgerError('clientMsgId: 1 to 64 of [A-Za-z0-9._:-]'));
    }
    if (content === undefined || content === null) {
      return Promise.reject(new ImledgerError('content: required'));
    }
    /** @type {Record<string, unknown>} */
    const frame = { topic, client_msg_id: clientMsgId, content };
    if (options.head) { frame.head = options.head; }
    if (options.msgType && options.msgType !== 'text') { frame.msg_type = options.msgType; }
    return new Promise((resolve, reject) => {
      /** @type {Entry} */
      const e = {
        pub: { clientMsgId, topic, content, status: 'queued', attempts: 0 },
        frame, resolve, reject, notBefore: 0, retries: 0
      };
      const q = this._queues.get(topic) || [];
      q.push(e);
      this._queues.set(topic, q);
      this._host.changed({ ...e.pub });
      this.kick();
    });
  }

  /**
   * entries lists the messages not acked yet, oldest first per topic.
   *
   * @returns {OutboxEntry[]}
   */
  entries() {
    return Array.from(this._queues.values()).flatMap((q) => q.map((e) => ({ ...e.pub })));
  }

  /** kick sends the first entry of every topic that may send now. */
  kick() {
    const conn = this._host.connection();
    if (!conn || this._closed) { return; }
    const now = Date.now();
    let next = Infinity;
    for (const [topic, q] of this._queues) {
      const e = q[0];
      if (!e || this._busy.has(topic) || !this._host.mayPublish(topic)) { continue; }
      if (e.notBefore > now) {
        next = Math.min(next, e.notBefore);
        continue;
      }
      this._send(conn, topic, e);
    }
    if (next < Infinity) {
      clearTimeout(this._timer);
      this._timer = setTimeout(() => this.kick(), next - now);
    }
  }

  /**
   * failAll rejects every entry with err and refuses further sends (the client closed).
   *
   * @param {Error} err
   */
  failAll(err) {
    this._closed = true;
    clearTimeout(this._timer);
    for (const q of this._queues.values()) {
      for (const e of q) {
        e.pub.status = 'failed';
        e.pub.error = err;
        e.reject(err);
        this._host.changed({ ...e.pub });
      }
    }
    this._queues.clear();
  }

  /**
   * @param {Connection} conn
   * @param {string} topic
   * @param {Entry} e
   */
  _send(conn, topic, e) {
    this._busy.add(topic);
    e.pub.status = 'sending';
    e.pub.attempts++;
    this._host.changed({ ...e.pub });
    conn.request('pub', e.frame).then((ctrl) => {
      this._busy.delete(topic);
      const p = ctrl.params || {};
      /** @type {SendAck} */
      const ack = {
        topic, seq: String(p.seq), messageId: String(p.message_id), ts: String(p.ts),
        clientMsgId: e.pub.clientMsgId, duplicate: p.duplicate === true
      };
      this._remove(topic, e);
      e.pub.status = 'sent';
      e.pub.ack = ack;
      this._host.changed({ ...e.pub });
      e.resolve(ack);
      this.kick();
    }, (err) => {
      this._busy.delete(topic);
      this._refused(topic, e, err);
    });
  }

  /**
   * _refused decides what a failed pub becomes: queued again (the connection was lost: the next
   * one resends it), retried after a pause (a temporary refusal), or failed (a refusal for good).
   *
   * @param {string} topic
   * @param {Entry} e
   * @param {unknown} err
   */
  _refused(topic, e, err) {
    e.pub.error = err instanceof Error ? err : new ImledgerError(String(err));
    if (err instanceof ConnectionLostError || (err instanceof ProtocolError && err.code === 401)) {
      e.pub.status = 'queued';
      this._host.changed({ ...e.pub });
      return;
    }
    if (err instanceof ProtocolError && (err.retryable || (err.code === 500 && e.retries < MAX_INTERNAL_RETRIES))) {
      e.retries++;
      const after = Number(err.params.retry_after_ms);
      e.notBefore = Date.now() + (after > 0 ? after : 100 + backoffDelay(e.retries, { initialMs: 250, maxMs: 5000 }));
      e.pub.status = 'retrying';
      this._host.changed({ ...e.pub });
      this.kick();
      return;
    }
    this._remove(topic, e);
    e.pub.status = 'failed';
    this._host.changed({ ...e.pub });
    e.reject(e.pub.error);
    this.kick();
  }

  /**
   * @param {string} topic
   * @param {Entry} e
   */
  _remove(topic, e) {
    const q = this._queues.get(topic);
    if (!q) { return; }
    const i = q.indexOf(e);
    if (i >= 0) { q.splice(i, 1); }
    if (q.length === 0) { this._queues.delete(topic); }
  }
}

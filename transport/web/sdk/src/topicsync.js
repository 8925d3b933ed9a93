// The work behind a Subscription: subscribe on every connection, then catch up by seq, so the
// client sees every message of the topic once and in seq order, and every edit and recall once
// per version, across reconnects and the read models' lag. Internal: callers hold a Subscription.

import { ConnectionLostError, ImledgerError } from './errors.js';
/** @typedef {import('./errors.js').ProtocolError} ProtocolError */
import { seqNumber } from './ids.js';
import { Subscription } from './subscription.js';
import { Seen } from './seen.js';

/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').MessageUpdate} MessageUpdate */
/** @typedef {import('./types.js').DataFrame} DataFrame */
/** @typedef {import('./types.js').InfoFrame} InfoFrame */
/** @typedef {import('./types.js').SubscribeOptions} SubscribeOptions */
/** @typedef {import('./types.js').SubscriptionState} SubscriptionState */
/** @typedef {import('./connection.js').Connection} Connection */

/**
 * What a Subscription needs from its client.
 *
 * @typedef {object} SubscriptionHost
 * @property {(m: Message) => void} message emit a message
 * @property {(u: MessageUpdate) => void} update emit an update
 * @property {(ch: {topic: string}, reason: string, error?: Error) => void} ended the subscription ended or failed (forget it)
 * @property {(err: Error) => void} error report a failure no promise reports
 * @property {(ch: {topic: string}) => void} activated the subscription is active on the current connection
 * @property {SyncOptions} sync
 */

/**
 * Tuning of catch-up; the Client's options give them.
 *
 * @typedef {object} SyncOptions
 * @property {number} pageLimit messages per get while catching up (at most the server's maximum, 100)
 * @property {number} gapTimeoutMs how long a live message waits for a missing lower seq before it is delivered anyway
 * @property {number[]} recheckDelaysMs after each subscribe, ask again after these pauses for what the lagging read models did not hold yet
 * @property {number} revalidate on reconnect, re-read this many of the latest messages seen, for edits and recalls made meanwhile
 * @property {number} lagRetries how often a sub refused because the read models do not know the membership yet is asked again
 * @property {number} maxKnown how many seqs per topic the dedupe remembers
 */


const MAX_GAPS = 1000;
/** The pauses before latest() asks again while history ends below the position. */
const LAG_PAGES_MS = [250, 500, 1000, 2000, 4000];
const MAX_GAP_CHECKS = 8;

/** @param {number} ms @returns {Promise<void>} */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * messageOf turns a data frame into a Message.
 *
 * @param {DataFrame} d
 * @param {boolean} live
 * @returns {Message}
 */
export function messageOf(d, live) {
  /** @type {Message} */
  const m = { topic: d.topic, seq: d.seq, from: d.from, ts: d.ts, msgType: d.msg_type || 'text', version: d.version || '1', live };
  if (d.content !== undefined) { m.content = d.content; }
  if (d.head !== undefined) { m.head = d.head; }
  if (d.message_id !== undefined) { m.messageId = d.message_id; }
  if (d.updated_at !== undefined) { m.updatedAt = d.updated_at; }
  if (d.status !== undefined) { m.status = d.status; }
  return m;
}

/**
 * TopicSync follows one topic for a Client; see the module comment. Its messages and updates are
 * the Client's "message" and "update" events.
 */
export class TopicSync {
  /**
   * @param {SubscriptionHost} host
   * @param {string} topic
   * @param {SubscribeOptions} options
   */
  constructor(host, topic, options) {
    this._host = host;
    /** The topic. */
    this.topic = topic;
    this._options = options;
    /** @type {SubscriptionState} */
    this._state = 'pending';
    /** @type {Error|null} */
    this._error = null;
    /** @type {number|null} every seq up to it was delivered or decided; null before the first subscribe */
    this._position = null;
    /** @type {number|null} the lowest seq the caller was given; older() reads below it */
    this._floor = null;
    /** Whether the subscription catches up (SubscribeOptions.catchUp, startCatchUp). */
    this._follow = options.catchUp !== false;
    /** The highest last_seq a page read by latest() or older() showed. */
    this._top = 0;
    this._seen = new Seen(topic, host.sync.maxKnown);
    /** @type {Map<number, Message>} live messages above a missing seq */
    this._buffer = new Map();
    this._gapSince = 0;
    /** @type {Set<number>} seqs given up on after gapTimeoutMs; delivered late if they turn up */
    this._gaps = new Set();
    this._gapChecks = 0;
    /** @type {Connection|null} */
    this._conn = null;
    this._gen = 0;
    /** @type {Promise<void>} the topic's work (catch-up, older pages), one step at a time */
    this._chain = Promise.resolve();
    /** @type {ReturnType<typeof setTimeout>[]} */
    this._timers = [];
    /** @type {ReturnType<typeof setTimeout>|undefined} the one pending look for a missing seq */
    this._gapTimer = undefined;
    /** @type {{resolve: () => void, reject: (err: Error) => void}[]} */
    this._waiters = [];
    /** The caller's handle. */
    this.subscription = new Subscription(this);
  }

  /** @returns {SubscriptionState} */
  get state() { return this._state; }

  /** Why the subscription failed, if it did. */
  get error() { return this._error; }

  /**
   * The seq up to which every message was delivered (or is a hole), as a string; null before the
   * first subscribe.
   *
   * @returns {string|null}
   */
  get position() { return this._position === null ? null : String(this._position); }

  /**
   * ready resolves when the subscription is active on the current connection, and rejects when it
   * failed or ended.
   *
   * @returns {Promise<void>}
   */
  ready() {
    if (this._state === 'active') { return Promise.resolve(); }
    if (this._state === 'failed' || this._state === 'ended') {
      return Promise.reject(this._error || new ImledgerError('subscription to ' + this.topic + ' ended'));
    }
    return new Promise((resolve, reject) => this._waiters.push({ resolve, reject }));
  }

  /**
   * older reads the page of history just below the oldest message the caller has (the latest
   * messages when it has none), for scrolling back. Its messages are returned, not emitted.
   *
   * @param {{limit?: number}} [options]
   * @returns {Promise<{messages: Message[], hasMore: boolean}>}
   */
  older(options = {}) {
    return this._topPage(options.limit, false);
  }

  /**
   * latest reads the latest page of history up to the position and makes older() continue below
   * it, for (re)opening a view of the topic. Its messages are returned, not emitted.
   *
   * @param {{limit?: number}} [options]
   * @returns {Promise<{messages: Message[], hasMore: boolean}>}
   */
  latest(options = {}) {
    return this._topPage(options.limit, true);
  }

  /**
   * startCatchUp turns catch-up on for a subscription made with catchUp false: from now on it
   * catches up after every (re)subscribe, from the latest seq it knows.
   */
  startCatchUp() {
    if (this._follow || this._state === 'ended' || this._state === 'failed') { return; }
    this._follow = true;
    if (this._state === 'active') {
      this._sync(this._gen, 'initial');
    }
  }

  /**
   * _topPage is _page, read again after a pause while a page from the top ends below the
   * position: history trails what was delivered live, and the caller opening a view wants those
   * messages in the page (the read models catch up within moments; after LAG_PAGES_MS it gives
   * what it has).
   *
   * @param {number|undefined} limit
   * @param {boolean} fromTop
   * @returns {Promise<{messages: Message[], hasMore: boolean}>}
   */
  async _topPage(limit, fromTop) {
    await this.ready();
    const top = fromTop || this._floor === null;
    for (let i = 0; ; i++) {
      const page = await this._run(() => this._page(limit, top));
      const pos = this._position;
      if (!top || pos === null || page.lastSeq >= pos || i >= LAG_PAGES_MS.length) {
        return { messages: page.messages, hasMore: page.hasMore };
      }
      await sleep(LAG_PAGES_MS[i]);
    }
  }

  /**
   * _page reads a page below the floor (from the top with fromTop, or when there is no floor yet).
   *
   * @param {number|undefined} limit
   * @param {boolean} fromTop
   * @returns {Promise<{messages: Message[], hasMore: boolean, lastSeq: number}>}
   */
  async _page(limit, fromTop) {
    const conn = this._conn;
    if (!conn) { throw new ConnectionLostError(); }
    /** @type {Record<string, unknown>} */
    const q = limit ? { limit } : {};
    const top = this._position !== null ? this._position + 1 : 0;
    const floor = fromTop || this._floor === null ? top : this._floor;
    if (floor === 1) { return { messages: [], hasMore: false, lastSeq: Infinity }; } // nothing below seq 1
    const page = await this._get(conn, floor > 0 ? { ...q, before_seq: String(floor) } : q);
    for (const m of page.messages) { this._remember(m); }
    this._top = Math.max(this._top, seqNumber(page.lastSeq) || 0);
    if (page.messages.length > 0) {
      this._floor = seqNumber(page.messages[0].seq);
    } else if (!page.hasMore) {
      this._floor = 1;
    }
    return { messages: page.messages, hasMore: page.hasMore, lastSeq: seqNumber(page.lastSeq) || 0 };
  }

  /**
   * unsubscribe leaves the topic: no more messages or updates are emitted for it, and the client
   * forgets it (a later subscribe starts afresh).
   *
   * @returns {Promise<void>}
   */
  async unsubscribe() {
    if (this._state === 'ended') { return; }
    const conn = this._conn;
    this._end('unsubscribe');
    if (conn && conn.isOpen) {
      await conn.request('leave', { topic: this.topic }).catch(() => {});
    }
  }

  // ---- driven by the Client ------------------------------------------------------------------

  /**
   * _activate subscribes on conn, then catches up.
   *
   * @param {Connection} conn
   */
  async _activate(conn) {
    if (this._state === 'ended' || this._state === 'failed') { return; }
    const gen = ++this._gen;
    this._conn = conn;
    this._state = 'pending';
    if (!(await this._subscribe(conn, gen))) { return; }
    this._state = 'active';
    for (const w of this._waiters.splice(0)) { w.resolve(); }
    this._host.activated(this);
    if (!this._follow) { return; }
    this._sync(gen, this._position === null ? 'initial' : 'reconnect');
  }

  /**
   * _subscribe sends sub until it is admitted; false when it failed, or the connection changed.
   *
   * @param {Connection} conn
   * @param {number} gen
   * @returns {Promise<boolean>}
   */
  async _subscribe(conn, gen) {
    const opts = this._host.sync;
    for (let tries = 0; ; tries++) {
      try {
        await conn.request('sub', { topic: this.topic });
        return gen === this._gen;
      } catch (err) {
        if (gen !== this._gen || err instanceof ConnectionLostError) { return false; }
        const e = /** @type {ProtocolError} */ (err);
        const lagging = e.code === 404 || (e.code === 403 && e.reason === 'not_member');
        if (e.code === 429) { // over the connection's sub/leave limit: wait as told, however often
          tries--;
          await sleep(Math.max(50, Number(e.params.retry_after_ms) || 1000));
          if (gen !== this._gen) { return false; }
          continue;
        }
        if (tries < opts.lagRetries && (lagging || e.retryable)) {
          await sleep(400 * Math.pow(2, tries));
          if (gen !== this._gen) { return false; }
          continue;
        }
        this._fail(e);
        return false;
      }
    }
  }

  /** _deactivate forgets the connection that was lost; the next one subscribes again. */
  _deactivate() {
    this._gen++;
    this._conn = null;
    for (const t of this._timers.splice(0)) { clearTimeout(t); }
    clearTimeout(this._gapTimer);
    this._gapTimer = undefined;
    if (this._state === 'active') { this._state = 'pending'; }
  }

  /**
   * _live takes a live data frame of the topic.
   *
   * @param {DataFrame} d
   */
  _live(d) {
    const seq = seqNumber(d.seq);
    if (!(seq > 0) || this._state === 'ended') { return; }
    const m = messageOf(d, true);
    if (!this._follow) {
      if (!this._seen.has(seq)) { this._deliver(m); } // live only: no order to keep, no catch-up
      return;
    }
    if (this._position !== null && seq <= this._position) {
      if (this._gaps.delete(seq) && !this._seen.has(seq)) { this._deliver(m); } // late, after a gap was given up
      return;
    }
    this._buffer.set(seq, m);
    if (this._state === 'active' && this._position !== null) {
      const gen = this._gen;
      this._run(async () => {
        if (gen === this._gen && this._drain(gen) && this._conn) {
          await this._catchUp(this._conn, gen); // a seq is missing: ask history for it
          this._drain(gen);
        }
      }).catch(() => {});
    }
  }

  /**
   * _change takes a live edit or recall of the topic.
   *
   * @param {InfoFrame} i
   */
  _change(i) {
    if (!(seqNumber(i.seq) > 0) || this._state === 'ended') { return; }
    const u = this._seen.change(i);
    if (u) { this._host.update(u); }
  }

  /**
   * _end ends the subscription for reason (the caller's unsubscribe, or a change of the topic).
   *
   * @param {string} reason
   */
  _end(reason) {
    if (this._state === 'ended') { return; }
    this._deactivate();
    this._state = 'ended';
    this._error = new ImledgerError('subscription to ' + this.topic + ' ended: ' + reason);
    for (const w of this._waiters.splice(0)) { w.reject(this._error); }
    this._host.ended(this, reason);
  }

  /** @param {Error} err */
  _fail(err) {
    this._deactivate();
    this._state = 'failed';
    this._error = err;
    for (const w of this._waiters.splice(0)) { w.reject(err); }
    this._host.ended(this, /** @type {ProtocolError} */ (err).reason || 'failed', err);
  }

  // ---- catching up -----------------------------------------------------------------------------

  /**
   * _run queues work on the topic's chain.
   *
   * @template T
   * @param {() => Promise<T>} work
   * @returns {Promise<T>}
   */
  _run(work) {
    const run = this._chain.then(work);
    this._chain = run.then(() => {}, () => {});
    return run;
  }

  /**
   * _sync queues a catch-up of mode on the chain; failures wait for the next connection.
   *
   * @param {number} gen
   * @param {'initial'|'reconnect'|'recheck'} mode
   */
  _sync(gen, mode) {
    if (mode !== 'recheck') {
      for (const ms of this._host.sync.recheckDelaysMs) {
        this._timers.push(setTimeout(() => this._sync(gen, 'recheck'), ms));
      }
    }
    this._run(async () => {
      const conn = this._conn;
      if (gen !== this._gen || !conn) { return; }
      if (mode === 'initial' && this._options.since == null) {
        await this._start(conn, gen);
      } else {
        if (mode === 'initial') {
          this._position = Math.max(0, seqNumber(this._options.since) || 0);
          this._floor = this._position + 1;
        }
        if (mode === 'reconnect') { await this._revalidate(conn, gen); }
        await this._catchUp(conn, gen);
        if (mode === 'recheck') { await this._checkGaps(conn, gen); }
      }
      this._drain(gen);
    }).catch(() => { /* the next connection catches up */ });
  }

  /**
   * _start takes the position of a subscription without since: the topic's last seq, after
   * delivering the latest `latest` messages.
   *
   * @param {Connection} conn
   * @param {number} gen
   */
  async _start(conn, gen) {
    const latest = Math.max(0, this._options.latest || 0);
    const page = await this._get(conn, { limit: Math.max(1, Math.min(latest, 100)) });
    if (gen !== this._gen) { return; }
    const shown = latest > 0 ? page.messages.slice(-latest) : [];
    for (const m of page.messages) {
      if (!shown.includes(m)) { this._remember(m); }
    }
    for (const m of shown) { this._deliver(m); }
    // A page the caller read before catch-up began (latest, older) counts: what came after it
    // is caught up below.
    const last = Math.max(seqNumber(page.lastSeq) || 0, ...page.messages.map((m) => seqNumber(m.seq)));
    this._position = this._top > 0 ? Math.min(this._top, last) : last;
    if (this._floor === null) { this._floor = shown.length > 0 ? seqNumber(shown[0].seq) : this._position + 1; }
    if (this._position < last) { await this._catchUp(conn, gen); }
  }

  /**
   * _catchUp delivers every message after the position, page by page, then moves the position to
   * the topic's last seq.
   *
   * @param {Connection} conn
   * @param {number} gen
   */
  async _catchUp(conn, gen) {
    const limit = this._host.sync.pageLimit;
    if (this._position === 0) {
      await this._catchUpFromStart(conn, gen, limit);
      return;
    }
    for (;;) {
      const from = /** @type {number} */ (this._position);
      const page = await this._get(conn, { after_seq: String(from), limit });
      if (gen !== this._gen) { return; }
      for (const m of page.messages) { this._take(m); }
      if (!page.hasMore || page.messages.length === 0) {
        this._position = Math.max(/** @type {number} */ (this._position), seqNumber(page.lastSeq) || 0);
        return;
      }
    }
  }

  /**
   * _catchUpFromStart is _catchUp from seq 0, which a get cannot name (after_seq 0 means "unset"):
   * it reads back from the latest page and delivers what it read in seq order.
   *
   * @param {Connection} conn
   * @param {number} gen
   * @param {number} limit
   */
  async _catchUpFromStart(conn, gen, limit) {
    /** @type {Message[]} */
    let all = [];
    let last = 0;
    /** @type {string|undefined} */
    let before;
    for (;;) {
      const page = await this._get(conn, before ? { before_seq: before, limit } : { limit });
      if (gen !== this._gen) { return; }
      if (before === undefined) { last = seqNumber(page.lastSeq) || 0; }
      all = page.messages.concat(all);
      if (!page.hasMore || page.messages.length === 0) { break; }
      before = page.messages[0].seq;
    }
    for (const m of all) { this._take(m); }
    this._position = Math.max(/** @type {number} */ (this._position), last);
  }

  /**
   * _revalidate re-reads the latest messages seen before a reconnect: edits and recalls made while
   * the client was away become updates.
   *
   * @param {Connection} conn
   * @param {number} gen
   */
  async _revalidate(conn, gen) {
    const n = this._host.sync.revalidate;
    const pos = this._position;
    if (!n || !pos || this._seen.size === 0) { return; }
    const page = await this._get(conn, { before_seq: String(pos + 1), limit: Math.min(n, 100) });
    if (gen !== this._gen) { return; }
    for (const m of page.messages) { this._reconcile(m); }
  }

  /**
   * _checkGaps asks history for seqs given up on; those that turn up are delivered late, and a
   * watermark past them makes the rest final holes.
   *
   * @param {Connection} conn
   * @param {number} gen
   */
  async _checkGaps(conn, gen) {
    if (this._gaps.size === 0) { return; }
    const seqs = Array.from(this._gaps).sort((a, b) => a - b);
    const lo = seqs[0];
    const hi = seqs[seqs.length - 1];
    const query = lo > 1 ? { after_seq: String(lo - 1), before_seq: String(hi + 1), limit: 100 } : { before_seq: String(hi + 1), limit: 100 };
    const page = await this._get(conn, query);
    if (gen !== this._gen) { return; }
    for (const m of page.messages) {
      const s = seqNumber(m.seq);
      if (this._gaps.delete(s) && !this._seen.has(s)) { this._deliver(m); }
    }
    if ((seqNumber(page.lastSeq) || 0) >= hi || ++this._gapChecks >= MAX_GAP_CHECKS) {
      this._gaps.clear();
      this._gapChecks = 0;
    }
  }

  /**
   * _take handles a message from a catch-up page: delivered when it is new, reconciled when seen.
   *
   * @param {Message} m
   */
  _take(m) {
    const seq = seqNumber(m.seq);
    if (this._position !== null && seq <= this._position) {
      this._reconcile(m);
      return;
    }
    this._buffer.delete(seq);
    this._deliver(m);
    this._position = seq;
  }

  /**
   * _drain delivers buffered live messages that follow the position. It reports whether a seq is
   * still missing below one of them; past gapTimeoutMs they are delivered anyway.
   *
   * @param {number} gen
   * @returns {boolean}
   */
  _drain(gen) {
    if (gen !== this._gen || this._position === null) { return false; }
    for (const seq of Array.from(this._buffer.keys()).sort((a, b) => a - b)) {
      const m = /** @type {Message} */ (this._buffer.get(seq));
      if (seq <= this._position) {
        this._buffer.delete(seq);
        if (!this._seen.has(seq)) { this._deliver(m); }
      } else if (seq === this._position + 1) {
        this._buffer.delete(seq);
        this._deliver(m);
        this._position = seq;
      } else {
        break;
      }
    }
    if (this._buffer.size === 0) {
      this._gapSince = 0;
      return false;
    }
    const now = Date.now();
    if (!this._gapSince) { this._gapSince = now; }
    const waited = now - this._gapSince;
    if (waited >= this._host.sync.gapTimeoutMs) {
      this._release();
      return false;
    }
    if (!this._gapTimer) {
      const again = Math.min(Math.max(100, waited), this._host.sync.gapTimeoutMs - waited);
      this._gapTimer = setTimeout(() => {
        this._gapTimer = undefined;
        this._sync(gen, 'recheck');
      }, again);
    }
    return true;
  }

  /** _release delivers the buffered messages over their missing seqs, which become gaps. */
  _release() {
    for (const seq of Array.from(this._buffer.keys()).sort((a, b) => a - b)) {
      for (let s = /** @type {number} */ (this._position) + 1; s < seq && this._gaps.size < MAX_GAPS; s++) {
        this._gaps.add(s);
      }
      this._deliver(/** @type {Message} */ (this._buffer.get(seq)));
      this._position = seq;
    }
    this._buffer.clear();
    this._gapSince = 0;
    this._gapChecks = 0;
  }

  // ---- dedupe (Seen) ---------------------------------------------------------------------------

  /**
   * _deliver emits m as a new message, unless it was delivered already.
   *
   * @param {Message} m
   */
  _deliver(m) {
    const out = this._seen.message(m);
    if (!out) { return; }
    this._seen.prune(this._position);
    this._host.message(out);
  }

  /**
   * _remember records a message the caller got from a page, for the dedupe of its changes.
   *
   * @param {Message} m
   */
  _remember(m) { this._seen.remember(m); }

  /**
   * _reconcile emits the edit or recall a stored message shows, if it is news.
   *
   * @param {Message} m
   */
  _reconcile(m) {
    const u = this._seen.reconcile(m);
    if (u) { this._host.update(u); }
  }

  /**
   * _get reads a page of the topic's history on conn.
   *
   * @param {Connection} conn
   * @param {Record<string, unknown>} query
   * @returns {Promise<{messages: Message[], lastSeq: string, hasMore: boolean}>}
   */
  async _get(conn, query) {
    const { frames, ctrl } = await conn.get(this.topic, query);
    const p = ctrl.params || {};
    return { messages: frames.map((d) => messageOf(d, false)), lastSeq: String(p.last_seq ?? '0'), hasMore: p.has_more === true };
  }
}

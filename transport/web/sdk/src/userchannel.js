// The per-user channel ("me"): subscribed on every connection, it catches up the user's log of
// items by seq within its epoch (no gap, no duplicate across reconnects), resyncs from the
// conversation list when the log lost the client's position (205 or another epoch), and keeps the
// counters and last message of every conversation from the conversation frames. Internal: the
// Client drives it and emits its events.

import { ConnectionLostError, ImledgerError } from './errors.js';
import { seqNumber } from './ids.js';
import { Conversations } from './conversations.js';
import { messageOf } from './topicsync.js';

/** @typedef {import('./types.js').MeFrame} MeFrame */
/** @typedef {import('./types.js').ChannelItem} ChannelItem */
/** @typedef {import('./types.js').ChannelState} ChannelState */
/** @typedef {import('./types.js').ClientEvents} ClientEvents */
/** @typedef {import('./types.js').ConversationState} ConversationState */
/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./connection.js').Connection} Connection */
/** @typedef {import('./errors.js').ProtocolError} ProtocolError */
/** @typedef {import('./rest.js').Conversation} Conversation */

/** @param {number} ms @returns {Promise<void>} */
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The channel's topic. */
export const ME = 'me';

/**
 * What a UserChannel needs from its client.
 *
 * @typedef {object} ChannelHost
 * @property {<K extends keyof ClientEvents>(type: K, event: ClientEvents[K]) => void} emit
 * @property {() => string} me the logged-in user's id
 * @property {((since: string) => Promise<Conversation[]>) | null} list reads the conversation list, most recently
 *   active first, down to those active at since ("" for all); null without a RestClient
 * @property {number} pageLimit items per get
 * @property {number} recheckMs how long after a list read the conversations active around it are read
 *   again (0: never)
 */

/** Items of another kind than these are emitted as "item" only. */
const GROUP_OWN = new Set(['joined', 'left', 'removed', 'role', 'mute', 'unmute', 'unbanned', 'dissolved']);
const FRIEND = new Set(['friend_requested', 'friend_accepted', 'friend_declined', 'friend_removed']);
const BLOCK = new Set(['blocked', 'unblocked']);
/** How far before a lost connection a reconnect re-reads the conversation list. */
const RELOAD_MARGIN_MS = 5000;
/** How long a missing item seq is waited for before the log is read for it. */
const GAP_WAIT_MS = 200;

/** UserChannel follows the user's channel for a Client; see the module comment. */
export class UserChannel {
  /** @param {ChannelHost} host */
  constructor(host) {
    this._host = host;
    /** @type {ChannelState} */
    this._state = 'pending';
    /** @type {string|null} the log's epoch; "" while the log has no item yet */
    this._epoch = null;
    /** @type {number|null} every item up to it was applied; null before the first sub */
    this._pos = null;
    /** @type {Map<number, MeFrame>} live items above a missing seq */
    this._buffer = new Map();
    /** @type {Connection|null} */
    this._conn = null;
    this._gen = 0;
    this._lostAt = 0;
    /** @type {ReturnType<typeof setTimeout>|undefined} */
    this._recheckTimer = undefined;
    /** @type {Promise<void>} */
    this._chain = Promise.resolve();
    /** @type {ReturnType<typeof setTimeout>|undefined} */
    this._gapTimer = undefined;
    this.conversations = new Conversations(host.me);
    /** @type {Set<string>} direct topics a "chat" event was emitted for, or that were listed */
    this._chats = new Set();
    /** @type {{resolve: () => void, reject: (err: Error) => void}[]} */
    this._waiters = [];
  }

  /** @returns {ChannelState} */
  get state() { return this._state; }

  /** The log's epoch, or null before the first sub. */
  get epoch() { return this._epoch; }

  /** The seq of the last item applied, as a string; null before the first sub. */
  get position() { return this._pos === null ? null : String(this._pos); }

  /**
   * ready resolves once the channel is active and caught up on the current connection (its
   * conversations read); it rejects when the channel failed.
   *
   * @returns {Promise<void>}
   */
  ready() {
    if (this._state === 'active') { return Promise.resolve(); }
    if (this._state === 'failed') { return Promise.reject(new ImledgerError('the per-user channel is not served')); }
    return new Promise((resolve, reject) => this._waiters.push({ resolve, reject }));
  }

  // ---- driven by the Client --------------------------------------------------------------------

  /**
   * _activate subscribes to the channel on conn, then catches up: the log from the position, the
   * conversations from the list.
   *
   * @param {Connection} conn
   */
  async _activate(conn) {
    if (this._state === 'failed') { return; }
    const gen = ++this._gen;
    this._conn = conn;
    this._state = 'pending';
    const ctrl = await this._subscribe(conn, gen);
    if (!ctrl) { return; }
    const p = ctrl.params || {};
    const epoch = String(p.epoch ?? '');
    const last = seqNumber(p.last_seq) || 0;
    const first = this._pos === null;
    this._run(async () => {
      if (gen !== this._gen) { return; }
      const readAt = Date.now();
      if (first) {
        this._epoch = epoch;
        this._pos = last;
        await this._reload(gen, 'start', '');
      } else if (this._epoch !== epoch && !(this._epoch === '' && (this._pos ?? 0) === 0)) {
        await this._resync(gen, epoch, last);
      } else {
        if (this._epoch === '') { this._epoch = epoch; }
        await this._catchUp(conn, gen);
        const since = this._lostAt ? new Date(this._lostAt - RELOAD_MARGIN_MS).toISOString() : '';
        await this._reload(gen, 'reconnect', since);
      }
      if (gen !== this._gen) { return; }
      this._drain();
      this._state = 'active';
      for (const w of this._waiters.splice(0)) { w.resolve(); }
      this._scheduleRecheck(gen, readAt);
    }).catch((err) => {
      if (gen === this._gen && !(err instanceof ConnectionLostError)) { this._host.emit('error', err); }
    });
  }

  /**
   * _subscribe sends sub of me until it is answered: over the connection's sub/leave limit (429)
   * or while the server is short of a store (a retryable refusal) it waits and asks again. It
   * returns null when the connection changed, or the refusal is final (the channel failed).
   *
   * @param {Connection} conn
   * @param {number} gen
   * @returns {Promise<import('./types.js').CtrlFrame|null>}
   */
  async _subscribe(conn, gen) {
    for (let tries = 0; ; tries++) {
      try {
        const ctrl = await conn.request('sub', { topic: ME });
        return gen === this._gen ? ctrl : null;
      } catch (err) {
        if (gen !== this._gen || err instanceof ConnectionLostError) { return null; }
        const e = /** @type {ProtocolError} */ (err);
        if (e.code === 429 || e.retryable) {
          await sleep(Math.max(50, Number(e.params?.retry_after_ms) || 400 * Math.pow(2, Math.min(tries, 5))));
          if (gen !== this._gen) { return null; }
          continue;
        }
        this._fail(e);
        return null;
      }
    }
  }

  /**
   * _scheduleRecheck reads the conversations active since a little before readAt once more,
   * recheckMs later: a message sent just before the list was read, while the connection was
   * away, may not have reached the read models then, and its conversation frame went to no
   * one. Merging the list again moves nothing back.
   *
   * @param {number} gen
   * @param {number} readAt when the list read began
   */
  _scheduleRecheck(gen, readAt) {
    const ms = this._host.recheckMs;
    if (!this._host.list || !(ms > 0)) { return; }
    clearTimeout(this._recheckTimer);
    this._recheckTimer = setTimeout(() => {
      this._recheckTimer = undefined;
      this._run(async () => {
        if (gen !== this._gen || this._state !== 'active') { return; }
        await this._reload(gen, 'recheck', new Date(readAt - RELOAD_MARGIN_MS).toISOString());
      }).catch(() => {});
    }, ms);
  }

  /** _deactivate forgets the lost connection; the next one subscribes again. */
  _deactivate() {
    this._gen++;
    this._conn = null;
    clearTimeout(this._gapTimer);
    this._gapTimer = undefined;
    clearTimeout(this._recheckTimer);
    this._recheckTimer = undefined;
    if (this._state === 'active') { this._lostAt = Date.now(); }
    if (this._state !== 'failed') { this._state = 'pending'; }
  }

  /**
   * _end stops the channel for good (the client closed).
   *
   * @param {string} reason
   */
  _end(reason) {
    this._deactivate();
    const err = new ImledgerError('the per-user channel ended: ' + reason);
    for (const w of this._waiters.splice(0)) { w.reject(err); }
  }

  /** @param {Error} err */
  _fail(err) {
    this._deactivate();
    this._state = 'failed';
    for (const w of this._waiters.splice(0)) { w.reject(err); }
    this._host.emit('error', err);
  }

  /**
   * _frame takes a me frame that answers no get: an item or a conversation frame.
   *
   * @param {MeFrame} f
   */
  _frame(f) {
    if (f.seq !== undefined) {
      this._item(f);
      return;
    }
    const topic = f.topic;
    if (!topic) { return; }
    if (f.what === 'msg') {
      /** @type {import('./types.js').DataFrame} */
      const d = { topic, seq: String(f.msg_seq), from: String(f.from), ts: f.ts };
      if (f.message_id !== undefined) { d.message_id = f.message_id; }
      if (f.msg_type !== undefined) { d.msg_type = f.msg_type; }
      if (f.head !== undefined) { d.head = f.head; }
      if (f.content !== undefined) { d.content = f.content; }
      this._message(messageOf(d, true));
    } else if (f.what === 'recall' || f.what === 'edit') {
      this._changed(topic, String(f.msg_seq), f.what, f.content, f.version);
    }
  }

  /**
   * _message takes a message of any conversation (a conversation frame, or a message a
   * subscription delivered) into the counters.
   *
   * @param {Message} m
   */
  _message(m) {
    const st = this.conversations.message(m);
    if (st) { this._host.emit('conversation', st); }
  }

  /**
   * _changed takes a recall or edit into the last message.
   *
   * @param {string} topic
   * @param {string} seq
   * @param {'edit'|'recall'} what
   * @param {unknown} [content]
   * @param {string} [version]
   */
  _changed(topic, seq, what, content, version) {
    const st = this.conversations.change(topic, seq, what, content, version);
    if (st) { this._host.emit('conversation', st); }
  }

  /**
   * _readLocal moves the read mark this device made.
   *
   * @param {string} topic
   * @param {number} seq
   */
  _readLocal(topic, seq) {
    const st = this.conversations.read(topic, seq);
    if (st) { this._host.emit('conversation', st); }
  }

  // ---- the log ---------------------------------------------------------------------------------

  /**
   * _item takes a live item: applied when it is the next seq, buffered above a missing one (the
   * log is read for it), dropped when applied already. An item of another epoch is a resync.
   *
   * @param {MeFrame} f
   */
  _item(f) {
    const seq = seqNumber(f.seq);
    if (!(seq > 0)) { return; }
    if (this._pos === null || this._state !== 'active') {
      this._buffer.set(seq, f); // applied (or dropped) once the catch-up is done
      return;
    }
    if (this._epoch && f.epoch && f.epoch !== this._epoch) {
      this._buffer.clear();
      const gen = this._gen;
      const conn = this._conn;
      if (conn) { this._run(() => this._catchUp(conn, gen)).catch(() => {}); }
      return;
    }
    if (seq <= this._pos) { return; }
    this._buffer.set(seq, f);
    this._drain();
  }

  /**
   * _drain applies the buffered items that follow the position; when one is missing, the log is
   * read for it after a moment (the item may just be late on another path).
   */
  _drain() {
    for (const seq of Array.from(this._buffer.keys()).sort((a, b) => a - b)) {
      const f = /** @type {MeFrame} */ (this._buffer.get(seq));
      const pos = /** @type {number} */ (this._pos);
      if (seq <= pos) {
        this._buffer.delete(seq);
      } else if (seq === pos + 1 && (!this._epoch || !f.epoch || f.epoch === this._epoch)) {
        this._buffer.delete(seq);
        this._apply(f);
      } else {
        break;
      }
    }
    if (this._buffer.size === 0 || this._gapTimer || !this._conn) { return; }
    const gen = this._gen;
    this._gapTimer = setTimeout(() => {
      this._gapTimer = undefined;
      const conn = this._conn;
      if (gen !== this._gen || !conn || this._buffer.size === 0) { return; }
      this._run(async () => {
        await this._catchUp(conn, gen);
        this._drain();
      }).catch(() => {});
    }, GAP_WAIT_MS);
  }

  /**
   * _catchUp reads the log after the position, page by page, applying each item; a 205 answer is
   * a resync.
   *
   * @param {Connection} conn
   * @param {number} gen
   */
  async _catchUp(conn, gen) {
    for (;;) {
      /** @type {Record<string, unknown>} */
      const q = { epoch: this._epoch || '', limit: this._host.pageLimit };
      if (this._pos) { q.after_seq = String(this._pos); }
      const { frames, ctrl } = await conn.getChannel(q);
      if (gen !== this._gen) { return; }
      const p = ctrl.params || {};
      if (ctrl.code === 205) {
        await this._resync(gen, String(p.epoch ?? ''), seqNumber(p.last_seq) || 0);
        return;
      }
      if (!this._epoch) { this._epoch = String(p.epoch ?? ''); }
      for (const f of frames.sort((a, b) => seqNumber(a.seq) - seqNumber(b.seq))) {
        const seq = seqNumber(f.seq);
        if (seq === /** @type {number} */ (this._pos) + 1) {
          this._buffer.delete(seq);
          this._apply(f);
        }
      }
      if (p.has_more !== true || frames.length === 0) { return; }
    }
  }

  /**
   * _resync takes the log's head as the new position and re-reads every conversation: the items
   * in between are gone.
   *
   * @param {number} gen
   * @param {string} epoch
   * @param {number} last
   */
  async _resync(gen, epoch, last) {
    this._epoch = epoch;
    this._pos = last;
    for (const seq of Array.from(this._buffer.keys())) { if (seq <= last) { this._buffer.delete(seq); } }
    this._host.emit('resync', { epoch, lastSeq: String(last) });
    await this._reload(gen, 'resync', '');
  }

  /**
   * _reload reads the conversation list (down to since) into the counters and emits it; a
   * direct conversation it finds that no item announced is a new chat.
   *
   * @param {number} gen
   * @param {'start'|'reconnect'|'resync'|'recheck'} reason
   * @param {string} since
   */
  async _reload(gen, reason, since) {
    const list = this._host.list;
    if (!list) { return; }
    let convs;
    try {
      convs = await list(since);
    } catch (err) {
      this._host.emit('error', /** @type {Error} */ (err));
      return;
    }
    if (gen !== this._gen) { return; }
    const states = convs.map((c) => {
      const known = this.conversations.has(c.topic);
      const st = this.conversations.merge(c);
      if (c.kind === 'direct' && !this._chats.has(c.topic)) {
        this._chats.add(c.topic);
        if (reason !== 'start' && !known) { this._host.emit('chat', { topic: c.topic, peer: String(c.peer), conversation: st }); }
      }
      return st;
    });
    this._host.emit('conversations', { reason, conversations: states, entries: convs });
  }

  /**
   * _apply applies the next item of the log: the position moves, the counters change, the
   * events are emitted.
   *
   * @param {MeFrame} f
   */
  _apply(f) {
    this._pos = seqNumber(f.seq);
    if (!this._epoch && f.epoch) { this._epoch = f.epoch; }
    const item = /** @type {ChannelItem} */ (/** @type {unknown} */ (f));
    const emit = this._host.emit;
    emit('item', item);
    const topic = f.topic || '';
    const ts = f.ts;
    const me = this._host.me();
    switch (f.what) {
      case 'conv':
        this._newChat(f, topic);
        return;
      case 'read': {
        const seq = seqNumber(f.read_seq) || 0;
        emit('read', { topic, seq: String(seq), ts });
        this._readLocal(topic, seq);
        return;
      }
      case 'account':
        emit('account', /** @type {import('./types.js').AccountEvent} */ ({ change: f.change, ...(f.reason ? { reason: f.reason } : {}), ts }));
        return;
      case 'invited':
        emit('invitation', groupEvent(f));
        return;
      case 'join_requested':
      case 'join_rejected':
        emit('joinRequest', groupEvent(f));
        return;
    }
    if (FRIEND.has(f.what) || BLOCK.has(f.what)) {
      const e = { topic, what: /** @type {any} */ (f.what), from: String(f.from), src: String(f.src), ts };
      emit(FRIEND.has(f.what) ? 'friend' : 'block', e);
      return;
    }
    if (!GROUP_OWN.has(f.what)) { return; }
    const mine = f.src === me || f.what === 'dissolved';
    if (f.what === 'joined' && f.src !== me) {
      emit('joinRequest', groupEvent(f)); // a decider hears an approval
      return;
    }
    if (!mine) { return; }
    emit('membership', groupEvent(f));
    if (f.what === 'joined') {
      emit('conversation', this.conversations.ensure(topic, ts));
    } else if (f.what === 'left' || f.what === 'removed' || f.what === 'dissolved') {
      const st = this.conversations.remove(topic);
      if (st) { emit('conversation', st); }
    }
  }

  /**
   * _newChat applies a conv item: the conversation and its first message.
   *
   * @param {MeFrame} f
   * @param {string} topic
   */
  _newChat(f, topic) {
    const first = f.message ? messageOf({ ...f.message, topic }, true) : null;
    if (first) { this.conversations.message(first); }
    const st = this.conversations.ensure(topic, f.ts);
    const me = this._host.me();
    if (!this._chats.has(topic)) {
      this._chats.add(topic);
      /** @type {import('./types.js').NewChat} */
      const chat = { topic, peer: st.peer || (f.from === me ? String(f.src || '') : String(f.from)), conversation: st };
      if (first) { chat.message = first; }
      this._host.emit('chat', chat);
    }
    this._host.emit('conversation', st);
  }

  /**
   * _run queues work on the channel's chain, one step at a time.
   *
   * @param {() => Promise<void>} work
   * @returns {Promise<void>}
   */
  _run(work) {
    const run = this._chain.then(work);
    this._chain = run.then(() => {}, () => {});
    return run;
  }
}

/**
 * groupEvent is the GroupEvent of a membership item.
 *
 * @param {MeFrame} f
 * @returns {import('./types.js').GroupEvent}
 */
function groupEvent(f) {
  /** @type {import('./types.js').GroupEvent} */
  const e = { topic: String(f.topic), what: /** @type {any} */ (f.what), ts: f.ts };
  if (f.from) { e.from = f.from; }
  if (f.src) { e.src = f.src; }
  if (f.role) { e.role = /** @type {any} */ (f.role); }
  return e;
}

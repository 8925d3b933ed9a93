// The Client: one logical session with the gateway that survives lost connections. It reconnects
// with backoff, refreshes its token through a hook, resubscribes and catches up every topic, and
// resends what was not acked with the same client_msg_id.

import { Emitter } from './emitter.js';
import { Connection } from './connection.js';
import { TopicSync, messageOf } from './topicsync.js';
import { ReadMarks } from './marks.js';
import { watchNetwork } from './network.js';
import { Outbox } from './outbox.js';
import { backoffDelay } from './backoff.js';
import { ClientClosedError, ConnectionLostError, ImledgerError, ProtocolError } from './errors.js';
import { seqNumber } from './ids.js';
import { AuthFailure, TokenKeeper } from './tokens.js';
import { UserChannel } from './userchannel.js';

/** @typedef {import('./types.js').ClientEvents} ClientEvents */
/** @typedef {import('./types.js').ConnectionState} ConnectionState */
/** @typedef {import('./types.js').Session} Session */
/** @typedef {import('./types.js').SendAck} SendAck */
/** @typedef {import('./types.js').SendOptions} SendOptions */
/** @typedef {import('./types.js').OutboxEntry} OutboxEntry */
/** @typedef {import('./types.js').SubscribeOptions} SubscribeOptions */
/** @typedef {import('./types.js').HistoryQuery} HistoryQuery */
/** @typedef {import('./types.js').HistoryPage} HistoryPage */
/** @typedef {import('./types.js').ServerFrame} ServerFrame */
/** @typedef {import('./types.js').InfoFrame} InfoFrame */
/** @typedef {import('./types.js').CtrlFrame} CtrlFrame */
/** @typedef {import('./topicsync.js').SyncOptions} SyncOptions */
/** @typedef {import('./subscription.js').Subscription} Subscription */
/** @typedef {import('./backoff.js').BackoffOptions} BackoffOptions */

/**
 * @typedef {object} ClientOptions
 * @property {string} url the gateway, ws(s)://host/v1/im/ws (gatewayUrl builds it)
 * @property {string | (() => string | Promise<string>)} token the token to log in with; a function is asked before every login
 * @property {(info: {reason: string}) => (string | null | undefined | Promise<string | null | undefined>)} [refreshToken]
 *   gives a new token. reason: "expiring" shortly before a live session's token expires (the
 *   session logs in again with the new token, without reconnecting); "expired" before
 *   reconnecting with a token past its expiry; or what the server said: token_expired,
 *   token_invalid, token_revoked (a refused login, once per attempt) or kicked (an ended
 *   session). Without the hook, or when it gives nothing, the client closes with that reason
 *   (after "expiring": the session ends at the expiry). A hook that throws is reported as an
 *   "error" event and the attempt is retried later.
 * @property {string} [ua] the user agent sent in hi
 * @property {typeof WebSocket} [WebSocket] the WebSocket class; default globalThis.WebSocket
 * @property {BackoffOptions} [backoff] reconnect pauses; default 0.5 s doubling to 15 s, full jitter
 * @property {number} [pingIntervalMs] default: half the server's idle timeout less 2 s, 5 s to 30 s
 * @property {number} [pongTimeoutMs] a ping unanswered this long ends the connection; default 10000
 * @property {number} [requestTimeoutMs] any request unanswered this long ends the connection; default 20000
 * @property {number} [connectTimeoutMs] a connection not open this long is given up; default 10000
 * @property {number} [refreshMarginMs] refresh a live session's token this long before it expires; default 60000
 * @property {boolean} [watchNetwork] follow the browser's online/offline events; default true
 * @property {Partial<SyncOptions>} [sync] catch-up tuning
 * @property {boolean} [channel] default true: follow the per-user channel ("me") on every
 *   connection: items (chats, invitations, friend requests, blocks, read marks, account changes)
 *   and the counters and last message of every conversation, without a subscription per topic
 * @property {import('./rest.js').RestClient} [rest] reads the conversation list the channel's
 *   counters start from (at the start, after a reconnect, on a resync); without it the counters
 *   start from what the channel brings
 * @property {number} [maxConversations] the most conversations a full re-read of the list reads; default 10000
 * @property {number} [recheckMs] how long after each of those reads the conversations active around it are
 *   read once more (a message sent just before may not have reached the read models yet); default 1000, 0: never
 */

/**
 * A Channel is what the Client keeps per subscription and drives: it activates it on every
 * connection, deactivates it when the connection is lost, routes the live data and message
 * changes of its topic to it, and ends it. Conversation topics (grp…, p2p…) are TopicSyncs; a
 * subscription of another kind (a per-user channel, say) is one more implementation, chosen by
 * channelFor.
 *
 * @typedef {object} Channel
 * @property {string} topic
 * @property {import('./types.js').SubscriptionState} state
 * @property {Subscription} subscription the caller's handle
 * @property {(conn: Connection) => Promise<void>} _activate
 * @property {() => void} _deactivate
 * @property {(d: import('./types.js').DataFrame) => void} _live
 * @property {(i: InfoFrame) => void} _change
 * @property {(reason: string) => void} _end
 * @property {(m: import('./types.js').Message) => void} _remember
 */

/**
 * channelFor makes the Channel of topic.
 *
 * @param {import('./topicsync.js').SubscriptionHost} host
 * @param {string} topic
 * @param {SubscribeOptions} options
 * @returns {Channel}
 */
function channelFor(host, topic, options) {
  return new TopicSync(host, topic, options);
}

/** Reasons after which no new connection can succeed with this account. */
const FATAL = new Set(['user_banned', 'tenant_suspended', 'tenant_not_found', 'session_revoked']);
/** Reasons a new token may cure. */
const REFRESHABLE = new Set(['token_expired', 'token_invalid', 'token_revoked', 'kicked']);
/** Changes that end the subscription of the user they concern (src), or of everyone. */
const ENDS_OWN = new Set(['left', 'removed', 'blocked']);

/** @type {SyncOptions} */
const DEFAULT_SYNC = { pageLimit: 100, gapTimeoutMs: 3000, recheckDelaysMs: [500, 1500, 3500], revalidate: 50, lagRetries: 6, maxKnown: 2000 };

/**
 * gatewayUrl returns the WebSocket URL of the gateway of base, an http(s) URL; in a browser
 * without base, the page's own origin.
 *
 * @param {string} [base]
 * @returns {string}
 */
export function gatewayUrl(base) {
  const origin = base ?? globalThis.location?.origin;
  if (!origin) { throw new ImledgerError('gatewayUrl: no base URL'); }
  const u = new URL('/v1/im/ws', origin);
  u.protocol = u.protocol === 'https:' ? 'wss:' : 'ws:';
  return u.toString();
}

/**
 * Client is the SDK's connection to imledger; see the module comment and docs/clients.md "The
 * TypeScript SDK". Events: see ClientEvents. Nothing happens until connect().
 *
 * @extends {Emitter<ClientEvents>}
 */
export class Client extends Emitter {
  /** @type {ClientOptions} */
  #o;
  /** @type {typeof WebSocket} */
  #WS;
  /** @type {SyncOptions} */
  #syncOptions;
  /** @type {ConnectionState} */
  #state = 'idle';
  #attempt = 0;
  /** @type {Connection|null} */
  #conn = null;
  #loggedIn = false;
  /** @type {Session|null} */
  #session = null;
  #everReady = false;
  /** @type {TokenKeeper} */
  #tokens;
  /** @type {string|null} the reason of a session-ended ctrl on the current connection */
  #ended = null;
  #closedReason = '';
  /** @type {ReturnType<typeof setTimeout>|undefined} */
  #reconnectTimer;
  /** @type {ReturnType<typeof setInterval>|undefined} */
  #pingTimer;
  #offline = false;
  /** @type {Map<string, Channel>} by topic */
  #subs = new Map();
  #marks = new ReadMarks();
  /** @type {{resolve: () => void, reject: (err: Error) => void}[]} */
  #waiters = [];
  /** @type {Outbox} */
  #outbox;
  /** @type {() => void} */
  #unwatch;
  /** @type {UserChannel|null} */
  #channel = null;

  /** @param {ClientOptions} options */
  constructor(options) {
    super();
    if (!options || !options.url) { throw new ImledgerError('Client: url is required'); }
    this.#o = options;
    const WS = options.WebSocket ?? globalThis.WebSocket;
    if (!WS) { throw new ImledgerError('Client: no WebSocket class (pass options.WebSocket)'); }
    this.#WS = WS;
    this.#syncOptions = { ...DEFAULT_SYNC, ...(options.sync || {}) };
    this.#tokens = new TokenKeeper(options, (err) => this.emit('error', err));
    this.#outbox = new Outbox({
      connection: () => (this.#loggedIn ? this.#conn : null),
      mayPublish: (topic) => this.#subs.get(topic)?.state !== 'pending',
      changed: (entry) => this.emit('outbox', { entry })
    });
    this.#unwatch = options.watchNetwork === false ? () => {} : watchNetwork(() => this.#online(), () => this.#goneOffline());
    if (options.channel !== false) { this.#channel = new UserChannel(this.#channelHost()); }
  }

  /**
   * The per-user channel: its state, epoch and position, ready(), and conversations (the
   * counters and last message of each conversation: get(topic), all()); null when the client was
   * made with channel false.
   *
   * @returns {UserChannel|null}
   */
  get channel() { return this.#channel; }

  /** The connection state. @returns {ConnectionState} */
  get state() { return this.#state; }

  /** The logged-in session, or null while not logged in. @returns {Session|null} */
  get session() { return this.#loggedIn ? this.#session : null; }

  /**
   * connect starts connecting (from idle); the client then stays connected, reconnecting as
   * needed, until disconnect() or close(). It throws once the client is closed.
   */
  connect() {
    if (this.#state === 'closed') { throw new ClientClosedError('closed'); }
    if (this.#state !== 'idle') { return; }
    this.#attempt = 0;
    this.#open();
  }

  /**
   * ready resolves when the client is logged in (at once if it is), and rejects with a
   * ClientClosedError when it closes first. It does not connect by itself.
   *
   * @returns {Promise<void>}
   */
  ready() {
    if (this.#state === 'ready') { return Promise.resolve(); }
    if (this.#state === 'closed') { return Promise.reject(new ClientClosedError(this.#closedReason || 'closed')); }
    return new Promise((resolve, reject) => this.#waiters.push({ resolve, reject }));
  }

  /**
   * disconnect closes the connection and stays idle until connect(); subscriptions and unsent
   * messages are kept and resume then.
   */
  disconnect() {
    if (this.#state === 'closed' || this.#state === 'idle') { return; }
    this.#drop(1000, 'disconnect');
    this.#setState('idle', { reason: 'disconnect' });
  }

  /**
   * reconnect drops the connection, if any, and connects again at once (e.g. after the app knows
   * the network changed).
   */
  reconnect() {
    if (this.#state === 'closed') { return; }
    this.#drop(4000, 'reconnect');
    this.#attempt = 0;
    this.#open();
  }

  /**
   * close ends the client for good: the connection closes, unsent messages are rejected with a
   * ClientClosedError, subscriptions end.
   */
  close() {
    this.#closeFor('closed');
  }

  /**
   * setToken sets the token of the next login (and re-logs in the live session with it).
   *
   * @param {string} token
   */
  setToken(token) {
    this.#tokens.set(token);
    const conn = this.#conn;
    if (this.#loggedIn && conn && this.#tokens.differs(token)) {
      this.#relogin(conn, token).catch(() => {});
    }
  }

  /**
   * subscribe follows topic: its messages become "message" events, its edits and recalls
   * "update" events, across reconnects. Subscribing to a topic followed already returns its
   * subscription.
   *
   * @param {string} topic
   * @param {SubscribeOptions} [options]
   * @returns {Subscription}
   */
  subscribe(topic, options = {}) {
    const had = this.#subs.get(topic);
    if (had) { return had.subscription; }
    const ch = channelFor(this.#subHost(), topic, options);
    this.#subs.set(topic, ch);
    if (this.#loggedIn && this.#conn) { ch._activate(this.#conn); }
    return ch.subscription;
  }

  /**
   * subscription returns the subscription to topic, if any.
   *
   * @param {string} topic
   * @returns {Subscription|undefined}
   */
  subscription(topic) { return this.#subs.get(topic)?.subscription; }

  /**
   * send sends a message and resolves with its ack once it is committed. Until then it waits in
   * the outbox: sent when the client is logged in (and the topic's subscription, if any, is
   * active), sent again with the same client_msg_id after a lost connection or a temporary
   * refusal, so the server stores it exactly once. Sends to one topic are stored in the order
   * they were made. It rejects with a ProtocolError when the server refuses the message for good,
   * and with a ClientClosedError when the client closes first.
   *
   * @param {string} topic
   * @param {unknown} content
   * @param {SendOptions} [options]
   * @returns {Promise<SendAck>}
   */
  send(topic, content, options) { return this.#outbox.add(topic, content, options); }

  /**
   * pending lists the messages sent but not acked yet.
   *
   * @returns {OutboxEntry[]}
   */
  pending() { return this.#outbox.entries(); }

  /**
   * markRead moves the user's read mark in topic to seq (and the receive mark with it). Marks made
   * while disconnected are sent after the next login; only the highest is sent.
   *
   * @param {string} topic
   * @param {string|number} seq
   */
  markRead(topic, seq) { this.#mark(topic, 'read', seq); }

  /**
   * markReceived moves the user's receive mark in topic to seq.
   *
   * @param {string} topic
   * @param {string|number} seq
   */
  markReceived(topic, seq) { this.#mark(topic, 'recv', seq); }

  /**
   * typing tells the topic's other sessions the user is typing; false when not connected (it is
   * not queued). The server relays at most one a second per topic.
   *
   * @param {string} topic
   * @returns {boolean}
   */
  typing(topic) {
    const conn = this.#loggedIn ? this.#conn : null;
    return !!conn && conn.notify({ note: { topic, what: 'kp' } });
  }

  /**
   * history reads a page of a topic's history (see HistoryQuery). It waits until the client is
   * logged in; it rejects with a ConnectionLostError when the connection ends first.
   *
   * @param {string} topic
   * @param {HistoryQuery} [query]
   * @returns {Promise<HistoryPage>}
   */
  async history(topic, query = {}) {
    await this.ready();
    const conn = this.#conn;
    if (!conn) { throw new ConnectionLostError(); }
    /** @type {Record<string, unknown>} */
    const q = {};
    if (query.afterSeq !== undefined) { q.after_seq = String(query.afterSeq); }
    if (query.beforeSeq !== undefined) { q.before_seq = String(query.beforeSeq); }
    if (query.limit !== undefined) { q.limit = query.limit; }
    const { frames, ctrl } = await conn.get(topic, q);
    const messages = frames.map((d) => messageOf(d, false));
    const sync = this.#subs.get(topic);
    if (sync) { for (const m of messages) { sync._remember(m); } }
    const p = ctrl.params || {};
    return { topic, messages, lastSeq: String(p.last_seq ?? '0'), hasMore: p.has_more === true };
  }

  /**
   * request sends any client frame of type and resolves with the ctrl answering it; for frames the
   * SDK does not wrap. It waits until the client is logged in.
   *
   * @param {string} type
   * @param {Record<string, unknown>} body
   * @returns {Promise<CtrlFrame>}
   */
  async request(type, body) {
    await this.ready();
    const conn = this.#conn;
    if (!conn) { throw new ConnectionLostError(); }
    return conn.request(type, body);
  }

  // ---- the connection's life -----------------------------------------------------------------

  /** #open starts a connection attempt. */
  #open() {
    clearTimeout(this.#reconnectTimer);
    this.#setState('connecting', {});
    /** @type {Connection} */
    const conn = new Connection(new this.#WS(this.#o.url), {
      requestTimeoutMs: this.#o.requestTimeoutMs ?? 20000,
      connectTimeoutMs: this.#o.connectTimeoutMs ?? 10000,
      onFrame: (f) => { if (conn === this.#conn) { this.#frame(f); } },
      onClose: (info) => this.#lost(conn, info.reason),
      onTimeout: (type) => conn.close(4001, type + ' timeout')
    });
    this.#conn = conn;
    conn.opened.then(() => this.#greet(conn), () => {});
  }

  /**
   * #greet says hi, starts the ping watchdog and logs in; then subscriptions, sends and marks
   * resume. A refusal no new connection can fix closes the client.
   *
   * @param {Connection} conn
   */
  async #greet(conn) {
    try {
      const hi = await conn.request('hi', { ver: '1', ua: this.#o.ua ?? 'imledger-sdk/0.1' });
      if (conn !== this.#conn) { return; }
      this.#startPing(conn, Number(hi.params?.idle_timeout_s) || 60);
      this.#setState('authenticating', {});
      const login = await this.#login(conn);
      if (conn !== this.#conn) { return; }
      const p = login.params || {};
      this.#session = { sessionId: String(hi.params?.sid ?? ''), tenant: String(p.tenant), user: String(p.user),
        expires: String(p.expires), reconnected: this.#everReady };
      this.#everReady = true;
      this.#loggedIn = true;
      this.#attempt = 0;
      this.#setState('ready', {});
      for (const w of this.#waiters.splice(0)) { w.resolve(); }
      this.emit('ready', { ...this.#session });
      for (const sub of this.#subs.values()) { sub._activate(conn); }
      this.#channel?._activate(conn);
      this.#outbox.kick();
      this.#marks.resent();
      this.#marks.flush(conn);
    } catch (err) {
      if (conn !== this.#conn) { return; }
      if (err instanceof AuthFailure) {
        this.#closeFor(err.reason);
        return;
      }
      conn.close(4000, err instanceof ProtocolError ? err.reason : 'greeting failed');
    }
  }

  /**
   * #login logs in on conn, asking refreshToken for a new token once when the server refuses the
   * one it has as expired, invalid or revoked.
   *
   * @param {Connection} conn
   * @returns {Promise<CtrlFrame>}
   */
  async #login(conn) {
    let token = await this.#tokens.forLogin();
    for (let refreshed = false; ; refreshed = true) {
      try {
        const ctrl = await conn.request('login', { token });
        this.#loggedInWith(conn, token, String(ctrl.params?.expires ?? ''));
        return ctrl;
      } catch (err) {
        if (!(err instanceof ProtocolError)) { throw err; }
        if (REFRESHABLE.has(err.reason) && !refreshed) {
          token = await this.#tokens.refreshOrFail(err.reason);
          continue;
        }
        if (err.code === 401 || FATAL.has(err.reason) || err.code === 409) { throw new AuthFailure(err.reason); }
        throw err;
      }
    }
  }

  /**
   * #relogin logs the live session conn in again with a fresh token of the same user, which
   * moves its expiry.
   *
   * @param {Connection} conn
   * @param {string} token
   */
  async #relogin(conn, token) {
    if (conn !== this.#conn || !this.#loggedIn) { return; }
    const ctrl = await conn.request('login', { token });
    this.#loggedInWith(conn, token, String(ctrl.params?.expires ?? ''));
  }

  /**
   * #loggedInWith records a login on conn and schedules the token's renewal.
   *
   * @param {Connection} conn
   * @param {string} token
   * @param {string} expires
   */
  #loggedInWith(conn, token, expires) {
    if (this.#session && conn === this.#conn) { this.#session.expires = expires; }
    this.#tokens.loggedIn(token, expires, (fresh) => this.#relogin(conn, fresh));
  }

  /**
   * #startPing pings every interval; a ping unanswered within pongTimeoutMs ends the connection,
   * which is then taken for dead (a network that drops packets without closing anything).
   *
   * @param {Connection} conn
   * @param {number} idleSeconds the server's idle timeout
   */
  #startPing(conn, idleSeconds) {
    clearInterval(this.#pingTimer);
    const every = this.#o.pingIntervalMs ?? Math.min(30000, Math.max(5000, idleSeconds * 500 - 2000));
    this.#pingTimer = setInterval(() => {
      if (conn !== this.#conn) { return; }
      conn.request('ping', {}, this.#o.pongTimeoutMs ?? 10000).catch(() => { /* a timeout closes the connection */ });
    }, every);
  }

  /**
   * #lost cleans up after conn ended and decides what next: a reconnect after a pause, a reconnect
   * with a new token, or the end of the client.
   *
   * @param {Connection} conn
   * @param {string} why
   */
  #lost(conn, why) {
    if (conn !== this.#conn) { return; }
    this.#teardown();
    const ended = this.#ended;
    this.#ended = null;
    if (this.#state === 'idle' || this.#state === 'closed') { return; }
    if (ended && FATAL.has(ended)) {
      this.#closeFor(ended);
      return;
    }
    if (ended && REFRESHABLE.has(ended)) {
      if (!this.#tokens.canRefresh) {
        this.#closeFor(ended);
        return;
      }
      this.#tokens.due(ended);
    }
    this.#scheduleReconnect(ended || why || 'connection lost');
  }

  /** #teardown forgets the current connection: timers stop, subscriptions wait for the next one. */
  #teardown() {
    this.#conn = null;
    this.#loggedIn = false;
    clearInterval(this.#pingTimer);
    this.#tokens.stop();
    for (const sub of this.#subs.values()) { sub._deactivate(); }
    this.#channel?._deactivate();
  }

  /**
   * #drop closes the current connection, if any, without reconnecting.
   *
   * @param {number} code
   * @param {string} reason
   */
  #drop(code, reason) {
    clearTimeout(this.#reconnectTimer);
    const conn = this.#conn;
    this.#teardown();
    if (conn) { conn.close(code, reason); }
  }

  /**
   * #scheduleReconnect waits (backoff with full jitter, or for the network while offline) and
   * connects again.
   *
   * @param {string} reason
   */
  #scheduleReconnect(reason) {
    clearTimeout(this.#reconnectTimer);
    const delay = backoffDelay(this.#attempt, this.#o.backoff);
    this.#attempt++;
    if (this.#offline) {
      // Wait for the online event; try anyway after the longest pause, in case it never comes.
      this.#setState('waiting', { reason: 'offline' });
      this.#reconnectTimer = setTimeout(() => this.#open(), this.#o.backoff?.maxMs ?? 15000);
      return;
    }
    this.#setState('waiting', { reason, delayMs: delay });
    this.#reconnectTimer = setTimeout(() => this.#open(), delay);
  }

  /**
   * #closeFor closes the client for good with reason.
   *
   * @param {string} reason
   */
  #closeFor(reason) {
    if (this.#state === 'closed') { return; }
    this.#closedReason = reason;
    this.#drop(1000, 'closed');
    this.#unwatch();
    const err = new ClientClosedError(reason);
    this.#outbox.failAll(err);
    for (const w of this.#waiters.splice(0)) { w.reject(err); }
    for (const sub of Array.from(this.#subs.values())) { sub._end(reason); }
    this.#channel?._end(reason);
    if (reason === 'session_revoked') { this.emit('session_revoked', { reason }); }
    this.#setState('closed', { reason });
  }

  /**
   * #setState moves to state and emits the change.
   *
   * @param {ConnectionState} state
   * @param {{reason?: string, delayMs?: number}} info
   */
  #setState(state, info) {
    const previous = this.#state;
    if (previous === state && state !== 'waiting') { return; }
    this.#state = state;
    this.emit('state', { state, previous, attempt: this.#attempt, ...info });
  }

  /** #online: the browser is back online: a waiting client connects at once. */
  #online() {
    this.#offline = false;
    if (this.#state === 'waiting') {
      this.#attempt = 0;
      this.#open();
    }
  }

  /** #goneOffline: the browser went offline: the connection is dropped (it is dead or soon will be). */
  #goneOffline() {
    this.#offline = true;
    const conn = this.#conn;
    if (conn) { conn.close(4002, 'offline'); }
  }

  // ---- frames ----------------------------------------------------------------------------------

  /**
   * #frame handles a frame that answers no request.
   *
   * @param {ServerFrame} f
   */
  #frame(f) {
    if (f.data) {
      this.#subs.get(f.data.topic)?._live(f.data);
    } else if (f.info) {
      this.#info(f.info);
    } else if (f.me) {
      this.#channel?._frame(f.me);
    } else if (f.pres) {
      this.emit('presence', { topic: f.pres.topic, user: f.pres.src, online: f.pres.what === 'on' });
    } else if (f.ctrl) {
      const c = f.ctrl;
      if (!c.id && c.text === 'session ended') {
        this.#ended = c.reason || 'session ended';
      } else {
        this.emit('error', new ProtocolError(c.code, c.reason || '', c.text, c.params));
      }
    }
  }

  /**
   * #info handles an info frame: notes, message changes, topic changes, notices.
   *
   * @param {InfoFrame} i
   */
  #info(i) {
    const topic = i.topic;
    switch (i.what) {
      case 'kp':
        if (topic && i.from) { this.emit('typing', { topic, user: i.from }); }
        return;
      case 'read':
      case 'recv':
        if (topic && i.from) { this.emit('receipt', { topic, user: i.from, what: i.what, seq: String(i.seq) }); }
        return;
      case 'edit':
      case 'recall':
        if (topic) { this.#subs.get(topic)?._change(i); }
        return;
    }
    if (!topic) {
      this.emit('notice', { what: i.what, ts: String(i.ts ?? ''), content: i.content });
      return;
    }
    /** @type {import('./types.js').TopicChange} */
    const change = { topic, what: i.what };
    if (i.src) { change.src = i.src; }
    if (i.from) { change.from = i.from; }
    this.emit('change', change);
    const me = this.#session?.user;
    if (i.what === 'dissolved' || (ENDS_OWN.has(i.what) && i.src && i.src === me)) {
      this.#subs.get(topic)?._end(i.what);
    }
  }

  // ---- subscriptions and marks -----------------------------------------------------------------

  /** @returns {import('./topicsync.js').SubscriptionHost} */
  #subHost() {
    return {
      sync: this.#syncOptions,
      message: (m) => {
        this.#channel?._message(m);
        this.emit('message', m);
      },
      update: (u) => {
        this.#channel?._changed(u.topic, u.seq, u.what, u.content, u.version);
        this.emit('update', u);
      },
      error: (err) => this.emit('error', err),
      activated: () => this.#outbox.kick(),
      ended: (ch, reason, error) => {
        if (this.#subs.get(ch.topic) === ch) { this.#subs.delete(ch.topic); }
        this.emit('unsubscribed', error ? { topic: ch.topic, reason, error } : { topic: ch.topic, reason });
        this.#outbox.kick();
      }
    };
  }

  /** @returns {import('./userchannel.js').ChannelHost} */
  #channelHost() {
    const rest = this.#o.rest;
    const max = this.#o.maxConversations ?? 10000;
    return {
      emit: (type, event) => this.emit(type, event),
      me: () => this.#session?.user ?? '',
      pageLimit: this.#syncOptions.pageLimit,
      recheckMs: this.#o.recheckMs ?? 1000,
      list: rest ? (since) => listConversations(rest, since, max) : null
    };
  }

  /**
   * @param {string} topic
   * @param {'read'|'recv'} what
   * @param {string|number} seq
   */
  #mark(topic, what, seq) {
    const n = seqNumber(seq);
    if (!(n > 0)) { return; }
    if (what === 'read') { this.#channel?._readLocal(topic, n); }
    this.#marks.set(topic, what, n);
    if (this.#loggedIn && this.#conn) { this.#marks.flush(this.#conn); }
  }
}

/**
 * listConversations reads the conversation list page by page, most recently active first, down
 * to the conversations last active before since ("" for all), at most max of them.
 *
 * @param {import('./rest.js').RestClient} rest
 * @param {string} since
 * @param {number} max
 * @returns {Promise<import('./rest.js').Conversation[]>}
 */
async function listConversations(rest, since, max) {
  /** @type {import('./rest.js').Conversation[]} */
  const out = [];
  let cursor = '';
  for (;;) {
    const page = await rest.conversations(cursor ? { cursor, limit: 100 } : { limit: 100 });
    const convs = page.conversations || [];
    out.push(...convs);
    const oldest = convs.length > 0 ? convs[convs.length - 1].active_at || '' : '';
    if (!page.next_cursor || convs.length === 0 || out.length >= max || (since && oldest && oldest < since)) { return out; }
    cursor = page.next_cursor;
  }
}

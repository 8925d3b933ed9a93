// Subscription: the caller's handle on a topic the Client follows.

/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').SubscriptionState} SubscriptionState */
/** @typedef {import('./topicsync.js').TopicSync} TopicSync */

/**
 * Subscription is a topic the Client follows, from Client.subscribe: the topic's messages are the
 * Client's "message" events (once per seq, in seq order), its edits and recalls "update" events
 * (once per version), across reconnects. It lives until unsubscribe(), or until the server ends
 * it (the user left or was removed, the group was dissolved, the peer blocked the user): then
 * the Client emits "unsubscribed".
 */
export class Subscription {
  /** @type {TopicSync} */
  #sync;

  /**
   * Client.subscribe creates subscriptions; this constructor is not for callers.
   *
   * @param {TopicSync} sync
   */
  constructor(sync) {
    this.#sync = sync;
  }

  /** The topic. @returns {string} */
  get topic() { return this.#sync.topic; }

  /** pending, active, ended or failed (see SubscriptionState). @returns {SubscriptionState} */
  get state() { return this.#sync.state; }

  /** Why it failed or ended, if it did. @returns {Error|null} */
  get error() { return this.#sync.error; }

  /**
   * The seq up to which every message of the topic was delivered (or is a hole), as a string;
   * null before the first subscribe. A later subscribe with since set to it resumes there.
   *
   * @returns {string|null}
   */
  get position() { return this.#sync.position; }

  /**
   * ready resolves when the subscription is active on the current connection, and rejects when it
   * failed or ended.
   *
   * @returns {Promise<void>}
   */
  ready() { return this.#sync.ready(); }

  /**
   * older resolves with the page of history just below the oldest message the caller has: the
   * first call after subscribing gives the latest messages up to the position (as latest() does),
   * each later call the page before the previous one, for scrolling back. Its messages are returned, not emitted;
   * hasMore says whether older ones remain. It rejects with a ConnectionLostError when the
   * connection ends first.
   *
   * @param {{limit?: number}} [options] limit: messages per page; the server's default (50) when absent
   * @returns {Promise<{messages: Message[], hasMore: boolean}>}
   */
  older(options) { return this.#sync.older(options); }

  /**
   * latest resolves with the latest page of history up to the position (the newest messages when
   * catch-up is off), and makes older() continue below it: for opening, or reopening, a view of
   * the topic whose newer messages are the "message" events. Its messages are returned, not
   * emitted.
   *
   * @param {{limit?: number}} [options] limit: messages per page; the server's default (50) when absent
   * @returns {Promise<{messages: Message[], hasMore: boolean}>}
   */
  latest(options) { return this.#sync.latest(options); }

  /**
   * startCatchUp turns catch-up on for a subscription made with catchUp false (for a list that
   * only counts live messages, say, whose topic the user now opens): from then on the messages
   * after the latest seq it knows are caught up after every (re)subscribe.
   */
  startCatchUp() { this.#sync.startCatchUp(); }

  /**
   * unsubscribe leaves the topic: no more of its messages or updates are emitted, and the client
   * forgets it (a later subscribe starts afresh, from now or from its since).
   *
   * @returns {Promise<void>}
   */
  unsubscribe() { return this.#sync.unsubscribe(); }
}

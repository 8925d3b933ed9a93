// The counters and last message of each of the user's conversations, as the per-user channel
// keeps them: started from the conversation list (REST), moved on by messages, recalls, edits and
// read marks. Internal: callers see ConversationState objects.

import { seqNumber } from './ids.js';

/** @typedef {import('./types.js').ConversationState} ConversationState */
/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./rest.js').Conversation} Conversation */
/** @typedef {import('./rest.js').StoredMessage} StoredMessage */

/**
 * @typedef {object} Entry
 * @property {string} topic
 * @property {'group'|'direct'} kind
 * @property {string} peer
 * @property {number} lastSeq
 * @property {number} readSeq
 * @property {number} baseMentions the list's mentions count, of seqs up to baseTop
 * @property {number} baseTop the list's last_seq when it counted baseMentions
 * @property {Set<number>} mentionSeqs seqs above baseTop that mention the user
 * @property {Message|null} lastMessage
 * @property {string} activeAt
 */

/**
 * messageOfStored turns a message of the REST API into a Message.
 *
 * @param {string} topic
 * @param {StoredMessage} s
 * @returns {Message}
 */
function messageOfStored(topic, s) {
  /** @type {Message} */
  const m = { topic, seq: String(s.seq), from: String(s.from), ts: s.sent_at, msgType: /** @type {any} */ (s.msg_type || 'text'),
    version: String(s.version || '1'), live: false };
  if (s.content !== null && s.content !== undefined) { m.content = s.content; }
  if (s.head) { m.head = s.head; }
  if (s.status && s.status !== 'normal') { m.status = s.status; }
  return m;
}

/**
 * mentionsUser reports whether head mentions user or everyone.
 *
 * @param {import('./types.js').Head|undefined} head
 * @param {string} user
 * @returns {boolean}
 */
function mentionsUser(head, user) {
  if (!head) { return false; }
  return head.mention_all === true || (head.mentions || []).map(String).includes(user);
}

/** Conversations holds the state of the user's conversations; see the module comment. */
export class Conversations {
  /** @param {() => string} me the user's id (the session's) */
  constructor(me) {
    this._me = me;
    /** @type {Map<string, Entry>} */
    this._byTopic = new Map();
  }

  /** The number of conversations known. */
  get size() { return this._byTopic.size; }

  /**
   * has reports whether topic is known.
   *
   * @param {string} topic
   * @returns {boolean}
   */
  has(topic) { return this._byTopic.has(topic); }

  /**
   * get returns the state of topic, if known.
   *
   * @param {string} topic
   * @returns {ConversationState|undefined}
   */
  get(topic) {
    const e = this._byTopic.get(topic);
    return e ? this._state(e) : undefined;
  }

  /** all returns every conversation, most recently active first. @returns {ConversationState[]} */
  all() {
    return Array.from(this._byTopic.values()).sort((a, b) => (a.activeAt < b.activeAt ? 1 : a.activeAt > b.activeAt ? -1 : 0))
      .map((e) => this._state(e));
  }

  /** clear forgets every conversation (a new session). */
  clear() { this._byTopic.clear(); }

  /**
   * merge takes an entry of the conversation list: counters that moved further locally (a live
   * message the read models do not hold yet, a read mark) are kept.
   *
   * @param {Conversation} c
   * @returns {ConversationState}
   */
  merge(c) {
    const e = this._entry(c.topic);
    e.kind = c.kind;
    e.peer = c.peer ? String(c.peer) : e.peer;
    const top = seqNumber(c.last_seq) || 0;
    e.lastSeq = Math.max(e.lastSeq, top);
    e.readSeq = Math.max(e.readSeq, seqNumber(c.read_seq) || 0);
    e.baseMentions = Number(c.mentions) || 0;
    e.baseTop = top;
    for (const s of e.mentionSeqs) { if (s <= top) { e.mentionSeqs.delete(s); } }
    if (c.last_message && (!e.lastMessage || (seqNumber(c.last_message.seq) || 0) >= (seqNumber(e.lastMessage.seq) || 0))) {
      e.lastMessage = messageOfStored(c.topic, c.last_message);
    }
    if (c.active_at && c.active_at > e.activeAt) { e.activeAt = c.active_at; }
    return this._state(e);
  }

  /**
   * message takes a message of topic (a conversation frame, a data frame, a new chat's first
   * message): it moves the last seq and the last message, counts a mention of the user, and moves
   * the read mark over the user's own message. It returns the new state, or null when the message
   * changed nothing (seen already).
   *
   * @param {Message} m
   * @returns {ConversationState|null}
   */
  message(m) {
    const seq = seqNumber(m.seq);
    if (!(seq > 0)) { return null; }
    const e = this._entry(m.topic);
    if (seq <= e.lastSeq && (!e.lastMessage || seqNumber(e.lastMessage.seq) >= seq)) { return null; }
    e.lastSeq = Math.max(e.lastSeq, seq);
    if (!e.lastMessage || seq >= seqNumber(e.lastMessage.seq)) { e.lastMessage = m; }
    if (m.ts && m.ts > e.activeAt) { e.activeAt = m.ts; }
    const me = this._me();
    if (m.from === me) {
      e.readSeq = Math.max(e.readSeq, seq);
    } else if (seq > e.readSeq && mentionsUser(m.head, me)) {
      e.mentionSeqs.add(seq);
    }
    return this._state(e);
  }

  /**
   * change applies a recall or an edit of message seq of topic to the last message; null when
   * it is not the last message.
   *
   * @param {string} topic
   * @param {string} seq
   * @param {'edit'|'recall'} what
   * @param {unknown} [content]
   * @param {string} [version]
   * @returns {ConversationState|null}
   */
  change(topic, seq, what, content, version) {
    const e = this._byTopic.get(topic);
    if (!e || !e.lastMessage || e.lastMessage.seq !== String(seq)) { return null; }
    const m = { ...e.lastMessage };
    if (what === 'recall') {
      delete m.content;
      m.status = 'recalled';
      e.mentionSeqs.delete(seqNumber(seq));
    } else {
      m.content = content;
      if (version) { m.version = version; }
    }
    e.lastMessage = m;
    return this._state(e);
  }

  /**
   * read moves the user's read mark in topic to seq; null when it did not move.
   *
   * @param {string} topic
   * @param {number} seq
   * @returns {ConversationState|null}
   */
  read(topic, seq) {
    const e = this._entry(topic);
    if (!(seq > e.readSeq)) { return null; }
    e.readSeq = seq;
    e.lastSeq = Math.max(e.lastSeq, seq);
    return this._state(e);
  }

  /**
   * remove forgets topic and returns its last state, marked removed; null when unknown.
   *
   * @param {string} topic
   * @returns {ConversationState|null}
   */
  remove(topic) {
    const e = this._byTopic.get(topic);
    if (!e) { return null; }
    this._byTopic.delete(topic);
    return { ...this._state(e), removed: true };
  }

  /**
   * ensure makes sure topic is known (a group just joined) and returns its state.
   *
   * @param {string} topic
   * @param {string} [ts]
   * @returns {ConversationState}
   */
  ensure(topic, ts) {
    const e = this._entry(topic);
    if (ts && ts > e.activeAt) { e.activeAt = ts; }
    return this._state(e);
  }

  /**
   * @param {string} topic
   * @returns {Entry}
   */
  _entry(topic) {
    let e = this._byTopic.get(topic);
    if (!e) {
      const direct = topic.startsWith('p2p');
      let peer = '';
      if (direct) {
        const me = this._me();
        const [a, b] = topic.slice(3).split('_');
        peer = a === me ? b : a;
      }
      e = { topic, kind: direct ? 'direct' : 'group', peer, lastSeq: 0, readSeq: 0, baseMentions: 0, baseTop: 0,
        mentionSeqs: new Set(), lastMessage: null, activeAt: '' };
      this._byTopic.set(topic, e);
    }
    return e;
  }

  /**
   * @param {Entry} e
   * @returns {ConversationState}
   */
  _state(e) {
    let mentions = e.readSeq < e.baseTop ? e.baseMentions : 0;
    for (const s of e.mentionSeqs) { if (s > e.readSeq) { mentions++; } }
    /** @type {ConversationState} */
    const st = { topic: e.topic, kind: e.kind, lastSeq: String(e.lastSeq), readSeq: String(e.readSeq),
      unread: Math.max(0, e.lastSeq - e.readSeq), mentions, lastMessage: e.lastMessage, activeAt: e.activeAt };
    if (e.peer) { st.peer = e.peer; }
    return st;
  }
}

// What a subscription delivered of its topic: each seq's content version and whether it was
// recalled, so a message is emitted once per seq and an edit or recall once per (seq, version),
// whether it comes live or is found in history. Internal to TopicSync.

import { seqNumber } from './ids.js';

/** @typedef {import('./types.js').Message} Message */
/** @typedef {import('./types.js').MessageUpdate} MessageUpdate */
/** @typedef {import('./types.js').InfoFrame} InfoFrame */

/**
 * A seq's state: its content version, whether it was recalled, and, for a change that came
 * before its message, that change (applied when the message comes).
 *
 * @typedef {{v: number, r: boolean, early?: {content?: unknown, version?: string, recalled?: boolean}}} Entry
 */

/** Seen is the dedupe state of one topic; see the module comment. */
export class Seen {
  /**
   * @param {string} topic
   * @param {number} max how many seqs it keeps (the highest), at least
   */
  constructor(topic, max) {
    this._topic = topic;
    this._max = max;
    /** @type {Map<number, Entry>} */
    this._seqs = new Map();
  }

  /** How many seqs it holds. */
  get size() { return this._seqs.size; }

  /**
   * has reports whether the message of seq was delivered or handed to the caller.
   *
   * @param {number} seq
   */
  has(seq) {
    const e = this._seqs.get(seq);
    return !!e && !e.early;
  }

  /**
   * message records m as delivered and returns it as it must be emitted (with a change that came
   * before it applied), or null when it was delivered already.
   *
   * @param {Message} m
   * @returns {Message|null}
   */
  message(m) {
    const seq = seqNumber(m.seq);
    const e = this._seqs.get(seq);
    if (e && !e.early) { return null; }
    const early = e?.early;
    if (early?.recalled && m.status !== 'recalled') {
      m = { ...m, status: 'recalled' };
      delete m.content;
      delete m.head;
    } else if (early?.version && seqNumber(early.version) > seqNumber(m.version) && m.status !== 'recalled') {
      m = { ...m, version: early.version, content: early.content };
    }
    this._seqs.set(seq, { v: seqNumber(m.version) || 1, r: m.status === 'recalled' });
    return m;
  }

  /**
   * remember records a message the caller got from a page (not emitted), for the dedupe of its
   * later changes.
   *
   * @param {Message} m
   */
  remember(m) {
    const seq = seqNumber(m.seq);
    if (!this.has(seq)) {
      this._seqs.set(seq, { v: seqNumber(m.version) || 1, r: m.status === 'recalled' });
    }
  }

  /**
   * reconcile compares a stored message (from history) with what was delivered of it and
   * returns the update it shows: a newer version is an edit, a recalled status a recall; null
   * when there is nothing new or the seq was never delivered.
   *
   * @param {Message} m
   * @returns {MessageUpdate|null}
   */
  reconcile(m) {
    const e = this._seqs.get(seqNumber(m.seq));
    if (!e || e.early) { return null; }
    const v = seqNumber(m.version) || 1;
    if (m.status === 'recalled') {
      if (e.r) { return null; }
      e.r = true;
      e.v = Math.max(e.v, v);
      return { topic: this._topic, seq: m.seq, what: 'recall', live: false };
    }
    if (!m.status && v > e.v && !e.r) {
      e.v = v;
      return { topic: this._topic, seq: m.seq, what: 'edit', version: m.version, content: m.content, live: false };
    }
    return null;
  }

  /**
   * change records a live edit or recall and returns its update, or null when that version (or
   * a later one, or the recall) was seen already. A change of a seq whose message has not come
   * yet is kept and applied to the message.
   *
   * @param {InfoFrame} i
   * @returns {MessageUpdate|null}
   */
  change(i) {
    const seq = seqNumber(i.seq);
    const e = this._seqs.get(seq);
    /** @type {MessageUpdate} */
    const u = { topic: this._topic, seq: String(seq), what: i.what === 'edit' ? 'edit' : 'recall', live: true };
    if (i.from) { u.from = i.from; }
    if (i.ts) { u.ts = i.ts; }
    if (u.what === 'edit') {
      const v = seqNumber(i.version);
      if (e && (e.r || e.v >= v)) { return null; }
      u.version = String(v);
      u.content = i.content;
      this._seqs.set(seq, { v, r: false, early: e && !e.early ? undefined : { content: i.content, version: String(v) } });
      return u;
    }
    if (e && e.r) { return null; }
    this._seqs.set(seq, { v: e ? e.v + 1 : 0, r: true, early: e && !e.early ? undefined : { recalled: true } });
    return u;
  }

  /**
   * prune keeps the state of the latest max seqs below top (the subscription's position, or the
   * highest seq held), once it holds a quarter more.
   *
   * @param {number|null} top
   */
  prune(top) {
    if (this._seqs.size <= this._max * 1.25) { return; }
    const below = (top ?? Math.max(...this._seqs.keys())) - this._max;
    for (const seq of this._seqs.keys()) {
      if (seq < below) { this._seqs.delete(seq); }
    }
  }
}

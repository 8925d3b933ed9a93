// Pure logic: how a subscription orders, holds back and dedupes what it is given. The connection
// here is a stand-in that answers gets from an in-memory history as the server pages it (the
// tests against a real server cover the rest).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { TopicSync } from '../../src/topicsync.js';

const TOPIC = 'grp1';

/** History answers gets as the gateway does: exclusive bounds, newest page without after_seq. */
class History {
  constructor() {
    /** @type {Map<number, any>} */
    this.messages = new Map();
    this.watermark = 0;
    this.isOpen = true;
    this.gets = 0;
  }

  add(seq, extra = {}) {
    this.messages.set(seq, { topic: TOPIC, seq: String(seq), from: '7', ts: '2026-01-01T00:00:00.000Z', version: '1',
      updated_at: '2026-01-01T00:00:00.000Z', content: 'm' + seq, ...extra });
  }

  async request() { return { code: 200, text: 'ok', ts: '' }; }

  async get(topic, q) {
    this.gets++;
    const after = Number(q.after_seq || 0);
    const before = Number(q.before_seq || 0);
    const limit = q.limit || 50;
    let seqs = Array.from(this.messages.keys()).filter((s) => s <= this.watermark && s > after && (!before || s < before)).sort((a, b) => a - b);
    let more = false;
    if (after > 0) {
      more = seqs.length > limit;
      seqs = seqs.slice(0, limit);
    } else {
      more = seqs.length > limit;
      seqs = seqs.slice(-limit);
    }
    return { frames: seqs.map((s) => this.messages.get(s)), ctrl: { code: 200, text: 'ok', ts: '', params: { last_seq: String(this.watermark), has_more: more } } };
  }
}

/** live is the live data frame of seq. */
const live = (seq) => ({ topic: TOPIC, seq: String(seq), from: '7', message_id: '01a00000-0000-7000-8000-00000000000' + (seq % 10), ts: '2026-01-01T00:00:00.000Z', content: 'm' + seq });

/** start subscribes a TopicSync on history and waits for its first catch-up. */
async function start(history, options = {}, sync = {}) {
  const got = { messages: [], updates: [] };
  const t = new TopicSync({
    sync: { pageLimit: 100, gapTimeoutMs: 60000, recheckDelaysMs: [], revalidate: 50, lagRetries: 0, maxKnown: 2000, ...sync },
    message: (m) => got.messages.push(m), update: (u) => got.updates.push(u), error: (e) => { throw e; },
    activated: () => {}, ended: () => {}
  }, TOPIC, options);
  await t._activate(/** @type {any} */ (history));
  await t._chain;
  return { t, got, seqs: () => got.messages.map((m) => Number(m.seq)) };
}

const settle = async (t) => { await new Promise((r) => setTimeout(r, 5)); await t._chain; };

test('live messages in order go straight through; a seq seen twice once', async () => {
  const h = new History();
  h.add(1); h.add(2); h.watermark = 2;
  const { t, seqs } = await start(h);
  assert.equal(t.position, '2');
  for (const s of [3, 4, 4, 3, 5]) { t._live(live(s)); }
  await settle(t);
  assert.deepEqual(seqs(), [3, 4, 5]);
});

test('a live message above a missing seq waits for history to fill the gap, then both go in order', async () => {
  const h = new History();
  h.add(1); h.watermark = 1;
  const { t, seqs } = await start(h);
  t._live(live(3)); // 2 is missing: history does not have it yet
  await settle(t);
  assert.deepEqual(seqs(), []);
  h.add(2); h.add(3); h.watermark = 3;
  t._live(live(4)); // another live frame asks history again
  await settle(t);
  assert.deepEqual(seqs(), [2, 3, 4]);
  assert.deepEqual(t.subscription.position, '4');
});

test('a hole: after gapTimeoutMs the waiting messages go; the missing seq, if it turns up, comes late', async () => {
  const h = new History();
  h.watermark = 5;
  const { t, seqs } = await start(h, {}, { gapTimeoutMs: 60 });
  t._live(live(7));
  await settle(t);
  assert.deepEqual(seqs(), []);
  await new Promise((r) => setTimeout(r, 150));
  await settle(t);
  assert.deepEqual(seqs(), [7]);
  h.add(6); h.add(7); h.watermark = 7;
  t._sync(t._gen, 'recheck');
  await settle(t);
  assert.deepEqual(seqs(), [7, 6]);
  t._sync(t._gen, 'recheck');
  await settle(t);
  assert.deepEqual(seqs(), [7, 6], 'nothing twice');
});

test('edits and recalls: one update per version, live or found on catch-up', async () => {
  const h = new History();
  h.add(1); h.add(2); h.watermark = 2;
  const { t, got } = await start(h, { latest: 2 });
  assert.deepEqual(got.messages.map((m) => m.seq), ['1', '2']);
  t._change({ topic: TOPIC, from: '7', what: 'edit', seq: '1', version: '2', content: 'one' });
  t._change({ topic: TOPIC, from: '7', what: 'edit', seq: '1', version: '2', content: 'one' });
  t._change({ topic: TOPIC, from: '7', what: 'recall', seq: '2' });
  t._change({ topic: TOPIC, from: '7', what: 'recall', seq: '2' });
  assert.deepEqual(got.updates.map((u) => [u.seq, u.what, u.version]), [['1', 'edit', '2'], ['2', 'recall', undefined]]);
  // A reconnect re-reads the latest messages: the same versions are no news, a newer one is.
  h.add(1, { version: '2', content: 'one' });
  h.add(2, { version: '2', status: 'recalled', content: undefined });
  t._deactivate();
  await t._activate(/** @type {any} */ (h));
  await settle(t);
  assert.equal(got.updates.length, 2);
  h.add(1, { version: '3', content: 'one, again' });
  t._deactivate();
  await t._activate(/** @type {any} */ (h));
  await settle(t);
  assert.deepEqual(got.updates.map((u) => [u.seq, u.what, u.version, u.live]),
    [['1', 'edit', '2', true], ['2', 'recall', undefined, true], ['1', 'edit', '3', false]]);
  assert.equal(got.messages.length, 2);
});

test('an edit that comes before its message is applied to the message', async () => {
  const h = new History();
  h.watermark = 0;
  const { t, got } = await start(h);
  t._change({ topic: TOPIC, from: '7', what: 'edit', seq: '1', version: '2', content: 'fixed' });
  t._live(live(1));
  await settle(t);
  assert.equal(got.updates.length, 1);
  assert.deepEqual(got.messages.map((m) => [m.seq, m.version, m.content]), [['1', '2', 'fixed']]);
});

test('since 0 catches up from the first message, reading history back page by page', async () => {
  const h = new History();
  for (let s = 1; s <= 5; s++) { h.add(s); }
  h.watermark = 5;
  const { seqs, t } = await start(h, { since: '0' }, { pageLimit: 2 });
  assert.deepEqual(seqs(), [1, 2, 3, 4, 5]);
  assert.equal(t.position, '5');
  assert.ok(h.gets >= 3, 'paged');
});

test('live only: no history is read, messages go as they come, each once; the dedupe stays bounded', async () => {
  const h = new History();
  h.add(1); h.watermark = 1;
  const { t, seqs } = await start(h, { catchUp: false }, { maxKnown: 10 });
  for (const s of [5, 3, 5, 4]) { t._live(live(s)); }
  assert.deepEqual(seqs(), [5, 3, 4]);
  assert.equal(h.gets, 0, 'no history read');
  assert.equal(t.position, null);
  for (let s = 6; s <= 60; s++) { t._live(live(s)); }
  assert.equal(seqs().length, 58);
  assert.ok(t._seen.size <= 13, `the dedupe holds ${t._seen.size} seqs`);
});

test('latest() waits for history to reach what was delivered live, within a few seconds', async () => {
  const h = new History();
  h.add(1); h.add(2); h.watermark = 2;
  const { t, seqs } = await start(h);
  t._live(live(3)); // delivered, while history still ends at 2
  await settle(t);
  assert.deepEqual(seqs(), [3]);
  setTimeout(() => { h.add(3); h.watermark = 3; }, 300);
  const page = await t.latest({ limit: 10 });
  assert.deepEqual(page.messages.map((m) => m.seq), ['1', '2', '3']);
  assert.ok(h.gets >= 3, 'asked again');
});

// The per-user channel under load against a real `imledger serve`: a user in 3,000 conversations
// follows every counter over the one channel, and a server killed and restarted while others
// send loses and duplicates nothing the channel and the subscriptions deliver.

import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { directTopic } from '../src/index.js';
import { startServer, waitFor } from './harness.js';
import { Recorder, sleep } from './helpers.js';

/**
 * pool runs work(i) for i in [0, n) with at most width at once.
 *
 * @param {number} n
 * @param {number} width
 * @param {(i: number) => Promise<unknown>} work
 */
async function pool(n, width, work) {
  let next = 0;
  const lanes = Array.from({ length: width }, async () => {
    while (next < n) { await work(next++); }
  });
  await Promise.all(lanes);
}

describe('a user in 3,000 conversations', () => {
  test('sees every counter change over the channel: messages, mentions, read marks from another device', async (t) => {
    const N = 3000;
    const s = await startServer({ after }); // one user makes the 3,000 groups: the harness lifts the per-user limit
    const u = await s.signUp('many-u');
    const owner = await s.signUp('many-s');
    const started = Date.now();
    /** @type {string[]} */
    const topics = new Array(N);
    await pool(N, 16, async (i) => {
      const g = await s.rest(owner.token).createGroup({ name: 'g' + i });
      await s.rest(u.token).joinGroup(/** @type {string} */ (g.group_id));
      topics[i] = 'grp' + g.group_id;
    });
    const listed = async () => {
      let n = 0;
      let cursor;
      for (;;) {
        const page = await s.rest(u.token).conversations(cursor ? { cursor, limit: 100 } : { limit: 100 });
        n += page.conversations.length;
        if (!page.next_cursor) { return n; }
        cursor = page.next_cursor;
      }
    };
    await waitFor('the read models list 3,000 conversations', async () => (await listed()) >= N, 180000);
    t.diagnostic(`3,000 groups made and joined in ${Date.now() - started} ms`);

    const r = await new Recorder(s.wsUrl, u.token, { rest: s.rest(u.token) }).connect();
    await r.client.channel?.ready();
    const ch = /** @type {import('../src/index.js').UserChannel} */ (r.client.channel);
    assert.equal(ch.conversations.size, N, 'the channel started from the whole list');
    for (const topic of topics) { assert.equal(ch.conversations.get(topic)?.unread, 0, topic); }

    // One message in each, every third mentioning u: 3,000 counters move, over no subscription.
    const sender = await new Recorder(s.wsUrl, owner.token, { channel: false }).connect();
    const sendStart = Date.now();
    // 64 in flight: a send unanswered for 20 s (behind thousands) would make the SDK take the
    // connection for dead.
    await pool(N, 64, (i) => sender.client.send(topics[i], { text: 'm' + i }, i % 3 === 0 ? { head: { mentions: [u.id] } } : {}));
    await waitFor('every counter at 1', () => topics.every((topic) => ch.conversations.get(topic)?.unread === 1), 60000);
    t.diagnostic(`3,000 sends acked and counted on the channel in ${Date.now() - sendStart} ms; the sender reconnected ` +
      `${sender.events.ready.length - 1} times`);
    topics.forEach((topic, i) => {
      const st = ch.conversations.get(topic);
      assert.equal(st?.mentions, i % 3 === 0 ? 1 : 0, topic + ' mentions');
      assert.deepEqual(st?.lastMessage?.content, { text: 'm' + i }, topic + ' last message');
    });
    assert.equal(r.events.message.length, 0, 'no subscription, no message events');

    // Another device reads the first thousand: their read items zero those counters here.
    const other = s.rest(u.token);
    await pool(1000, 16, (i) => other.markRead(topics[i], { read_seq: /** @type {string} */ (ch.conversations.get(topics[i])?.lastSeq) }));
    await waitFor('1,000 read marks', () => r.events.read.length >= 1000, 60000);
    topics.forEach((topic, i) => {
      const st = ch.conversations.get(topic);
      assert.equal(st?.unread, i < 1000 ? 0 : 1, topic + ' unread');
      assert.equal(st?.mentions, i < 1000 || i % 3 !== 0 ? 0 : 1, topic + ' mentions after the reads');
    });
    const seqs = r.events.item.map((x) => Number(x.seq));
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => seqs[0] + i), 'items once each, in order');
    sender.client.close();
    r.client.close();
  });
});

describe('a server killed and restarted while others send', () => {
  test('the channel and the subscriptions lose and duplicate nothing', async (t) => {
    const N = 120; // group messages
    const K = 12; // new 1:1 chats
    // Seqs the kill leaves allocated but never committed are given up after 2 s, not 15.
    const s = await startServer({ after }, { relay: '{min_poll: 1ms, max_poll: 20ms, gap_deadline: 2s}' });
    const a = await s.signUp('kill-a');
    const b = await s.signUp('kill-b');
    const g = await s.rest(a.token).createGroup({ name: 'kill' });
    await s.rest(b.token).joinGroup(/** @type {string} */ (g.group_id));
    const grp = 'grp' + g.group_id;
    const strangers = [];
    for (let i = 0; i < K; i++) { strangers.push(await s.signUp('kill-s' + i)); }

    const receiver = await new Recorder(s.wsUrl, b.token, { rest: s.rest(b.token), sync: { gapTimeoutMs: 30000 } }).connect();
    await receiver.client.channel?.ready();
    await receiver.client.subscribe(grp).ready();
    const sender = await new Recorder(s.wsUrl, a.token, { channel: false }).connect();
    const starters = await Promise.all(strangers.map((x) => new Recorder(s.wsUrl, x.token, { channel: false }).connect()));

    /** @type {import('../src/index.js').SendAck[]} */
    const acks = new Array(N);
    let ackCalls = 0;
    /** @type {Error[]} */
    const failures = [];
    const sends = [];
    for (let i = 0; i < N; i++) {
      sends.push(sender.client.send(grp, { i }, { clientMsgId: 'g-' + i }).then((ack) => { ackCalls++; acks[i] = ack; }, (err) => failures.push(err)));
    }
    const acked = () => acks.filter(Boolean).length;
    const chats = [];
    for (const [share, from] of [[1 / 4, 0], [2 / 4, K / 3], [3 / 4, (2 * K) / 3]]) {
      // A third of the new chats start just before each kill.
      for (let j = from; j < from + K / 3; j++) {
        const x = strangers[j];
        chats.push(starters[j].client.send(directTopic(x.id, b.id), { hello: j }, { clientMsgId: 'c-' + j }).then(() => { ackCalls++; }, (err) => failures.push(err)));
      }
      await waitFor('acks before a kill', () => acked() >= N * share, 60000);
      await s.restart();
    }
    await Promise.all([...sends, ...chats]);
    assert.deepEqual(failures, []);
    assert.equal(ackCalls, N + K, 'every send acked exactly once');

    const events = s.sql(`SELECT payload->>'client_msg_id' FROM events WHERE event_type IN ('message.group.sent.v1', 'message.direct.sent.v1')`)
      .map((row) => row[0]).sort();
    const want = [...Array.from({ length: N }, (_, i) => 'g-' + i), ...Array.from({ length: K }, (_, j) => 'c-' + j)].sort();
    assert.deepEqual(events, want, 'each message stored once');

    await waitFor('the receiver has every group message', () => receiver.messages(grp).length >= N, 90000);
    await waitFor('the receiver heard of every new chat', () => receiver.events.chat.length >= K, 60000);
    await sleep(4000); // rechecks and late frames: nothing more may come
    assert.deepEqual(receiver.messages(grp).map((m) => /** @type {any} */ (m.content).i), Array.from({ length: N }, (_, i) => i),
      'each group message received once, in order');
    const chatTopics = receiver.events.chat.map((c) => c.topic).sort();
    assert.deepEqual(chatTopics, strangers.map((x) => directTopic(x.id, b.id)).sort(), 'each new chat once');
    const seqs = receiver.events.item.map((x) => Number(x.seq));
    assert.deepEqual(seqs, Array.from({ length: seqs.length }, (_, i) => seqs[0] + i), 'items once each, in order');
    const ch = /** @type {import('../src/index.js').UserChannel} */ (receiver.client.channel);
    await waitFor('the counters settle', () => ch.conversations.get(grp)?.lastSeq === acks[N - 1].seq, 30000);
    assert.equal(ch.conversations.get(grp)?.unread, Number(acks[N - 1].seq), 'every group message unread once');
    for (const x of strangers) { assert.equal(ch.conversations.get(directTopic(x.id, b.id))?.unread, 1); }
    const fromItems = receiver.events.chat.filter((c) => c.message).length;
    t.diagnostic(`${N} group messages and ${K} new chats over 3 kills: the receiver reconnected ${receiver.events.ready.length - 1} times, ` +
      `${fromItems} chats came as items and ${K - fromItems} from the list re-read after a reconnect, ${receiver.events.resync.length} resyncs`);
    for (const c of [sender, receiver, ...starters]) { c.client.close(); }
  });
});

// The Client's recovery against a real `imledger serve`: the server killed and restarted while a
// client sends, a network that stops answering, tokens that expire, sessions the server ends.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { directTopic } from '../src/index.js';
import { Server, waitFor } from './harness.js';
import { Proxy, Recorder, sleep } from './helpers.js';

/** @type {Server} */
let s;
before(async () => {
  // Seqs the kill leaves allocated but never committed are given up after 2 s, not 15.
  s = new Server({ relay: '{min_poll: 1ms, max_poll: 20ms, gap_deadline: 2s}', admin: true });
  await s.start();
});
after(() => s.cleanup());

/** storedMessages reads the whole history of topic over REST, oldest first. */
async function storedMessages(token, topic) {
  const rest = s.rest(token);
  let all = [];
  let before;
  for (;;) {
    const page = await rest.history(topic, before ? { before_seq: before, limit: 200 } : { limit: 200 });
    all = page.messages.concat(all);
    if (!page.has_more || page.messages.length === 0) { return all; }
    before = page.messages[0].seq;
  }
}

describe('a server killed and restarted mid-send', () => {
  test('loses and duplicates nothing: every message stored once, the receiver sees each once and in order', async () => {
    const N = 150; // per topic
    const a = await s.signUp('load-a');
    const b = await s.signUp('load-b');
    const g = await s.rest(a.token).createGroup({ name: 'load' });
    await s.rest(b.token).joinGroup(/** @type {string} */ (g.group_id));
    const topics = ['grp' + g.group_id, directTopic(a.id, b.id)];
    // The receiver holds live messages back while a lower seq is missing (30 s here, so the test
    // sees the order the SDK keeps while history catches up after each restart).
    const receiver = await new Recorder(s.wsUrl, b.token, { sync: { gapTimeoutMs: 30000 } }).connect();
    for (const topic of topics) { await receiver.client.subscribe(topic).ready(); }
    const sender = await new Recorder(s.wsUrl, a.token).connect();

    // One message in flight per topic at any time: two topics, so the kills cut off sends of both.
    /** @type {Error[]} */
    const failures = [];
    /** @type {Record<string, import('../src/index.js').SendAck[]>} */
    const acks = {};
    const sends = [];
    for (let i = 0; i < N; i++) {
      for (const topic of topics) {
        acks[topic] = acks[topic] || new Array(N);
        sends.push(sender.client.send(topic, { text: 'n' + i, i }, { clientMsgId: 'load-' + i })
          .then((ack) => { acks[topic][i] = ack; }, (err) => { failures.push(err); }));
      }
    }
    const acked = () => topics.reduce((n, t) => n + acks[t].filter(Boolean).length, 0);
    const kills = [1 / 4, 2 / 4, 3 / 4];
    for (const [k, share] of kills.entries()) {
      await waitFor('acks before a restart', () => acked() >= 2 * N * share, 60000);
      // Each kill finds the receiver connected: a kill while it is still coming back from the
      // last one would be a restart it never sees.
      await waitFor('the receiver back after the last restart', () => receiver.events.ready.length >= k + 1, 60000);
      await s.restart();
    }
    await Promise.all(sends);
    assert.deepEqual(failures, []);
    let duplicates = 0;
    for (const topic of topics) {
      duplicates += acks[topic].filter((x) => x.duplicate).length;
      await checkTopic(topic, acks[topic], a.token, receiver, N);
    }
    const reconnects = receiver.events.ready.length - 1;
    const caughtUp = receiver.events.message.filter((m) => !m.live).length;
    console.log(`${2 * N} messages in 2 topics, 3 kills: ${duplicates} acks were duplicates of a send a kill cut off ` +
      `after its commit; the receiver reconnected ${reconnects} times and caught up ${caughtUp} messages`);
    assert.ok(reconnects >= kills.length, 'the receiver reconnected after each restart');
    sender.client.close();
    receiver.client.close();
  });
});

/**
 * checkTopic checks that the event store and history hold each message of topic once, in the
 * order sent, and that the receiver saw each once, in that order.
 *
 * @param {string} topic
 * @param {import('../src/index.js').SendAck[]} acks by message index
 * @param {string} token
 * @param {Recorder} receiver
 * @param {number} n
 */
async function checkTopic(topic, acks, token, receiver, n) {
  for (let i = 1; i < n; i++) {
    assert.ok(Number(acks[i].seq) > Number(acks[i - 1].seq), `${topic}: seq of ${i} (${acks[i].seq}) after ${acks[i - 1].seq}`);
  }
  const kind = topic.startsWith('grp') ? 'group' : 'direct';
  const events = s.sql(`SELECT stream_version, payload->>'client_msg_id' FROM events
    WHERE event_type = 'message.${kind}.sent.v1' AND stream_id = '${topic}' ORDER BY stream_version`);
  assert.deepEqual(events.map((e) => e[1]), acks.map((x) => x.clientMsgId), topic + ': the events of the messages, in order');
  assert.deepEqual(events.map((e) => e[0]), acks.map((x) => x.seq), topic + ': their seqs');
  await waitFor('history holds every message', async () => (await storedMessages(token, topic)).length >= n, 60000);
  const ids = (await storedMessages(token, topic)).map((m) => m.client_msg_id);
  assert.deepEqual(ids, acks.map((x) => x.clientMsgId), topic + ': history holds each message once, in the order sent');

  await waitFor('the receiver has every message', () => receiver.messages(topic).length >= n, 90000);
  await sleep(4000); // rechecks: nothing more may come
  const seen = receiver.messages(topic);
  assert.deepEqual(seen.map((m) => /** @type {any} */ (m.content).i), Array.from({ length: n }, (_, i) => i),
    topic + ': the receiver saw each message once, in order');
  assert.deepEqual(seen.map((m) => m.seq), acks.map((x) => x.seq), topic + ': with the acked seqs');
}

describe('a network that stops answering', () => {
  test('the ping watchdog drops the silent connection and the client comes back, sends included', async () => {
    const u = await s.signUp('silent');
    const g = await s.rest(u.token).createGroup({ name: 'silent' });
    const topic = 'grp' + g.group_id;
    const proxy = new Proxy(/** @type {number} */ (s.port));
    const port = await proxy.listen();
    after(() => proxy.close());
    const r = await new Recorder(`ws://127.0.0.1:${port}/v1/im/ws`, u.token, { pingIntervalMs: 300, pongTimeoutMs: 500 }).connect();
    await r.client.subscribe(topic).ready();
    proxy.freeze();
    const sent = r.client.send(topic, 'through the silence');
    await waitFor('the watchdog gives up on the connection', () => r.events.state.some((e) => e.state === 'waiting' && e.reason === 'ping timeout'), 5000);
    const ack = await sent;
    assert.equal(ack.seq, '1');
    assert.equal(r.client.state, 'ready');
    await waitFor('the message arrives on the new connection', () => r.messages(topic).length === 1);
    r.client.close();
  });
});

describe('tokens and ended sessions', () => {
  test('refreshToken renews a live session before its token expires, without a reconnect', async () => {
    const u = await s.signUp('renewed');
    const reasons = [];
    const r = await new Recorder(s.wsUrl, s.issueToken(u.id, '4s'), {
      refreshToken: ({ reason }) => { reasons.push(reason); return s.issueToken(u.id, '1h'); }
    }).connect();
    const first = Date.parse(/** @type {string} */ (r.client.session?.expires));
    await waitFor('the refresh', () => reasons.length === 1, 10000);
    await waitFor('the new expiry', () => Date.parse(/** @type {string} */ (r.client.session?.expires)) > first + 60000, 5000);
    await sleep(3000); // past the first token's expiry
    assert.deepEqual(reasons, ['expiring']);
    assert.equal(r.client.state, 'ready');
    assert.deepEqual(r.events.state.map((e) => e.state), ['connecting', 'authenticating', 'ready']);
    r.client.close();
  });

  test('without refreshToken, the session ends when its token expires and the client closes', async () => {
    const u = await s.signUp('expired');
    const r = await new Recorder(s.wsUrl, s.issueToken(u.id, '2s')).connect();
    await waitFor('closed', () => r.client.state === 'closed', 10000);
    assert.equal(r.events.state.at(-1).reason, 'token_expired');
  });

  test('a login refused as expired asks refreshToken and goes on with the new token', async () => {
    const u = await s.signUp('late');
    const stale = s.issueToken(u.id, '1s');
    await sleep(1500);
    const reasons = [];
    const r = await new Recorder(s.wsUrl, stale, {
      refreshToken: ({ reason }) => { reasons.push(reason); return s.issueToken(u.id, '1h'); }
    }).connect();
    assert.deepEqual(reasons, ['token_expired']);
    assert.equal(r.client.session?.user, u.id);
    r.client.close();
  });

  test('a kick ends the session: with refreshToken the client logs in again, without it closes', async () => {
    const u = await s.signUp('kicked');
    const reasons = [];
    const again = await new Recorder(s.wsUrl, u.token, { refreshToken: ({ reason }) => { reasons.push(reason); return u.token; } }).connect();
    const gone = await new Recorder(s.wsUrl, u.token).connect();
    s.admin('user.kick', { user_id: u.id, reason: 'test' });
    await waitFor('the client without refreshToken closes', () => gone.client.state === 'closed', 20000);
    assert.equal(gone.events.state.at(-1).reason, 'kicked');
    await waitFor('the client with refreshToken is back', () => again.events.ready.length === 2, 20000);
    assert.deepEqual(reasons, ['kicked']);
    assert.equal(again.client.state, 'ready');
    again.client.close();
  });
});

describe('tokens past their expiry and the browser network events', () => {
  test('a token past its expiry is refreshed before the reconnect, not sent', async () => {
    const u = await s.signUp('expired-offline');
    const reasons = [];
    const r = await new Recorder(s.wsUrl, s.issueToken(u.id, '3s'), {
      refreshMarginMs: 0, // no renewal of the live session: this test is about the reconnect
      refreshToken: ({ reason }) => { reasons.push(reason); return s.issueToken(u.id, '1h'); }
    }).connect();
    r.client.disconnect();
    await sleep(3500);
    r.client.connect();
    await r.client.ready();
    assert.deepEqual(reasons, ['expired']);
    r.client.close();
  });

  test('offline drops the connection and waits; online reconnects at once', async () => {
    const u = await s.signUp('network');
    // The browser's events, as a page would get them from window.
    const target = new EventTarget();
    const g = /** @type {any} */ (globalThis);
    g.addEventListener = target.addEventListener.bind(target);
    g.removeEventListener = target.removeEventListener.bind(target);
    after(() => { delete g.addEventListener; delete g.removeEventListener; });
    const r = await new Recorder(s.wsUrl, u.token, { backoff: { initialMs: 60000, maxMs: 60000 } }).connect();
    target.dispatchEvent(new Event('offline'));
    await waitFor('waiting for the network', () => r.client.state === 'waiting');
    assert.deepEqual(r.events.state.at(-1), { state: 'waiting', previous: 'ready', attempt: 1, reason: 'offline' });
    const before = Date.now();
    target.dispatchEvent(new Event('online'));
    await r.client.ready();
    assert.ok(Date.now() - before < 5000, 'reconnected at once, not after the 60 s backoff');
    assert.equal(r.events.ready.length, 2);
    r.client.close();
  });
});

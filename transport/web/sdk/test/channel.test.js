// The per-user channel against a real `imledger serve`: typed events for each kind of item, the
// counters and last message of conversations the client is not subscribed to, catch-up of the
// log after a reconnect (no gap, no duplicate), and a signed-out session closing the client.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { directTopic } from '../src/index.js';
import { Server, startServer, waitFor } from './harness.js';
import { Recorder, sleep } from './helpers.js';

/** @type {Server} */
let s;
before(async () => {
  s = new Server();
  await s.start();
});
after(() => s.cleanup());

/** channelClient connects user with the channel and a RestClient, and waits for the channel. */
async function channelClient(user, options = {}) {
  const r = await new Recorder(s.wsUrl, user.token, { rest: s.rest(user.token), ...options }).connect();
  await r.client.channel?.ready();
  return r;
}

/** seqsOf is the seqs of the items r emitted, as numbers. */
function seqsOf(r) { return r.events.item.map((i) => Number(i.seq)); }

/** assertContiguous fails unless the item seqs r emitted are each once, one after another. */
function assertContiguous(r) {
  const seqs = seqsOf(r);
  for (let i = 1; i < seqs.length; i++) { assert.equal(seqs[i], seqs[i - 1] + 1, `item seqs ${seqs.join(',')}`); }
}

describe('the per-user channel', () => {
  test('a new chat, a friend request and its answer, a group invitation and a block are typed events', async () => {
    const a = await s.signUp('ch-a');
    const b = await s.signUp('ch-b');
    const rb = await channelClient(b);
    const ra = await channelClient(a);
    const p2p = directTopic(a.id, b.id);

    await ra.client.send(p2p, { text: 'hi b' });
    await waitFor('b hears of the new chat', () => rb.events.chat.length === 1, 10000);
    const chat = rb.events.chat[0];
    assert.equal(chat.topic, p2p);
    assert.equal(chat.peer, a.id);
    assert.deepEqual(chat.message?.content, { text: 'hi b' });
    assert.equal(rb.client.channel?.conversations.get(p2p)?.unread, 1);

    await s.rest(a.token).requestFriend(b.id);
    await waitFor('b hears the friend request', () => rb.events.friend.some((f) => f.what === 'friend_requested'), 10000);
    assert.deepEqual(rb.events.friend.map((f) => [f.what, f.from, f.src]), [['friend_requested', a.id, b.id]]);
    await s.rest(b.token).acceptFriend(a.id);
    await waitFor('a hears the answer', () => ra.events.friend.some((f) => f.what === 'friend_accepted'), 10000);

    const g = await s.rest(a.token).createGroup({ name: 'invite' });
    await s.rest(a.token).request('POST', '/v1/im/groups/' + g.group_id + '/invites', { body: { user_id: b.id } });
    await waitFor('b is invited', () => rb.events.invitation.length === 1 || rb.events.membership.length > 0, 10000);
    const joinedOrInvited = rb.events.invitation[0] || rb.events.membership[0];
    assert.equal(joinedOrInvited.topic, 'grp' + g.group_id);
    assert.equal(joinedOrInvited.from, a.id);

    await s.rest(b.token).block(a.id);
    await waitFor('a hears the block', () => ra.events.block.some((x) => x.what === 'blocked'), 10000);
    assert.equal(ra.events.block[0].from, b.id);
    assertContiguous(ra);
    assertContiguous(rb);
    ra.client.close();
    rb.client.close();
  });

  test('counters and last messages of conversations without a subscription; read marks from another device', async () => {
    const a = await s.signUp('cnt-a');
    const b = await s.signUp('cnt-b');
    const g = await s.rest(a.token).createGroup({ name: 'count' });
    const topic = 'grp' + g.group_id;
    await s.rest(b.token).joinGroup(/** @type {string} */ (g.group_id));
    const rb = await channelClient(b);
    const ra = await new Recorder(s.wsUrl, a.token, { channel: false }).connect();
    for (let i = 1; i <= 5; i++) {
      await ra.client.send(topic, { text: 'm' + i }, { head: i % 2 ? { mentions: [b.id] } : undefined });
    }
    await waitFor('b counts 5 unread', () => rb.client.channel?.conversations.get(topic)?.unread === 5, 10000);
    const st = rb.client.channel?.conversations.get(topic);
    assert.equal(st?.mentions, 3);
    assert.deepEqual(st?.lastMessage?.content, { text: 'm5' });
    assert.equal(rb.events.message.length, 0, 'no subscription: no message events');

    // Another device of b reads up to seq 4: the read item moves b's counters here.
    await s.rest(b.token).markRead(topic, { read_seq: String(Number(st?.lastSeq) - 1) });
    await waitFor('the read mark arrives', () => rb.events.read.length === 1, 10000);
    assert.equal(rb.events.read[0].topic, topic);
    const after = rb.client.channel?.conversations.get(topic);
    assert.equal(after?.unread, 1);
    assert.equal(after?.mentions, 1);
    ra.client.close();
    rb.client.close();
  });

  test('a reconnect catches up the items missed, each once, in order, and the counters from the list', async () => {
    const b = await s.signUp('rc-b');
    const rb = await channelClient(b);
    const others = [];
    for (let i = 0; i < 3; i++) { others.push(await s.signUp('rc-o' + i)); }
    await s.rest(others[0].token).requestFriend(b.id);
    await waitFor('one item live', () => rb.events.item.length === 1, 10000);
    rb.client.disconnect();
    for (const o of others.slice(1)) { await s.rest(o.token).requestFriend(b.id); }
    const g = await s.rest(others[0].token).createGroup({ name: 'away' });
    await s.rest(b.token).joinGroup(/** @type {string} */ (g.group_id));
    const sender = await new Recorder(s.wsUrl, others[0].token, { channel: false }).connect();
    await sender.client.send('grp' + g.group_id, 'while away');
    await sender.client.send(directTopic(others[1].id, b.id), 'x').catch(() => {}); // not theirs: refused
    // The counters come from the list: the reconnect reads it once the read model has the message
    // (a loaded machine may hold the projection back longer than any fixed pause).
    const grp = 'grp' + g.group_id;
    await s.listed('the message is listed', b.token, grp, (c) => Number(c.last_seq) === 1);
    rb.client.connect();
    await rb.client.ready();
    await waitFor('the missed items', () => rb.events.friend.length === 3 && rb.events.membership.length === 1, 10000);
    assert.deepEqual(rb.events.friend.map((f) => f.from).sort(), others.map((o) => o.id).sort());
    assertContiguous(rb);
    await waitFor('the group counted from the list', () => rb.client.channel?.conversations.get(grp)?.unread === 1, 15000);
    await sleep(500);
    assert.equal(rb.events.friend.length, 3, 'no duplicates');
    sender.client.close();
    rb.client.close();
  });

  test('a session signed out from another device closes the client with session_revoked', async () => {
    const u = await s.signUp('revoked');
    const other = await s.rest().login({ tenant: 'demo', login: u.login, password: u.password });
    const r = await channelClient(u);
    await s.rest(other.token).endSession(u.sessionId);
    await waitFor('the client closes', () => r.client.state === 'closed', 10000);
    assert.deepEqual(r.events.session_revoked, [{ reason: 'session_revoked' }]);
    assert.equal(r.events.state.at(-1).reason, 'session_revoked');
    assert.ok(r.events.account.some((e) => e.change === 'session_ended'), 'the account item came first');
  });
});

describe('a list read while the read models trail a message', () => {
  test('the recheck a moment later counts the message the first read did not have', async () => {
    // The projectors hold every record 1.5 s: a message sent just before the client starts is
    // not in the list it reads first, and its conversation frame went to no session of the user.
    const slow = await startServer({ after }, { projections: 'fetch_linger: 1500ms' });
    const a = await slow.signUp('rk-a');
    const b = await slow.signUp('rk-b');
    const g = await slow.rest(a.token).createGroup({ name: 'late' });
    const grp = 'grp' + g.group_id;
    await slow.rest(b.token).joinGroup(/** @type {string} */ (g.group_id));
    await slow.listed('the join is listed', b.token, grp);
    const sender = await new Recorder(slow.wsUrl, a.token, { channel: false }).connect();
    await sender.client.send(grp, 'just before');
    const r = await new Recorder(slow.wsUrl, b.token, { rest: slow.rest(b.token), recheckMs: 4000 }).connect();
    await r.client.channel?.ready();
    const start = r.events.conversations.find((e) => e.reason === 'start');
    assert.equal(start?.conversations.find((c) => c.topic === grp)?.unread, 0, 'the first read was made before the read models had the message');
    await waitFor('the recheck counts it', () => r.client.channel?.conversations.get(grp)?.unread === 1, 10000);
    const recheck = r.events.conversations.find((e) => e.reason === 'recheck');
    assert.ok(recheck, 'a recheck was read');
    assert.ok(recheck.conversations.some((c) => c.topic === grp), 'the recheck read the active conversation');
    sender.client.close();
    r.client.close();
  });
});

describe('a log that lost the client\'s position', () => {
  test('a reconnect past the log\'s items resyncs: the list is read again, the items go on from the log\'s head', async () => {
    const small = await startServer({ after }, { extra: 'channel: {log_size: 3}' });
    const b = await small.signUp('rs-b');
    const r = await new Recorder(small.wsUrl, b.token, { rest: small.rest(b.token) }).connect();
    await r.client.channel?.ready();
    const first = await small.signUp('rs-first');
    await small.rest(first.token).requestFriend(b.id);
    await waitFor('an item live: the client has a position in the log', () => r.events.friend.length === 1, 10000);
    r.client.disconnect();
    const others = [];
    for (let i = 0; i < 5; i++) {
      const o = await small.signUp('rs-o' + i);
      others.push(o);
      await small.rest(o.token).requestFriend(b.id); // 5 items: the log keeps the last 3
    }
    const g = await small.rest(others[0].token).createGroup({ name: 'while away' });
    await small.rest(b.token).joinGroup(/** @type {string} */ (g.group_id));
    const grp = 'grp' + g.group_id;
    await small.listed('the join is listed', b.token, grp);
    r.client.connect();
    await waitFor('a resync', () => r.events.resync.length === 1, 10000);
    await r.client.channel?.ready();
    assert.equal(r.events.friend.length, 1, 'the items in between are gone, not replayed');
    assert.ok(r.events.conversations.some((e) => e.reason === 'resync' && e.conversations.some((c) => c.topic === grp)),
      'the whole list was read again');
    const head = Number(r.events.resync[0].lastSeq);
    await small.rest(b.token).declineFriend(others[2].id);
    await waitFor('the next item', () => r.events.friend.length === 2, 10000);
    assert.equal(Number(r.events.item.at(-1)?.seq), head + 1, 'items go on from the head');
    r.client.close();
  });
});

// The Client against a real `imledger serve`: connection states, sends and their acks, catch-up
// after a disconnect (edits and recalls included), history paging, read marks, typing, the end
// of a subscription by the server, refusals.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';

import { ProtocolError, directTopic } from '../src/index.js';
import { Server, waitFor } from './harness.js';
import { Recorder, sleep } from './helpers.js';

/** @type {Server} */
let s;
before(async () => {
  s = new Server();
  await s.start();
});
after(() => s.cleanup());

/** group creates a group of owner joined by members and returns its topic. */
async function group(owner, ...members) {
  const g = await s.rest(owner.token).createGroup({ name: 'g' });
  for (const m of members) { await s.rest(m.token).joinGroup(/** @type {string} */ (g.group_id)); }
  return 'grp' + g.group_id;
}

/** receiverOf connects user, subscribes to topic and waits until the subscription is active. */
async function receiverOf(user, topic, options = {}) {
  const r = await new Recorder(s.wsUrl, user.token).connect();
  await r.client.subscribe(topic, options).ready();
  return r;
}

describe('connection', () => {
  test('goes idle → connecting → authenticating → ready and says who it is', async () => {
    const u = await s.signUp('states');
    const r = new Recorder(s.wsUrl, u.token);
    assert.equal(r.client.state, 'idle');
    await r.connect();
    assert.deepEqual(r.events.state.map((e) => e.state), ['connecting', 'authenticating', 'ready']);
    assert.equal(r.client.session?.user, u.id);
    assert.equal(r.client.session?.tenant, 'demo');
    assert.equal(r.events.ready.length, 1);
    assert.equal(r.events.ready[0].reconnected, false);
    r.client.disconnect();
    assert.equal(r.client.state, 'idle');
    await r.connect();
    assert.equal(r.events.ready[1].reconnected, true);
    r.client.close();
    assert.equal(r.client.state, 'closed');
    await assert.rejects(r.client.ready(), { name: 'ClientClosedError' });
  });

  test('a token the server refuses closes the client with the reason', async () => {
    const r = new Recorder(s.wsUrl, 'not-a-token');
    r.client.connect();
    await assert.rejects(r.client.ready(), { name: 'ClientClosedError', reason: 'token_invalid' });
    assert.equal(r.events.state.at(-1).reason, 'token_invalid');
  });
});

describe('sending', () => {
  test('resolves with the ack; a resend of the client_msg_id is a duplicate of the same seq', async () => {
    const u = await s.signUp('sender');
    const topic = await group(u);
    const r = await new Recorder(s.wsUrl, u.token).connect();
    const first = await r.client.send(topic, { text: 'one' }, { clientMsgId: 'fixed-1', head: { mentions: [u.id] } });
    assert.equal(first.seq, '1');
    assert.equal(first.duplicate, false);
    assert.match(first.messageId, /^[0-9a-f-]{36}$/);
    const again = await r.client.send(topic, { text: 'one' }, { clientMsgId: 'fixed-1' });
    assert.equal(again.seq, '1');
    assert.equal(again.duplicate, true);
    assert.equal(r.client.pending().length, 0);
    r.client.close();
  });

  test('waits in the outbox until the client connects', async () => {
    const u = await s.signUp('early');
    const topic = await group(u);
    const r = new Recorder(s.wsUrl, u.token);
    const sent = r.client.send(topic, 'queued before connect');
    assert.deepEqual(r.client.pending().map((e) => e.status), ['queued']);
    r.client.connect();
    const ack = await sent;
    assert.equal(ack.seq, '1');
    assert.deepEqual(r.events.outbox.map((e) => e.entry.status), ['queued', 'sending', 'sent']);
    r.client.close();
  });

  test('a refusal for good rejects with the stable reason, and the next send goes on', async () => {
    const u = await s.signUp('refused');
    const other = await s.signUp('stranger');
    const theirs = await group(other);
    const mine = await group(u);
    const r = await new Recorder(s.wsUrl, u.token).connect();
    const refused = r.client.send(theirs, 'not a member');
    const ok = r.client.send(mine, 'fine');
    await assert.rejects(refused, (err) => err instanceof ProtocolError && err.code === 403 && err.reason === 'not_member');
    assert.equal((await ok).seq, '1');
    await assert.rejects(r.client.send(mine, 'x', { clientMsgId: 'has space' }), /clientMsgId/);
    const invalid = await r.client.send(mine, { text: 'bad \u0000' }).catch((e) => e);
    assert.ok(invalid instanceof ProtocolError && invalid.reason === 'invalid', String(invalid));
    assert.equal(invalid.params.field, 'content');
    r.client.close();
  });
});

describe('receiving', () => {
  test('messages arrive once and in order; after a disconnect, catch-up brings what was missed, edits and recalls included', async () => {
    const a = await s.signUp('catcher-a');
    const b = await s.signUp('catcher-b');
    const topic = await group(a, b);
    const sender = await new Recorder(s.wsUrl, a.token).connect();
    const bob = await receiverOf(b, topic);
    const acks = [];
    for (const text of ['m1', 'm2', 'm3']) { acks.push(await sender.client.send(topic, { text })); }
    await waitFor('bob has 3 messages', () => bob.messages(topic).length === 3);
    assert.deepEqual(bob.texts(topic), ['m1', 'm2', 'm3']);
    assert.ok(bob.messages(topic).every((m) => m.live && m.version === '1' && m.messageId));

    bob.client.disconnect();
    for (const text of ['m4', 'm5']) { await sender.client.send(topic, { text }); }
    const rest = s.rest(a.token);
    await rest.editMessage(topic, acks[0].seq, { version: '1', content: { text: 'm1 edited' } });
    await rest.recallMessage(topic, acks[1].seq);
    // History trails the commits: reconnect once it shows the new messages and the changes.
    await waitFor('history has the changes', async () => {
      const h = await rest.history(topic, { before_seq: '6', limit: 10 });
      return h.messages.length === 5 && h.messages[1].status === 'recalled' && h.messages[0].version === '2';
    });
    bob.client.connect();
    await waitFor('bob caught up', () => bob.messages(topic).length === 5 && bob.updates(topic).length === 2);
    await sleep(4500); // the rechecks after a subscribe: nothing more may come
    assert.deepEqual(bob.texts(topic), ['m1', 'm2', 'm3', 'm4', 'm5']);
    assert.deepEqual(bob.messages(topic).map((m) => m.seq), ['1', '2', '3', '4', '5']);
    assert.deepEqual(bob.messages(topic).map((m) => m.live), [true, true, true, false, false]);
    const ups = bob.updates(topic).map((u) => [u.seq, u.what, u.version ?? '', u.live]);
    assert.deepEqual(ups.sort(), [['1', 'edit', '2', false], ['2', 'recall', '', false]]);
    assert.deepEqual(bob.updates(topic).find((u) => u.what === 'edit').content, { text: 'm1 edited' });

    // Live changes: one update each, never again from a later catch-up.
    await rest.editMessage(topic, acks[2].seq, { version: '1', content: { text: 'm3 edited' } });
    await waitFor('the live edit', () => bob.updates(topic).length === 3);
    bob.client.reconnect();
    await bob.client.ready();
    await sleep(4500);
    assert.equal(bob.updates(topic).length, 3, JSON.stringify(bob.updates(topic)));
    assert.deepEqual(bob.updates(topic)[2], { topic, seq: '3', what: 'edit', version: '2', content: { text: 'm3 edited' },
      from: a.id, ts: bob.updates(topic)[2].ts, live: true });
    assert.equal(bob.messages(topic).length, 5);
    sender.client.close();
    bob.client.close();
  });

  test('latest delivers the newest messages first; older() pages back to the start', async () => {
    const a = await s.signUp('pager');
    const topic = await group(a);
    const sender = await new Recorder(s.wsUrl, a.token).connect();
    for (let i = 1; i <= 7; i++) { await sender.client.send(topic, 'p' + i); }
    await waitFor('history holds 7', async () => (await s.rest(a.token).history(topic, { limit: 10 })).messages.length === 7);
    const reader = await new Recorder(s.wsUrl, a.token).connect();
    const sub = reader.client.subscribe(topic, { latest: 3 });
    await waitFor('the latest 3', () => reader.messages(topic).length === 3);
    assert.deepEqual(reader.texts(topic), ['p5', 'p6', 'p7']);
    assert.equal(sub.position, '7');
    const pages = [];
    for (;;) {
      const page = await sub.older({ limit: 2 });
      pages.push(page.messages.map((m) => m.content));
      if (!page.hasMore) { break; }
    }
    assert.deepEqual(pages, [['p3', 'p4'], ['p1', 'p2']]);
    assert.deepEqual((await sub.older()).messages, []);
    // since resumes after a seq; client.history reads any page.
    const resumed = await new Recorder(s.wsUrl, a.token).connect();
    resumed.client.subscribe(topic, { since: '5' });
    await waitFor('p6 and p7', () => resumed.messages(topic).length === 2);
    assert.deepEqual(resumed.texts(topic), ['p6', 'p7']);
    const h = await resumed.client.history(topic, { afterSeq: '2', limit: 2 });
    assert.deepEqual(h.messages.map((m) => m.seq), ['3', '4']);
    assert.equal(h.hasMore, true);
    assert.equal(h.lastSeq, '7');
    // A subscription since 0 catches up from the very first message.
    const all = await new Recorder(s.wsUrl, a.token, { sync: { pageLimit: 3 } }).connect();
    all.client.subscribe(topic, { since: '0' });
    await waitFor('all 7', () => all.messages(topic).length === 7);
    assert.deepEqual(all.messages(topic).map((m) => m.seq), ['1', '2', '3', '4', '5', '6', '7']);
    for (const r of [sender, reader, resumed, all]) { r.client.close(); }
  });

  test('a live-only subscription reads no history until latest() and startCatchUp() take it further', async () => {
    const a = await s.signUp('live-a');
    const b = await s.signUp('live-b');
    const topic = await group(a, b);
    const sender = await new Recorder(s.wsUrl, a.token).connect();
    for (const t of ['l1', 'l2', 'l3']) { await sender.client.send(topic, t); }
    const bob = await new Recorder(s.wsUrl, b.token).connect();
    const sub = bob.client.subscribe(topic, { catchUp: false });
    await sub.ready();
    await sender.client.send(topic, 'l4');
    await waitFor('the live message', () => bob.messages(topic).length === 1);
    assert.deepEqual(bob.texts(topic), ['l4']);
    assert.equal(sub.position, null);
    await waitFor('history holds 4', async () => (await s.rest(a.token).history(topic, {})).messages.length === 4);
    const top = await sub.latest({ limit: 10 });
    assert.deepEqual(top.messages.map((m) => m.content), ['l1', 'l2', 'l3', 'l4']);
    assert.equal(top.hasMore, false);
    assert.deepEqual((await sub.older()).messages, []);
    sub.startCatchUp();
    await waitFor('a position', () => sub.position === '4');
    bob.client.disconnect();
    for (const t of ['l5', 'l6']) { await sender.client.send(topic, t); }
    await waitFor('history holds 6', async () => (await s.rest(a.token).history(topic, {})).messages.length === 6);
    bob.client.connect();
    await waitFor('caught up', () => bob.messages(topic).length === 3);
    assert.deepEqual(bob.texts(topic), ['l4', 'l5', 'l6']);
    const again = await sub.latest({ limit: 2 });
    assert.deepEqual(again.messages.map((m) => m.content), ['l5', 'l6']);
    assert.deepEqual((await sub.older({ limit: 2 })).messages.map((m) => m.content), ['l3', 'l4']);
    sender.client.close();
    bob.client.close();
  });

  test('read marks, typing and the end of a subscription reach the other side', async () => {
    const a = await s.signUp('marker-a');
    const b = await s.signUp('marker-b');
    const p2p = directTopic(a.id, b.id);
    const alice = await receiverOf(a, p2p);
    const bob = await receiverOf(b, p2p);
    const ack = await alice.client.send(p2p, 'read me');
    await waitFor('bob has it', () => bob.messages(p2p).length === 1);
    bob.client.disconnect();
    bob.client.markRead(p2p, ack.seq); // kept while disconnected, sent after the login
    bob.client.connect();
    await waitFor('alice hears bob read it', () => alice.events.receipt.some((e) => e.what === 'read' && e.seq === ack.seq && e.user === b.id));
    await bob.client.subscription(p2p)?.ready();
    assert.equal(bob.client.typing(p2p), true);
    await waitFor('alice sees bob typing', () => alice.events.typing.some((e) => e.topic === p2p && e.user === b.id));

    const topic = await group(a, b);
    await alice.client.subscribe(topic).ready();
    await bob.client.subscribe(topic).ready();
    await waitFor('bob is on', () => alice.events.presence.some((p) => p.topic === topic && p.user === b.id && p.online));
    await s.rest(b.token).leaveGroup(topic.slice(3));
    await waitFor('bob\'s subscription ended', () => bob.events.unsubscribed.some((e) => e.topic === topic && e.reason === 'left'));
    assert.equal(bob.client.subscription(topic), undefined);
    await waitFor('alice hears bob left', () => alice.events.change.some((c) => c.topic === topic && c.what === 'left' && c.src === b.id));
    alice.client.close();
    bob.client.close();
  });
});

describe('RestClient', () => {
  test('the calls a chat client makes answer typed data; a refusal is an ApiError with the reason', async () => {
    const a = await s.signUp('rest-a');
    const b = await s.signUp('rest-b');
    const ra = s.rest(a.token);
    const rb = s.rest(b.token);
    const created = await ra.createGroup({ name: 'Rest' });
    const gid = /** @type {string} */ (created.group_id);
    assert.equal(created.topic, 'grp' + gid);
    await rb.joinGroup(gid);
    const sent = await s.rest(a.token).request('POST', '/v1/im/topics/grp' + gid + '/messages',
      { body: { client_msg_id: 'rest-1', content: { text: 'over REST' } } });
    assert.equal(/** @type {any} */ (sent).seq, '1');

    await waitFor('the group in the lists', async () => {
      const list = await ra.conversations({ limit: 10 });
      const members = await ra.members(gid).catch(() => ({ members: [] }));
      return list.conversations.some((c) => c.topic === 'grp' + gid && c.last_seq === '1') && members.members.length === 2;
    });
    const g = await ra.group(gid);
    assert.equal(g.name, 'Rest');
    assert.equal(g.owner, a.id);
    assert.deepEqual((await ra.members(gid)).members.map((m) => m.role).sort(), ['member', 'owner']);
    assert.equal((await ra.user(b.id)).nickname, 'rest-b');
    assert.ok(['online', 'offline'].includes((await ra.presence(b.id)).status));

    const marks = await rb.markRead('grp' + gid, { read_seq: '1' });
    assert.equal(marks.read_seq, '1');
    const deleted = await rb.deleteMessage('grp' + gid, '1');
    assert.equal(deleted.seq, '1');

    await ra.requestFriend(b.id, 'hi');
    await waitFor('the request', async () => (await rb.friendRequests()).requests.some((q) => q.user_id === a.id && q.direction === 'incoming'));
    await rb.acceptFriend(a.id);
    await waitFor('friends', async () => (await ra.friends()).user_ids.includes(b.id));
    await ra.block(b.id);
    await ra.unblock(b.id);
    await rb.leaveGroup(gid);

    const refused = await ra.joinGroup('999999999').catch((e) => e);
    assert.equal(refused.name, 'ApiError');
    assert.equal(refused.status, 404);
    assert.equal(refused.reason, 'not_found');
    assert.ok(refused.requestId);
    const anonymous = await s.rest().conversations().catch((e) => e);
    assert.equal(anonymous.status, 401);
  });
});

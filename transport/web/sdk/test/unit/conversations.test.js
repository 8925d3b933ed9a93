// Conversations: the counters the per-user channel keeps, from the list and from messages.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Conversations } from '../../src/conversations.js';

const ME = '42';

/** msg is a live message of topic. */
function msg(topic, seq, from, head) {
  return { topic, seq: String(seq), from, ts: '2026-12-01T10:00:0' + (seq % 10) + '.000Z', msgType: 'text', version: '1', live: true,
    content: { text: 'm' + seq }, ...(head ? { head } : {}) };
}

test('messages move the last seq, count mentions of the user, and the user\'s own move the read mark', () => {
  const c = new Conversations(() => ME);
  c.message(msg('grp1', 1, '7'));
  c.message(msg('grp1', 2, '7', { mentions: [ME] }));
  c.message(msg('grp1', 3, '7', { mention_all: true }));
  assert.deepEqual([c.get('grp1')?.unread, c.get('grp1')?.mentions], [3, 2]);
  assert.equal(c.message(msg('grp1', 2, '7', { mentions: [ME] })), null, 'a message seen again changes nothing');
  c.message(msg('grp1', 4, ME));
  assert.deepEqual([c.get('grp1')?.unread, c.get('grp1')?.mentions, c.get('grp1')?.readSeq], [0, 0, '4']);
});

test('a list entry merges: the higher marks win, its mentions stand until the read mark passes them', () => {
  const c = new Conversations(() => ME);
  c.message(msg('grp1', 6, '7', { mentions: [ME] })); // live, ahead of the read model
  c.merge({ topic: 'grp1', kind: 'group', last_seq: '5', read_seq: '1', unread: '4', mentions: '2' });
  let st = c.get('grp1');
  assert.deepEqual([st?.lastSeq, st?.unread, st?.mentions], ['6', 5, 3]);
  c.read('grp1', 5);
  st = c.get('grp1');
  assert.deepEqual([st?.unread, st?.mentions], [1, 1], 'the list\'s mentions were all at or below 5');
  assert.equal(c.read('grp1', 3), null, 'a read mark never goes back');
});

test('a recall of the last message clears its content and its mention; removal forgets the topic', () => {
  const c = new Conversations(() => ME);
  c.message(msg('p2p7_42', 1, '7', { mentions: [ME] }));
  const st = c.change('p2p7_42', '1', 'recall');
  assert.equal(st?.lastMessage?.status, 'recalled');
  assert.equal(st?.lastMessage?.content, undefined);
  assert.equal(st?.mentions, 0);
  assert.equal(st?.peer, '7');
  assert.equal(c.remove('p2p7_42')?.removed, true);
  assert.equal(c.has('p2p7_42'), false);
});

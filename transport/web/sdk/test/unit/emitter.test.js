// Pure logic: events reach their listeners; a listener that throws does not stop the others, and
// its error is rethrown on a later task (caught here by holding that task).

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { Emitter } from '../../src/emitter.js';

class Source extends Emitter {
  fire(type, event) { this.emit(type, event); }
}

test('listeners get events in order; off and once stop them; a throwing listener is isolated', () => {
  const s = new Source();
  const got = [];
  const off = s.on('a', (e) => got.push('first ' + e));
  s.on('a', () => { throw new Error('listener bug'); });
  s.once('a', (e) => got.push('once ' + e));
  s.on('a', (e) => got.push('last ' + e));
  const later = [];
  const realSetTimeout = globalThis.setTimeout;
  globalThis.setTimeout = /** @type {any} */ ((fn) => later.push(fn));
  try {
    s.fire('a', 1);
    off();
    s.fire('a', 2);
  } finally {
    globalThis.setTimeout = realSetTimeout;
  }
  assert.deepEqual(got, ['first 1', 'once 1', 'last 1', 'last 2']);
  assert.equal(later.length, 2, 'one rethrow per throwing call');
  assert.throws(later[0], /listener bug/);
});

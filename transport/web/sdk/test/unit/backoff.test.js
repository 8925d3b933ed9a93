// Pure logic: the reconnect pauses.

import { test } from 'node:test';
import assert from 'node:assert/strict';

import { backoffDelay } from '../../src/index.js';

test('the pause is drawn between 0 and the capped exponential (full jitter)', () => {
  const cases = [
    { attempt: 0, cap: 500 }, { attempt: 1, cap: 1000 }, { attempt: 4, cap: 8000 }, { attempt: 5, cap: 15000 }, { attempt: 60, cap: 15000 }
  ];
  for (const { attempt, cap } of cases) {
    assert.equal(backoffDelay(attempt, { random: () => 0 }), 0, `attempt ${attempt}, lowest draw`);
    assert.equal(backoffDelay(attempt, { random: () => 0.999999 }), cap - 1, `attempt ${attempt}, highest draw`);
    assert.equal(backoffDelay(attempt, { random: () => 0.5 }), cap / 2, `attempt ${attempt}, middle draw`);
  }
  assert.equal(backoffDelay(3, { initialMs: 100, maxMs: 400, random: () => 0.5 }), 200);
  const draws = Array.from({ length: 1000 }, () => backoffDelay(2));
  assert.ok(Math.min(...draws) < 500 && Math.max(...draws) >= 1500 && Math.max(...draws) < 2000, 'spread over [0, 2000)');
});

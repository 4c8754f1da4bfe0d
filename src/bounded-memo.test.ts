import assert from 'node:assert/strict';
import { test } from 'node:test';
import { boundedMemo } from './bounded-memo.ts';

test('boundedMemo answers a key from what it kept, and starts again empty past its size', () => {
  const calls: string[] = [];
  const memo = boundedMemo(2, (k) => {
    calls.push(k);
    return k === 'none' ? undefined : `v:${k}`;
  });
  assert.equal(memo('a'), 'v:a');
  assert.equal(memo('a'), 'v:a');
  assert.equal(memo('none'), undefined);
  assert.equal(memo('none'), undefined, 'an undefined answer is kept too');
  assert.deepEqual(calls, ['a', 'none']);
  assert.equal(memo('b'), 'v:b', 'a third key empties it first');
  assert.equal(memo('a'), 'v:a');
  assert.deepEqual(calls, ['a', 'none', 'b', 'a']);
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ttlCache } from './ttl-cache.ts';

/** A load that is settled by hand, and counts how often it was started. */
function loads<T>() {
  const started: Array<{ resolve: (v: T) => void; reject: (e: Error) => void }> = [];
  const load = () =>
    new Promise<T>((resolve, reject) => {
      started.push({ resolve, reject });
    });
  return { load, started };
}

describe('ttlCache', () => {
  test('answers a load from memory until its time is up, then loads again', async () => {
    let clock = 1_000;
    const cache = ttlCache<number>(1_000, { now: () => clock });
    let n = 0;
    const load = async () => ++n;
    assert.equal(await cache('k', load), 1);
    clock += 999;
    assert.equal(await cache('k', load), 1, 'still fresh just before the ttl');
    clock += 1;
    assert.equal(await cache('k', load), 2, 'loaded again once the ttl has passed since the load began');
    assert.equal(await cache('other', load), 3, 'each key has its own entry');
    assert.equal(await cache('k', load), 2);
  });

  test('callers at once share the one load in flight', async () => {
    const cache = ttlCache<string>(1_000, { now: () => 0 });
    const { load, started } = loads<string>();
    const a = cache('k', load);
    const b = cache('k', load);
    const c = cache('k', load);
    assert.equal(started.length, 1, 'one load for three callers');
    started[0].resolve('v');
    assert.deepEqual(await Promise.all([a, b, c]), ['v', 'v', 'v']);
  });

  test('a failed load is not kept: its callers share the failure, the next caller loads again', async () => {
    const cache = ttlCache<string>(1_000, { now: () => 0 });
    const { load, started } = loads<string>();
    const a = cache('k', load);
    const b = cache('k', load);
    started[0].reject(new Error('database away'));
    await assert.rejects(a, /database away/);
    await assert.rejects(b, /database away/);
    const c = cache('k', load);
    assert.equal(started.length, 2, 'the failure was forgotten');
    started[1].resolve('back');
    assert.equal(await c, 'back');
    assert.equal(await cache('k', load), 'back');
    assert.equal(started.length, 2, 'the success is kept');
  });

  test('a load that throws before it promises is not kept either', async () => {
    const cache = ttlCache<string>(1_000, { now: () => 0 });
    await assert.rejects(
      cache('k', () => {
        throw new Error('no');
      }),
      /no/,
    );
    assert.equal(await cache('k', async () => 'yes'), 'yes');
  });

  test('an expired load that fails late does not drop the newer load under its key', async () => {
    let clock = 0;
    const cache = ttlCache<string>(1_000, { now: () => clock });
    const { load, started } = loads<string>();
    const old = cache('k', load);
    clock = 5_000;
    const fresh = cache('k', load);
    assert.equal(started.length, 2);
    started[1].resolve('new');
    assert.equal(await fresh, 'new');
    started[0].reject(new Error('late'));
    await assert.rejects(old, /late/);
    assert.equal(await cache('k', load), 'new');
    assert.equal(started.length, 2, 'the newer entry is still answered');
  });

  test('forget drops the keys under a prefix only', async () => {
    const cache = ttlCache<number>(1_000, { now: () => 0 });
    let n = 0;
    const load = async () => ++n;
    await cache('sandbox-1\nbuilder', load);
    await cache('sandbox-1\nreviewer', load);
    await cache('sandbox-2\nbuilder', load);
    cache.forget('sandbox-1\n');
    assert.equal(await cache('sandbox-1\nbuilder', load), 4);
    assert.equal(await cache('sandbox-1\nreviewer', load), 5);
    assert.equal(await cache('sandbox-2\nbuilder', load), 3);
  });

  test('past its size it starts again empty, holding what is in use now', async () => {
    let clock = 0;
    const cache = ttlCache<string>(1_000, { max: 2, now: () => clock });
    const load = (v: string) => async () => v;
    await cache('a', load('a'));
    clock = 900;
    await cache('b', load('b'));
    clock = 1_500;
    assert.equal(await cache('a', load('a2')), 'a2', 'an expired key loaded again');
    assert.equal(await cache('b', load('b2')), 'b', 'a key held is not dropped when another held key is loaded again');
    await cache('c', load('c'));
    assert.equal(await cache('c', load('c2')), 'c');
    assert.equal(await cache('b', load('b3')), 'b3', 'a new key past the size dropped the others');
  });
});

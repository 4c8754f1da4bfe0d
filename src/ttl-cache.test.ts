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
  describe('refreshed ahead (refreshWithinMs)', () => {
    /** A cache of a 1 s ttl refreshed in its last 250 ms, with `key` loaded ('v1') at 0 ms. */
    async function primed(key = 'k') {
      const clock = { now: 0 };
      const cache = ttlCache<string>(1_000, { now: () => clock.now, refreshWithinMs: 250 });
      const { load, started } = loads<string>();
      const first = cache(key, load);
      started[0].resolve('v1');
      assert.equal(await first, 'v1');
      return { clock, cache, load, started };
    }

    test('a key in use near its expiry is answered at once and loaded again behind the caller', async () => {
      const { clock, cache, load, started } = await primed();
      clock.now = 749;
      assert.equal(await cache('k', load), 'v1');
      assert.equal(started.length, 1, 'no load before the refresh window');
      clock.now = 750;
      assert.equal(await cache('k', load), 'v1', 'answered from memory while it is loaded again');
      assert.equal(await cache('k', load), 'v1');
      assert.equal(started.length, 2, 'one background load for both callers');
      started[1].resolve('v2');
      await Promise.resolve();
      assert.equal(await cache('k', load), 'v2', 'the background load replaced the entry');
      clock.now = 1_200;
      assert.equal(await cache('k', load), 'v2', 'dated from when the background load began (750), not the first');
      assert.equal(started.length, 2);
    });

    test('never answers past the ttl: a key not used in the window is loaded on the way, as without it', async () => {
      const { clock, cache, load, started } = await primed();
      clock.now = 1_000;
      const second = cache('k', load);
      assert.equal(started.length, 2);
      started[1].resolve('v2');
      assert.equal(await second, 'v2', 'the caller waited for the new load');
    });

    test('a background load still running at the ttl does not keep the old value answered', async () => {
      const { clock, cache, load, started } = await primed();
      clock.now = 900;
      assert.equal(await cache('k', load), 'v1');
      assert.equal(started.length, 2, 'refresh begun');
      clock.now = 1_000;
      const waited = cache('k', load);
      assert.equal(started.length, 3, 'past the ttl the caller loads on its way');
      started[2].resolve('v3');
      assert.equal(await waited, 'v3');
      started[1].resolve('v2-late');
      await Promise.resolve();
      assert.equal(await cache('k', load), 'v3', 'the late background load did not replace the newer entry');
    });

    test('a failed background load leaves the entry to expire and lets the next caller try again', async () => {
      const { clock, cache, load, started } = await primed();
      clock.now = 800;
      assert.equal(await cache('k', load), 'v1');
      started[1].reject(new Error('database away'));
      await new Promise((r) => setImmediate(r));
      assert.equal(await cache('k', load), 'v1', 'still answered until its ttl');
      assert.equal(started.length, 3, 'tried again');
    });

    test('forget during a background load: the load is not kept, the next caller loads afresh', async () => {
      const { clock, cache, load, started } = await primed('sandbox-1\nbuilder');
      clock.now = 800;
      assert.equal(await cache('sandbox-1\nbuilder', load), 'v1');
      assert.equal(started.length, 2);
      cache.forget('sandbox-1\n');
      started[1].resolve('read before the change');
      await Promise.resolve();
      const next = cache('sandbox-1\nbuilder', load);
      assert.equal(started.length, 3, 'loaded on the way after forget, not answered from the background load');
      started[2].resolve('new policy');
      assert.equal(await next, 'new policy');
    });
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { sandboxRequestId, sandboxRequestPrefix } from './sandbox-spend.ts';

describe('the request ids the gateway gives a sandbox\'s model calls', () => {
  it('start with the sandbox\'s own prefix, are unique, and fit a request id', () => {
    const ids = new Set<string>();
    for (let i = 0; i < 5000; i++) {
      for (const sandbox of ['sb_one', 'sb_two']) {
        const id = sandboxRequestId(sandbox);
        assert.ok(id.startsWith(sandboxRequestPrefix(sandbox)), id);
        assert.match(id, /^[A-Za-z0-9._:-]{1,64}$/);
        ids.add(id);
      }
    }
    assert.equal(ids.size, 10_000);
    assert.notEqual(sandboxRequestPrefix('sb_one'), sandboxRequestPrefix('sb_two'));
  });

  it('keep naming each sandbox rightly however many sandboxes were named before', () => {
    for (let i = 0; i < 10_000; i++) assert.ok(sandboxRequestId(`sb_${i}`).startsWith(sandboxRequestPrefix(`sb_${i}`)));
    assert.ok(sandboxRequestId('sb_0').startsWith(sandboxRequestPrefix('sb_0')));
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { makeAgent, makeSecret } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

describe('audit log', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('admins read every write newest first, a page at a time, filtered by action and target type', async () => {
    const agents = [await makeAgent(t), await makeAgent(t), await makeAgent(t)];
    const first = await t.request({ method: 'GET', url: '/api/v1/audit?action=agent.create&limit=2', token: t.adminToken });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.items.length, 2);
    assert.deepEqual(
      first.body.items.map((e: { target: string }) => e.target),
      [agents[2].name, agents[1].name],
    );
    const entry = first.body.items[0];
    assert.equal(entry.action, 'agent.create');
    assert.equal(entry.target_type, 'agent');
    assert.equal(entry.via, 'token');
    assert.ok(!Number.isNaN(Date.parse(entry.at)));
    assert.equal(typeof entry.details, 'object');
    assert.ok(first.body.next_cursor);
    const second = await t.request({ method: 'GET', url: `/api/v1/audit?action=agent.create&limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`, token: t.adminToken });
    assert.equal(second.status, 200);
    assert.equal(second.body.items[0].target, agents[0].name);
    const byType = await t.request({ method: 'GET', url: '/api/v1/audit?target_type=agent&limit=200', token: t.adminToken });
    assert.ok(byType.body.items.every((e: { target_type: string }) => e.target_type === 'agent'));
  });

  test('a secret written is in the log without its value', async () => {
    const value = `s3cret-${uniq('v')}`;
    const name = uniq('audit-secret');
    await makeSecret(t, { name, value });
    const log = await t.request({ method: 'GET', url: '/api/v1/audit?target_type=secret&limit=200', token: t.adminToken });
    assert.ok(log.body.items.some((e: { target: string }) => e.target === name), log.text);
    assert.ok(!log.text.includes(value));
  });

  test('operators and viewers may not read it; a bad cursor or filter is a 400 naming the field', async () => {
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/audit', token: u.token })).status, 403);
    }
    const bad = await t.request({ method: 'GET', url: '/api/v1/audit?cursor=nope', token: t.adminToken });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.errors[0].field, 'cursor');
    const limit = await t.request({ method: 'GET', url: '/api/v1/audit?limit=0', token: t.adminToken });
    assert.equal(limit.status, 400);
    assert.equal(limit.body.errors[0].field, 'limit');
  });
});

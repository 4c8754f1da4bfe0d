import assert from 'node:assert/strict';
import { test } from 'node:test';
import { testApp, uniq } from '../../test/harness.ts';
import { createModelProxyClient } from './client.ts';

test('testApp({ modelProxy: true }) gives the console a client that reaches the real proxy on the same database', async () => {
  const t = await testApp({ modelProxy: true });
  try {
    assert.ok(t.modelProxy);
    assert.equal(t.config.modelProxyUrl, t.modelProxy.url);
    const client = createModelProxyClient(t.config);
    const team = uniq('team');
    await client.setTeamBudget(team, 12.5);
    const minted = await client.mintKey({ team, role: 'lead', agent: 'coder', rpm_limit: 30 });
    assert.match(minted.key, /^sk-ch-/);
    const row = await t.db.selectFrom('mp_keys').select(['team', 'rpm_limit', 'key_hash']).where('key_id', '=', minted.key_id).executeTakeFirstOrThrow();
    assert.equal(row.team, team);
    assert.notEqual(row.key_hash, minted.key);
    const spend = await client.teamSpend(team, 7);
    assert.equal(spend.budget_usd_per_day, 12.5);
    assert.equal(spend.series.length, 7);
    assert.equal(spend.spent_today_usd, 0);
    const revoked = await client.revokeTeamKeys(team);
    assert.deepEqual(revoked.key_ids, [minted.key_id]);
  } finally {
    await t.close();
  }
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { openDatabase, type OpenDatabase } from '../db/database.ts';
import { awayFromClockEdges, TEST_DATABASE_URL, testConfig, testDb, testModelProxy, uniq, type TestDb } from '../../test/harness.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../test/fakes/openai-upstream.ts';
import { createModelProxyClient, type ModelProxyClient } from './client.ts';
import type { RunningModelProxy } from './server.ts';

// Two proxies, each with its own connection pool to one PostgreSQL schema, share nothing in
// memory: whatever limit holds across them holds in the database.
/** A response's JSON body, loosely typed for assertions. */
const json = (r: Response): Promise<any> => r.json();

describe('two model proxies on one PostgreSQL', { skip: TEST_DATABASE_URL ? false : 'needs SERVICE_TEST_DATABASE_URL' }, () => {
  let tdb: TestDb;
  let second: OpenDatabase;
  let fake: FakeOpenAI;
  let a: RunningModelProxy;
  let b: RunningModelProxy;
  let client: ModelProxyClient;

  before(async () => {
    tdb = await testDb();
    second = await openDatabase({ databaseUrl: tdb.url, dataDir: '', searchPath: tdb.schema!, poolSize: 5 });
    fake = await startFakeOpenAI({ latencyMs: 20 });
    const overrides = {
      SERVICE_MODELS: JSON.stringify([{ alias: 'fake', model: 'gpt-fake', base_url: fake.baseUrl, input_usd_per_mtok: 1000, output_usd_per_mtok: 2000, max_output_tokens: 50 }]),
    };
    a = await testModelProxy({ db: tdb.db, config: overrides });
    b = await testModelProxy({ db: second.db, config: overrides });
    client = createModelProxyClient(testConfig(overrides), { baseUrl: a.url });
  });
  after(async () => {
    await a?.stop();
    await b?.stop();
    await fake?.close();
    await second?.close();
    await tdb?.close();
  });

  const chat = (proxy: RunningModelProxy, key: string, body: Record<string, unknown> = {}) =>
    fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10, ...body }),
    }).then(async (r) => ({ status: r.status, body: await json(r) }));

  test('an rpm limit holds across both proxies', async () => {
    // Stay inside one clock minute, where the limit's window is.
    await awayFromClockEdges();
    const k = await client.mintKey({ team: uniq('team'), role: 'dev', agent: 'coder', rpm_limit: 6 });
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => chat(i % 2 ? a : b, k.key)));
    assert.equal(results.filter((r) => r.status === 200).length, 6);
    assert.equal(results.filter((r) => r.status === 429).length, 14);
    assert.ok(results.filter((r) => r.status === 429).every((r) => r.body.error.code === 'rpm_limit_exceeded'));
  });

  test('a team budget holds across both proxies under concurrency', async () => {
    await awayFromClockEdges();
    const team = uniq('team');
    const budget = 0.08;
    await client.setTeamBudget(team, budget);
    const keys = await Promise.all(['dev', 'review'].map((role) => client.mintKey({ team, role, agent: role })));
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => chat(i % 2 ? a : b, keys[i % 2 === 0 ? 0 : 1].key)));
    const ok = results.filter((r) => r.status === 200);
    assert.ok(ok.length >= 1 && ok.length < 40, `${ok.length} got through`);
    assert.ok(results.filter((r) => r.status === 429).every((r) => r.body.error.code === 'team_budget_exceeded'));
    const charged = ok.reduce((s, r) => s + (r.body.usage.prompt_tokens * 1000 + r.body.usage.completion_tokens * 2000) / 1e6, 0);
    // Settling happens after each answer; wait for all of them (every request counted and charged, no reservation left) for up to 30 s, then compare.
    let spend = await client.teamSpend(team, 1);
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; spend = await client.teamSpend(team, 1)) {
      if (spend.series[0].requests >= ok.length && spend.reserved_usd === 0 && Math.abs(spend.spent_today_usd - charged) < 1e-6) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(Math.abs(spend.spent_today_usd - charged) < 1e-6, `charged ${charged}, recorded ${spend.spent_today_usd}`);
    const oneReservation = (100 * 1000 + 10 * 2000) / 1e6;
    assert.ok(spend.spent_today_usd <= budget + oneReservation, `spent ${spend.spent_today_usd} of ${budget}`);
    assert.equal(spend.reserved_usd, 0);
  });
});

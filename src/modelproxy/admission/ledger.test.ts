import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { systemActor } from '../../audit/audit.ts';
import { hashToken } from '../../auth/credentials.ts';
import { openDatabase } from '../../db/database.ts';
import { migrateToLatest } from '../../db/migrate.ts';
import { loadModelCatalog } from '../../models/catalog.ts';
import { awayFromClockEdges, captureLogger, testConfig, testDb, testModelProxy, uniq, type TestDb } from '../../../test/harness.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../../test/fakes/openai-upstream.ts';
import { createModelProxyClient } from '../client.ts';
import { embeddedLedger } from './ledger.ts';
import { createModelProxyService } from '../modelproxy.service.ts';
import type { Admission, Reservation } from './admission.ts';
import { createDatabaseAdmission } from './database.ts';
import type { RunningModelProxy } from '../server.ts';

const MODELS = JSON.stringify([
  { alias: 'fake', model: 'gpt-fake', base_url: 'http://127.0.0.1:9/v1', input_usd_per_mtok: 1000, output_usd_per_mtok: 2000, max_output_tokens: 50 },
  { alias: 'other', model: 'gpt-other', base_url: 'http://127.0.0.1:9/v1' },
]);
const json = (r: Response): Promise<any> => r.json();

describe('the embedded admission ledger', () => {
  let tdb: TestDb;
  before(async () => {
    tdb = await testDb();
  });
  after(() => tdb.close());

  // The ledger admits by mp_reserve's rules and settles by mp_settle's, in memory: the same
  // requests through both must get the same answers and leave the same rows behind.
  test('admits, refuses and settles exactly as the database functions do', async () => {
    const catalog = loadModelCatalog(testConfig({ SERVICE_MODELS: MODELS }).models);
    const errors: unknown[] = [];
    const ledger = embeddedLedger(tdb.db, (err) => errors.push(err));
    await ledger.ready;
    const inDatabase = createDatabaseAdmission(tdb.db, (err) => errors.push(err));
    await awayFromClockEdges();

    async function scenario(admission: Admission) {
      const service = createModelProxyService({ db: tdb.db, catalog, admission });
      const actor = systemActor('test');
      const team = uniq('team');
      await service.setTeamBudget(actor, team, 0.9);
      const k = await service.mintKey(actor, { team, role: 'dev', agent: 'coder', models: ['fake'], max_budget: 1, budget_duration: '1d', rpm_limit: 6 });
      const t = await service.mintKey(actor, { team, role: 'review', agent: 'reviewer', tpm_limit: 25 });
      const gone = await service.mintKey(actor, { team, role: 'gone', agent: 'x' });
      await service.revokeKey(actor, gone.key_id);
      const transcript: unknown[] = [];
      const reserve = async (key: string, amount: number, model = 'fake', tokens = 10) => {
        const r: Reservation = await admission.reserve({ keyHash: hashToken(key), model, amount, tokens, ttlSeconds: 60 });
        transcript.push([r.outcome, r.role, r.retryAfter === null ? null : r.retryAfter > 0]);
        return r;
      };
      const settle = async (r: Reservation, cost: number, tokensIn: number, tokensOut: number, status = 200) => {
        admission.settle({ reservation: r.reservation, keyId: r.keyId, team: r.team, role: r.role, model: 'fake', stream: false, cost, tokensIn, tokensOut, status, latencyMs: 1, upstreamRequestId: null, requestId: null, error: null, count: true });
        await admission.drain();
      };

      await reserve(k.key, 0.4, 'other'); // not an allowed model
      const r1 = await reserve(k.key, 0.4);
      const r2 = await reserve(k.key, 0.4);
      const r3 = await reserve(k.key, 0.4); // 0.8 reserved is under both budgets: let through
      await reserve(k.key, 0.4); // 1.2 reserved: the key's budget
      await settle(r1, 0.1, 10, 10);
      await settle(r2, 0.1, 10, 10);
      await settle(r3, 0, 0, 0, 502);
      const r4 = await reserve(k.key, 0.4);
      const r5 = await reserve(k.key, 0.3);
      await reserve(k.key, 0.01); // 0.2 spent and 0.7 reserved: under the key's 1, at the team's 0.9
      await settle(r4, 0.05, 10, 10);
      await settle(r5, 0, 0, 0, 499);
      await reserve(k.key, 0.01); // the sixth this minute, left open
      await reserve(k.key, 0.01); // rpm
      const t1 = await reserve(t.key, 0, 'other', 10);
      await settle(t1, 0, 10, 20); // 30 tokens this minute, over 25
      await reserve(t.key, 0, 'other', 1);
      // A budget window of one second: spent, refused, and whole again once the window rolls over.
      const w = await service.mintKey(actor, { team, role: 'window', agent: 'w', max_budget: 0.1, budget_duration: '1s' });
      const w1 = await reserve(w.key, 0.05);
      await settle(w1, 0.15, 1, 1);
      await reserve(w.key, 0.05);
      await new Promise((r) => setTimeout(r, 1100));
      const w2 = await reserve(w.key, 0.05);
      await settle(w2, 0.01, 1, 1);
      await reserve(gone.key, 0.1);
      await reserve(`sk-ch-${uniq('unknown')}`, 0.1);
      await admission.drain();

      const keys = await tdb.db.selectFrom('mp_keys').selectAll().where('team', '=', team).orderBy('role').execute();
      const teamRow = await tdb.db.selectFrom('mp_teams').selectAll().where('team', '=', team).executeTakeFirstOrThrow();
      const rollup = await tdb.db.selectFrom('mp_spend_daily').select(['role', 'spend_usd', 'tokens_in', 'tokens_out', 'requests']).where('team', '=', team).orderBy('role').execute();
      const log = await tdb.db.selectFrom('mp_request_log').select(['role', 'status', 'cost_usd', 'tokens_in', 'tokens_out']).where('team', '=', team).orderBy('id').execute();
      return {
        transcript,
        keys: keys.map((r) => ({ role: r.role, window_spend: Number(r.window_spend).toFixed(9), spend_total: Number(r.spend_total).toFixed(9), reserved: Number(r.reserved).toFixed(9), rl_requests: r.rl_requests, rl_tokens: r.rl_tokens, used: r.last_used_at !== null })),
        team: { day_spend: Number(teamRow.day_spend).toFixed(9), reserved: Number(teamRow.reserved).toFixed(9), day: teamRow.day },
        rollup: rollup.map((r) => ({ ...r, spend_usd: Number(r.spend_usd).toFixed(9) })),
        log: log.map((r) => ({ ...r, cost_usd: Number(r.cost_usd).toFixed(9) })),
      };
    }

    const sqlRun = await scenario(inDatabase);
    const memoryRun = await scenario(ledger);
    assert.deepEqual(memoryRun, sqlRun);
    // The scenario does reach every outcome.
    assert.deepEqual(
      [...new Set(sqlRun.transcript.map((t) => (t as string[])[0]))].sort(),
      ['invalid_key', 'key_budget', 'model_not_allowed', 'ok', 'rpm', 'team_budget', 'tpm'],
    );
    assert.deepEqual(errors, []);
    await ledger.close();
  });

  // An upstream may report far more usage than was reserved. The next request of the same key
  // or team must be decided on that, even while the settlement still waits to be written behind
  // its answer (the database admission writes it in the reservation's own statement).
  test('a request right after another is decided on what that one really cost, not its estimate', async () => {
    const catalog = loadModelCatalog(testConfig({ SERVICE_MODELS: MODELS }).models);
    const errors: unknown[] = [];
    const ledger = embeddedLedger(tdb.db, (err) => errors.push(err));
    await ledger.ready;
    for (const admission of [createDatabaseAdmission(tdb.db, (err) => errors.push(err)), ledger]) {
      const service = createModelProxyService({ db: tdb.db, catalog, admission });
      const actor = systemActor('test');
      const alone = await service.mintKey(actor, { team: uniq('team'), role: 'dev', agent: 'coder', max_budget: 1 });
      const team = uniq('team');
      await service.setTeamBudget(actor, team, 1);
      const first = await service.mintKey(actor, { team, role: 'dev', agent: 'coder' });
      const second = await service.mintKey(actor, { team, role: 'review', agent: 'reviewer' });
      const reserve = (key: string) => admission.reserve({ keyHash: hashToken(key), model: 'fake', amount: 0.01, tokens: 10, ttlSeconds: 60 });
      const costly = (r: Reservation) =>
        admission.settle({ reservation: r.reservation, keyId: r.keyId, team: r.team, role: r.role, model: 'fake', stream: false, cost: 5, tokensIn: 1_000_000, tokensOut: 10, status: 200, latencyMs: 1, upstreamRequestId: null, requestId: null, error: null, count: true });

      const a = await reserve(alone.key);
      assert.equal(a.outcome, 'ok');
      costly(a);
      assert.equal((await reserve(alone.key)).outcome, 'key_budget', 'the key spent 5 of its 1');

      // The second key has been seen before: it is known to be of the same team.
      const s = await reserve(second.key);
      assert.equal(s.outcome, 'ok');
      const f = await reserve(first.key);
      assert.equal(f.outcome, 'ok');
      costly(f);
      assert.equal((await reserve(second.key)).outcome, 'team_budget', 'the team spent 5 of its 1 today');

      await admission.drain();
      const row = await tdb.db.selectFrom('mp_keys').select(['spend_total', 'reserved']).where('key_id', '=', alone.key_id).executeTakeFirstOrThrow();
      assert.equal(Number(row.spend_total), 5, 'charged once');
      assert.equal(Number(row.reserved), 0);
    }
    assert.deepEqual(errors, []);
    await ledger.close();
  });

  test('a reservation never settled is released when it expires; a line the database refuses is set aside', async () => {
    const catalog = loadModelCatalog(testConfig({ SERVICE_MODELS: MODELS }).models);
    const errors: Array<[unknown, number]> = [];
    const ledger = embeddedLedger(tdb.db, (err, n) => errors.push([err, n]));
    const service = createModelProxyService({ db: tdb.db, catalog, admission: ledger });
    const k = await service.mintKey(systemActor('test'), { team: uniq('team'), role: 'dev', agent: 'coder', max_budget: 1 });
    const ask = (ttlSeconds: number) => ledger.reserve({ keyHash: hashToken(k.key), model: 'fake', amount: 0.6, tokens: 1, ttlSeconds });
    const lost = await ask(0);
    assert.equal(lost.outcome, 'ok');
    const held = await ask(3600);
    assert.equal(held.outcome, 'ok');
    assert.equal((await ask(3600)).outcome, 'key_budget', '1.2 is held');
    assert.equal(await ledger.releaseExpired(), 1);
    const again = await ask(3600);
    assert.equal(again.outcome, 'ok', 'the expired 0.6 came back; the one still running keeps its own');

    // A settlement with text no cleaning foresaw (the route cleans; the ledger must still not stall on it).
    const line = (r: Reservation, error: string | null) =>
      ledger.settle({ reservation: r.reservation, keyId: r.keyId, team: r.team, role: r.role, model: 'fake', stream: false, cost: 0.1, tokensIn: 1, tokensOut: 1, status: 200, latencyMs: 1, upstreamRequestId: null, requestId: null, error, count: true });
    line(held, 'bad \u0000 byte');
    line(again, null);
    await ledger.drain();
    const rows = await tdb.db.selectFrom('mp_request_log').select('error').where('key_id', '=', k.key_id).execute();
    assert.deepEqual(rows, [{ error: null }], 'the good line is written, the bad one set aside');
    const key = await tdb.db.selectFrom('mp_keys').selectAll().where('key_id', '=', k.key_id).executeTakeFirstOrThrow();
    assert.equal(Number(key.spend_total).toFixed(9), '0.200000000', 'both are charged');
    assert.equal(Number(key.reserved), 0);
    assert.equal(errors.length, 1);
    assert.equal(errors[0][1], 1);
    await ledger.close();
  });

  test('a new ledger clears the reservations a process that ended left behind', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-ledger-'));
    try {
      let opened = await openDatabase({ databaseUrl: null, dataDir: dir });
      await migrateToLatest(opened.db);
      // No proxy runs on this database yet: nothing keeps limits in memory to tell.
      const service = createModelProxyService({ db: opened.db, catalog: loadModelCatalog(testConfig({ SERVICE_MODELS: MODELS }).models), admission: { limitsChanged: async () => {} } });
      const k = await service.mintKey(systemActor('test'), { team: 'left', role: 'dev', agent: 'coder', max_budget: 1 });
      // What a process that died mid-request leaves: a reservation and the amount it holds.
      await opened.db.insertInto('mp_reservations').values({ key_id: k.key_id, team: 'left', amount: 0.9, tokens: 10, rl_minute: new Date().toISOString(), expires_at: new Date(Date.now() + 3_600_000).toISOString() }).execute();
      await opened.db.updateTable('mp_keys').set({ reserved: 0.9 }).where('key_id', '=', k.key_id).execute();
      await opened.db.updateTable('mp_teams').set({ reserved: 0.9 }).where('team', '=', 'left').execute();
      await opened.close();

      opened = await openDatabase({ databaseUrl: null, dataDir: dir });
      const ledger = embeddedLedger(opened.db, () => {});
      await ledger.ready;
      assert.equal(Number((await opened.db.selectFrom('mp_keys').select('reserved').where('key_id', '=', k.key_id).executeTakeFirstOrThrow()).reserved), 0);
      assert.equal(Number((await opened.db.selectFrom('mp_teams').select('reserved').where('team', '=', 'left').executeTakeFirstOrThrow()).reserved), 0);
      assert.equal((await opened.db.selectFrom('mp_reservations').selectAll().execute()).length, 0);
      const r = await ledger.reserve({ keyHash: (await opened.db.selectFrom('mp_keys').select('key_hash').where('key_id', '=', k.key_id).executeTakeFirstOrThrow()).key_hash, model: 'fake', amount: 0.5, tokens: 1, ttlSeconds: 60 });
      assert.equal(r.outcome, 'ok', 'the whole budget is there again');
      await ledger.close();
      await opened.close();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('limits an admin changes hold at once', () => {
  let tdb: TestDb;
  let fake: FakeOpenAI;
  let proxy: RunningModelProxy;
  let client: ReturnType<typeof createModelProxyClient>;
  let lines: string[];

  before(async () => {
    tdb = await testDb();
    fake = await startFakeOpenAI();
    const overrides = { SERVICE_MODELS: JSON.stringify([{ alias: 'fake', model: 'gpt-fake', base_url: fake.baseUrl, input_usd_per_mtok: 1000, output_usd_per_mtok: 2000, max_output_tokens: 50 }, { alias: 'other', model: 'gpt-other', base_url: fake.baseUrl }]) };
    const captured = captureLogger();
    lines = captured.lines;
    proxy = await testModelProxy({ db: tdb.db, config: overrides, logger: captured.logger });
    client = createModelProxyClient(testConfig(overrides), { baseUrl: proxy.url });
  });
  after(async () => {
    await proxy.stop();
    await fake.close();
    await tdb.close();
  });

  const chat = (key: string, model = 'fake') =>
    fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hi' }], max_tokens: 5 }),
    });

  test('rate limits, models, revocation and the team budget', async () => {
    await awayFromClockEdges();
    const team = uniq('team');
    const k = await client.mintKey({ team, role: 'dev', agent: 'coder', rpm_limit: 1 });
    assert.equal((await chat(k.key)).status, 200);
    assert.equal((await chat(k.key)).status, 429);
    await client.updateKey(k.key_id, { rpm_limit: 100 });
    assert.equal((await chat(k.key)).status, 200, 'a raised limit holds for the next request');

    await client.updateKey(k.key_id, { models: ['other'] });
    const refused = await chat(k.key);
    assert.equal(refused.status, 403);
    assert.equal((await json(refused)).error.code, 'model_not_allowed');
    assert.equal((await chat(k.key, 'other')).status, 200);

    await client.setTeamBudget(team, 0);
    const capped = await chat(k.key, 'other');
    assert.equal(capped.status, 429);
    assert.equal((await json(capped)).error.code, 'team_budget_exceeded');
    await client.setTeamBudget(team, null);
    assert.equal((await chat(k.key, 'other')).status, 200);

    await client.revokeKey(k.key_id);
    assert.equal((await chat(k.key, 'other')).status, 401);
    const other = await client.mintKey({ team, role: 'review', agent: 'reviewer' });
    assert.equal((await chat(other.key)).status, 200, 'a key minted a moment ago works at once');
    await client.revokeTeamKeys(team);
    assert.equal((await chat(other.key)).status, 401);
    assert.ok(!lines.join('').includes(k.key));
  });

  test('when writing settlements fails, nothing is lost: they are written once the database takes them', { skip: process.env.SERVICE_TEST_DATABASE_URL ? 'on PostgreSQL settlements are written by the database admission' : false }, async () => {
    const k = await client.mintKey({ team: uniq('team'), role: 'dev', agent: 'coder', max_budget: 10 });
    await sql`alter function mp_write_ledger(json, json, json, json) rename to mp_write_ledger_away`.execute(tdb.db);
    let charged = 0;
    try {
      for (let i = 0; i < 3; i++) {
        const res = await chat(k.key);
        assert.equal(res.status, 200);
        const u = (await json(res)).usage;
        charged += (u.prompt_tokens * 1000 + u.completion_tokens * 2000) / 1e6;
      }
      for (let i = 0; i < 100 && !lines.join('').includes('admission could not write settlements or reread limits'); i++) await new Promise((r) => setTimeout(r, 20));
      assert.match(lines.join(''), /admission could not write settlements or reread limits/);
      assert.equal((await tdb.db.selectFrom('mp_request_log').selectAll().where('key_id', '=', k.key_id).execute()).length, 0);
      // The ledger still counts what it could not write yet.
      assert.equal((await chat(k.key)).status, 200);
    } finally {
      await sql`alter function mp_write_ledger_away(json, json, json, json) rename to mp_write_ledger`.execute(tdb.db);
    }
    let rows: unknown[] = [];
    for (let i = 0; i < 150 && rows.length < 4; i++) {
      await new Promise((r) => setTimeout(r, 20));
      rows = await tdb.db.selectFrom('mp_request_log').selectAll().where('key_id', '=', k.key_id).execute();
    }
    assert.equal(rows.length, 4);
    const key = await tdb.db.selectFrom('mp_keys').selectAll().where('key_id', '=', k.key_id).executeTakeFirstOrThrow();
    assert.ok(Number(key.spend_total) > charged, `all four requests are charged: ${key.spend_total} > ${charged}`);
    assert.equal(Number(key.reserved), 0);
  });
});

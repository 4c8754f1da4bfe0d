import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { makeAgent, makeEnvironment, makeRun, makeTeam, makeTemplate } from '../../../test/factories.ts';
import { makeHostRow } from '../../../test/sandboxes.ts';
import { createTeamsDirectory } from './teams.directory.ts';
import { captureLogger, testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { createModelProxyClient, type ModelProxyClient } from '../../modelproxy/client.ts';
import { byKind, getJob, listJobs } from '../../queue/queue.ts';
import { createJobRunner } from '../../queue/runner.ts';
import { revokeKeyJob } from './jobs/revoke-key.job.ts';
import { revokeTeamKeysJob } from './jobs/revoke-team-keys.job.ts';
import { syncProxyJob } from './jobs/sync-proxy.job.ts';
import { proxyTeamOf } from './proxy-team.ts';

describe('teams', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ modelProxy: true });
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
  });
  after(() => t.close());

  const get = (name: string, token = t.adminToken) => t.request({ method: 'GET', url: `/api/v1/teams/${name}`, token });

  test('create: active, one model-proxy key per role, creator as member, template version and hash', async () => {
    const op = await t.user('operator');
    const tpl = await makeTemplate(t);
    const team = await makeTeam(t, { template: tpl.name, token: op.token });
    assert.equal(team.status, 'active');
    assert.equal(team.state, 'idle');
    assert.equal(team.lead, 'lead');
    assert.deepEqual(team.roles.sort(), ['dev', 'lead']);
    const detail = await get(team.name);
    assert.equal(detail.body.template.name, tpl.name);
    assert.equal(detail.body.template.version, 1);
    assert.equal(detail.body.template.hash, tpl.current.content_sha256);
    assert.equal(detail.body.members[0].user_id, op.id);
    assert.equal(detail.body.home.surface, 'console');
    assert.equal(detail.body.budget_usd_per_day, 10);
    assert.equal(detail.body.budget_state, 'normal');
    assert.equal(detail.body.spent_usd, 0);
    const lead = detail.body.role_settings.find((r: { role: string }) => r.role === 'lead');
    assert.equal(lead.pipeline_next_role, 'dev');
    assert.equal(lead.confirmation_policy, 'never_confirm');
    assert.deepEqual(lead.memory, { inject: true, max_entries: 10, write_outcomes: true, own: [] });
    assert.deepEqual(detail.body.settings, { idle_after_seconds: 600, deep_sleep_after_seconds: 3600, isolation: 'shared', rework_rounds: 2, memory: { inject: true, max_entries: 10, write_outcomes: true } });
    const keys = await t.services.proxy.listKeys(proxyTeamOf(await t.services.teams.mustGetLive(team.name)));
    assert.equal(keys.items.filter((k) => !k.revoked_at).length, 2);
    const worker = await t.services.teamsDirectory.roleModelKey(team.name, 'lead');
    assert.ok(worker && worker.length > 16, 'the worker can read the role key');
    assert.ok(!JSON.stringify(detail.body).includes(worker!), 'the key never leaves the server');
  });

  test('a team whose home is none has no room: room_id or room_label with it is a 422 naming the field', async () => {
    const tpl = await makeTemplate(t);
    for (const field of ['room_id', 'room_label']) {
      const name = uniq('nohome');
      const res = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name, template: { name: tpl.name }, home: { surface: 'none', [field]: 'x' } } });
      assert.equal(res.status, 422, res.text);
      assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), [`home.${field}`]);
      assert.match(res.body.detail, /home "none" has no room/);
      assert.equal((await get(name)).status, 404, 'no team was created');
    }
    const plain = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('nohome'), template: { name: tpl.name }, home: { surface: 'none', room_id: null, room_label: null } } });
    assert.equal(plain.status, 201, plain.text);
    assert.deepEqual(plain.body.home, { surface: 'none', room_id: null, room_label: null });
  });

  test('viewers cannot create teams; names are unique among live teams; reserved names and missing repos are 422', async () => {
    const viewer = await t.user('viewer');
    const tpl = await makeTemplate(t);
    assert.equal((await t.request({ method: 'POST', url: '/api/v1/teams', token: viewer.token, body: { name: uniq('v'), template: { name: tpl.name } } })).status, 403);
    const team = await makeTeam(t, { template: tpl.name });
    const h = { 'if-match': team.etag };
    assert.equal((await t.request({ method: 'PATCH', url: `/api/v1/teams/${team.name}`, token: viewer.token, headers: h, body: { rework_rounds: 1 } })).status, 403);
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: viewer.token, headers: h })).status, 403);
    assert.equal((await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/upgrade`, token: viewer.token, headers: h, body: {} })).status, 403);
    assert.equal((await get(team.name, viewer.token)).status, 200);
    const dup = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: team.name, template: { name: tpl.name } } });
    assert.equal(dup.status, 409);
    const reserved = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: 'platform', template: { name: tpl.name } } });
    assert.equal(reserved.status, 422);
    const repoTpl = await makeTemplate(t, { requires_repo: true });
    const noRepo = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('r'), template: { name: repoTpl.name } } });
    assert.equal(noRepo.status, 422);
    assert.equal(noRepo.body.errors[0].field, 'repo_url');
    const withRepo = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('r'), template: { name: repoTpl.name }, repo_url: 'https://example.com/o/r.git' } });
    assert.equal(withRepo.status, 201, withRepo.text);
    const unknown = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('u'), template: { name: uniq('none') } } });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.errors[0].field, 'template.name');
    const badVersion = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('u'), template: { name: tpl.name, version: 9 } } });
    assert.equal(badVersion.status, 422);
    // A version whose agent was deleted since (it was no longer current) cannot make a team.
    const solo = await makeTemplate(t, {}, ['solo']);
    const gone = solo.current.roles.solo.agent;
    const v2 = await t.request({
      method: 'POST',
      url: `/api/v1/team-templates/${solo.name}/versions`,
      token: t.adminToken,
      headers: { 'if-match': solo.etag },
      body: { lead: 'solo', roles: { solo: { agent: (await makeAgent(t)).name, model: 'fast', vm: solo.env } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 5 },
    });
    assert.equal(v2.status, 201, v2.text);
    const agent = await t.request({ method: 'GET', url: `/api/v1/agents/${gone}`, token: t.adminToken });
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/agents/${gone}`, token: t.adminToken, headers: { 'if-match': String(agent.headers.etag) } })).status, 204);
    const stale = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: uniq('u'), template: { name: solo.name, version: 1 } } });
    assert.equal(stale.status, 422, stale.text);
    assert.equal(stale.body.errors[0].field, 'template.version');
  });

  test('list: filter by state and name substring, paginate', async () => {
    const tpl = await makeTemplate(t);
    const prefix = uniq('flt');
    const teams = [];
    for (const s of ['a', 'b', 'c']) teams.push(await makeTeam(t, { template: tpl.name, body: { name: `${prefix}-${s}` } }));
    await makeRun(t, { team: teams[0].name });
    const all = await t.request({ method: 'GET', url: `/api/v1/teams?q=${prefix}&limit=2`, token: t.adminToken });
    assert.equal(all.body.items.length, 2);
    assert.ok(all.body.next_cursor);
    const rest = await t.request({ method: 'GET', url: `/api/v1/teams?q=${prefix}&limit=2&cursor=${all.body.next_cursor}`, token: t.adminToken });
    assert.deepEqual([...all.body.items, ...rest.body.items].map((i: { name: string }) => i.name), teams.map((x) => x.name));
    const running = await t.request({ method: 'GET', url: `/api/v1/teams?q=${prefix}&state=running`, token: t.adminToken });
    assert.deepEqual(running.body.items.map((i: { name: string }) => i.name), [teams[0].name]);
    assert.equal(running.body.items[0].active_runs, 1);
    assert.ok(running.body.items[0].last_run_at);
    const idle = await t.request({ method: 'GET', url: `/api/v1/teams?q=${prefix}&state=idle`, token: t.adminToken });
    assert.equal(idle.body.items.length, 2);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/teams?state=bogus', token: t.adminToken })).status, 400);
  });

  test('derived state: waiting, sleeping, idle', async () => {
    const team = await makeTeam(t);
    const row = await t.services.teams.mustGetLive(team.name);
    const sb = uniq('sb');
    await t.db.insertInto('sandboxes').values({ id: sb, team_id: row.id, role: 'lead', replica: 0, provider: 'microvm', state: 'sleeping' }).execute();
    assert.equal((await get(team.name)).body.state, 'sleeping');
    await t.db.updateTable('sandboxes').set({ state: 'running' }).where('id', '=', sb).execute();
    assert.equal((await get(team.name)).body.state, 'idle');
    await t.db.insertInto('runs').values({ id: uniq('run'), team_id: row.id, team_name: row.name, state: 'waiting', text: 'q', created_by: 'test' }).execute();
    assert.equal((await get(team.name)).body.state, 'waiting');
  });

  test('PATCH: budget, sleep, rework rounds and role fields; memory layering; key limits are 422', async () => {
    const team = await makeTeam(t);
    const url = `/api/v1/teams/${team.name}`;
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { rework_rounds: 3 } })).status, 428);
    const ok = await t.request({
      method: 'PATCH',
      url,
      token: t.adminToken,
      headers: { 'if-match': team.etag },
      body: {
        budget_usd_per_day: 42,
        rework_rounds: 4,
        idle_after_seconds: 900,
        memory: { max_entries: 5 },
        role_settings: { dev: { model: 'smart', replicas_max: 3, concurrent_runs: 2, max_iterations: 50, confirmation_policy: 'confirm_risky', memory: { inject: false } } },
      },
    });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.budget_usd_per_day, 42);
    assert.equal(ok.body.settings.rework_rounds, 4);
    assert.equal(ok.body.settings.idle_after_seconds, 900);
    assert.deepEqual(ok.body.settings.memory, { inject: true, max_entries: 5, write_outcomes: true });
    const dev = ok.body.role_settings.find((r: { role: string }) => r.role === 'dev');
    assert.equal(dev.model, 'smart');
    assert.equal(dev.replicas_max, 3);
    assert.equal(dev.concurrent_runs, 2);
    assert.equal(dev.max_iterations, 50);
    assert.equal(dev.confirmation_policy, 'confirm_risky');
    assert.deepEqual(dev.memory, { inject: false, max_entries: 5, write_outcomes: true, own: ['inject'] });
    const lead = ok.body.role_settings.find((r: { role: string }) => r.role === 'lead');
    assert.deepEqual(lead.memory.own, []);
    const budget = await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/budget`, token: t.adminToken });
    assert.equal(budget.body.budget_usd_per_day, 42);
    const keys = await t.services.proxy.listKeys(proxyTeamOf(await t.services.teams.mustGetLive(team.name)));
    assert.deepEqual(keys.items.find((k) => k.role === 'dev')!.models, ['smart']);

    // null clears the role's own memory layer.
    const cleared = await t.request({ method: 'PATCH', url, token: t.adminToken, headers: { 'if-match': String(ok.headers.etag) }, body: { role_settings: { dev: { memory: null } } } });
    assert.equal(cleared.status, 200, cleared.text);
    assert.deepEqual(cleared.body.role_settings.find((r: { role: string }) => r.role === 'dev').memory.own, []);

    for (const field of ['max_budget', 'budget_duration', 'rpm_limit', 'tpm_limit']) {
      const res = await t.request({ method: 'PATCH', url, token: t.adminToken, headers: { 'if-match': String(cleared.headers.etag) }, body: { role_settings: { dev: { [field]: 1 } } } });
      assert.equal(res.status, 422, field);
      assert.equal(res.body.errors[0].field, `role_settings.dev.${field}`);
    }
    const badRole = await t.request({ method: 'PATCH', url, token: t.adminToken, headers: { 'if-match': String(cleared.headers.etag) }, body: { role_settings: { ghost: { replicas_max: 2 } } } });
    assert.equal(badRole.status, 422);
    const badMem = await t.request({ method: 'PATCH', url, token: t.adminToken, headers: { 'if-match': String(cleared.headers.etag) }, body: { memory: { max_entries: 11 } } });
    assert.equal(badMem.status, 400);
  });

  test('racing writers leave the proxy agreeing with the stored team', async () => {
    const team = await makeTeam(t);
    const results = await Promise.all([20, 30].map((b) => t.request({ method: 'PATCH', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': team.etag }, body: { budget_usd_per_day: b } })));
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 412]);
    await t.drainJobs();
    const stored = (await get(team.name)).body.budget_usd_per_day;
    const proxied = await t.services.proxy.teamSpend(proxyTeamOf(await t.services.teams.mustGetLive(team.name)), 1);
    assert.equal(proxied.budget_usd_per_day, stored);

    // Archive against PATCH with one ETag: never an active team whose keys were revoked.
    const other = await makeTeam(t);
    const row = await t.services.teams.mustGetLive(other.name);
    const [del, patch] = await Promise.all([
      t.request({ method: 'DELETE', url: `/api/v1/teams/${other.name}`, token: t.adminToken, headers: { 'if-match': other.etag } }),
      t.request({ method: 'PATCH', url: `/api/v1/teams/${other.name}`, token: t.adminToken, headers: { 'if-match': other.etag }, body: { rework_rounds: 1 } }),
    ]);
    // The archive claims the team (the PATCH's ETag goes stale, or the team is gone when the
    // PATCH looks), or the PATCH wins and the archive's ETag goes stale.
    const outcome = `${del.status}/${patch.status}`;
    assert.ok(['204/412', '204/404', '412/200'].includes(outcome), outcome);
    await t.drainJobs();
    const keys = await t.services.proxy.listKeys(proxyTeamOf(row));
    const live = await t.services.teams.mustGetLive(other.name).catch(() => null);
    if (live) assert.ok(keys.items.every((k) => !k.revoked_at), 'an active team keeps its keys');
    else assert.ok(keys.items.every((k) => k.revoked_at), 'an archived team has no live keys');
  });

  test('role names that are also object properties work (constructor, tostring); upgrade without a body moves to the current version', async () => {
    const env = await makeEnvironment(t);
    const agent = await makeAgent(t);
    const tpl = await t.request({
      method: 'POST',
      url: '/api/v1/team-templates',
      token: t.adminToken,
      body: {
        name: uniq('tpl'),
        lead: 'constructor',
        roles: { constructor: { agent: agent.name, model: 'fast', vm: env.name }, tostring: { agent: agent.name, model: 'fast', vm: env.name } },
        sleep: {},
        idle_after_seconds: 600,
        deep_sleep_after_seconds: 3600,
        budget_usd_per_day: 5,
        pipeline: { constructor: 'tostring' },
      },
    });
    assert.equal(tpl.status, 201, tpl.text);
    const team = await makeTeam(t, { template: tpl.body.name });
    const by = new Map<string, { pipeline_next_role: string | null }>(team.role_settings.map((r: { role: string; pipeline_next_role: string | null }) => [r.role, r]));
    assert.equal(by.get('constructor')!.pipeline_next_role, 'tostring');
    assert.equal(by.get('tostring')!.pipeline_next_role, null);
    const up = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/upgrade`, token: t.adminToken, headers: { 'if-match': team.etag } });
    assert.equal(up.status, 200, up.text);
    assert.equal(up.body.template.version, 1);
  });

  test('two operators patching with one ETag: exactly one wins', async () => {
    const team = await makeTeam(t);
    const [a, b] = [await t.user('operator'), await t.user('operator')];
    const results = await Promise.all([a, b].map((u, i) => t.request({ method: 'PATCH', url: `/api/v1/teams/${team.name}`, token: u.token, headers: { 'if-match': team.etag }, body: { rework_rounds: i + 5 } })));
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 412]);
    const winner = results.find((r) => r.status === 200)!;
    assert.equal((await get(team.name)).body.settings.rework_rounds, winner.body.settings.rework_rounds);
  });

  test('the ETag changes with what the body shows (a run starting changes state and active runs), and If-Match still compares only the team itself', async () => {
    const team = await makeTeam(t);
    const before = await get(team.name);
    assert.equal(before.headers.etag, team.etag);
    await makeRun(t, { team: team.name });
    const after = await get(team.name);
    assert.notDeepEqual([after.body.state, after.body.active_runs], [before.body.state, before.body.active_runs]);
    assert.notEqual(after.headers.etag, before.headers.etag, 'a body that differs has another ETag');
    // The team itself did not change: the ETag read before the run is not stale for a write.
    const patched = await t.request({ method: 'PATCH', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': String(before.headers.etag) }, body: { rework_rounds: 4 } });
    assert.equal(patched.status, 200, patched.text);
    assert.equal(patched.headers.etag, (await get(team.name)).headers.etag);
    // Once it did, that ETag is stale.
    const stale = await t.request({ method: 'PATCH', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': String(after.headers.etag) }, body: { rework_rounds: 5 } });
    assert.equal(stale.status, 412);
  });

  test('what a run reads of a team is its fields only (the directory\'s forRun)', async () => {
    const team = await makeTeam(t);
    const directory = createTeamsDirectory({ db: t.db, agentVersion: async () => null, openKey: () => '' });
    const forRun = await directory.forRun(team.name);
    assert.deepEqual(Object.keys(forRun!).sort(), ['id', 'lead', 'name', 'repo_url', 'rework_rounds', 'roles', 'status', 'surface']);
  });

  test('archive: cancels runs, revokes keys, removes roles, links and documents, frees the name; a new team inherits nothing', async () => {
    const team = await makeTeam(t);
    const row = await t.services.teams.mustGetLive(team.name);
    const { run_id: runId } = await makeRun(t, { team: team.name });
    await t.db.insertInto('sandboxes').values({ id: uniq('sb'), team_id: row.id, role: 'lead', replica: 0, provider: 'microvm', state: 'running' }).execute();
    const doc = await t.request({ method: 'PUT', url: `/api/v1/teams/${team.name}/documents/notes.md`, token: t.adminToken, body: { media_type: 'text/markdown', content: '# notes' } });
    assert.equal(doc.status, 201, doc.text);
    assert.equal((await t.request({ method: 'PUT', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken, body: { surface: 'tracker_a', external_id: uniq('proj') } })).status, 201);
    const etag = String((await get(team.name)).headers.etag);
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: t.adminToken })).status, 428);
    const del = await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': etag } });
    assert.equal(del.status, 204, del.text);
    const archived = await get(team.name);
    assert.equal(archived.body.status, 'archived');
    assert.equal(archived.body.state, 'archived');
    assert.deepEqual(archived.body.role_settings, []);
    assert.deepEqual(archived.body.links, []);
    const run = await t.db.selectFrom('runs').select('state').where('id', '=', runId).executeTakeFirstOrThrow();
    assert.equal(run.state, 'cancelled');
    await t.drainJobs();
    const keys = await t.services.proxy.listKeys(proxyTeamOf(row));
    assert.ok(keys.items.every((k) => k.revoked_at));
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams?state=archived&q=${team.name}`, token: t.adminToken })).body.items.length, 1);
    // The name is free, and the new team starts empty.
    const again = await makeTeam(t, { template: team.template, body: { name: team.name } });
    assert.equal(again.status, 'active');
    const docs = await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/documents`, token: t.adminToken });
    assert.deepEqual(docs.body.items, []);
    assert.equal((await get(team.name)).body.active_runs, 0);
    // Archiving cannot be done twice; a stale ETag is 412.
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': etag } })).status, 412);
  });

  test('a template in use by an active team cannot be deleted', async () => {
    const tpl = await makeTemplate(t);
    const team = await makeTeam(t, { template: tpl.name });
    const cur = await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken });
    assert.equal(cur.body.used_by, 1);
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken, headers: { 'if-match': String(cur.headers.etag) } })).status, 409);
    const agentName = cur.body.current.roles.lead.agent;
    const agent = await t.request({ method: 'GET', url: `/api/v1/agents/${agentName}`, token: t.adminToken });
    assert.ok(agent.body.used_by >= 2, 'template and team both use the agent');
    await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': team.etag } });
    const after = await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken });
    assert.equal(after.body.used_by, 0);
  });

  test('upgrade moves to another template version and keeps fields set by hand', async () => {
    const tpl = await makeTemplate(t);
    const team = await makeTeam(t, { template: tpl.name });
    const patched = await t.request({ method: 'PATCH', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': team.etag }, body: { role_settings: { lead: { model: 'local' } } } });
    assert.equal(patched.status, 200, patched.text);
    const v1 = tpl.current;
    const env = await makeEnvironment(t);
    const reviewer = await makeAgent(t);
    const roles = {
      lead: { agent: v1.roles.lead.agent, model: 'smart', vm: v1.roles.lead.vm },
      dev: { agent: v1.roles.dev.agent, model: 'smart', vm: v1.roles.dev.vm, replicas: { max: 4 } },
      review: { agent: reviewer.name, model: 'fast', vm: env.name },
    };
    const v2 = await t.request({
      method: 'POST',
      url: `/api/v1/team-templates/${tpl.name}/versions`,
      token: t.adminToken,
      headers: { 'if-match': tpl.etag },
      body: { lead: 'lead', roles, sleep: {}, idle_after_seconds: 1200, deep_sleep_after_seconds: 7200, budget_usd_per_day: 20, pipeline: { lead: 'dev', dev: 'review' }, note: 'review' },
    });
    assert.equal(v2.status, 201, v2.text);
    assert.equal((await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/upgrade`, token: t.adminToken, body: {} })).status, 428);
    // A version the template lacks is a 422 naming the field of the body that was sent: `version` here, `template.version` on create.
    const missing = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/upgrade`, token: t.adminToken, headers: { 'if-match': String(patched.headers.etag) }, body: { version: 99 } });
    assert.equal(missing.status, 422, missing.text);
    assert.deepEqual(missing.body.errors.map((e: { field: string }) => e.field), ['version']);
    const created = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name: `${team.name}-x`, template: { name: tpl.name, version: 99 } } });
    assert.equal(created.status, 422, created.text);
    assert.deepEqual(created.body.errors.map((e: { field: string }) => e.field), ['template.version']);
    const up = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/upgrade`, token: t.adminToken, headers: { 'if-match': String(patched.headers.etag) }, body: { version: 2 } });
    assert.equal(up.status, 200, up.text);
    assert.equal(up.body.template.version, 2);
    assert.equal(up.body.template.hash, v2.body.content_sha256);
    const by = Object.fromEntries(up.body.role_settings.map((r: { role: string }) => [r.role, r]));
    assert.equal(by.lead.model, 'local', 'set by hand, kept');
    assert.equal(by.dev.model, 'smart');
    assert.equal(by.dev.replicas_max, 4);
    assert.equal(by.dev.pipeline_next_role, 'review');
    assert.ok(by.review);
    assert.equal(up.body.settings.idle_after_seconds, 1200);
    assert.equal(up.body.budget_usd_per_day, 20);
    const proxyTeam = proxyTeamOf(await t.services.teams.mustGetLive(team.name));
    const keys = await t.services.proxy.listKeys(proxyTeam);
    assert.equal(keys.items.filter((k) => !k.revoked_at).length, 3);
    // After commit, the proxy takes the stored models and budget.
    await t.drainJobs();
    const models = Object.fromEntries((await t.services.proxy.listKeys(proxyTeam)).items.map((k) => [k.role, k.models]));
    assert.deepEqual(models, { lead: ['local'], dev: ['smart'], review: ['fast'] });
    assert.equal((await t.services.proxy.teamSpend(proxyTeam, 1)).budget_usd_per_day, 20);
    // A role the template drops loses its key.
    const v3 = await t.request({
      method: 'POST',
      url: `/api/v1/team-templates/${tpl.name}/versions`,
      token: t.adminToken,
      headers: { 'if-match': String((await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken })).headers.etag) },
      body: { lead: 'lead', roles: { lead: roles.lead, dev: roles.dev }, sleep: {}, idle_after_seconds: 1200, deep_sleep_after_seconds: 7200, budget_usd_per_day: 20, pipeline: { lead: 'dev' } },
    });
    assert.equal(v3.status, 201, v3.text);
    const down = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/upgrade`, token: t.adminToken, headers: { 'if-match': String(up.headers.etag) }, body: { version: 3 } });
    assert.equal(down.status, 200, down.text);
    await t.drainJobs();
    const after = await t.services.proxy.listKeys(proxyTeam);
    assert.deepEqual(after.items.filter((k) => !k.revoked_at).map((k) => k.role).sort(), ['dev', 'lead']);
  });

  test('archive queues the revocation of the keys: a proxy that is down delays it (retried, the error kept) but does not stop the archive', async () => {
    await t.drainJobs();
    const team = await makeTeam(t);
    const proxyTeam = proxyTeamOf(await t.services.teams.mustGetLive(team.name));
    const del = await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': team.etag } });
    assert.equal(del.status, 204, del.text);
    const nowMs = Date.now() + 5_000;
    // The teams module's jobs, with the proxy given.
    const teamJobs = (proxy: ModelProxyClient) => byKind([revokeKeyJob.handler({ proxy }), revokeTeamKeysJob.handler({ proxy }), syncProxyJob.handler({ db: t.db, proxy })]);
    const worker = (proxy: ModelProxyClient, at: number) => createJobRunner({ db: t.db, logger: captureLogger().logger, handlers: teamJobs(proxy), now: () => new Date(at) });
    // Nothing listens on port 1 of the loopback.
    await worker(createModelProxyClient(t.config, { baseUrl: 'http://127.0.0.1:1', timeoutMs: 5_000 }), nowMs).drain();
    const queued = (await listJobs(t.db, { kind: revokeTeamKeysJob.kind, limit: 1_000 })).find((j) => (j.payload as { team: string }).team === proxyTeam)!;
    assert.equal(queued.state, 'queued');
    assert.equal(queued.attempts, 1);
    assert.match(queued.last_error!, /is not answering/);
    assert.ok((await t.services.proxy.listKeys(proxyTeam)).items.some((k) => !k.revoked_at), 'not revoked yet');
    await worker(t.services.proxy, nowMs + 3_600_000).drain();
    assert.equal((await listJobs(t.db, { kind: revokeTeamKeysJob.kind, limit: 1_000 })).find((j) => j.id === queued.id)!.state, 'done');
    assert.ok((await t.services.proxy.listKeys(proxyTeam)).items.every((k) => k.revoked_at), 'revoked once the proxy answers');
  });

  test('key jobs: a key the proxy never had counts as revoked; a refusal of the proxy fails the job at once, its error kept', async () => {
    await t.drainJobs();
    const never = await revokeKeyJob.enqueue(t.db, { key_id: `mpk_${crypto.randomBytes(8).toString('hex')}`, actor: 'test' });
    const refused = await revokeTeamKeysJob.enqueue(t.db, { team: `-${uniq('bad')}`, actor: 'test' });
    await t.drainJobs();
    const [a, b] = await Promise.all([getJob(t.db, never.id), getJob(t.db, refused.id)]);
    assert.equal(a!.state, 'done', a!.last_error ?? '');
    assert.equal(b!.state, 'failed');
    assert.equal(b!.attempts, 1);
    assert.match(b!.last_error!, /PermanentJobError: the model proxy answered 400/);
  });

  test('links: idempotent PUT, code_host needs the app installed, DELETE with slashes', async () => {
    const team = await makeTeam(t);
    const url = `/api/v1/teams/${team.name}/links`;
    const ext = `${uniq('grp')}/sub/project`;
    const first = await t.request({ method: 'PUT', url, token: t.adminToken, body: { surface: 'tracker_b', external_id: ext } });
    assert.equal(first.status, 201);
    assert.equal(first.headers.location, `/api/v1/teams/${team.name}/links/tracker_b/${ext}`, 'the link is where it is removed');
    assert.deepEqual(first.body, { surface: 'tracker_b', external_id: ext, label: ext, verified: false, verification: 'unverified' });
    assert.equal((await t.request({ method: 'PUT', url, token: t.adminToken, body: { surface: 'tracker_b', external_id: ext } })).status, 200);
    // A chat room is checked on its chat server (chat_a.test.ts, chat_b.test.ts); tracker_a is not verified.
    const tracker = await t.request({ method: 'PUT', url, token: t.adminToken, body: { surface: 'tracker_a', external_id: uniq('project'), label: 'Project' } });
    assert.equal(tracker.status, 201, tracker.text);
    const code = await t.request({ method: 'PUT', url, token: t.adminToken, body: { surface: 'code_host', external_id: 'acme/widgets' } });
    assert.equal(code.status, 422);
    assert.equal(code.body.errors[0].field, 'external_id');
    const list = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(list.body.items.length, 2);
    const viewer = await t.user('viewer');
    assert.equal((await t.request({ method: 'PUT', url, token: viewer.token, body: { surface: 'chat_a', external_id: 'x' } })).status, 403);
    assert.equal((await t.request({ method: 'DELETE', url: `${url}/tracker_b/${ext}`, token: t.adminToken })).status, 204);
    assert.equal((await t.request({ method: 'DELETE', url: `${url}/tracker_b/${ext}`, token: t.adminToken })).status, 404);
    // One surface id belongs to one live team.
    const other = await makeTeam(t, { template: team.template });
    const taken = await t.request({ method: 'PUT', url: `/api/v1/teams/${other.name}/links`, token: t.adminToken, body: { surface: 'tracker_a', external_id: tracker.body.external_id } });
    assert.equal(taken.status, 409);
  });

  test('a template\'s ETag changes with its used_by (a team made from it), and If-Match still compares the template itself', async () => {
    const tpl = await makeTemplate(t);
    const url = `/api/v1/team-templates/${tpl.name}`;
    const before = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(before.body.used_by, 0);
    await makeTeam(t, { template: tpl.name });
    const after = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(after.body.used_by, 1);
    assert.notEqual(after.headers.etag, before.headers.etag, 'a body whose used_by differs has another ETag');
    const patched = await t.request({ method: 'PATCH', url, token: t.adminToken, body: { description: 'still mine' }, headers: { 'if-match': String(before.headers.etag) } });
    assert.equal(patched.status, 200, patched.text);
  });

  test('links are a list like any other: limit and cursor page through them', async () => {
    const team = await makeTeam(t);
    const url = `/api/v1/teams/${team.name}/links`;
    const ids = ['a', 'b', 'c'].map((x) => `${uniq('page')}-${x}`);
    for (const external_id of ids) assert.equal((await t.request({ method: 'PUT', url, token: t.adminToken, body: { surface: 'tracker_b', external_id } })).status, 201);
    const first = await t.request({ method: 'GET', url: `${url}?limit=2`, token: t.adminToken });
    assert.equal(first.status, 200, first.text);
    assert.equal(first.body.items.length, 2);
    assert.equal(typeof first.body.next_cursor, 'string');
    const second = await t.request({ method: 'GET', url: `${url}?limit=2&cursor=${encodeURIComponent(first.body.next_cursor)}`, token: t.adminToken });
    assert.equal(second.status, 200, second.text);
    assert.equal(second.body.next_cursor, null);
    assert.deepEqual([...first.body.items, ...second.body.items].map((l: { external_id: string }) => l.external_id).sort(), ids.sort());
    const bad = await t.request({ method: 'GET', url: `${url}?cursor=nonsense`, token: t.adminToken });
    assert.equal(bad.status, 400, bad.text);
    assert.equal(bad.body.errors[0].field, 'cursor');
  });

  test('a repository or tracker id is one link whatever its case, as work arriving on it is matched', async () => {
    const team = await makeTeam(t);
    const other = await makeTeam(t, { template: team.template });
    const id = uniq('Proj');
    const put = (name: string, external_id: string) => t.request({ method: 'PUT', url: `/api/v1/teams/${name}/links`, token: t.adminToken, body: { surface: 'tracker_b', external_id } });
    assert.equal((await put(team.name, id)).status, 201);
    // The same id in other case is the link the team has (tracker and code-host ids are matched without case).
    const again = await put(team.name, id.toUpperCase());
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.external_id, id);
    const list = await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken });
    assert.deepEqual(list.body.items.map((l: { external_id: string }) => l.external_id), [id]);
    // Another team cannot take it in other case: work on it would find two teams.
    const taken = await put(other.name, id.toLowerCase());
    assert.equal(taken.status, 409, taken.text);
    assert.match(taken.body.detail, new RegExp(`already linked to team "${team.name}"`));
    // And it is unlinked by the id in any case, as it was put.
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}/links/tracker_b/${id.toLowerCase()}`, token: t.adminToken })).status, 204);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken })).body.items.length, 0);
  });

  test('role egress overrides: admin only, validated, If-Match, removable', async () => {
    const team = await makeTeam(t);
    const url = `/api/v1/teams/${team.name}/roles/dev/egress`;
    const first = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(first.status, 200);
    assert.equal(first.body.override, null);
    const op = await t.user('operator');
    const body = { mode: 'allowlist', destinations: [] as string[] };
    assert.equal((await t.request({ method: 'PUT', url, token: op.token, body, headers: { 'if-match': String(first.headers.etag) } })).status, 403);
    assert.equal((await t.request({ method: 'PUT', url, token: t.adminToken, body })).status, 428);
    const bad = await t.request({ method: 'PUT', url, token: t.adminToken, body: { mode: 'allowlist', destinations: ['nowhere'] }, headers: { 'if-match': String(first.headers.etag) } });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.errors[0].field, 'destinations.0');
    const put = await t.request({ method: 'PUT', url, token: t.adminToken, body: { ...body, upstream_deny_cidrs: ['10.0.0.0/8'] }, headers: { 'if-match': String(first.headers.etag) } });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual(put.body.override, { mode: 'allowlist', destinations: [], upstream_deny_cidrs: ['10.0.0.0/8'], report_only: false });
    const applied = await t.services.teamsDirectory.rolesWithEgress(team.name);
    assert.equal(applied.find((r) => r.role === 'dev')!.egress.mode, 'allowlist');
    assert.equal(applied.find((r) => r.role === 'lead')!.egress.mode, 'allow_all');
    assert.equal((await t.request({ method: 'PUT', url, token: t.adminToken, body, headers: { 'if-match': String(first.headers.etag) } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken })).status, 428);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': String(put.headers.etag) } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url, token: t.adminToken })).body.override, null);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/roles/ghost/egress`, token: t.adminToken })).status, 404);
  });

  test('team documents: operators write, viewers read', async () => {
    const team = await makeTeam(t);
    const viewer = await t.user('viewer');
    const op = await t.user('operator');
    const url = `/api/v1/teams/${team.name}/documents/brief.md`;
    assert.equal((await t.request({ method: 'PUT', url, token: viewer.token, body: { media_type: 'text/markdown', content: 'x' } })).status, 403);
    assert.equal((await t.request({ method: 'PUT', url, token: op.token, body: { media_type: 'text/markdown', content: 'x' } })).status, 201);
    const read = await t.request({ method: 'GET', url, token: viewer.token });
    assert.equal(read.body.scope, 'team');
    assert.equal(read.body.owner, team.name);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${uniq('no')}/documents`, token: viewer.token })).status, 404);
  });

  test('a hosted role\'s checkpoint is listed as in use by the team', async () => {
    const checkpoint = uniq('ckpt');
    const env = await makeEnvironment(t, { provider: 'hosted', profile: 'm5', vcpus: null, memory_mib: null, disk_gib: null, checkpoint_id: checkpoint });
    const agent = await makeAgent(t);
    const tpl = await t.request({
      method: 'POST',
      url: '/api/v1/team-templates',
      token: t.adminToken,
      body: { name: uniq('tpl'), lead: 'solo', roles: { solo: { agent: agent.name, model: 'fast', vm: env.name } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 5 },
    });
    assert.equal(tpl.status, 201, tpl.text);
    assert.equal(tpl.body.current.roles.solo.checkpoint_id, checkpoint);
    const team = await makeTeam(t, { template: tpl.body.name });
    const list = await t.request({ method: 'GET', url: '/api/v1/checkpoints?limit=200', token: t.adminToken });
    const entry = list.body.items.find((c: { id: string }) => c.id === checkpoint);
    assert.ok(entry.used_by.some((u: { kind: string; name: string }) => u.kind === 'team' && u.name === `${team.name}/solo`), JSON.stringify(entry));
  });

  test('team skills are listed read-only', async () => {
    const team = await makeTeam(t);
    const row = await t.services.teams.mustGetLive(team.name);
    await t.db.insertInto('team_skills').values({ team_id: row.id, name: 'deploy', version: 2, status: 'proposed', source: 'agent:dev', body: '---\nname: deploy\n---' }).execute();
    const res = await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/skills`, token: t.adminToken });
    assert.equal(res.status, 200);
    assert.equal(res.body.items.length, 1);
    assert.deepEqual(Object.keys(res.body.items[0]).sort(), ['name', 'source', 'status', 'updated_at', 'version']);
  });

  test('spend and budget: shapes, 404 for an unknown team, and the budget check for tasks', async () => {
    const team = await makeTeam(t);
    const budget = await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/budget?days=3`, token: t.adminToken });
    assert.equal(budget.status, 200, budget.text);
    assert.equal(budget.body.series.length, 3);
    assert.equal(budget.body.state, 'normal');
    assert.equal(budget.body.spent_today_usd, 0);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${uniq('no')}/budget`, token: t.adminToken })).status, 404);
    const spend = await t.request({ method: 'GET', url: '/api/v1/spend?days=2', token: t.adminToken });
    assert.equal(spend.status, 200, spend.text);
    assert.equal(spend.body.days, 2);
    assert.equal(spend.body.series.length, 2);
    assert.ok(spend.body.teams.some((x: { team: string }) => x.team === team.name));
    assert.ok(spend.body.budget_usd_per_day >= 10);
    assert.equal(await t.services.teams.isBudgetSpent(team.name), false);
  });
});

describe('teams without a model proxy', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ config: { SERVICE_MODEL_PROXY_URL: 'http://127.0.0.1:9' } });
  });
  after(() => t.close());

  test('creation answers 503 and leaves nothing behind; budget reads answer 503', async () => {
    const tpl = await makeTemplate(t);
    const name = uniq('np');
    const res = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, body: { name, template: { name: tpl.name } } });
    assert.equal(res.status, 503, res.text);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${name}`, token: t.adminToken })).status, 404);
    assert.equal((await t.db.selectFrom('teams').select('id').where('name', '=', name).execute()).length, 0);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/spend', token: t.adminToken })).status, 503);
  });
});

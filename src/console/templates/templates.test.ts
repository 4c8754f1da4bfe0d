import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { makeAgent, makeEnvironment, makeTemplate } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { pipelineProblems } from './templates.service.ts';

describe('team templates', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  const body = async (overrides: Record<string, unknown> = {}) => {
    const env = await makeEnvironment(t);
    const agent = await makeAgent(t);
    return {
      name: uniq('tpl'),
      lead: 'lead',
      roles: { lead: { agent: agent.name, model: 'fast', vm: env.name }, dev: { agent: agent.name, model: 'smart', vm: env.name, replicas: { max: 3 }, max_budget: 5 } },
      sleep: { idle_after_seconds: 600 },
      idle_after_seconds: 600,
      deep_sleep_after_seconds: 3600,
      budget_usd_per_day: 25,
      pipeline: { lead: 'dev' },
      ...overrides,
    };
  };
  const post = (b: unknown, token = t.adminToken) => t.request({ method: 'POST', url: '/api/v1/team-templates', token, body: b });

  test('create answers 201 with version 1, the environment copied into each role and a content hash', async () => {
    const b = await body({ description: 'two roles' });
    const res = await post(b);
    assert.equal(res.status, 201, res.text);
    assert.match(String(res.headers.etag), /^"\d+\.[0-9a-f]{16}"$/, 'the row version and a digest of the body (used_by is derived)');
    assert.equal(res.body.current_version, 1);
    assert.equal(res.body.used_by, 0);
    const v = res.body.current;
    assert.equal(v.version, 1);
    assert.equal(v.lead, 'lead');
    assert.match(v.content_sha256, /^[0-9a-f]{64}$/);
    assert.equal(v.roles.dev.provider, 'microvm');
    assert.equal(v.roles.dev.profile, 'small');
    assert.equal(v.roles.dev.vcpus, 2);
    assert.equal(v.roles.dev.replicas.max, 3);
    assert.equal(v.roles.dev.budget_duration, '1d');
    assert.equal(v.roles.lead.concurrent_runs, 1);
    assert.equal(v.isolation, 'shared');
    assert.equal(v.requires_repo, false);
    assert.equal(v.rework_rounds, 2);
    assert.deepEqual(v.sleep, { idle_after_seconds: 600, deep_sleep_after_seconds: 3600 });
    const list = await t.request({ method: 'GET', url: '/api/v1/team-templates?limit=200', token: t.adminToken });
    const item = list.body.items.find((i: { name: string }) => i.name === b.name);
    assert.deepEqual(item.roles.sort(), ['dev', 'lead']);
    assert.equal(item.lead, 'lead');
  });

  test('the same content has the same hash', async () => {
    const b = await body();
    const one = await post(b);
    const two = await post({ ...b, name: uniq('tpl') });
    assert.equal(one.body.current.content_sha256, two.body.current.content_sha256);
  });

  test('viewers and operators cannot write templates', async () => {
    const tpl = await makeTemplate(t);
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await post(await body(), u.token)).status, 403);
      const h = { 'if-match': tpl.etag };
      assert.equal((await t.request({ method: 'PATCH', url: `/api/v1/team-templates/${tpl.name}`, token: u.token, body: { description: 'x' }, headers: h })).status, 403);
      assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/team-templates/${tpl.name}`, token: u.token, headers: h })).status, 403);
      assert.equal((await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: u.token })).status, 200);
    }
  });

  test('rules break with 422 naming the field', async () => {
    const b = await body();
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ lead: 'boss' }, 'lead'],
      [{ roles: { ...b.roles, dev: { ...b.roles.dev, agent: 'no-such-agent' } } }, 'roles.dev.agent'],
      [{ roles: { ...b.roles, dev: { ...b.roles.dev, model: 'no-such-model' } } }, 'roles.dev.model'],
      [{ roles: { ...b.roles, dev: { ...b.roles.dev, vm: 'no-such-env' } } }, 'roles.dev.vm'],
      [{ roles: { ...b.roles, dev: { ...b.roles.dev, mcp_servers: ['nope'] } } }, 'roles.dev.mcp_servers'],
      [{ roles: { ...b.roles, dev: { ...b.roles.dev, skills: ['nope'] } } }, 'roles.dev.skills'],
      [{ pipeline: { lead: 'ghost' } }, 'pipeline.lead'],
      [{ pipeline: { dev: 'lead' } }, 'pipeline.dev'],
      [{ deep_sleep_after_seconds: 120 }, 'deep_sleep_after_seconds'],
      [{ sleep: { idle_after_seconds: 900 } }, 'sleep.idle_after_seconds'],
    ];
    for (const [patch, field] of cases) {
      const res = await post({ ...b, name: uniq('bad'), ...patch });
      assert.equal(res.status, 422, `${field}: ${res.text}`);
      assert.ok(res.body.errors.some((e: { field: string }) => e.field === field), `${field} in ${JSON.stringify(res.body.errors)}`);
    }
    // Schema shape problems are 400s.
    assert.equal((await post({ ...b, name: 'Bad Name' })).status, 400);
    assert.equal((await post({ ...b, budget_usd_per_day: 'lots' })).status, 400);
    assert.equal((await post({ ...b, roles: {} })).status, 400);
  });

  test('a pipeline is a chain over the roles', () => {
    const roles = ['lead', 'dev', 'review'];
    assert.deepEqual(pipelineProblems({ lead: 'dev', dev: 'review' }, roles, 'lead'), []);
    assert.ok(pipelineProblems({ dev: 'review', review: 'dev' }, roles, 'lead').some((p) => p.message.includes('cycle')));
    assert.ok(pipelineProblems({ lead: 'review', dev: 'review' }, roles, 'lead').some((p) => p.message.includes('already follows')));
    assert.ok(pipelineProblems({ dev: 'dev' }, roles, 'lead').length > 0);
  });

  test('a name is taken once (409)', async () => {
    const b = await body();
    assert.equal((await post(b)).status, 201);
    assert.equal((await post(b)).status, 409);
  });

  test('versions: If-Match required, newest first, older versions stay, from an old one the content comes back', async () => {
    const tpl = await makeTemplate(t);
    const url = `/api/v1/team-templates/${tpl.name}/versions`;
    const v2body = await body();
    delete (v2body as Record<string, unknown>).name;
    const next = { ...v2body, note: 'bigger budget', budget_usd_per_day: 99 };
    assert.equal((await t.request({ method: 'POST', url, token: t.adminToken, body: next })).status, 428);
    assert.equal((await t.request({ method: 'POST', url, token: t.adminToken, body: next, headers: { 'if-match': '"1"' } })).status, 412);
    const made = await t.request({ method: 'POST', url, token: t.adminToken, body: next, headers: { 'if-match': tpl.etag } });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.body.version, 2);
    assert.equal(made.body.note, 'bigger budget');
    const detail = await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken });
    assert.equal(detail.body.current_version, 2);
    assert.equal(detail.body.current.budget_usd_per_day, 99);
    const list = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.deepEqual(list.body.items.map((v: { version: number }) => v.version), [2, 1]);
    const v1 = await t.request({ method: 'GET', url: `${url}/1`, token: t.adminToken });
    assert.equal(v1.body.budget_usd_per_day, 10);
    assert.equal((await t.request({ method: 'GET', url: `${url}/7`, token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/team-templates/${uniq('none')}/versions`, token: t.adminToken })).status, 404);

    // from_version: an old version alone makes its content current again; with fields, only those change.
    const etag = async () => String((await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken })).headers.etag);
    const back = await t.request({ method: 'POST', url, token: t.adminToken, body: { from_version: 1, note: 'back to 1' }, headers: { 'if-match': await etag() } });
    assert.equal(back.status, 201, back.text);
    assert.equal(back.body.version, 3);
    assert.equal(back.body.note, 'back to 1');
    assert.equal(back.body.content_sha256, v1.body.content_sha256, 'the same content as version 1');
    assert.deepEqual(back.body.roles, v1.body.roles);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/team-templates/${tpl.name}`, token: t.adminToken })).body.current_version, 3);
    const derived = await t.request({ method: 'POST', url, token: t.adminToken, body: { from_version: 2, rework_rounds: 5 }, headers: { 'if-match': await etag() } });
    assert.equal(derived.status, 201, derived.text);
    assert.equal(derived.body.budget_usd_per_day, 99, 'from version 2');
    assert.equal(derived.body.rework_rounds, 5, 'changed');
    assert.deepEqual(derived.body.roles, made.body.roles);
    const unknown = await t.request({ method: 'POST', url, token: t.adminToken, body: { from_version: 99 }, headers: { 'if-match': await etag() } });
    assert.equal(unknown.status, 422, unknown.text);
    assert.deepEqual(unknown.body.errors.map((e: { field: string }) => e.field), ['from_version']);
    const partial = await t.request({ method: 'POST', url, token: t.adminToken, body: { note: 'no base', budget_usd_per_day: 5 }, headers: { 'if-match': await etag() } });
    assert.equal(partial.status, 422, partial.text);
    assert.deepEqual(partial.body.errors.map((e: { field: string }) => e.field).sort(), ['deep_sleep_after_seconds', 'idle_after_seconds', 'lead', 'roles', 'sleep']);
  });

  test('editing an environment later changes no template version', async () => {
    const env = await makeEnvironment(t, { vcpus: 2 });
    const agent = await makeAgent(t);
    const created = await post({ ...(await body()), roles: { lead: { agent: agent.name, model: 'fast', vm: env.name } }, pipeline: {} });
    assert.equal(created.status, 201, created.text);
    const envRes = await t.request({ method: 'GET', url: `/api/v1/environments/${env.name}`, token: t.adminToken });
    const { name: _n, image: _i, used_by: _u, created_at: _c, updated_at: _up, ...rest } = envRes.body;
    const put = await t.request({ method: 'PUT', url: `/api/v1/environments/${env.name}`, token: t.adminToken, body: { ...rest, vcpus: 8 }, headers: { 'if-match': String(envRes.headers.etag) } });
    assert.equal(put.status, 200, put.text);
    const again = await t.request({ method: 'GET', url: `/api/v1/team-templates/${created.body.name}`, token: t.adminToken });
    assert.equal(again.body.current.roles.lead.vcpus, 2);
  });

  test('a template counts as a user of its agents and environments', async () => {
    const tpl = await makeTemplate(t, {}, ['solo']);
    const agentName = tpl.current.roles.solo.agent;
    const agent = await t.request({ method: 'GET', url: `/api/v1/agents/${agentName}`, token: t.adminToken });
    assert.equal(agent.body.used_by, 1);
    const del = await t.request({ method: 'DELETE', url: `/api/v1/agents/${agentName}`, token: t.adminToken, headers: { 'if-match': String(agent.headers.etag) } });
    assert.equal(del.status, 409);
    const env = await t.request({ method: 'GET', url: `/api/v1/environments/${tpl.env}`, token: t.adminToken });
    assert.equal(env.body.used_by, 1);
    const envDel = await t.request({ method: 'DELETE', url: `/api/v1/environments/${tpl.env}`, token: t.adminToken, headers: { 'if-match': String(env.headers.etag) } });
    assert.equal(envDel.status, 409);
  });

  test('PATCH description and DELETE need If-Match', async () => {
    const tpl = await makeTemplate(t);
    const url = `/api/v1/team-templates/${tpl.name}`;
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { description: 'new' } })).status, 428);
    const ok = await t.request({ method: 'PATCH', url, token: t.adminToken, body: { description: 'new' }, headers: { 'if-match': tpl.etag } });
    assert.equal(ok.status, 200);
    assert.equal(ok.body.description, 'new');
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': tpl.etag } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': String(ok.headers.etag) } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url, token: t.adminToken })).status, 404);
    const audit = await t.db.selectFrom('audit_log').select('action').where('target', '=', tpl.name).orderBy('id').execute();
    assert.deepEqual(audit.map((a) => a.action), ['team_template.create', 'team_template.update', 'team_template.delete']);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { makeAgent, makeDestination as makeDest, makeEnvironment, makeTeam, makeTemplate } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { agentVersionForRun } from './agents.service.ts';

const V1 = '/api/v1';

async function etagOf(t: TestApp, name: string) {
  return String((await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken })).headers.etag);
}

async function postVersion(t: TestApp, name: string, body: Record<string, unknown>, etag?: string) {
  return t.request({ method: 'POST', url: `${V1}/agents/${name}/versions`, token: t.adminToken, body, headers: { 'if-match': etag ?? (await etagOf(t, name)) } });
}

async function auditActions(t: TestApp, target: string) {
  const rows = await t.db.selectFrom('audit_log').select(['action', 'actor', 'details']).where('target', '=', target).orderBy('id').execute();
  return rows.map((r) => r.action);
}

describe('agents', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('POST /agents creates version 1 with the defaults of rule 1; 201 with ETag and Location; audited', async () => {
    const name = uniq('ag');
    const res = await t.request({
      method: 'POST',
      url: `${V1}/agents`,
      token: t.adminToken,
      body: { name, display_name: 'Coder', kind: 'coder', description: 'writes code', version: { system_prompt: 'You write code.', note: 'first' } },
    });
    assert.equal(res.status, 201, res.text);
    assert.match(String(res.headers.etag), /^"\d+\.[0-9a-f]{16}"$/, 'the row version and a digest of the body (used_by is derived)');
    assert.equal(res.headers.location, `/api/v1/agents/${name}`);
    const b = res.body;
    assert.deepEqual(
      { name: b.name, display_name: b.display_name, kind: b.kind, description: b.description, avatar_url: b.avatar_url, model: b.model, environment: b.environment, tool_count: b.tool_count, mcp: b.mcp, current_version: b.current_version, used_by: b.used_by },
      { name, display_name: 'Coder', kind: 'coder', description: 'writes code', avatar_url: null, model: null, environment: null, tool_count: 0, mcp: [], current_version: 1, used_by: 0 },
    );
    assert.equal(typeof b.updated_at, 'string');
    const c = b.current;
    assert.equal(c.version, 1);
    assert.equal(c.note, 'first');
    assert.equal(c.created_by, 'admin');
    assert.equal(typeof c.created_at, 'string');
    assert.equal(c.system_prompt, 'You write code.');
    assert.deepEqual(c.tools, []);
    assert.equal(c.confirmation_policy, 'never_confirm');
    assert.equal(c.produces_branch, false);
    assert.equal(c.works_on_branch, null);
    assert.deepEqual(c.skills, []);
    assert.deepEqual(c.mcp_servers, []);
    assert.deepEqual(c.egress, { mode: 'allow_all', destinations: [], upstream_deny_cidrs: [], report_only: false });
    assert.deepEqual(c.context, []);
    assert.deepEqual(await auditActions(t, name), ['agent.create']);

    const got = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
    assert.equal(got.status, 200);
    assert.equal(got.headers.etag, res.headers.etag);
    assert.deepEqual(got.body, res.body);
  });

  test('create: system_prompt is required without from_version (422), a taken name is 409, a bad body is 400', async () => {
    for (const version of [{}, { system_prompt: null }, { tools: ['shell'] }]) {
      const res = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, body: { name: uniq('ag'), version } });
      assert.equal(res.status, 422, res.text);
      assert.equal(res.body.errors[0].field, 'version.system_prompt');
    }
    const fromVersion = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, body: { name: uniq('ag'), version: { system_prompt: 'x', from_version: 1 } } });
    assert.equal(fromVersion.status, 422);
    assert.equal(fromVersion.body.errors[0].field, 'version.from_version');

    const { name } = await makeAgent(t);
    const dup = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, body: { name, version: { system_prompt: 'x' } } });
    assert.equal(dup.status, 409);
    assert.equal(dup.body.errors[0].field, 'name');

    const cases: Array<[unknown, string]> = [
      [{ name: 'Bad Name', version: { system_prompt: 'x' } }, 'name'],
      [{ name: uniq('ag') }, 'version'],
      [{ name: uniq('ag'), version: { system_prompt: 'x', confirmation_policy: 'always' } }, 'version.confirmation_policy'],
      [{ name: uniq('ag'), version: { system_prompt: 'x', extra: 1 } }, 'version.extra'],
      [{ name: uniq('ag'), version: { system_prompt: 'x', tools: ['shell', 'shell'] } }, 'version.tools'],
      [{ name: uniq('ag'), version: { system_prompt: 'x', egress: { mode: 'open' } } }, 'version.egress.mode'],
    ];
    for (const [body, field] of cases) {
      const res = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, body });
      assert.equal(res.status, 400, `${JSON.stringify(body)}: ${res.text}`);
      assert.ok(res.body.errors.some((e: { field: string }) => e.field === field), `${field} in ${res.text}`);
    }
  });

  test('names a version refers to must exist: tools, skills, platform MCP servers, destinations, environment, model (422 naming the field)', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ tools: ['shell', 'teleport'] }, 'version.tools.1'],
      [{ skills: ['no-such-skill'] }, 'version.skills.0'],
      [{ mcp_servers: ['no-such-server'] }, 'version.mcp_servers.0'],
      [{ egress: { mode: 'allowlist', destinations: ['no-such-destination'] } }, 'version.egress.destinations.0'],
      [{ environment: 'no-such-environment' }, 'version.environment'],
      [{ model: 'no-such-alias' }, 'version.model'],
      [{ egress: { mode: 'allow_all', upstream_deny_cidrs: ['10.0.0.0/8', '10.0.0.0/33'] } }, 'version.egress.upstream_deny_cidrs.1'],
      [{ context: [{ blob: 'x'.repeat(70 * 1024) }] }, 'version.context'],
    ];
    for (const [version, field] of cases) {
      const name = uniq('ag');
      const res = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, body: { name, version: { system_prompt: 'x', ...version } } });
      assert.equal(res.status, 422, `${field}: ${res.text}`);
      assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), [field]);
      assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken })).status, 404);
    }
    const ok = await makeAgent(t, { version: {
      tools: ['shell', 'read_file', 'finish'],
      model: 'smart',
      egress: { mode: 'allow_all', upstream_deny_cidrs: ['10.0.0.0/8', 'fd00::/8'] },
      context: [{ repo: 'web' }],
    } });
    assert.deepEqual(ok.body.current.tools, ['shell', 'read_file', 'finish']);
    assert.equal(ok.body.tool_count, 3);
    assert.equal(ok.body.model, 'smart');
    assert.deepEqual(ok.body.current.egress.upstream_deny_cidrs, ['10.0.0.0/8', 'fd00::/8']);
    // A new version is checked too, including names it keeps from its base.
    const bad = await postVersion(t, ok.name, { from_version: 1, tools: ['nope'] });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.errors[0].field, 'tools.0');
  });

  test('a new version becomes current; versions list newest first with note, created_by, created_at', async () => {
    const { name } = await makeAgent(t, { version: { tools: ['shell'], note: 'one' } });
    const v2 = await postVersion(t, name, { system_prompt: 'Second.', tools: ['shell', 'git_push'], mcp_servers: [], note: 'two' });
    assert.equal(v2.status, 201, v2.text);
    assert.equal(v2.body.version, 2);
    assert.equal(v2.headers.location, `/api/v1/agents/${name}/versions/2`);
    assert.equal(v2.headers.etag, await etagOf(t, name));
    const agent = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
    assert.equal(agent.body.current_version, 2);
    assert.equal(agent.body.tool_count, 2);
    assert.equal(agent.body.current.system_prompt, 'Second.');

    const list = await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions`, token: t.adminToken });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.items.map((v: { version: number; note: string }) => [v.version, v.note]), [[2, 'two'], [1, 'one']]);
    for (const v of list.body.items) assert.deepEqual(Object.keys(v).sort(), ['created_at', 'created_by', 'note', 'version']);
    const page1 = await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions?limit=1`, token: t.adminToken });
    assert.deepEqual(page1.body.items.map((v: { version: number }) => v.version), [2]);
    const page2 = await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions?limit=1&cursor=${page1.body.next_cursor}`, token: t.adminToken });
    assert.deepEqual(page2.body.items.map((v: { version: number }) => v.version), [1]);
    assert.equal(page2.body.next_cursor, null);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions?cursor=bogus`, token: t.adminToken })).status, 400);

    const one = await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions/1`, token: t.adminToken });
    assert.equal(one.status, 200);
    assert.deepEqual(one.body.tools, ['shell']);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions/9`, token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${uniq('none')}/versions`, token: t.adminToken })).status, 404);
    assert.deepEqual(await auditActions(t, name), ['agent.create', 'agent.version.create']);
  });

  test('rule 1: without from_version the body is a whole version; what it leaves out takes the defaults, not the previous values', async () => {
    const { name } = await makeAgent(t, { version: { tools: ['shell'], confirmation_policy: 'confirm_risky', produces_branch: true, works_on_branch: true, model: 'smart', context: [{ a: 1 }] } });
    const v2 = await postVersion(t, name, { system_prompt: 'Fresh.' });
    assert.equal(v2.status, 201);
    assert.deepEqual(
      [v2.body.tools, v2.body.confirmation_policy, v2.body.produces_branch, v2.body.works_on_branch, v2.body.model, v2.body.context, v2.body.egress.mode],
      [[], 'never_confirm', false, null, null, [], 'allow_all'],
    );
    const missing = await postVersion(t, name, { tools: ['shell'] });
    assert.equal(missing.status, 422);
    assert.equal(missing.body.errors[0].field, 'system_prompt');
  });

  test('rules 2 and 3: from_version is the base, only present fields change, null means "not given"', async () => {
    const { name } = await makeAgent(t, { version: {
      tools: ['shell', 'read_file'],
      confirmation_policy: 'confirm_risky',
      produces_branch: true,
      egress: { mode: 'allow_all', upstream_deny_cidrs: ['10.0.0.0/8'] },
      context: [{ repo: 'api' }],
    } });
    const v2 = await postVersion(t, name, {
      from_version: 1,
      tools: ['shell'],
      system_prompt: null,
      confirmation_policy: null,
      produces_branch: null,
      skills: null,
      mcp_servers: null,
      egress: null,
      context: null,
      note: 'fewer tools',
    });
    assert.equal(v2.status, 201, v2.text);
    assert.equal(v2.body.system_prompt, 'You write code.');
    assert.deepEqual(v2.body.tools, ['shell']);
    assert.equal(v2.body.confirmation_policy, 'confirm_risky');
    assert.equal(v2.body.produces_branch, true);
    assert.deepEqual(v2.body.egress, { mode: 'allow_all', destinations: [], upstream_deny_cidrs: ['10.0.0.0/8'], report_only: false });
    assert.deepEqual(v2.body.context, [{ repo: 'api' }]);
    assert.equal(v2.body.note, 'fewer tools');
    // null without a base means the default
    const fresh = await makeAgent(t, { version: { tools: null, confirmation_policy: null, produces_branch: null, egress: null, context: null, skills: null, mcp_servers: null } });
    assert.deepEqual([fresh.body.current.tools, fresh.body.current.confirmation_policy, fresh.body.current.produces_branch], [[], 'never_confirm', false]);
  });

  test('rule 4: null for works_on_branch, model and environment is stored; omitting keeps the base value', async () => {
    const { name } = await makeAgent(t, { version: { works_on_branch: true, model: 'smart' } });
    const kept = await postVersion(t, name, { from_version: 1, note: 'keep' });
    assert.equal(kept.status, 201);
    assert.equal(kept.body.works_on_branch, true);
    assert.equal(kept.body.model, 'smart');
    const cleared = await postVersion(t, name, { from_version: 2, works_on_branch: null, model: null, environment: null });
    assert.equal(cleared.status, 201);
    assert.equal(cleared.body.works_on_branch, null);
    assert.equal(cleared.body.model, null);
    assert.equal(cleared.body.environment, null);
    const agent = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
    assert.equal(agent.body.model, null);
    const set = await postVersion(t, name, { from_version: 3, works_on_branch: false, model: 'fast' });
    assert.equal(set.body.works_on_branch, false);
    assert.equal(set.body.model, 'fast');
  });

  test('from_version naming an old version makes its content current again as a new version; an unknown one is 422', async () => {
    const { name } = await makeAgent(t, { version: { tools: ['shell'], note: 'v1' } });
    await postVersion(t, name, { system_prompt: 'Other.', tools: ['search'] });
    const back = await postVersion(t, name, { from_version: 1, note: 'roll back' });
    assert.equal(back.status, 201);
    assert.equal(back.body.version, 3);
    assert.equal(back.body.system_prompt, 'You write code.');
    assert.deepEqual(back.body.tools, ['shell']);
    const agent = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
    assert.equal(agent.body.current_version, 3);
    assert.deepEqual(agent.body.current.tools, ['shell']);
    const unknown = await postVersion(t, name, { from_version: 42 });
    assert.equal(unknown.status, 422);
    assert.equal(unknown.body.errors[0].field, 'from_version');
  });

  test('POST versions needs If-Match: 428 without, 412 stale; two writers with one ETag: one wins', async () => {
    const { name, etag } = await makeAgent(t);
    const none = await t.request({ method: 'POST', url: `${V1}/agents/${name}/versions`, token: t.adminToken, body: { system_prompt: 'x' } });
    assert.equal(none.status, 428);
    const results = await Promise.all(['a', 'b', 'c'].map((p) => postVersion(t, name, { system_prompt: p }, etag)));
    assert.deepEqual(results.map((r) => r.status).sort(), [201, 412, 412]);
    const list = await t.request({ method: 'GET', url: `${V1}/agents/${name}/versions`, token: t.adminToken });
    assert.deepEqual(list.body.items.map((v: { version: number }) => v.version), [2, 1]);
    assert.equal((await postVersion(t, uniq('none'), { system_prompt: 'x' }, '"1"')).status, 404);
  });

  test('PATCH changes display_name, kind, description (null clears); If-Match 428/412; audited', async () => {
    const { name, etag } = await makeAgent(t, { body: { display_name: 'A', kind: 'coder', description: 'd' } });
    const url = `${V1}/agents/${name}`;
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { kind: 'reviewer' } })).status, 428);
    const ok = await t.request({ method: 'PATCH', url, token: t.adminToken, body: { display_name: null, kind: 'reviewer', description: null }, headers: { 'if-match': etag } });
    assert.equal(ok.status, 200, ok.text);
    assert.deepEqual([ok.body.display_name, ok.body.kind, ok.body.description, ok.body.current_version], [null, 'reviewer', '', 1]);
    assert.notEqual(ok.headers.etag, etag);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { kind: 'x' }, headers: { 'if-match': etag } })).status, 412);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: {}, headers: { 'if-match': String(ok.headers.etag) } })).status, 400);
    assert.equal((await t.request({ method: 'PATCH', url, token: t.adminToken, body: { name: 'other' }, headers: { 'if-match': String(ok.headers.etag) } })).status, 400);
    assert.equal((await t.request({ method: 'PATCH', url: `${V1}/agents/${uniq('none')}`, token: t.adminToken, body: { kind: 'x' }, headers: { 'if-match': '"1"' } })).status, 404);
    assert.deepEqual(await auditActions(t, name), ['agent.create', 'agent.update']);
  });

  test('GET /agents lists summaries by name with pagination; unknown agent is 404', async () => {
    const a = await makeAgent(t, { version: { tools: ['shell', 'search'], model: 'fast' } });
    const page = await t.request({ method: 'GET', url: `${V1}/agents?limit=200`, token: t.adminToken });
    assert.equal(page.status, 200);
    const item = page.body.items.find((i: { name: string }) => i.name === a.name);
    assert.deepEqual(Object.keys(item).sort(), ['avatar_url', 'current_version', 'description', 'display_name', 'environment', 'kind', 'mcp', 'model', 'name', 'tool_count', 'updated_at', 'used_by']);
    assert.equal(item.tool_count, 2);
    assert.equal(item.model, 'fast');
    const names: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { body: { items: Array<{ name: string }>; next_cursor: string | null } } = await t.request({ method: 'GET', url: `${V1}/agents?limit=2${cursor ? `&cursor=${cursor}` : ''}`, token: t.adminToken });
      names.push(...res.body.items.map((i) => i.name));
      cursor = res.body.next_cursor;
    } while (cursor);
    assert.deepEqual(names, page.body.items.map((i: { name: string }) => i.name));
    assert.deepEqual(names, [...names].sort());
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${uniq('none')}`, token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents?cursor=WzFd`, token: t.adminToken })).status, 400);
  });

  test('roles: viewers and operators read agents but every agent write answers 403; no token is 401', async () => {
    const { name, etag } = await makeAgent(t);
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      for (const url of [`${V1}/agents`, `${V1}/agents/${name}`, `${V1}/agents/${name}/versions`, `${V1}/agents/${name}/versions/1`, `${V1}/agents/${name}/documents`]) {
        assert.equal((await t.request({ method: 'GET', url, token: u.token })).status, 200, `${role} GET ${url}`);
      }
      const h = { 'if-match': etag };
      const writes = [
        { method: 'POST', url: `${V1}/agents`, body: { name: uniq('ag'), version: { system_prompt: 'x' } } },
        { method: 'PATCH', url: `${V1}/agents/${name}`, body: { kind: 'x' }, headers: h },
        { method: 'DELETE', url: `${V1}/agents/${name}`, headers: h },
        { method: 'POST', url: `${V1}/agents/${name}/versions`, body: { system_prompt: 'x' }, headers: h },
        { method: 'PUT', url: `${V1}/agents/${name}/documents/notes.md`, body: { media_type: 'text/markdown', content: 'x' } },
        { method: 'DELETE', url: `${V1}/agents/${name}/documents/notes.md`, headers: h },
      ];
      for (const w of writes) {
        const res = await t.request({ ...w, token: u.token });
        assert.equal(res.status, 403, `${role} ${w.method} ${w.url}`);
      }
    }
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents` })).status, 401);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${name}` })).status, 401);
    assert.equal((await t.request({ method: 'POST', url: `${V1}/agents`, body: { name: uniq('ag'), version: { system_prompt: 'x' } } })).status, 401);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken })).body.current_version, 1);
  });

  test('DELETE needs If-Match, removes versions and documents; a new agent of the same name starts empty', async () => {
    const { name, etag } = await makeAgent(t);
    const doc = await t.request({ method: 'PUT', url: `${V1}/agents/${name}/documents/notes.md`, token: t.adminToken, body: { media_type: 'text/markdown', content: '# notes' } });
    assert.equal(doc.status, 201);
    const url = `${V1}/agents/${name}`;
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken })).status, 428);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': etag } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url, token: t.adminToken })).status, 404);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': etag } })).status, 404);
    const left = await t.db.selectFrom('context_documents').select('name').where('scope', '=', 'agent').where('owner', '=', name).execute();
    assert.deepEqual(left, []);
    const again = await t.request({ method: 'POST', url: `${V1}/agents`, token: t.adminToken, body: { name, version: { system_prompt: 'again' } } });
    assert.equal(again.status, 201);
    assert.equal(again.body.current_version, 1);
    const docs = await t.request({ method: 'GET', url: `${url}/documents`, token: t.adminToken });
    assert.deepEqual(docs.body.items, []);
    const actions = await auditActions(t, name);
    assert.deepEqual(actions.slice(0, 2), ['agent.create', 'agent.delete']);
  });

  test('the worker resolves a new run to the current version; a run already going keeps its pinned version', async () => {
    const { name } = await makeAgent(t, { version: { tools: ['shell'] } });
    const first = await agentVersionForRun(t.db, name);
    assert.equal(first.version, 1);
    assert.deepEqual(first.tools, ['shell']);
    await postVersion(t, name, { from_version: 1, tools: ['shell', 'search'] });
    const next = await agentVersionForRun(t.db, name);
    assert.equal(next.version, 2);
    assert.deepEqual(next.tools, ['shell', 'search']);
    const pinned = await agentVersionForRun(t.db, name, first.version);
    assert.equal(pinned.version, 1);
    assert.deepEqual(pinned.tools, ['shell']);
    assert.deepEqual(await t.services.agents.versionForRun(name), next);
    await assert.rejects(agentVersionForRun(t.db, uniq('none')), (e: { status: number }) => e.status === 404);
    await assert.rejects(agentVersionForRun(t.db, name, 7), (e: { status: number }) => e.status === 404);
  });

  test('every agent route has an operationId and tags in the OpenAPI document', async () => {
    const doc = await t.request({ method: 'GET', url: `${V1}/openapi.json`, token: t.adminToken });
    const expected: Record<string, string> = {
      'get /agents': 'listAgents',
      'post /agents': 'createAgent',
      'get /agents/{name}': 'getAgent',
      'patch /agents/{name}': 'updateAgent',
      'delete /agents/{name}': 'deleteAgent',
      'get /agents/{name}/avatar': 'getAgentAvatar',
      'put /agents/{name}/avatar': 'putAgentAvatar',
      'get /agents/{name}/documents': 'listAgentDocuments',
      'get /agents/{name}/documents/{doc}': 'getAgentDocument',
      'put /agents/{name}/documents/{doc}': 'putAgentDocument',
      'delete /agents/{name}/documents/{doc}': 'deleteAgentDocument',
      'get /agents/{name}/versions': 'listAgentVersions',
      'post /agents/{name}/versions': 'createAgentVersion',
      'get /agents/{name}/versions/{version}': 'getAgentVersion',
      'get /tools': 'listTools',
      'get /models': 'listModels',
    };
    for (const [key, id] of Object.entries(expected)) {
      const [method, path] = key.split(' ');
      const op = doc.body.paths[path]?.[method];
      assert.ok(op, `${key} missing`);
      assert.equal(op.operationId, id);
      assert.ok(op.tags.length > 0);
      assert.ok(Object.keys(op.responses).some((s) => s.startsWith('2')), `${key} has a success response`);
    }
  });
});

describe('agents and the names of other modules', () => {
  let t: TestApp;
  before(async () => {
    // The real environments, destinations, templates and teams modules; teams need the model proxy.
    t = await testApp({ modelProxy: true });
  });
  after(() => t.close());

  const makeDestination = async (host: string) => (await makeDest(t, { host })).name;
  const environmentUsedBy = async (name: string) => {
    const res = await t.request({ method: 'GET', url: `${V1}/environments/${name}`, token: t.adminToken });
    assert.equal(res.status, 200, res.text);
    return res.body.used_by as number;
  };
  const deleteWithEtag = async (url: string) => {
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    return t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': etag } });
  };

  test('environments and destinations that exist are accepted and counted on current versions only', async () => {
    const small = (await makeEnvironment(t)).name;
    const big = (await makeEnvironment(t)).name;
    const github = await makeDestination('api.github.com');
    const npm = await makeDestination('registry.npmjs.org');
    const { name } = await makeAgent(t, { version: { environment: small, egress: { mode: 'allowlist', destinations: [github] } } });
    const other = await makeAgent(t, { version: { environment: small, egress: { mode: 'allowlist', destinations: [github, npm] } } });
    assert.equal(other.body.environment, small);
    assert.deepEqual(other.body.current.egress.destinations, [github, npm]);
    const refs = t.services.references;
    assert.equal(await refs.uses('environment', small), 2);
    assert.equal(await environmentUsedBy(small), 2);
    assert.equal(await environmentUsedBy(big), 0);
    assert.equal(await refs.uses('destination', github), 2);
    assert.equal(await refs.uses('destination', npm), 1);
    const moved = await postVersion(t, name, { from_version: 1, environment: big, egress: { mode: 'allowlist', destinations: [npm] } });
    assert.equal(moved.status, 201, moved.text);
    assert.equal(await refs.uses('environment', small), 1);
    assert.equal(await refs.uses('environment', big), 1);
    assert.equal(await environmentUsedBy(small), 1);
    assert.equal(await environmentUsedBy(big), 1);
    assert.equal(await refs.uses('destination', github), 1);
    assert.equal(await refs.uses('destination', npm), 2);
    assert.equal(await refs.uses('environment', uniq('nowhere')), 0);
    const bad = await postVersion(t, name, { from_version: 1, environment: uniq('tiny-vm') });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.errors[0].field, 'environment');
    const badDestination = await postVersion(t, name, { from_version: 1, egress: { mode: 'allowlist', destinations: [npm, uniq('nodest')] } });
    assert.equal(badDestination.status, 422);
    assert.deepEqual(badDestination.body.errors.map((e: { field: string }) => e.field), ['egress.destinations.1']);

    // The owners refuse to delete what a current version names, and allow it once none does.
    assert.equal((await deleteWithEtag(`${V1}/environments/${small}`)).status, 409);
    assert.equal((await deleteWithEtag(`${V1}/destinations/${github}`)).status, 409);
    const cleared = await postVersion(t, other.name, { from_version: 1, environment: null, egress: { mode: 'allow_all' } });
    assert.equal(cleared.status, 201, cleared.text);
    assert.equal(await environmentUsedBy(small), 0);
    assert.equal(await refs.uses('destination', github), 0);
    assert.equal((await deleteWithEtag(`${V1}/environments/${small}`)).status, 204);
    assert.equal((await deleteWithEtag(`${V1}/destinations/${github}`)).status, 204);
    // Gone from their modules, the names are unknown to a new version again.
    const gone = await postVersion(t, other.name, { from_version: 1 });
    assert.equal(gone.status, 422);
    assert.deepEqual(gone.body.errors.map((e: { field: string }) => e.field).sort(), ['egress.destinations.0', 'environment']);
  });

  test("references answer for agents and tools: the kinds this module provides", async () => {
    const { name } = await makeAgent(t);
    assert.deepEqual(await t.services.references.unknown('agent', [name, 'ghost-agent']), ['ghost-agent']);
    assert.deepEqual(await t.services.references.unknown('tool', ['shell', 'hand_off', 'warp']), ['warp']);
  });

  test('a page of agents carries each one its own used_by, counted for the whole page at once', async () => {
    const [a, b, c] = [(await makeAgent(t)).name, (await makeAgent(t)).name, (await makeAgent(t)).name];
    const env = (await makeEnvironment(t)).name;
    const role = (agent: string) => ({ agent, model: 'fast', vm: env });
    // a: two templates and a team; b: one template and the team; c: nothing.
    const both = await makeTemplate(t, { roles: { lead: role(a), dev: role(b) }, pipeline: { lead: 'dev' } });
    await makeTemplate(t, { roles: { lead: role(a) }, pipeline: {} }, ['lead']);
    await makeTeam(t, { template: both.name });
    const expected = new Map([[a, 3], [b, 2], [c, 0]]);
    const list = await t.request({ method: 'GET', url: `${V1}/agents?limit=200`, token: t.adminToken });
    assert.equal(list.status, 200, list.text);
    const listed = new Map(list.body.items.filter((i: { name: string }) => expected.has(i.name)).map((i: { name: string; used_by: number }) => [i.name, i.used_by]));
    assert.deepEqual(listed, expected);
    for (const [name, n] of expected) {
      const one = await t.request({ method: 'GET', url: `${V1}/agents/${name}`, token: t.adminToken });
      assert.equal(one.body.used_by, n, `GET /agents/${name} agrees with the list`);
    }
    const ghost = uniq('ghost');
    assert.deepEqual(await t.services.references.usesMany('agent', [c, a, ghost, b, a]), new Map([[c, 0], [a, 3], [ghost, 0], [b, 2]]));
  });

  test('used_by counts the templates and teams that use the agent; DELETE is 409 while anything does', async () => {
    const { name, etag } = await makeAgent(t);
    const url = `${V1}/agents/${name}`;
    const usedBy = async () => {
      const got = await t.request({ method: 'GET', url, token: t.adminToken });
      const list = await t.request({ method: 'GET', url: `${V1}/agents?limit=200`, token: t.adminToken });
      const listed = list.body.items.find((i: { name: string }) => i.name === name).used_by;
      assert.equal(listed, got.body.used_by, 'the list and the agent agree');
      return got.body.used_by as number;
    };
    const refused = async (count: number) => {
      const res = await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': etag } });
      assert.equal(res.status, 409, res.text);
      assert.match(res.body.detail, new RegExp(`used by ${count}\\b`));
    };
    assert.equal(await usedBy(), 0);

    const env = (await makeEnvironment(t)).name;
    const role = { agent: name, model: 'fast', vm: env };
    // A template whose two roles run the agent counts once.
    const tpl = await makeTemplate(t, { roles: { lead: role, dev: { ...role, model: 'smart' } }, pipeline: { lead: 'dev' } });
    assert.equal(await usedBy(), 1);
    // The ETag changes with used_by (a cache revalidating keeps no stale count); the one read before is still the agent's for If-Match (the 409 below).
    assert.notEqual(String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag), etag);
    // So does a team created from it.
    const team = await makeTeam(t, { template: tpl.name });
    assert.deepEqual(team.role_settings.map((r: { agent: string }) => r.agent), [name, name]);
    assert.equal(await usedBy(), 2);
    await refused(2);

    // The template moves on to a version that runs another agent; the team still runs this one.
    const otherAgent = (await makeAgent(t)).name;
    const v2 = await t.request({
      method: 'POST',
      url: `${V1}/team-templates/${tpl.name}/versions`,
      token: t.adminToken,
      headers: { 'if-match': tpl.etag },
      body: { lead: 'lead', roles: { lead: { ...role, agent: otherAgent } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 10, note: 'another agent' },
    });
    assert.equal(v2.status, 201, v2.text);
    assert.equal(await usedBy(), 1);
    await refused(1);

    // A second template names it.
    const spare = await makeTemplate(t, { roles: { lead: role }, pipeline: {} }, ['lead']);
    assert.equal(await usedBy(), 2);
    await refused(2);

    // Archiving the team ends its use.
    const archived = await t.request({ method: 'DELETE', url: `${V1}/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': team.etag } });
    assert.equal(archived.status, 204, archived.text);
    assert.equal(await usedBy(), 1);
    await refused(1);

    // Deleting the second template ends the last one.
    const removed = await t.request({ method: 'DELETE', url: `${V1}/team-templates/${spare.name}`, token: t.adminToken, headers: { 'if-match': spare.etag } });
    assert.equal(removed.status, 204, removed.text);
    assert.equal(await usedBy(), 0);
    assert.equal((await t.request({ method: 'DELETE', url, token: t.adminToken, headers: { 'if-match': etag } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url, token: t.adminToken })).status, 404);
    // A template can no longer name it.
    const late = await t.request({
      method: 'POST',
      url: `${V1}/team-templates`,
      token: t.adminToken,
      body: { name: uniq('tpl'), lead: 'lead', roles: { lead: role }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 10 },
    });
    assert.equal(late.status, 422, late.text);
    assert.equal(late.body.errors[0].field, 'roles.lead.agent');
  });
});

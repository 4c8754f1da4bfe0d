import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { makeDestination as makeDest, makeSecret, makeAgent, makeEnvironment, makeTeam, makeTemplate } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

describe('mcp servers', () => {
  let t: TestApp;
  let operator: { token: string };
  let viewer: { token: string };
  /** A destination the lead role's egress allows, one nobody's does, and a secret. */
  let allowed: string;
  let other: string;
  let secret: string;
  const SECRET_VALUE = 'tok-very-secret-value-0123456789';
  /** A team whose `lead` runs an allowlist agent (only `allowed`) and whose `dev` allows all. */
  let team: string;

  const url = (id: string) => `/api/v1/mcp-servers/${id}`;
  const create = (body: Record<string, unknown>, token = t.adminToken) => t.request({ method: 'POST', url: '/api/v1/mcp-servers', token, body });
  const get = (id: string, token = t.adminToken) => t.request({ method: 'GET', url: url(id), token });
  const etagOf = async (id: string) => String((await get(id)).headers.etag);
  const base = (extra: Record<string, unknown> = {}) => ({ name: uniq('srv'), url: 'https://mcp.example.com/sse', destination: allowed, auth: 'bearer', secret: `secret:${secret}`, roles: [], ...extra });

  const makeDestination = async () => (await makeDest(t)).name;
  /** A secret in a team's namespace, as a reference a team server may name. */
  async function teamSecret(teamName: string) {
    const name = `teams/${teamName}/${uniq('tok')}`;
    await makeSecret(t, { name, value: SECRET_VALUE });
    return `secret:${name}`;
  }
  async function auditOf(id: string) {
    return t.db.selectFrom('audit_log').select(['action', 'actor', 'details']).where('target_type', '=', 'mcp_server').where('target', '=', id).orderBy('id').execute();
  }

  before(async () => {
    t = await testApp({ modelProxy: true });
    operator = await t.user('operator');
    viewer = await t.user('viewer');
    allowed = await makeDestination();
    other = await makeDestination();
    const env = await makeEnvironment(t);
    const strict = await makeAgent(t, { version: { egress: { mode: 'allowlist', destinations: [allowed] } } });
    const open = await makeAgent(t);
    const tpl = await makeTemplate(t, { roles: { lead: { agent: strict.name, model: 'fast', vm: env.name }, dev: { agent: open.name, model: 'fast', vm: env.name } } });
    team = (await makeTeam(t, { template: tpl.name })).name;
    // A team server's secret lives in its team's namespace; a platform server may name any.
    secret = `teams/${team}/${uniq('mcp-token')}`;
    await makeSecret(t, { name: secret, value: SECRET_VALUE });
  });
  after(() => t.close());

  test('an admin creates a platform server: id platform:<name>, no team, curated, secret status set, readable both ways', async () => {
    const body = base();
    const res = await create(body);
    assert.equal(res.status, 201, res.text);
    assert.deepEqual(res.body, {
      id: `platform:${body.name}`, scope: 'platform', team: null, name: body.name, url: body.url, destination: allowed, auth: 'bearer', header: null, roles: [],
      secret: { ref: `secret:${secret}`, status: 'set' }, status: 'curated', proposed_by: null, warnings: [], created_by: 'admin',
      created_at: res.body.created_at, updated_at: res.body.updated_at,
    });
    assert.equal(res.headers.location, `/api/v1/mcp-servers/platform/${body.name}`);
    assert.match(String(res.headers.etag), /^"\d+\.[0-9a-f]{16}"$/, 'the row version and a digest of the body (secret.status and warnings are derived)');
    for (const id of [`platform:${body.name}`, `platform/${body.name}`]) {
      const got = await get(id, viewer.token);
      assert.equal(got.status, 200, id);
      assert.equal(got.headers.etag, res.headers.etag);
      assert.deepEqual(got.body, res.body);
    }
    assert.ok(!res.text.includes(SECRET_VALUE));
    const dup = await create({ ...base(), name: body.name });
    assert.deepEqual([dup.status, dup.body.detail], [409, `a platform MCP server named "${body.name}" already exists`]);
    assert.equal(dup.body.errors[0].field, 'name');
    assert.deepEqual((await auditOf(`platform:${body.name}`)).map((a) => a.action), ['mcp_server.create']);
  });

  test('roles: platform servers are admin-only (403 for operators), viewers write nothing (403)', async () => {
    assert.equal((await create(base(), operator.token)).status, 403);
    assert.equal((await create(base({ team: null }), operator.token)).status, 403);
    assert.equal((await create(base({ team }), viewer.token)).status, 403);
    assert.equal((await create(base(), viewer.token)).status, 403);
    const p = (await create(base())).body;
    const etag = await etagOf(p.id);
    const put = (token: string) => t.request({ method: 'PUT', url: url(`platform/${p.name}`), token, body: base({ name: undefined }), headers: { 'if-match': etag } });
    assert.equal((await put(operator.token)).status, 403);
    assert.equal((await put(viewer.token)).status, 403);
    for (const token of [operator.token, viewer.token]) {
      assert.equal((await t.request({ method: 'DELETE', url: url(`platform/${p.name}`), token, headers: { 'if-match': etag } })).status, 403);
      assert.equal((await t.request({ method: 'POST', url: url(`platform/${p.name}/accept`), token, headers: { 'if-match': etag } })).status, 403);
    }
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/mcp-servers' })).status, 401);
    assert.equal((await get(p.id, viewer.token)).status, 200);
  });

  test('an operator creates a team server: id <team>/<name>, warnings name the roles whose egress lacks the destination', async () => {
    const lacking = await create(base({ team, destination: other }), operator.token);
    assert.equal(lacking.status, 201, lacking.text);
    assert.equal(lacking.body.id, `${team}/${lacking.body.name}`);
    assert.equal(lacking.body.scope, 'team');
    assert.equal(lacking.body.team, team);
    assert.deepEqual(lacking.body.warnings, ['lead'], 'lead is an allowlist without the destination; dev allows all');
    assert.equal(lacking.headers.location, `/api/v1/mcp-servers/${team}/${lacking.body.name}`);
    for (const id of [`${team}/${lacking.body.name}`, `${team}%2F${lacking.body.name}`]) {
      const got = await get(id, viewer.token);
      assert.equal(got.status, 200, id);
      assert.deepEqual(got.body, lacking.body);
    }
    const fine = await create(base({ team, destination: allowed }), operator.token);
    assert.deepEqual(fine.body.warnings, []);
    const builtin = await create(base({ team, destination: 'mcp' }), operator.token);
    assert.equal(builtin.status, 201);
    assert.deepEqual(builtin.body.warnings, [], 'the built-ins are in every egress');
    const devOnly = await create(base({ team, destination: other, roles: ['dev'] }), operator.token);
    assert.deepEqual(devOnly.body.roles, ['dev']);
    assert.deepEqual(devOnly.body.warnings, [], 'only the named roles count');

    // The same name may exist once per team and once on the platform.
    const name = lacking.body.name;
    const taken = await create(base({ team, name }), operator.token);
    assert.deepEqual([taken.status, taken.body.detail], [409, `an MCP server of team "${team}" named "${name}" already exists`]);
    assert.equal((await create(base({ name }))).status, 201);
    const second = await makeTeam(t);
    assert.equal((await create(base({ team: second.name, name, secret: await teamSecret(second.name) }), operator.token)).status, 201);

    // An override of the lead's egress that allows the destination clears the warning.
    const egressUrl = `/api/v1/teams/${team}/roles/lead/egress`;
    const etag = String((await t.request({ method: 'GET', url: egressUrl, token: t.adminToken })).headers.etag);
    const put = await t.request({ method: 'PUT', url: egressUrl, token: t.adminToken, body: { mode: 'allowlist', destinations: [allowed, other] }, headers: { 'if-match': etag } });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual((await get(lacking.body.id)).body.warnings, []);
    assert.equal((await t.request({ method: 'DELETE', url: egressUrl, token: t.adminToken, headers: { 'if-match': String(put.headers.etag) } })).status, 204);
    assert.deepEqual((await get(lacking.body.id)).body.warnings, ['lead']);
  });

  test('a server that needs a secret and names none gets its own reference, shown unset with where to set it', async () => {
    const name = uniq('own');
    const res = await create(base({ team, name, secret: undefined }), operator.token);
    assert.equal(res.status, 201, res.text);
    const ref = `teams/${team}/mcp/${name}`;
    assert.deepEqual(res.body.secret, { ref: `secret:${ref}`, status: 'unset', set_with: `PUT /api/v1/secrets/${ref}` });
    // Once an admin sets it, the server shows it set.
    const meta = await t.request({ method: 'GET', url: `/api/v1/secrets/${ref}`, token: t.adminToken });
    assert.equal(meta.status, 200);
    assert.equal(meta.body.set, false);
    const put = await t.request({ method: 'PUT', url: `/api/v1/secrets/${ref}`, token: t.adminToken, body: { value: SECRET_VALUE }, headers: { 'if-match': String(meta.headers.etag) } });
    assert.equal(put.status, 200, put.text);
    assert.deepEqual((await get(res.body.id)).body.secret, { ref: `secret:${ref}`, status: 'set' });
    const platform = await create(base({ name: uniq('own'), secret: null, auth: 'header', header: 'X-Key' }));
    assert.equal(platform.status, 201, platform.text);
    assert.equal(platform.body.secret.ref, `secret:mcp/${platform.body.name}`);
    assert.equal(platform.body.secret.status, 'unset');
    // A refused server declares nothing.
    const refusedName = uniq('own');
    const refused = await create(base({ name: refusedName, secret: undefined, destination: uniq('nowhere') }));
    assert.equal(refused.status, 422);
    const declared = await t.request({ method: 'GET', url: `/api/v1/secrets/mcp/${refusedName}`, token: t.adminToken });
    assert.equal(declared.status, 404);
  });

  test('rules beyond the schema answer 422 naming the field', async () => {
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ team: uniq('ghost') }, 'team'],
      [{ destination: uniq('nowhere') }, 'destination'],
      [{ secret: `secret:${uniq('missing')}` }, 'secret'],
      [{ auth: 'none' }, 'secret'],
      [{ auth: 'header' }, 'header'],
      [{ header: 'X-Api-Key' }, 'header'],
      [{ url: 'https://user:pw@mcp.example.com/' }, 'url'],
      [{ url: 'https://[zz]/' }, 'url'],
      [{ roles: ['lead'] }, 'roles'],
      [{ team, roles: ['dev', 'nobody'] }, 'roles.1'],
    ];
    for (const [extra, field] of cases) {
      const res = await create(base(extra));
      assert.equal(res.status, 422, `${JSON.stringify(extra)}: ${res.text}`);
      assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), [field], JSON.stringify(extra));
    }
    const several = await create(base({ destination: uniq('nowhere'), auth: 'none', team, roles: ['nobody'] }));
    assert.deepEqual(several.body.errors.map((e: { field: string }) => e.field).sort(), ['destination', 'roles.0', 'secret']);
    const ok = await create(base({ team, auth: 'header', header: 'X-Api-Key' }), operator.token);
    assert.equal(ok.status, 201, ok.text);
    assert.equal(ok.body.header, 'X-Api-Key');
    const none = await create(base({ auth: 'none', secret: undefined, url: 'http://mcp.internal.example.com:8080/mcp' }));
    assert.equal(none.status, 201);
    assert.deepEqual(none.body.secret, { ref: null, status: 'none' });
  });

  test('bodies that do not match the schema answer 400', async () => {
    const cases: Array<Record<string, unknown>> = [
      { url: 'ftp://mcp.example.com/' },
      { url: `https://${'a'.repeat(2000)}.example.com/` },
      { url: 'https://mcp example.com/' },
      { name: 'Bad_Name' },
      { name: 'a'.repeat(64) },
      { name: undefined },
      { roles: undefined },
      { roles: ['lead', 'lead'] },
      { roles: Array.from({ length: 21 }, (_, i) => `r${i}`) },
      { auth: 'basic' },
      { secret: 'plain-name' },
      { team: 'Not A Team' },
      { extra: true },
      { header: 'X Bad' },
    ];
    for (const extra of cases) {
      const res = await create(base(extra));
      assert.equal(res.status, 400, `${JSON.stringify(extra).slice(0, 80)}: ${res.text}`);
    }
    assert.equal((await get('nothing-like-an-id')).status, 404);
    assert.equal((await get('platform:Bad')).status, 404);
    assert.equal((await get(`platform:${uniq('none')}`)).status, 404);
    assert.equal((await get(`${team}/${uniq('none')}`)).status, 404);
    assert.equal((await get(`${uniq('ghost')}/x`)).status, 404);
  });

  test('list: platform servers first, then each team\'s by team and name; keyset pages; bad cursor 400', async () => {
    await create(base({ team }), operator.token);
    await create(base());
    const seen: Array<{ scope: string; team: string | null; name: string }> = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: { items: typeof seen; next_cursor: string | null } } = await t.request({ method: 'GET', url: `/api/v1/mcp-servers?limit=3${cursor ? `&cursor=${cursor}` : ''}`, token: viewer.token });
      assert.equal(res.status, 200);
      assert.ok(res.body.items.length <= 3);
      seen.push(...res.body.items);
      cursor = res.body.next_cursor;
    } while (cursor);
    const all = await t.request({ method: 'GET', url: '/api/v1/mcp-servers?limit=200', token: viewer.token });
    assert.deepEqual(seen, all.body.items);
    const firstTeam = seen.findIndex((s) => s.scope === 'team');
    assert.ok(firstTeam > 0);
    assert.ok(seen.slice(0, firstTeam).every((s) => s.scope === 'platform' && s.team === null));
    assert.ok(seen.slice(firstTeam).every((s) => s.scope === 'team'));
    const keys = seen.map((s) => [s.team ?? '', s.name]);
    const sorted = [...keys].sort((a, b) => (a[0] === b[0] ? (a[1] < b[1] ? -1 : 1) : a[0] < b[0] ? -1 : 1));
    assert.deepEqual(keys, sorted);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/mcp-servers?cursor=bogus', token: viewer.token })).status, 400);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/mcp-servers?limit=0', token: viewer.token })).status, 400);
  });

  test('PUT replaces with If-Match (428, 412), creates without it (201), never renames or moves', async () => {
    const s = (await create(base({ team }), operator.token)).body;
    const path = url(`${team}/${s.name}`);
    const etag = await etagOf(s.id);
    const body = { url: 'https://other.example.com/mcp', destination: other, auth: 'none', roles: ['lead'] };
    assert.equal((await t.request({ method: 'PUT', url: path, token: operator.token, body })).status, 428);
    assert.equal((await t.request({ method: 'PUT', url: path, token: operator.token, body, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await t.request({ method: 'PUT', url: path, token: viewer.token, body, headers: { 'if-match': etag } })).status, 403);
    const renamed = await t.request({ method: 'PUT', url: path, token: operator.token, body: { ...body, name: uniq('other') }, headers: { 'if-match': etag } });
    assert.equal(renamed.status, 422);
    assert.equal(renamed.body.errors[0].field, 'name');
    const moved = await t.request({ method: 'PUT', url: path, token: operator.token, body: { ...body, team: null }, headers: { 'if-match': etag } });
    assert.equal(moved.status, 422);
    assert.equal(moved.body.errors[0].field, 'team');
    const res = await t.request({ method: 'PUT', url: path, token: operator.token, body: { ...body, team, name: s.name }, headers: { 'if-match': etag } });
    assert.equal(res.status, 200, res.text);
    assert.notEqual(res.headers.etag, etag);
    assert.deepEqual([res.body.url, res.body.destination, res.body.auth, res.body.roles, res.body.secret, res.body.warnings], [body.url, other, 'none', ['lead'], { ref: null, status: 'none' }, ['lead']]);
    assert.equal((await t.request({ method: 'PUT', url: path, token: operator.token, body, headers: { 'if-match': etag } })).status, 412);

    const fresh = uniq('put');
    const made = await t.request({ method: 'PUT', url: url(`${team}/${fresh}`), token: operator.token, body });
    assert.equal(made.status, 201, made.text);
    assert.equal(made.headers.location, `/api/v1/mcp-servers/${team}/${fresh}`);
    assert.equal(made.body.status, 'curated');
    const platform = await t.request({ method: 'PUT', url: url(`platform/${fresh}`), token: t.adminToken, body: { ...body, roles: [], team: null } });
    assert.equal(platform.status, 201, platform.text);
    assert.equal(platform.body.id, `platform:${fresh}`);
    assert.equal((await t.request({ method: 'PUT', url: url(`${uniq('ghost')}/${fresh}`), token: operator.token, body })).status, 404);
    assert.deepEqual((await auditOf(s.id)).map((a) => a.action), ['mcp_server.create', 'mcp_server.update']);
  });

  test('two writers holding one ETag: exactly one wins', async () => {
    const s = (await create(base({ team }), operator.token)).body;
    const etag = await etagOf(s.id);
    const put = (u: string) => t.request({ method: 'PUT', url: url(s.id), token: operator.token, body: { url: u, destination: allowed, auth: 'none', roles: [] }, headers: { 'if-match': etag } });
    const results = await Promise.all([put('https://a.example.com/'), put('https://b.example.com/')]);
    assert.deepEqual(results.map((r) => r.status).sort(), [200, 412]);
  });

  test('DELETE removes a team server (If-Match); a platform server in use by a template answers 409', async () => {
    const s = (await create(base({ team }), operator.token)).body;
    const path = url(s.id);
    const etag = await etagOf(s.id);
    assert.equal((await t.request({ method: 'DELETE', url: path, token: operator.token })).status, 428);
    assert.equal((await t.request({ method: 'DELETE', url: path, token: operator.token, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url: path, token: viewer.token, headers: { 'if-match': etag } })).status, 403);
    assert.equal((await t.request({ method: 'DELETE', url: path, token: operator.token, headers: { 'if-match': etag } })).status, 204);
    assert.equal((await get(s.id)).status, 404);
    assert.equal((await t.request({ method: 'DELETE', url: path, token: operator.token, headers: { 'if-match': etag } })).status, 404);
    assert.deepEqual((await auditOf(s.id)).map((a) => a.action), ['mcp_server.create', 'mcp_server.delete']);

    const p = (await create(base())).body;
    const tpl = await makeTemplate(t, { roles: { lead: { agent: (await makeAgent(t)).name, model: 'fast', vm: (await makeEnvironment(t)).name, mcp_servers: [p.name] } } }, ['lead']);
    const pEtag = await etagOf(p.id);
    const inUse = await t.request({ method: 'DELETE', url: url(`platform/${p.name}`), token: t.adminToken, headers: { 'if-match': pEtag } });
    assert.equal(inUse.status, 409, inUse.text);
    assert.match(inUse.body.detail, /template/);
    // A new template version without it: the server is free again.
    const v2 = await t.request({
      method: 'POST',
      url: `/api/v1/team-templates/${tpl.name}/versions`,
      token: t.adminToken,
      headers: { 'if-match': tpl.etag },
      body: { lead: 'lead', roles: { lead: { agent: tpl.current.roles.lead.agent, model: 'fast', vm: tpl.env } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 10 },
    });
    assert.equal(v2.status, 201, v2.text);
    assert.equal((await t.request({ method: 'DELETE', url: url(`platform/${p.name}`), token: t.adminToken, headers: { 'if-match': pEtag } })).status, 204);
  });

  test('agents, templates and destinations may name only existing platform servers (422 otherwise)', async () => {
    const p = (await create(base())).body;
    const teamOnly = (await create(base({ team }), operator.token)).body;
    const agent = (name: string) => t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name: uniq('ag'), version: { system_prompt: 'x', mcp_servers: [name] } } });
    assert.equal((await agent(p.name)).status, 201);
    const bad = await agent(teamOnly.name);
    assert.equal(bad.status, 422);
    assert.equal(bad.body.errors[0].field, 'version.mcp_servers.0');
    const env = (await makeEnvironment(t)).name;
    const agentName = (await makeAgent(t)).name;
    const template = (name: string) => t.request({
      method: 'POST',
      url: '/api/v1/team-templates',
      token: t.adminToken,
      body: { name: uniq('tpl'), lead: 'lead', roles: { lead: { agent: agentName, model: 'fast', vm: env, mcp_servers: [name] } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 10 },
    });
    assert.equal((await template(p.name)).status, 201);
    const badTpl = await template(uniq('nope'));
    assert.equal(badTpl.status, 422);
    assert.equal(badTpl.body.errors[0].field, 'roles.lead.mcp_servers');
    const dest = (inject: string) => t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name: uniq('d'), inject_secret: inject } });
    assert.equal((await dest(`mcp:${p.name}`)).status, 201);
    assert.equal((await dest(`mcp:${teamOnly.name}`)).status, 422);
  });

  test('a destination or secret a server names is in use: the destination cannot be deleted, the secret counts it', async () => {
    const d = await makeDestination();
    const name = `teams/${team}/${uniq('sec')}`;
    await makeSecret(t, { name, value: SECRET_VALUE });
    const s = (await create(base({ team, destination: d, secret: `secret:${name}` }), operator.token)).body;
    const dEtag = String((await t.request({ method: 'GET', url: `/api/v1/destinations/${d}`, token: t.adminToken })).headers.etag);
    const del = await t.request({ method: 'DELETE', url: `/api/v1/destinations/${d}`, token: t.adminToken, headers: { 'if-match': dEtag } });
    assert.equal(del.status, 409, del.text);
    const sec = await t.request({ method: 'GET', url: `/api/v1/secrets/${name}`, token: t.adminToken });
    assert.equal(sec.body.used_by, 1);
    await t.request({ method: 'DELETE', url: url(s.id), token: operator.token, headers: { 'if-match': await etagOf(s.id) } });
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/destinations/${d}`, token: t.adminToken, headers: { 'if-match': dEtag } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/secrets/${name}`, token: t.adminToken })).body.used_by, 0);
  });

  test('secret.status: set, unset, missing, none; the value never leaves the server or reaches the audit log or logs', async () => {
    const integration = `integrations/chat_a/bots/${uniq('team')}/lead`;
    const put = await makeSecret(t, { name: integration, value: SECRET_VALUE });
    // A team server may not name a platform credential: only its team's secrets.
    for (const ref of [`secret:${integration}`, 'secret:models/openai', `secret:teams/${uniq('other')}/k`]) {
      const refused = await create(base({ team, secret: ref }), operator.token);
      assert.equal(refused.status, 422, ref);
      assert.equal(refused.body.errors[0].field, 'secret');
    }
    const made = await create(base({ secret: `secret:${integration}` }));
    const s = made.body;
    assert.equal(s.secret.status, 'set');
    await t.request({ method: 'DELETE', url: `/api/v1/secrets/${integration}`, token: t.adminToken, headers: { 'if-match': put.etag } });
    const unset = await get(s.id);
    assert.deepEqual(unset.body.secret, { ref: `secret:${integration}`, status: 'unset', set_with: `PUT /api/v1/secrets/${integration}` });
    assert.notEqual(unset.headers.etag, made.headers.etag, 'the ETag changes with secret.status');
    const plain = `teams/${team}/${uniq('gone')}`;
    const put2 = await makeSecret(t, { name: plain, value: SECRET_VALUE });
    const g = (await create(base({ team, secret: `secret:${plain}` }), operator.token)).body;
    await t.request({ method: 'DELETE', url: `/api/v1/secrets/${plain}`, token: t.adminToken, headers: { 'if-match': put2.etag } });
    assert.deepEqual((await get(g.id)).body.secret, { ref: `secret:${plain}`, status: 'missing', set_with: `PUT /api/v1/secrets/${plain}` });
    const list = await t.request({ method: 'GET', url: '/api/v1/mcp-servers?limit=200', token: t.adminToken });
    assert.ok(!list.text.includes(SECRET_VALUE));
    const audit = await t.db.selectFrom('audit_log').select('details').where('target_type', '=', 'mcp_server').execute();
    assert.ok(audit.length > 0);
    assert.ok(!JSON.stringify(audit).includes(SECRET_VALUE));
    assert.ok(!t.logs.join('').includes(SECRET_VALUE));
  });

  test('an agent proposes a server: proposed, then curated by accept (If-Match, idempotent) or by PUT', async () => {
    const mcp = t.services.mcpServers;
    const agentActor = systemActor(`${team}/lead`);
    const name = uniq('prop');
    const proposal = { name, url: 'https://tools.example.com/mcp', destination: allowed, auth: 'none' as const, roles: [] };
    const row = await mcp.propose(agentActor, team, proposal);
    const id = `${team}/${name}`;
    const first = await get(id, viewer.token);
    assert.equal(first.body.status, 'proposed');
    assert.equal(first.body.proposed_by, `${team}/lead`);
    assert.match(String(first.headers.etag), new RegExp(`^"${row.row_version}\\.[0-9a-f]{16}"$`), 'the proposal\'s row version (and a digest of the body)');
    // A new proposal of the same name replaces the old one while it is still proposed.
    await mcp.propose(agentActor, team, { ...proposal, url: 'https://tools.example.com/v2' });
    const second = await get(id);
    assert.equal(second.body.url, 'https://tools.example.com/v2');
    assert.notEqual(second.headers.etag, first.headers.etag);

    const accept = (etag?: string, token = operator.token) => t.request({ method: 'POST', url: url(`${id}/accept`), token, headers: etag ? { 'if-match': etag } : {} });
    assert.equal((await accept()).status, 428);
    assert.equal((await accept(String(first.headers.etag))).status, 412, 'the proposal changed since it was read');
    assert.equal((await accept(String(second.headers.etag), viewer.token)).status, 403);
    const ok = await accept(String(second.headers.etag));
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.status, 'curated');
    assert.equal(ok.body.proposed_by, `${team}/lead`);
    const again = await accept(String(second.headers.etag));
    assert.equal(again.status, 200, 'accepting twice is harmless');
    assert.equal(again.body.status, 'curated');
    assert.equal(again.headers.etag, ok.headers.etag);
    await assert.rejects(mcp.propose(agentActor, team, proposal), (e: { status: number }) => e.status === 409);
    assert.deepEqual((await auditOf(id)).map((a) => a.action), ['mcp_server.propose', 'mcp_server.propose', 'mcp_server.accept']);
    assert.equal((await t.request({ method: 'POST', url: url(`${team}/${uniq('none')}/accept`), token: operator.token, headers: { 'if-match': '"1"' } })).status, 404);

    const other = uniq('prop');
    await mcp.propose(agentActor, team, { ...proposal, name: other });
    const etag = await etagOf(`${team}/${other}`);
    const replaced = await t.request({ method: 'PUT', url: url(`${team}/${other}`), token: operator.token, body: { url: 'https://tools.example.com/x', destination: allowed, auth: 'none', roles: ['dev'] }, headers: { 'if-match': etag } });
    assert.equal(replaced.status, 200);
    assert.equal(replaced.body.status, 'curated');
    const platform = (await create(base())).body;
    assert.equal((await t.request({ method: 'POST', url: url(`platform/${platform.name}/accept`), token: t.adminToken, headers: { 'if-match': await etagOf(platform.id) } })).status, 200);

    await assert.rejects(mcp.propose(agentActor, uniq('ghost'), proposal), (e: { status: number }) => e.status === 404);
    await assert.rejects(mcp.propose(agentActor, team, { ...proposal, name: uniq('p'), roles: ['nobody'] }), (e: { status: number }) => e.status === 422);
  });

  test('archiving a team removes its servers; its servers answer 404 and a new team of the name inherits none', async () => {
    const doomed = await makeTeam(t);
    const s = (await create(base({ team: doomed.name, secret: await teamSecret(doomed.name) }), operator.token)).body;
    const teamEtag = String((await t.request({ method: 'GET', url: `/api/v1/teams/${doomed.name}`, token: t.adminToken })).headers.etag);
    const archived = await t.request({ method: 'DELETE', url: `/api/v1/teams/${doomed.name}`, token: operator.token, headers: { 'if-match': teamEtag } });
    assert.equal(archived.status, 204, archived.text);
    assert.equal((await get(s.id)).status, 404);
    assert.equal((await create(base({ team: doomed.name }), operator.token)).status, 422);
    const list = await t.request({ method: 'GET', url: '/api/v1/mcp-servers?limit=200', token: t.adminToken });
    assert.ok(!list.body.items.some((i: { team: string }) => i.team === doomed.name));
    await makeTeam(t, { body: { name: doomed.name } });
    assert.equal((await get(s.id)).status, 404);
    assert.deepEqual((await auditOf(s.id)).map((a) => a.action), ['mcp_server.create', 'mcp_server.delete']);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

describe('destinations', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  const url = (name: string) => `/api/v1/destinations/${name}`;
  const create = (body: Record<string, unknown>, token = t.adminToken) => t.request({ method: 'POST', url: '/api/v1/destinations', token, body });

  test('an admin creates a destination; defaults fill the rest; GET answers it with an ETag', async () => {
    const name = uniq('gh');
    const res = await create({ name, host: 'API.GitHub.com.', methods: ['get', 'POST'], paths: ['/repos/'], header_allowlist: ['Accept'], what: 'GitHub API', github_scope: 'api' });
    assert.equal(res.status, 201);
    assert.deepEqual(res.body, {
      name, host: 'api.github.com', methods: ['GET', 'POST'], paths: ['/repos/'], header_allowlist: ['accept'], inject_secret: null, git_push_ref_globs: [],
      what: 'GitHub API', builtin: false, github_scope: 'api', dev_only: false, policy_name: null, updated_at: res.body.updated_at,
    });
    assert.equal(res.headers.location, `/api/v1/destinations/${name}`);
    const got = await t.request({ method: 'GET', url: url(name), token: t.adminToken });
    assert.equal(got.status, 200);
    assert.equal(got.headers.etag, res.headers.etag);
    const minimal = await create({ name: uniq('min') });
    assert.equal(minimal.status, 201);
    assert.deepEqual([minimal.body.host, minimal.body.methods, minimal.body.what, minimal.body.dev_only], [null, [], '', false]);
    assert.equal((await create({ name })).status, 409);
  });

  test('the built-ins llm, mcp, otel always exist and cannot be created, replaced or deleted (409)', async () => {
    const list = await t.request({ method: 'GET', url: '/api/v1/destinations?limit=200', token: t.adminToken });
    const names = list.body.items.map((d: { name: string }) => d.name);
    for (const b of ['llm', 'mcp', 'otel']) {
      assert.ok(names.includes(b), b);
      const got = await t.request({ method: 'GET', url: url(b), token: t.adminToken });
      assert.equal(got.status, 200);
      assert.equal(got.body.builtin, true);
      assert.equal((await create({ name: b })).status, 409);
      const put = await t.request({ method: 'PUT', url: url(b), token: t.adminToken, body: { host: 'x.example.com' }, headers: { 'if-match': String(got.headers.etag) } });
      assert.equal(put.status, 409);
      assert.match(put.body.detail, /built-in/);
      const del = await t.request({ method: 'DELETE', url: url(b), token: t.adminToken, headers: { 'if-match': String(got.headers.etag) } });
      assert.equal(del.status, 409);
      assert.match(del.body.detail, /built-in/);
    }
    assert.equal((await create({ name: uniq('b'), builtin: true })).status, 422);
  });

  test('a loopback or private host needs dev_only (422), in every spelling', async () => {
    for (const host of ['127.0.0.1', '127.1', '0x7f.0.0.1', '2130706433', '017700000001', '[::ffff:127.0.0.1]', '::1', 'localhost', 'api.localhost.', '10.0.0.5',
      '192.168.1.10:8080', '172.20.0.1', '169.254.169.254', '100.64.1.1', '[fe80::1]', 'fd00::1', 'db']) {
      const res = await create({ name: uniq('dev'), host });
      assert.equal(res.status, 422, host);
      assert.equal(res.body.errors[0].field, 'dev_only', host);
      const ok = await create({ name: uniq('dev'), host, dev_only: true });
      assert.equal(ok.status, 201, host);
      assert.equal(ok.body.dev_only, true);
    }
    const normal = await create({ name: uniq('dev'), host: '0x7f.1:8080', dev_only: true });
    assert.equal(normal.body.host, '127.0.0.1:8080');
    const v6 = await create({ name: uniq('dev'), host: '[::ffff:127.0.0.1]:9000', dev_only: true });
    assert.equal(v6.body.host, '[::ffff:7f00:1]:9000');
    const bad = await create({ name: uniq('bad'), host: 'a..b' });
    assert.equal(bad.status, 422);
    assert.equal(bad.body.errors[0].field, 'host');
  });

  test('inject_secret: a gateway key, mcp:<name> or secret:<name> of an existing reference; 422 otherwise', async () => {
    assert.equal((await create({ name: uniq('i'), inject_secret: 'code_host_installation_token' })).status, 201);
    assert.equal((await create({ name: uniq('i'), inject_secret: 'model_proxy_key' })).status, 201);
    for (const bad of ['no_such_key', 'secret:missing-one', 'mcp:nobody', 'secret:']) {
      const res = await create({ name: uniq('i'), inject_secret: bad });
      assert.equal(res.status, 422, bad);
      assert.equal(res.body.errors[0].field, 'inject_secret');
    }
    const secret = `integrations/chat_a/bots/${uniq('team')}/lead`;
    await t.request({ method: 'PUT', url: `/api/v1/secrets/${secret}`, token: t.adminToken, body: { value: 'shh-1' } });
    const ok = await create({ name: uniq('i'), inject_secret: `secret:${secret}` });
    assert.equal(ok.status, 201);
    const meta = await t.request({ method: 'GET', url: `/api/v1/secrets/${secret}`, token: t.adminToken });
    assert.equal(meta.body.used_by, 1);
  });

  test('deleting a platform secret stops destinations injecting it; an integration secret stays referenced, unset', async () => {
    const plat = uniq('plat');
    const put = await t.request({ method: 'PUT', url: `/api/v1/secrets/${plat}`, token: t.adminToken, body: { value: 'shh-2' } });
    const d = await create({ name: uniq('uses'), host: 'example.com', inject_secret: `secret:${plat}` });
    assert.equal(d.status, 201);
    assert.equal((await t.request({ method: 'DELETE', url: `/api/v1/secrets/${plat}`, token: t.adminToken, headers: { 'if-match': String(put.headers.etag) } })).status, 204);
    const after = await t.request({ method: 'GET', url: url(d.body.name), token: t.adminToken });
    assert.equal(after.body.inject_secret, null);
    assert.notEqual(after.headers.etag, d.headers.etag);
    const audit = await t.db.selectFrom('audit_log').select('action').where('target_type', '=', 'destination').where('target', '=', d.body.name).orderBy('id').execute();
    assert.deepEqual(audit.map((a) => a.action), ['destination.create', 'destination.update']);

    const integ = `integrations/chat_a/bots/${uniq('team')}/dev`;
    const p2 = await t.request({ method: 'PUT', url: `/api/v1/secrets/${integ}`, token: t.adminToken, body: { value: 'shh-3' } });
    const d2 = await create({ name: uniq('uses'), host: 'example.com', inject_secret: `secret:${integ}` });
    await t.request({ method: 'DELETE', url: `/api/v1/secrets/${integ}`, token: t.adminToken, headers: { 'if-match': String(p2.headers.etag) } });
    assert.equal((await t.request({ method: 'GET', url: url(d2.body.name), token: t.adminToken })).body.inject_secret, `secret:${integ}`);
  });

  test('PUT replaces with If-Match (428, 412, 200), cannot rename, and 404s an unknown name', async () => {
    const name = uniq('rep');
    const c = await create({ name, host: 'example.com', methods: ['GET'] });
    const etag = String(c.headers.etag);
    assert.equal((await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body: { host: 'example.org' } })).status, 428);
    const ok = await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body: { host: 'example.org', what: 'changed' }, headers: { 'if-match': etag } });
    assert.equal(ok.status, 200);
    assert.deepEqual([ok.body.host, ok.body.methods, ok.body.what], ['example.org', [], 'changed']);
    assert.equal((await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body: {}, headers: { 'if-match': etag } })).status, 412);
    const rename = await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body: { name: 'other' }, headers: { 'if-match': String(ok.headers.etag) } });
    assert.equal(rename.status, 422);
    assert.equal((await t.request({ method: 'PUT', url: url(uniq('none')), token: t.adminToken, body: {}, headers: { 'if-match': '"1"' } })).status, 404);
    const priv = await t.request({ method: 'PUT', url: url(name), token: t.adminToken, body: { host: '10.0.0.1' }, headers: { 'if-match': String(ok.headers.etag) } });
    assert.equal(priv.status, 422);
  });

  test('DELETE needs If-Match and is 409 while a current agent version names the destination', async () => {
    const name = uniq('del');
    const c = await create({ name, host: 'pypi.org' });
    const agent = uniq('agent');
    const a = await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name: agent, version: { system_prompt: 'x', egress: { mode: 'allowlist', destinations: [name] } } } });
    assert.equal(a.status, 201, JSON.stringify(a.body));
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken })).status, 428);
    const busy = await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } });
    assert.equal(busy.status, 409);
    assert.match(busy.body.detail, /1 current agent version/);
    // A new current version without it frees the destination.
    const v = await t.request({ method: 'POST', url: `/api/v1/agents/${agent}/versions`, token: t.adminToken, body: { system_prompt: 'y', note: 'drop egress' }, headers: { 'if-match': String(a.headers.etag) } });
    assert.equal(v.status, 201, JSON.stringify(v.body));
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': '"1"' } })).status, 412);
    assert.equal((await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } })).status, 204);
    assert.equal((await t.request({ method: 'GET', url: url(name), token: t.adminToken })).status, 404);
    const actions = await t.db.selectFrom('audit_log').select('action').where('target_type', '=', 'destination').where('target', '=', name).orderBy('id').execute();
    assert.deepEqual(actions.map((x) => x.action), ['destination.create', 'destination.delete']);
  });

  test('DELETE is 409 while an MCP server names the destination, and the answer says so', async () => {
    const name = uniq('mcpdest');
    const c = await create({ name, host: 'mcp.example.com' });
    const server = await t.request({ method: 'POST', url: '/api/v1/mcp-servers', token: t.adminToken, body: { name: uniq('srv'), url: 'https://mcp.example.com/sse', destination: name, auth: 'none', roles: [] } });
    assert.equal(server.status, 201, server.text);
    const busy = await t.request({ method: 'DELETE', url: url(name), token: t.adminToken, headers: { 'if-match': String(c.headers.etag) } });
    assert.equal(busy.status, 409);
    assert.match(busy.body.detail, /is named by 1 .*MCP server/);
  });

  test('viewers and operators read; only admins write (403)', async () => {
    const name = uniq('r');
    const c = await create({ name });
    for (const role of ['viewer', 'operator'] as const) {
      const u = await t.user(role);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/destinations', token: u.token })).status, 200);
      assert.equal((await t.request({ method: 'GET', url: url(name), token: u.token })).status, 200);
      assert.equal((await create({ name: uniq('no') }, u.token)).status, 403);
      assert.equal((await t.request({ method: 'PUT', url: url(name), token: u.token, body: {}, headers: { 'if-match': String(c.headers.etag) } })).status, 403);
      assert.equal((await t.request({ method: 'DELETE', url: url(name), token: u.token, headers: { 'if-match': String(c.headers.etag) } })).status, 403);
    }
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/destinations' })).status, 401);
  });

  test('bad bodies are 400 naming fields', async () => {
    const res = await create({ name: 'Bad Name', methods: ['G E T'], paths: ['no-slash'], github_scope: 'other', extra: true });
    assert.equal(res.status, 400);
    const fields = res.body.errors.map((e: { field: string }) => e.field);
    for (const f of ['name', 'methods.0', 'paths.0', 'github_scope', 'extra']) assert.ok(fields.includes(f), `${f} in ${fields}`);
    assert.equal((await create({ name: uniq('x'), paths: Array(101).fill('/') })).status, 400);
  });

  test('the list pages by name with the built-ins merged in', async () => {
    for (let i = 0; i < 3; i++) await create({ name: uniq('page') });
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res: any = await t.request({ method: 'GET', url: `/api/v1/destinations?limit=4${cursor ? `&cursor=${cursor}` : ''}`, token: t.adminToken });
      assert.equal(res.status, 200);
      seen.push(...res.body.items.map((d: { name: string }) => d.name));
      cursor = res.body.next_cursor;
      pages++;
    } while (cursor && pages < 100);
    assert.deepEqual(seen, [...seen].sort());
    assert.equal(new Set(seen).size, seen.length);
    for (const b of ['llm', 'mcp', 'otel']) assert.ok(seen.includes(b));
    const total = await t.db.selectFrom('destinations').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    assert.equal(seen.length, Number(total.n) + 3);
  });

  test('policyFor gives the effective policy from stored destinations (dev-only off here)', async () => {
    const dev = uniq('devp');
    const pub = uniq('pubp');
    await create({ name: dev, host: '127.0.0.1:11434', dev_only: true });
    await create({ name: pub, host: 'pypi.org' });
    const p = await t.services.destinations.policyFor({ mode: 'allowlist', destinations: [dev, pub] });
    assert.deepEqual(p.destinations.map((d) => d.name), ['llm', 'mcp', 'otel', pub]);
    assert.deepEqual(p.dropped, [{ name: dev, reason: 'dev_only' }]);
  });
});

describe('destinations with SERVICE_EGRESS_DEV_DESTINATIONS=1', () => {
  test('dev-only destinations join the policy', async () => {
    const t = await testApp({ config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1' } });
    try {
      const dev = uniq('devp');
      await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name: dev, host: 'localhost:9000', dev_only: true } });
      const p = await t.services.destinations.policyFor({ mode: 'allowlist', destinations: [dev] });
      assert.deepEqual(p.destinations.map((d) => d.name), ['llm', 'mcp', 'otel', dev]);
      assert.equal(p.destinations[3].host, 'localhost:9000');
    } finally {
      await t.close();
    }
  });
});

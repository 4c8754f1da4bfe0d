import assert from 'node:assert/strict';
import net, { type AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { captureLogger, testApp, type TestApp } from '../../test/harness.ts';
import { useAuth } from './auth.ts';
import { authUser } from '../console/users/users.service.ts';
import { Type } from 'typebox';
import { createServer, type App } from './kernel.ts';
import { refuseUnknownQuery } from './schemas.ts';
import { Registry } from '../metrics.ts';
import { useProblems } from './problem-handler.ts';

const PROBLEM = /^application\/problem\+json/;

function assertProblem(res: { status: number; headers: Record<string, unknown>; body: any }, status: number) {
  assert.equal(res.status, status);
  assert.match(String(res.headers['content-type']), PROBLEM);
  assert.equal(res.body.status, status);
  assert.equal(typeof res.body.type, 'string');
  assert.equal(typeof res.body.title, 'string');
  assert.equal(typeof res.body.detail, 'string');
  assert.ok(Array.isArray(res.body.errors));
}

describe('HTTP conventions', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ config: { SERVICE_BODY_LIMIT: '4096' } });
  });
  after(() => t.close());

  test('an unknown route is a 404 problem, under /api/v1 with or without credentials, and for any method', async () => {
    for (const [method, url, token] of [
      ['GET', '/api/v1/nothing-here', t.adminToken],
      ['GET', '/api/v1/nothing-here', null],
      ['POST', '/api/v1/users/1/nothing', t.adminToken],
      ['DELETE', '/api/v1', t.adminToken],
      ['GET', '/api/v2/users', null],
    ] as const) {
      const res = await t.request({ method, url, token });
      assertProblem(res, 404);
      assert.match(res.body.detail, /no route/);
    }
  });

  test('a known path called with a method it does not take is a 405 problem with Allow, in words, with or without credentials', async () => {
    for (const [method, url, allow, token] of [
      ['DELETE', '/api/v1/users', 'GET, HEAD, POST', t.adminToken],
      ['POST', '/api/v1/secrets/some/name', 'GET, HEAD, PUT, DELETE', t.adminToken],
      ['PATCH', '/api/v1/openapi.json', 'GET, HEAD', null],
      ['GET', '/api/v1/session/setup', 'POST', null],
    ] as const) {
      const res = await t.request({ method, url, token });
      assertProblem(res, 405);
      assert.equal(res.headers.allow, allow, `${method} ${url}`);
      assert.equal(res.body.detail, `this resource does not take ${method}; it takes ${allow}`);
      assert.doesNotMatch(res.body.detail, /\/api\//);
    }
  });

  test('a body that is not JSON is a 400 problem naming the body', async () => {
    const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, raw: '{"name": "x",', headers: { 'content-type': 'application/json' } });
    assertProblem(res, 400);
    assert.equal(res.body.errors[0].field, '(body)');
  });

  test('an unsupported content type is a 415 problem; so is none', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, raw: 'name=x', headers: { 'content-type': type } });
      assertProblem(res, 415);
    }
    const none = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, raw: '{"name":"x","role":"viewer"}' });
    assertProblem(none, 415);
  });

  test('a body over SERVICE_BODY_LIMIT is a 413 problem, and nothing is created', async () => {
    const name = 'big-' + 'x'.repeat(10);
    const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, email: null, role: 'viewer', pad: 'y'.repeat(5000) } });
    assertProblem(res, 413);
    const found = await t.db.selectFrom('users').select('id').where('name', '=', name).executeTakeFirst();
    assert.equal(found, undefined);
  });

  test('field problems name each field: 400 with errors[]', async () => {
    const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: '', role: 'chief', email: 'not-an-email', extra: true } });
    assertProblem(res, 400);
    const byField = Object.fromEntries(res.body.errors.map((e: { field: string; message: string }) => [e.field, e.message]));
    assert.deepEqual(Object.keys(byField).sort(), ['email', 'extra', 'name', 'role']);
    assert.match(byField.role, /"viewer".*"operator".*"admin"/);
    assert.match(byField.email, /email/);
    assert.equal(byField.extra, 'is not a known field');
  });

  test('a NUL character in a body, query or path is a 400 naming the field, not a database error', async () => {
    const body = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: 'a\u0000b', role: 'viewer' } });
    assertProblem(body, 400);
    assert.equal(body.body.errors[0].field, 'name');
    const query = await t.request({ method: 'GET', url: '/api/v1/users?cursor=%00', token: t.adminToken });
    assertProblem(query, 400);
    assert.equal(query.body.errors[0].field, 'cursor');
    // The same NUL, or half a surrogate pair, inside a well-formed cursor (base64 of JSON) is refused by the cursor's decoder, naming cursor.
    for (const key of ['a\u0000b', 'a\ud800b']) {
      const inside = await t.request({ method: 'GET', url: `/api/v1/secrets?cursor=${Buffer.from(JSON.stringify([key])).toString('base64url')}`, token: t.adminToken });
      assertProblem(inside, 400);
      assert.deepEqual(inside.body.errors, [{ field: 'cursor', message: 'not a valid cursor' }], JSON.stringify(key));
    }
    // A name that may hold `/` (a trailing wildcard) is named as the contract names it, not `*`.
    const path = await t.request({ method: 'PUT', url: '/api/v1/secrets/%00x', token: t.adminToken, body: { value: 'v' } });
    assertProblem(path, 400);
    assert.deepEqual(path.body.errors, [{ field: 'name', message: 'must not contain a NUL character' }]);
    assert.match(path.body.detail, /^name holds a NUL character/);
  });

  test('half of a surrogate pair in a body (a text field or one stored as jsonb) is a 400 naming the field; nothing is stored', async () => {
    const name = `half-${Date.now()}`;
    // The escape alone is valid JSON syntax, but not Unicode: a text column would keep U+FFFD, jsonb refuses it naming no field.
    const text = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, headers: { 'content-type': 'application/json' }, raw: `{"name":"${name}-\\ud800","role":"viewer"}` });
    assertProblem(text, 400);
    assert.deepEqual(text.body.errors, [{ field: 'name', message: 'must be Unicode text: it holds half of a surrogate pair (an escape such as "\\ud800" alone)' }]);
    assert.match(text.body.detail, /^name holds half of a surrogate pair/);
    assert.equal(await t.db.selectFrom('users').select('id').where('name', 'like', `${name}%`).executeTakeFirst(), undefined, 'nothing was stored');
    const inJsonb = await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name, description: 'd', version: { system_prompt: 'p', context: [{ note: 'low \udc00 half' }] } } });
    assertProblem(inJsonb, 400);
    assert.deepEqual(inJsonb.body.errors.map((e: { field: string }) => e.field), ['version.context.0.note']);
    assert.equal(await t.db.selectFrom('agents').select('name').where('name', '=', name).executeTakeFirst(), undefined, 'no agent was stored');
    // A whole pair (an emoji written as two escapes) is Unicode and goes through.
    const whole = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, headers: { 'content-type': 'application/json' }, raw: `{"name":"${name}-\\ud83d\\ude00","role":"viewer"}` });
    assert.equal(whole.status, 201, whole.text);
    assert.equal(whole.body.name, `${name}-\u{1F600}`);
  });

  test('a JSON body naming __proto__ is a 400 saying so, not "not valid JSON"', async () => {
    for (const raw of ['{"name":"x","__proto__":{"admin":true}}', '{"name":"x","constructor":{"prototype":{"admin":true}}}']) {
      const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, raw, headers: { 'content-type': 'application/json' } });
      assertProblem(res, 400);
      assert.match(res.body.detail, /names a field __proto__ \(or constructor\.prototype\), which is not accepted/);
    }
  });

  test('a JSON body that is not UTF-8 is a 400 saying so, not text stored with replacement characters', async () => {
    const name = `utf8-${Date.now()}`;
    for (const bytes of [[0xff, 0xfe], [0xc3], [0xed, 0xa0, 0x80]]) {
      const raw = Buffer.concat([Buffer.from(`{"name":"${name}-`), Buffer.from(bytes), Buffer.from('","role":"viewer"}')]);
      const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, headers: { 'content-type': 'application/json' }, raw });
      assertProblem(res, 400);
      assert.match(res.body.detail, /not valid UTF-8/);
      assert.deepEqual(res.body.errors, [{ field: '(body)', message: 'is not valid UTF-8' }]);
    }
    const found = await t.db.selectFrom('users').select('id').where('name', 'like', `${name}%`).executeTakeFirst();
    assert.equal(found, undefined, 'nothing was stored');
    // Text outside ASCII, sent as UTF-8, still goes through (with or without a charset).
    for (const type of ['application/json', 'application/json; charset=utf-8']) {
      const ok = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, headers: { 'content-type': type }, raw: Buffer.from(JSON.stringify({ name: `${name}-é✓-${type.length}`, role: 'viewer' })) });
      assert.equal(ok.status, 201, ok.text);
      assert.equal(ok.body.name, `${name}-é✓-${type.length}`);
    }
    // The parser still refuses a prototype-poisoning key, as Fastify's own does.
    const proto = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, headers: { 'content-type': 'application/json' }, raw: Buffer.from('{"name":"x","role":"viewer","__proto__":{"admin":true}}') });
    assertProblem(proto, 400);
  });

  test('a problem with a path parameter or a query parameter says which part of the request it is in', async () => {
    const path = await t.request({ method: 'GET', url: '/api/v1/teams/Not_A_Name', token: t.adminToken });
    assertProblem(path, 400);
    assert.match(path.body.detail, /^the path is not valid: name must be /);
    const query = await t.request({ method: 'GET', url: '/api/v1/users?limit=many', token: t.adminToken });
    assertProblem(query, 400);
    assert.match(query.body.detail, /^the query string is not valid: limit must be a whole number/);
    // Sent twice, it says so rather than that the value has the wrong type; a text one too.
    for (const url of ['/api/v1/users?limit=1&limit=2', '/api/v1/users?cursor=a&cursor=b', '/api/v1/teams?q=a&q=b']) {
      const twice = await t.request({ method: 'GET', url, token: t.adminToken });
      assertProblem(twice, 400);
      const name = url.split('?')[1]!.split('=')[0]!;
      assert.deepEqual(twice.body.errors, [{ field: name, message: 'is given more than once: give it once' }], url);
    }
  });

  test('If-Match takes one ETag: * or a list is a 400 saying so, a stale or weak one a 412', async () => {
    const made = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: `ifmatch-${Date.now()}`, role: 'viewer' } });
    assert.equal(made.status, 201, made.text);
    const url = `/api/v1/users/${made.body.id}`;
    const etag = String((await t.request({ method: 'GET', url, token: t.adminToken })).headers.etag);
    const patch = (ifMatch: string) => t.request({ method: 'PATCH', url, token: t.adminToken, headers: { 'if-match': ifMatch }, body: { role: 'operator' } });
    for (const value of ['*', `"1", ${etag}`, 'garbage']) {
      const res = await patch(value);
      assertProblem(res, 400);
      assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), ['If-Match'], value);
      assert.match(res.body.detail, /If-Match must be one ETag/);
    }
    for (const value of ['"999999"', `W/${etag}`]) assertProblem(await patch(value), 412);
    assert.equal((await patch(etag)).status, 200);
  });

  test('a URL the router cannot decode is a 400 problem', async () => {
    for (const url of ['/api/v1/users/%zz', '/%E0%A4%A']) {
      const res = await t.request({ method: 'GET', url, token: t.adminToken });
      assertProblem(res, 400);
    }
  });

  test('a request that is not valid HTTP is answered as a 400 problem, not the framework\'s own JSON', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = net.connect(port, '127.0.0.1', () => socket.write('GET /api/v1/me HTTP/1.1\r\nHost: x\r\nthis is not a header\r\n\r\n'));
      let got = '';
      socket.on('data', (d) => (got += d.toString('utf8')));
      socket.on('close', () => resolve(got));
      socket.on('error', reject);
    });
    const [head, body] = raw.split('\r\n\r\n');
    assert.match(head!, /^HTTP\/1\.1 400 /);
    assert.match(head!, /content-type: application\/problem\+json/i);
    const problem = JSON.parse(body!);
    assert.equal(problem.status, 400);
    assert.match(problem.detail, /^the request is not valid HTTP/);
    assert.deepEqual(problem.errors, []);
  });

  test('the web console never answers for an /api path, and paths with escapes do not fail', async () => {
    assertProblem(await t.request({ method: 'GET', url: '/api/v1/x/y', token: t.adminToken }), 404);
    for (const url of ['/', '/%25zz', '/assets/%25', '/some/page']) {
      const res = await t.request({ method: 'GET', url });
      assert.equal(res.status, 200, url);
      assert.match(String(res.headers['content-type']), /text\/html/);
    }
  });

  test('request ids: a sane X-Request-Id is echoed, otherwise one is generated', async () => {
    const given = await t.request({ method: 'GET', url: '/api/v1/me', token: t.adminToken, headers: { 'x-request-id': 'abc-123.def' } });
    assert.equal(given.headers['x-request-id'], 'abc-123.def');
    const bad = await t.request({ method: 'GET', url: '/api/v1/me', token: t.adminToken, headers: { 'x-request-id': 'no spaces <script>' } });
    assert.match(String(bad.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    const none = await t.request({ method: 'GET', url: '/api/v1/nope' });
    assert.match(String(none.headers['x-request-id']), /^[0-9a-f-]{36}$/);
    // The id is in the log line of that request.
    assert.ok(t.logs.some((l) => JSON.parse(l).reqId === 'abc-123.def'));
  });

  test('/healthz and /readyz answer without credentials; /metrics is Prometheus text', async () => {
    const health = await t.request({ method: 'GET', url: '/healthz' });
    assert.equal(health.status, 200);
    assert.equal(health.body.status, 'ok');
    const ready = await t.request({ method: 'GET', url: '/readyz' });
    assert.equal(ready.status, 200);
    await t.request({ method: 'GET', url: '/api/v1/me', token: t.adminToken });
    const metrics = await t.request({ method: 'GET', url: '/metrics' });
    assert.equal(metrics.status, 200);
    assert.match(String(metrics.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    assert.match(metrics.text, /# TYPE console_http_requests_total counter/);
    assert.match(metrics.text, /console_http_requests_total\{method="GET",route="\/api\/v1\/me",status="200"\} \d+/);
    assert.match(metrics.text, /console_http_request_duration_seconds_bucket\{method="GET",route="\/api\/v1\/me",le="\+Inf"\} \d+/);
  });

  test('logs redact credentials: no token, cookie, CSRF token or password ever appears', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: 'logcheck', role: 'operator' } });
    const password = 'a password nobody may log';
    const setup = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password } });
    assert.equal(setup.status, 201);
    const cookie = String(setup.headers['set-cookie']).split(';')[0];
    const csrf = setup.body.csrf_token;
    const minted = await t.request({ method: 'POST', url: '/api/v1/session/tokens', headers: { cookie, 'x-console-csrf': csrf }, body: { name: 'logged?' } });
    assert.equal(minted.status, 201);
    await t.request({ method: 'GET', url: `/api/v1/me?token=${minted.body.token}`, token: minted.body.token });
    // RFC 6750's name, and other credential-like names, plain or percent-encoded: refused, and censored in the log.
    const aside = ['chk_aside-access', 'chk_aside-refresh', 'aside-client-secret', 'aside-sig', 'aside-encoded'];
    await t.request({ method: 'GET', url: `/api/v1/me?access_token=${aside[0]}&view=plain&refresh_token=${aside[1]}&client_secret=${aside[2]}&X-Amz-Signature=${aside[3]}&access%5Ftoken=${aside[4]}` });
    await t.request({ method: 'GET', url: '/api/v1/me', token: 'chk_definitely-not-a-token' });
    await t.request({ method: 'POST', url: '/api/v1/session', body: { name: 'logcheck', password: 'wrong ' + password } });
    const secrets = [t.adminToken, created.body.setup_token, cookie.split('=')[1], csrf, minted.body.token, password, 'chk_definitely-not-a-token', ...aside];
    const all = t.logs.join('\n');
    assert.ok(t.logs.length > 5);
    for (const s of secrets) assert.ok(!all.includes(s), `a log line holds ${s.slice(0, 6)}...`);
    assert.match(all, /token=\[redacted\]/);
    // Only credentials are censored: the rest of the URL stays readable.
    assert.match(all, /\?access_token=\[redacted\]&view=plain&refresh_token=\[redacted\]/);
  });

  test('the logger censors credential headers and database query parameters wherever they are logged', () => {
    const { logger, lines } = captureLogger();
    const err = Object.assign(new Error('failed'), { params: ['chk_param-secret'], code: '42703' });
    logger.info({ req: { headers: { authorization: 'Bearer chk_h1', cookie: 'crewhouse_session=chs_h2', 'x-console-csrf': 'csrf-h3' } } }, 'request');
    logger.error({ err }, 'boom');
    const all = lines.join('\n');
    for (const s of ['chk_h1', 'chs_h2', 'csrf-h3', 'chk_param-secret']) assert.ok(!all.includes(s), s);
    assert.match(all, /\[redacted\]/);
  });
});

describe('a 5xx never carries internals; routes deny by default', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('an unexpected error answers a bare 500 problem and is logged with its request id', async () => {
    const db = t.db;
    const { logger, lines } = captureLogger();
    const app = createServer({ logger, metrics: new Registry(), component: 'console' });
    useProblems(app);
    useAuth(app, db, { prefix: '/api/v1', userOf: authUser });
    app.get('/api/v1/explode', { config: { auth: { public: true } } }, async () => {
      throw new Error('select * from secrets where password = hunter2');
    });
    try {
      await app.ready();
      const res = await app.inject({ method: 'GET', url: '/api/v1/explode', headers: { 'x-request-id': 'boom-1' } });
      assert.equal(res.statusCode, 500);
      assert.match(String(res.headers['content-type']), PROBLEM);
      assert.ok(!res.body.includes('hunter2'));
      assert.ok(!res.body.includes('select'));
      assert.ok(!/at .*\.ts:\d+/.test(res.body), 'no stack trace');
      assert.equal(res.json().status, 500);
      const logged = lines.map((l) => JSON.parse(l)).find((l) => l.msg === 'unhandled error');
      assert.equal(logged.reqId, 'boom-1');
    } finally {
      await app.close();
    }
  });

  test('a route under /api/v1 without an auth rule stops the server from starting (deny by default)', async () => {
    const app = createServer({ logger: captureLogger().logger, component: 'console' });
    useAuth(app, t.db, { prefix: '/api/v1', userOf: authUser });
    try {
      assert.throws(() => app.get('/api/v1/open', async () => ({ ok: true })), /does not declare config\.auth/);
    } finally {
      await app.close();
    }
  });
});

describe('query strings refused by default (refuseUnknownQuery)', () => {
  test('a route of the scope that declares none refuses any parameter; one that declares a loose query string stops the server from starting', async () => {
    const app = createServer({ logger: captureLogger().logger, component: 'test' });
    useProblems(app);
    await app.register(async (api: App) => {
      refuseUnknownQuery(api);
      api.delete('/things/:id', async () => ({ ok: true }));
      api.get('/things', { schema: { querystring: Type.Object({ q: Type.Optional(Type.String()) }, { additionalProperties: false }) } }, async (req) => req.query);
      assert.throws(() => api.get('/loose', { schema: { querystring: Type.Object({ q: Type.String() }) } }, async () => ({})), /GET \/loose: its query string must refuse parameters it does not name/);
    });
    // Outside the scope nothing changes: a route there still takes what it is sent.
    app.post('/outside', async () => ({ ok: true }));
    try {
      const refused = await app.inject({ method: 'DELETE', url: '/things/1?force=true' });
      assert.equal(refused.statusCode, 400, refused.body);
      assert.deepEqual(refused.json().errors, [{ field: 'force', message: 'is not a known field' }]);
      assert.equal((await app.inject({ method: 'DELETE', url: '/things/1' })).statusCode, 200);
      assert.deepEqual((await app.inject({ method: 'GET', url: '/things?q=a' })).json(), { q: 'a' });
      assert.equal((await app.inject({ method: 'GET', url: '/things?q=a&r=b' })).statusCode, 400);
      assert.equal((await app.inject({ method: 'POST', url: '/outside?anything=1' })).statusCode, 200);
    } finally {
      await app.close();
    }
  });
});

describe('closing a server', () => {
  test('a connection that never sent a request does not hold the close (it would for the 72 s keep-alive timeout)', async () => {
    const net = await import('node:net');
    const app = createServer({ logger: captureLogger().logger, component: 'test' });
    let started!: () => void;
    const handlerStarted = new Promise<void>((r) => (started = r));
    let release!: () => void;
    const released = new Promise<void>((r) => (release = r));
    app.get('/slow', async () => {
      started();
      await released;
      return { done: true };
    });
    await app.listen({ port: 0, host: '127.0.0.1' });
    const port = (app.server.address() as { port: number }).port;
    const silent = net.connect(port, '127.0.0.1');
    await new Promise((resolve) => silent.once('connect', resolve));
    const silentClosed = new Promise((resolve) => silent.once('close', resolve));
    // A request in flight when the close begins still gets its answer.
    const inFlight = fetch(`http://127.0.0.1:${port}/slow`).then((r) => r.json());
    // The close begins only once the request is being handled, and the handler ends after it began.
    await handlerStarted;
    const closing = app.close();
    release();
    let timer: NodeJS.Timeout | undefined;
    const stuck = new Promise((resolve) => (timer = setTimeout(() => resolve('stuck'), 20_000)));
    const outcome = await Promise.race([Promise.all([closing, silentClosed, inFlight]).then(([, , body]) => body), stuck]);
    clearTimeout(timer);
    assert.deepEqual(outcome, { done: true });
  });
});

describe('deeply nested JSON', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('JSON nested 10,000 levels deep (arrays or objects) is a 400 problem, not a stack overflow', async () => {
    const arrays = '['.repeat(10_000) + ']'.repeat(10_000);
    const objects = '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000);
    for (const raw of [arrays, objects, `{"name":"deep","role":"viewer","x":${arrays}}`]) {
      const res = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, raw, headers: { 'content-type': 'application/json' } });
      assertProblem(res, 400);
      assert.match(res.body.detail, /nests deeper than 100 levels/);
    }
    // Nesting up to the bound is not refused for its depth.
    const shallow = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, raw: '['.repeat(100) + ']'.repeat(100), headers: { 'content-type': 'application/json' } });
    assertProblem(shallow, 400);
    assert.doesNotMatch(shallow.body.detail, /nests deeper/);
  });
});

describe('request loggers', () => {
  test("a request's lines carry its id, through children and at the configured level only, and redaction still holds", async () => {
    const { logger, lines } = captureLogger('warn');
    const app = createServer({ logger, metrics: new Registry(), component: 'console' });
    app.get('/quiet', async (req) => {
      req.log.info('not written at warn');
      return { ok: true };
    });
    app.get('/loud', async (req) => {
      assert.equal(req.log.isLevelEnabled('info'), false);
      assert.equal(req.log.level, 'warn');
      req.log.warn({ headers: { authorization: 'Bearer chk_never-logged' } }, 'a warning');
      req.log.child({ part: 'inner' }).error('from a child');
      assert.equal(req.log.bindings().reqId, 'loud-1');
      return { ok: true };
    });
    try {
      await app.ready();
      assert.equal((await app.inject({ method: 'GET', url: '/quiet', headers: { 'x-request-id': 'quiet-1' } })).statusCode, 200);
      assert.equal(lines.length, 0);
      assert.equal((await app.inject({ method: 'GET', url: '/loud', headers: { 'x-request-id': 'loud-1' } })).statusCode, 200);
      const logged = lines.map((l) => JSON.parse(l));
      assert.deepEqual(logged.map((l) => [l.msg, l.reqId, l.component, l.part]), [
        ['a warning', 'loud-1', 'console', undefined],
        ['from a child', 'loud-1', 'console', 'inner'],
      ]);
      assert.ok(!lines.join('\n').includes('chk_never-logged'));
    } finally {
      await app.close();
    }
  });
});

import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { after, before, describe, test } from 'node:test';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse as parseYaml } from 'yaml';
import { makeAgent, makeTemplate } from '../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../test/harness.ts';
import { consoleShapes } from '../console/shapes.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

/** A body each If-Match write validates, where an empty one would be refused first (400). */
const EXAMPLE_BODIES: Record<string, unknown> = {
  'patch /users/{id}': { role: 'viewer' },
  'patch /agents/{name}': { description: 'd' },
  'patch /teams/{name}': { rework_rounds: 2 },
  'patch /team-templates/{name}': { description: 'd' },
  'put /environments/{name}': { provider: 'local' },
  'put /teams/{name}/roles/{role}/egress': { mode: 'allow_all' },
  'put /integrations/{kind}': { enabled: false, settings: {} },
};

/** An OpenAPI path for a Fastify route URL: `/users/:id` -> `/users/{id}`, a trailing `*` -> its documented name. */
const openApiPath = (url: string, wildcard = 'path') => url.slice('/api/v1'.length).replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, `{${wildcard}}`) || '/';

/** A JSON pointer's target in the document: `#/components/schemas/Agent`. */
const at = (doc: any, ref: string) => ref.slice(2).split('/').reduce((x, k) => x?.[k.replace(/~1/g, '/').replace(/~0/g, '~')], doc);
/** A schema or response with its `$ref` followed, when it has one. */
const deref = (doc: any, x: any): any => (x && typeof x.$ref === 'string' ? deref(doc, at(doc, x.$ref)) : x);
const problemSchemaRef = (doc: any, response: any) => deref(doc, response)?.content?.['application/problem+json']?.schema?.$ref;

describe('OpenAPI', () => {
  let t: TestApp;
  let doc: any;
  // Every route the console registers, seen through Fastify's own announcement of a new
  // instance, so the test compares the document with what is really served.
  // The query schema is read once every hook has run: a scope's own hooks (refuseUnknownQuery) run after this one.
  const routes: Array<{ method: string; url: string; hidden: boolean; wildcard?: string; readonly query?: any; sessionOnly: boolean }> = [];
  const onInit = ({ fastify }: any) =>
    fastify.addHook('onRoute', (r: any) => {
      for (const m of [r.method].flat()) routes.push({ method: String(m).toLowerCase(), url: r.url, hidden: Boolean(r.schema?.hide), wildcard: r.config?.openapiWildcard, get query() { return r.schema?.querystring; }, sessionOnly: Boolean(r.config?.auth?.sessionOnly) });
    });

  before(async () => {
    diagnostics.subscribe('fastify.initialization', onInit);
    try {
      t = await testApp();
    } finally {
      diagnostics.unsubscribe('fastify.initialization', onInit);
    }
    const res = await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken });
    assert.equal(res.status, 200);
    doc = res.body;
  });
  after(() => t.close());

  test('served as JSON and YAML to any logged-in role; 401 without credentials', async () => {
    for (const url of ['/api/v1/openapi.json', '/api/v1/openapi.yaml']) {
      const none = await t.request({ method: 'GET', url });
      assert.equal(none.status, 401);
      assert.match(String(none.headers['www-authenticate']), /Bearer/);
    }
    const viewer = await t.user('viewer');
    const json = await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: viewer.token });
    assert.equal(json.status, 200);
    assert.match(String(json.headers['content-type']), /^application\/json/);
    const yaml = await t.request({ method: 'GET', url: '/api/v1/openapi.yaml', token: viewer.token });
    assert.equal(yaml.status, 200);
    assert.match(String(yaml.headers['content-type']), /^application\/yaml/);
    assert.deepEqual(parseYaml(yaml.text), json.body);
  });

  test('OpenAPI 3.1 with the API base as the server and both ways to authenticate', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(typeof doc.info.title, 'string');
    assert.equal(typeof doc.info.version, 'string');
    assert.deepEqual(doc.servers, [{ url: 'http://crewhouse.test/api/v1' }]);
    assert.equal(doc.components.securitySchemes.bearerAuth.scheme, 'bearer');
    assert.equal(doc.components.securitySchemes.sessionCookie.in, 'cookie');
    assert.ok(doc.components.schemas.Problem);
  });

  test('every /api/v1 route is listed, and nothing outside /api/v1', () => {
    const served = routes.filter((r) => r.url.startsWith('/api/v1/') && r.method !== 'head');
    assert.ok(served.length >= 15, `saw ${served.length} routes`);
    for (const r of served) {
      assert.equal(r.hidden, false, `${r.method} ${r.url} is hidden`);
      assert.ok(doc.paths[openApiPath(r.url, r.wildcard)]?.[r.method], `${r.method.toUpperCase()} ${r.url} is missing from the document`);
    }
    const listed = Object.entries<any>(doc.paths).flatMap(([p, ops]) => Object.keys(ops).filter((m) => METHODS.includes(m)).map((m) => `${m} ${p}`));
    assert.equal(listed.length, served.length);
    for (const p of Object.keys(doc.paths)) {
      assert.ok(p.startsWith('/'), p);
      assert.ok(!p.startsWith('/api/'), `${p} repeats the server prefix`);
    }
    for (const outside of ['/healthz', '/readyz', '/metrics', '/', '/{*}']) assert.equal(doc.paths[outside], undefined, outside);
    assert.ok(routes.some((r) => r.url === '/healthz'), 'the routes outside /api/v1 exist, unlisted');
  });

  test('every route of every method refuses a query parameter it does not take: a 400 naming it, never ignored', async () => {
    const served = routes.filter((r) => r.url.startsWith('/api/v1/') && r.method !== 'head');
    assert.ok(served.filter((r) => r.method === 'get').length >= 40, 'the GET routes');
    for (const m of ['post', 'put', 'patch', 'delete']) assert.ok(served.some((r) => r.method === m), `a ${m.toUpperCase()} route`);
    // Sent as an admin with a token (no CSRF token needed) and a well-formed If-Match.
    for (const r of served) {
      const where = `${r.method.toUpperCase()} ${r.url}`;
      // Declared, with no other parameter allowed (NoQuery when it takes none, as ListQuery on lists).
      assert.equal(r.query?.additionalProperties, false, `${where}: its query string refuses unknown parameters`);
      if (r.sessionOnly) continue;
      // Answered so: each path parameter filled with the contract's example (or a plain value), which the route's own path schema takes.
      const path = openApiPath(r.url, r.wildcard);
      const op = doc.paths[path][r.method];
      const params = op.parameters ?? [];
      // No query parameter is documented where none is taken: the document shows what is validated.
      if (Object.keys(r.query.properties ?? {}).length === 0) assert.ok(!params.some((x: any) => x.in === 'query'), `${where}: documents no query parameter`);
      const url = `/api/v1${path.replace(/\{([^}]+)\}/g, (_m: string, name: string) => encodeURIComponent(String(params.find((x: any) => x.in === 'path' && x.name === name)?.example ?? 'x')))}?not_a_parameter=1`;
      // A body the route takes (its example), since the body is validated before the query string.
      const json = op.requestBody?.content?.['application/json'];
      const body = json ? (json.example ?? deref(doc, json.schema)?.examples?.[0] ?? {}) : undefined;
      const res = await t.request({ method: r.method.toUpperCase(), url, token: t.adminToken, headers: { 'if-match': '"1"' }, ...(body === undefined ? {} : { body }) });
      assert.equal(res.status, 400, `${where}: ${res.text.slice(0, 300)}`);
      const named = res.body.errors?.find((e: any) => e.field === 'not_a_parameter');
      assert.deepEqual(named, { field: 'not_a_parameter', message: 'is not a known field' }, `${where}: ${res.text.slice(0, 300)}`);
    }
  });

  test('every operation has a verbNoun operationId, tags, parameters, schemas, security and the problem answer', () => {
    const ids = new Set<string>();
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(ops)) {
        if (!METHODS.includes(method)) continue;
        const where = `${method.toUpperCase()} ${path}`;
        assert.match(op.operationId ?? '', /^[a-z]+[A-Z][A-Za-z0-9]*$/, `${where}: operationId`);
        assert.ok(!ids.has(op.operationId), `${where}: operationId ${op.operationId} repeats`);
        ids.add(op.operationId);
        assert.ok(Array.isArray(op.tags) && op.tags.length > 0, `${where}: tags`);
        assert.ok(Array.isArray(op.security), `${where}: security`);
        // Path parameters are declared, each one.
        const params = op.parameters ?? [];
        for (const [, name] of path.matchAll(/\{([^}]+)\}/g)) {
          const p = params.find((x: any) => x.in === 'path' && x.name === name);
          assert.ok(p && p.required === true && p.schema, `${where}: path parameter ${name}`);
        }
        // Answers: a success with a schema (or 204/304 without), and the problem document.
        const codes = Object.keys(op.responses);
        const success = codes.filter((c) => /^2\d\d$/.test(c));
        assert.ok(success.length > 0, `${where}: a success answer`);
        for (const c of success) {
          if (c === '204') continue;
          const content = op.responses[c].content;
          assert.ok(content && Object.values<any>(content).every((m) => m.schema), `${where}: ${c} has a schema`);
        }
        assert.equal(op.responses.default?.$ref, '#/components/responses/Problem', `${where}: problem answer`);
        // Every problem answer is the Problem document; every route can answer 400 and 401.
        for (const c of codes.filter((x) => /^[45]\d\d$/.test(x))) assert.equal(problemSchemaRef(doc, op.responses[c]), '#/components/schemas/Problem', `${where}: ${c} is a problem`);
        for (const c of ['400', '401']) assert.ok(op.responses[c], `${where}: declares ${c}`);
        assert.ok(typeof op.summary === 'string' && op.summary.length > 0 && op.summary.length <= 60, `${where}: a short summary`);
        if (op.requestBody) {
          assert.ok(Object.values<any>(op.requestBody.content).every((m) => m.schema), `${where}: request body schema`);
        }
        if (['put', 'post', 'patch'].includes(method) && op.requestBody?.content?.['application/json']) {
          const schema = deref(doc, op.requestBody.content['application/json'].schema);
          if (schema.type === 'object') assert.equal(schema.additionalProperties, false, `${where}: body refuses unknown fields`);
        }
        // Lists take limit and cursor.
        const ok = deref(doc, op.responses['200']?.content?.['application/json']?.schema);
        if (method === 'get' && ok?.properties?.items && ok?.properties?.next_cursor) {
          for (const q of ['limit', 'cursor']) assert.ok(params.some((x: any) => x.in === 'query' && x.name === q), `${where}: list takes ${q}`);
        }
      }
    }
  });

  test('security follows each route: public routes none, session-only routes the cookie, the rest bearer or cookie', () => {
    assert.deepEqual(doc.paths['/session'].post.security, []);
    assert.deepEqual(doc.paths['/session/tokens'].post.security, [{ sessionCookie: [] }]);
    assert.deepEqual(doc.paths['/users'].get.security, [{ bearerAuth: [] }, { sessionCookie: [] }]);
  });

  test('the document holds no data', async () => {
    const name = uniq('secret-person');
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, email: `${name}@example.com`, role: 'viewer' } });
    const text = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).text;
    for (const s of [name, created.body.setup_token, t.adminToken]) assert.ok(!text.includes(s));
    assert.doesNotMatch(text, /ch[ksu]_[A-Za-z0-9_-]{20,}/);
  });

  test("Redocly's recommended rules find no error and no warning in the served document", async () => {
    // The recommended set as it is, no rule turned off: the contract must pass a standard linter.
    const config = await createConfig({ extends: ['recommended'] });
    const found = await lintFromString({ source: JSON.stringify(doc), absoluteRef: 'openapi.json', config });
    const lines = found.map((p) => `${p.severity} ${p.ruleId}: ${p.message} at ${p.location[0]?.pointer ?? '?'}`);
    assert.deepEqual(lines, []);
  });

  test('a body is documented as required only where leaving it out is refused', async () => {
    const requiredOf = (method: string, path: string) => doc.paths[path][method].requestBody.required;
    // Left out, these answer as an empty object does (the import's dry run, the upgrade to the current version).
    assert.equal(requiredOf('post', '/import'), false);
    assert.equal(requiredOf('post', '/teams/{name}/upgrade'), false);
    assert.equal(requiredOf('post', '/teams'), true);
    const noBody = await t.request({ method: 'POST', url: '/api/v1/teams/nope/upgrade', token: t.adminToken, headers: { 'if-match': '"1"' } });
    assert.equal(noBody.status, 404, noBody.text);
    // Left out with a JSON Content-Type (a client that sends the header on every request): still left out, not "the body is empty".
    const emptyJson = await t.request({ method: 'POST', url: '/api/v1/teams/nope/upgrade', token: t.adminToken, headers: { 'if-match': '"1"', 'content-type': 'application/json' } });
    assert.equal(emptyJson.status, 404, emptyJson.text);
    const empty = await t.request({ method: 'POST', url: '/api/v1/teams', token: t.adminToken, headers: { 'content-type': 'application/json' } });
    assert.equal(empty.status, 400, empty.text);
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, o] of Object.entries<any>(ops)) assert.ok(!Object.keys(o).some((k) => k.startsWith('x-optional')), `${method} ${path}: no internal marker left`);
    }
  });

  test('problem answers follow each route: role, path parameters, body, If-Match and the route\'s own', () => {
    const op = (method: string, path: string) => doc.paths[path][method];
    const codes = (method: string, path: string) => Object.keys(op(method, path).responses).filter((c) => /^[45]/.test(c)).sort();
    // A viewer read without parameters: only the request and the credentials can be wrong.
    assert.deepEqual(codes('get', '/agents'), ['400', '401']);
    assert.deepEqual(codes('get', '/agents/{name}'), ['400', '401', '404']);
    // An admin create with a JSON body and its own 409.
    assert.deepEqual(codes('post', '/agents'), ['400', '401', '403', '409', '413', '415', '422']);
    assert.match(op('post', '/agents').responses['409'].description, /name/);
    // A write of an existing resource: If-Match required, 412 and 428.
    assert.deepEqual(codes('patch', '/team-templates/{name}'), ['400', '401', '403', '404', '412', '413', '415', '428']);
    const ifMatch = (method: string, path: string) => op(method, path).parameters.find((p: any) => p.in === 'header' && p.name === 'if-match');
    assert.equal(ifMatch('patch', '/agents/{name}').required, true);
    assert.equal(ifMatch('delete', '/agents/{name}').required, true);
    // Create-or-replace: If-Match optional (it creates without), 428 only when replacing.
    assert.equal(ifMatch('put', '/agents/{name}/documents/{doc}').required, false);
    assert.match(op('put', '/agents/{name}/documents/{doc}').responses['428'].description, /replacing/);
    // A route's own answers, and one it drops: a log-in refuses with 401 or 429, never 422.
    assert.deepEqual(codes('post', '/session'), ['400', '401', '413', '415', '429']);
    assert.ok(op('post', '/teams').responses['503'] && op('post', '/teams').responses['502']);
    // A link is checked with the code host, the tracker or the chat server: one that cannot be asked is a bad gateway.
    assert.deepEqual(codes('put', '/teams/{name}/links'), ['400', '401', '403', '404', '409', '413', '415', '422', '502', '503']);
    assert.match(op('put', '/teams/{name}/links').responses['502'].description, /could not be reached.*nothing was linked/);
    // One that refuses the integration's own credentials is not the caller's to mend: 503, on both routes that check.
    assert.match(op('put', '/teams/{name}/links').responses['503'].description, /refused the integration's credentials.*nothing was linked; an admin mends the integration/);
    assert.match(op('post', '/teams').responses['503'].description, /refused the integration's credentials/);
    // The session-only routes answer 403 to a token, even for reads.
    assert.ok(op('get', '/session/tokens').responses['403']);
    // Every 412 comes with an If-Match parameter, and a required one with 428.
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, o] of Object.entries<any>(ops)) {
        const header = o.parameters?.find((p: any) => p.in === 'header' && p.name === 'if-match');
        assert.equal(Boolean(o.responses['412']), Boolean(header), `${method} ${path}: 412 with If-Match`);
        if (header?.required) assert.ok(o.responses['428'], `${method} ${path}: 428`);
      }
    }
  });

  test('the declared problem answers are real: 401, 403, 404, 409, 412, 413, 415, 422, 428', async () => {
    const viewer = await t.user('viewer');
    const agent = await makeAgent(t);
    const url = `/api/v1/agents/${agent.name}`;
    const expect = async (status: number, path: string, method: string, res: { status: number; headers: Record<string, unknown>; text: string }) => {
      assert.equal(res.status, status, `${method.toUpperCase()} ${path}: ${res.text.slice(0, 300)}`);
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
      assert.ok(doc.paths[path][method].responses[String(status)], `${method.toUpperCase()} ${path} declares ${status}`);
    };
    // Even a public route answers 401 to a malformed Authorization header, with the scheme to use.
    const unauthorized = await t.request({ method: 'POST', url: '/api/v1/session', body: { name: 'x', password: 'y' }, headers: { authorization: 'Basic eDp5' } });
    await expect(401, '/session', 'post', unauthorized);
    assert.match(String(unauthorized.headers['www-authenticate']), /^Bearer/);
    assert.ok(deref(doc, doc.components.responses.Unauthorized).headers['www-authenticate']);
    await expect(403, '/agents', 'post', await t.request({ method: 'POST', url: '/api/v1/agents', token: viewer.token, body: { name: uniq('a'), version: { system_prompt: 'x' } } }));
    await expect(404, '/agents/{name}', 'get', await t.request({ method: 'GET', url: '/api/v1/agents/no-such-agent', token: t.adminToken }));
    await expect(409, '/agents', 'post', await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name: agent.name, version: { system_prompt: 'x' } } }));
    await expect(428, '/agents/{name}', 'patch', await t.request({ method: 'PATCH', url, token: t.adminToken, body: { description: 'd' } }));
    await expect(412, '/agents/{name}', 'patch', await t.request({ method: 'PATCH', url, token: t.adminToken, body: { description: 'd' }, headers: { 'if-match': '"999999"' } }));
    await expect(415, '/agents', 'post', await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, raw: 'name=x', headers: { 'content-type': 'text/plain' } }));
    await expect(413, '/agents', 'post', await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, raw: JSON.stringify({ name: 'x'.repeat(t.config.bodyLimit) }), headers: { 'content-type': 'application/json' } }));
    await expect(422, '/agents', 'post', await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name: uniq('a'), version: { system_prompt: 'x', tools: ['no-such-tool'] } } }));
    // Replacing a document without If-Match is the 428 the create-or-replace route declares.
    const doc1 = `/api/v1/agents/${agent.name}/documents/notes.md`;
    assert.equal((await t.request({ method: 'PUT', url: doc1, token: t.adminToken, body: { media_type: 'text/markdown', content: 'one' } })).status, 201);
    await expect(428, '/agents/{name}/documents/{doc}', 'put', await t.request({ method: 'PUT', url: doc1, token: t.adminToken, body: { media_type: 'text/markdown', content: 'two' } }));
  });

  test('every write that requires If-Match answers 404 for a resource that is not there, before asking for If-Match (428)', async () => {
    let checked = 0;
    const wrong: string[] = [];
    for (const [path, ops] of Object.entries<any>(doc.paths)) {
      for (const [method, o] of Object.entries<any>(ops)) {
        if (!o.parameters?.some((p: any) => p.in === 'header' && p.name === 'if-match' && p.required)) continue;
        const url = '/api/v1' + path.replace(/\{([^}]+)\}/g, (_m: string, name: string) => (name === 'id' ? '999999999' : `no-such-${name}`));
        const res = await t.request({ method: method.toUpperCase(), url, token: t.adminToken, ...(o.requestBody ? { body: EXAMPLE_BODIES[`${method} ${path}`] ?? {} } : {}) });
        if (res.status !== 404) wrong.push(`${method.toUpperCase()} ${path}: ${res.status} ${res.text.slice(0, 300)}`);
        checked++;
      }
    }
    assert.deepEqual(wrong, []);
    assert.ok(checked >= 20, `${checked} routes checked`);
  });

  test('ETag and Location are declared where they are sent, and not where they are not', async () => {
    const headers = (method: string, path: string, code: string) => Object.keys(deref(doc, doc.paths[path][method].responses[code]).headers ?? {}).sort();
    const name = uniq('agent');
    const created = await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name, version: { system_prompt: 'x' } } });
    assert.equal(created.status, 201);
    assert.deepEqual(headers('post', '/agents', '201'), ['etag', 'location']);
    assert.ok(created.headers.etag && created.headers.location);
    const got = await t.request({ method: 'GET', url: `/api/v1/agents/${name}`, token: t.adminToken });
    assert.deepEqual(headers('get', '/agents/{name}', '200'), ['etag']);
    assert.match(String(got.headers.etag), /^"\d+\.[0-9a-f]{16}"$/);
    // A version is immutable and answers without an ETag; the contract says none.
    const version = await t.request({ method: 'GET', url: `/api/v1/agents/${name}/versions/1`, token: t.adminToken });
    assert.equal(version.status, 200);
    assert.equal(version.headers.etag, undefined);
    assert.deepEqual(headers('get', '/agents/{name}/versions/{version}', '200'), []);
    // Lists carry no ETag.
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/agents', token: t.adminToken })).headers.etag, undefined);
    assert.deepEqual(headers('get', '/agents', '200'), []);
    // Across resources: a GET sends an ETag exactly where the contract says it does.
    const template = await makeTemplate(t);
    // A PUT that creates answers 201 with its own path as Location; a replace answers 200 without one.
    const doc1 = await t.request({ method: 'PUT', url: `/api/v1/agents/${name}/documents/a.md`, token: t.adminToken, body: { media_type: 'text/markdown', content: 'a' } });
    assert.equal(doc1.status, 201, doc1.text);
    assert.equal(doc1.headers.location, `/api/v1/agents/${name}/documents/a.md`);
    assert.deepEqual(headers('put', '/agents/{name}/documents/{doc}', '201'), ['etag', 'location']);
    const doc2 = await t.request({ method: 'PUT', url: `/api/v1/agents/${name}/documents/a.md?`, token: t.adminToken, body: { media_type: 'text/markdown', content: 'b' }, headers: { 'if-match': String(doc1.headers.etag) } });
    assert.equal(doc2.status, 200, doc2.text);
    assert.equal(doc2.headers.location, undefined);
    // Every 201 of the contract declares its Location.
    const without: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) if (op.responses?.['201'] && !headers(method, path, '201').includes('location')) without.push(`${method} ${path}`);
    }
    assert.deepEqual(without, []);
    const reads: Array<[string, string]> = [
      ['/team-templates/{name}', `/team-templates/${template.name}`],
      ['/team-templates/{name}/versions/{version}', `/team-templates/${template.name}/versions/1`],
      ['/environments/{name}', `/environments/${template.env}`],
      ['/agents/{name}/documents/{doc}', `/agents/${name}/documents/a.md`],
      ['/destinations/{name}', '/destinations/llm'],
      ['/me', '/me'],
    ];
    for (const [path, url] of reads) {
      const res = await t.request({ method: 'GET', url: `/api/v1${url}`, token: t.adminToken });
      assert.equal(res.status, 200, `${url}: ${res.text.slice(0, 200)}`);
      assert.equal(res.headers.etag !== undefined, headers('get', path, '200').includes('etag'), `GET ${path}: ETag sent and declared alike`);
    }
  });

  test('the limit the contract states is the one every list takes', () => {
    assert.match(doc.info.description, /limit is 1 to 200 \(default 50\), except a run's posts \(1 to 500, default 200/);
    const odd: string[] = [];
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      const limit = item.get?.parameters?.find((p: any) => p.in === 'query' && p.name === 'limit')?.schema;
      if (!limit) continue;
      const [max, dflt] = path === '/runs/{id}/posts' ? [500, 200] : [200, 50];
      if (limit.minimum !== 1 || limit.maximum !== max || limit.default !== dflt) odd.push(`${path}: ${JSON.stringify(limit)}`);
    }
    assert.deepEqual(odd, []);
  });

  test('shared shapes are named components, referred to and never copied inline', () => {
    const components = doc.components.schemas;
    for (const name of ['Agent', 'AgentSummary', 'AgentSummaryPage', 'AgentVersion', 'Document', 'Team', 'TeamTemplate', 'User', 'Problem']) assert.ok(components[name], name);
    assert.equal(doc.paths['/agents/{name}'].get.responses['200'].content['application/json'].schema.$ref, '#/components/schemas/Agent');
    const canonical = (v: unknown): string =>
      JSON.stringify(v, (_k, x) => (x && typeof x === 'object' && !Array.isArray(x) ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b))) : x));
    const named = new Map(Object.entries<any>(components).map(([n, c]) => [canonical(c), n]));
    const inline = new Map<string, number>();
    const walk = (x: any, where: string) => {
      if (!x || typeof x !== 'object') return;
      if (x.type === 'object' && x.properties) {
        assert.equal(named.get(canonical(x)), undefined, `${where} copies ${named.get(canonical(x))} inline`);
        if (Object.keys(x.properties).length >= 5) inline.set(canonical(x), (inline.get(canonical(x)) ?? 0) + 1);
      }
      for (const [k, v] of Object.entries(x)) walk(v, `${where}/${k}`);
    };
    walk(doc.paths, '#/paths');
    for (const [shape, n] of inline) assert.equal(n, 1, `an object of five or more fields is copied ${n} times: ${shape.slice(0, 200)}`);
    // Each resource module's shapes are named by their exports.
    assert.equal(consoleShapes.size > 40, true);
    for (const name of ['Agent', 'Document', 'Team']) assert.ok([...consoleShapes.values()].includes(name), name);
  });

  test('real answers match the documented schemas, times included (format date-time)', async () => {
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addFormat('binary', true);
    ajv.addSchema({ ...doc, $id: 'https://crewhouse.test/openapi.json' });
    const check = (method: string, path: string, code: number, body: unknown) => {
      const pointer = ['paths', path, method, 'responses', String(code), 'content', 'application/json', 'schema'].map((k) => k.replace(/~/g, '~0').replace(/\//g, '~1')).join('/');
      const validate = ajv.compile({ $ref: `https://crewhouse.test/openapi.json#/${pointer}` });
      assert.ok(validate(body), `${method.toUpperCase()} ${path} ${code}: ${JSON.stringify(validate.errors)}`);
    };
    const agent = await makeAgent(t);
    check('get', '/agents/{name}', 200, (await t.request({ method: 'GET', url: `/api/v1/agents/${agent.name}`, token: t.adminToken })).body);
    check('get', '/agents', 200, (await t.request({ method: 'GET', url: '/api/v1/agents?limit=2', token: t.adminToken })).body);
    const name = uniq('dt-person');
    const user = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name, email: `${name}@example.com`, role: 'viewer' } });
    check('post', '/users', 201, user.body);
    const docUrl = `/api/v1/agents/${agent.name}/documents/style.md`;
    check('put', '/agents/{name}/documents/{doc}', 201, (await t.request({ method: 'PUT', url: docUrl, token: t.adminToken, body: { media_type: 'text/markdown', content: 'x' } })).body);
    const template = await makeTemplate(t);
    const answer = async (path: string, url: string) => check('get', path, 200, (await t.request({ method: 'GET', url: `/api/v1${url}`, token: t.adminToken })).body);
    await answer('/team-templates/{name}', `/team-templates/${template.name}`);
    await answer('/team-templates/{name}/versions', `/team-templates/${template.name}/versions`);
    await answer('/environments/{name}', `/environments/${template.env}`);
    await answer('/environments', '/environments');
    await answer('/destinations', '/destinations');
    await answer('/users/{id}', `/users/${user.body.id}`);
    await answer('/users', '/users');
    await answer('/me', '/me');
    await answer('/tools', '/tools');
    await answer('/models', '/models');
    await answer('/agents/{name}/versions', `/agents/${agent.name}/versions`);
    await answer('/agents/{name}/documents', `/agents/${agent.name}/documents`);
    // The document says times are date-times, and a time that is not one would fail the check.
    assert.equal(doc.components.schemas.AgentSummary.properties.updated_at.format, 'date-time');
    const bad = { ...(await t.request({ method: 'GET', url: `/api/v1/agents/${agent.name}`, token: t.adminToken })).body, updated_at: 'yesterday' };
    assert.throws(() => check('get', '/agents/{name}', 200, bad), /date-time/);
  });
});

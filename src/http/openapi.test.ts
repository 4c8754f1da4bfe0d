import assert from 'node:assert/strict';
import diagnostics from 'node:diagnostics_channel';
import { after, before, describe, test } from 'node:test';
import { parse as parseYaml } from 'yaml';
import { testApp, uniq, type TestApp } from '../../test/harness.ts';

const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

/** An OpenAPI path for a Fastify route URL: `/users/:id` -> `/users/{id}`, a trailing `*` -> its documented name. */
const openApiPath = (url: string, wildcard = 'path') => url.slice('/api/v1'.length).replace(/:([A-Za-z0-9_]+)/g, '{$1}').replace(/\*$/, `{${wildcard}}`) || '/';

describe('OpenAPI', () => {
  let t: TestApp;
  let doc: any;
  // Every route the console registers, seen through Fastify's own announcement of a new
  // instance, so the test compares the document with what is really served.
  const routes: Array<{ method: string; url: string; hidden: boolean; wildcard?: string }> = [];
  const onInit = ({ fastify }: any) =>
    fastify.addHook('onRoute', (r: any) => {
      for (const m of [r.method].flat()) routes.push({ method: String(m).toLowerCase(), url: r.url, hidden: Boolean(r.schema?.hide), wildcard: r.config?.openapiWildcard });
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
        assert.equal(op.responses.default?.content?.['application/problem+json']?.schema?.$ref, '#/components/schemas/Problem', `${where}: problem answer`);
        if (op.requestBody) {
          assert.ok(Object.values<any>(op.requestBody.content).every((m) => m.schema), `${where}: request body schema`);
        }
        if (['put', 'post', 'patch'].includes(method) && op.requestBody?.content?.['application/json']) {
          const schema = op.requestBody.content['application/json'].schema;
          if (schema.type === 'object') assert.equal(schema.additionalProperties, false, `${where}: body refuses unknown fields`);
        }
        // Lists take limit and cursor.
        const ok = op.responses['200']?.content?.['application/json']?.schema;
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
});

// Walks the SERVED OpenAPI document, so every route anyone adds is covered, and sends each
// operation bad input of every kind: malformed JSON, bodies of the wrong shape, wrong types
// for each field, strings beyond maxLength and beyond the body limit, unknown fields, bad
// cursors, limits and path parameters, and unsupported content types. Each answer must be a
// 4xx application/problem+json; none may be a 5xx; and no stored data may change.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { testApp, uniq, type TestApp } from './harness.ts';

type Schema = Record<string, any>;
interface Op {
  method: string;
  path: string;
  op: any;
}
interface Sent {
  label: string;
  method: string;
  url: string;
  body?: unknown;
  raw?: string;
  headers?: Record<string, string>;
}

const BODY_LIMIT = 65536;
const METHODS = ['get', 'put', 'post', 'patch', 'delete'];
const NAME_CANDIDATES = ['zz-missing-9', 'zzmissing9', 'zz_missing_9', 'ZzMissing9', 'platform:zz-missing-9', 'zz-missing/zz-missing-9', 'integrations/zz/zz-missing-9', 'zz', 'z9', '999999'];

/** A branch of a union that is not null, or the schema itself. */
function main(schema: Schema): Schema {
  const branches = schema.anyOf ?? schema.oneOf;
  if (branches) return branches.find((b: Schema) => b.type !== 'null') ?? branches[0];
  return schema;
}

const typeOf = (schema: Schema): string | undefined => {
  const s = main(schema);
  if (Array.isArray(s.type)) return s.type.find((t: string) => t !== 'null');
  if (s.type) return s.type;
  if (s.const !== undefined) return typeof s.const;
  if (s.enum) return typeof s.enum[0];
  if (s.properties) return 'object';
  return undefined;
};

function sampleString(s: Schema): string {
  if (s.const !== undefined) return String(s.const);
  if (s.enum) return String(s.enum[0]);
  if (s.format === 'email') return 'zz@example.com';
  if (s.format === 'uri' || s.format === 'url') return 'https://example.com/zz';
  if (s.format === 'date-time') return new Date().toISOString();
  const fits = (v: string) =>
    (!s.pattern || new RegExp(s.pattern, 'u').test(v)) && v.length >= (s.minLength ?? 0) && v.length <= (s.maxLength ?? Infinity);
  const found = NAME_CANDIDATES.find(fits);
  if (found) return found;
  return 'zz-sample'.padEnd(s.minLength ?? 0, 'z').slice(0, s.maxLength ?? 1000);
}

/** A value that satisfies the schema as far as a simple reading goes: the base the mutations start from. */
function sample(schema: Schema, depth = 0): unknown {
  const s = main(schema);
  if (s.const !== undefined) return s.const;
  if (s.enum) return s.enum[0];
  switch (typeOf(s)) {
    case 'string':
      return sampleString(s);
    case 'integer':
    case 'number': {
      const min = s.minimum ?? (s.exclusiveMinimum !== undefined ? s.exclusiveMinimum + 1 : 1);
      return Math.min(Math.max(min, 1), s.maximum ?? Infinity);
    }
    case 'boolean':
      return false;
    case 'array':
      return depth > 4 ? [] : Array.from({ length: s.minItems ?? 0 }, () => sample(s.items ?? {}, depth + 1));
    case 'object': {
      const out: Record<string, unknown> = {};
      if (depth > 4) return out;
      for (const key of s.required ?? []) out[key] = sample(s.properties?.[key] ?? {}, depth + 1);
      return out;
    }
    default:
      return null;
  }
}

/** Values of the wrong type for a field, by the type it wants. */
function wrongTypes(schema: Schema): unknown[] {
  switch (typeOf(schema)) {
    case 'string':
      return [12345, true, ['x'], { x: 1 }];
    case 'integer':
      return ['12', 1.5, true, { x: 1 }];
    case 'number':
      return ['12', true, [1]];
    case 'boolean':
      return ['true', 1, null];
    case 'array':
      return ['x', { x: 1 }, 7];
    case 'object':
      return ['x', [1], 7];
    default:
      return [];
  }
}

/** A path parameter's value: a valid name that no resource has, so the route is reached. */
function missingParam(op: any, name: string): string {
  const p = (op.parameters ?? []).find((x: any) => x.in === 'path' && x.name === name);
  const schema = p?.schema ?? {};
  const t = typeOf(schema);
  if (t === 'integer' || t === 'number') return String(Math.min(999_999, schema.maximum ?? Infinity));
  return encodeURIComponent(sampleString(main(schema))).replace(/%2F/g, '/');
}

// (No dot segments: a URL parser resolves those before the request leaves the client.)
const BAD_PARAMS = ['%00', 'x'.repeat(3000), '...', '-1', '0', '99999999999999999999', '%F0%9F%92%A5', "%27%3B%20drop%20table%20users%3B--", '%20', 'a%2Fb', '1.5'];
const b64 = (s: string) => Buffer.from(s).toString('base64url');
// Cursors no list gives out. (A well-formed key such as ["x"] is a valid place to start from.)
const BAD_CURSORS = ['garbage', '%00', b64('[-1, "x", 3, 4, 5, 6, 7]'), b64('[1, NaN]'), b64('{"a":1}'), b64('null'), b64('[[1]]'), b64('[' + '"x",'.repeat(50) + '"x"]'), 'x'.repeat(1025), b64(JSON.stringify(['x'.repeat(600)]))];
const BAD_LIMITS = ['0', '-1', '201', '1000000', 'abc', '1.5', '', '%00'];

describe('robustness: every operation of the served OpenAPI, bad input of every kind', () => {
  let t: TestApp;
  const ops: Op[] = [];
  let session: { cookie: string; csrf: string };
  const failures: string[] = [];
  let sent = 0;

  before(async () => {
    t = await testApp({ config: { SERVICE_BODY_LIMIT: String(BODY_LIMIT) } });
    // Named shapes and shared answers are $refs into components: followed here, so every body is sampled whole.
    const served = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).body;
    const inline = (x: any): any => {
      if (Array.isArray(x)) return x.map(inline);
      if (!x || typeof x !== 'object') return x;
      if (typeof x.$ref === 'string') return inline(x.$ref.slice(2).split('/').reduce((v: any, k: string) => v?.[k], served));
      return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, inline(v)]));
    };
    const doc = { ...served, paths: inline(served.paths) };
    for (const [path, item] of Object.entries<any>(doc.paths)) {
      for (const [method, op] of Object.entries<any>(item)) if (METHODS.includes(method)) ops.push({ method: method.toUpperCase(), path, op });
    }
    // An admin browser session too, for the routes that only a session may call.
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('robot'), role: 'admin' } });
    const setup = await t.request({ method: 'POST', url: '/api/v1/session/setup', body: { token: created.body.setup_token, password: 'robustness password' } });
    session = { cookie: String(setup.headers['set-cookie']).split(';')[0], csrf: setup.body.csrf_token };
  });
  after(() => t.close());

  /** Credentials for an operation: none for public routes, the session for session-only ones, else the admin token. */
  function credentials(op: any): { token?: string; headers: Record<string, string> } {
    const security: Array<Record<string, unknown>> = op.security ?? [];
    if (security.length === 0) return { headers: {} };
    if (security.every((s) => 'sessionCookie' in s)) return { headers: { cookie: session.cookie, 'x-console-csrf': session.csrf } };
    return { token: t.adminToken, headers: {} };
  }

  async function send(o: Op, s: Sent) {
    const cred = credentials(o.op);
    const headers = { ...cred.headers, 'if-match': '"1"', ...s.headers };
    const res = await t.request({ method: s.method, url: s.url, token: cred.token, body: s.body, raw: s.raw, headers });
    sent++;
    const where = `${s.method} ${s.url.slice(0, 120)} [${s.label}]`;
    const type = String(res.headers['content-type'] ?? '');
    if (res.status >= 500) failures.push(`${where}: ${res.status} ${res.text.slice(0, 200)}`);
    else if (res.status < 400) failures.push(`${where}: accepted with ${res.status}`);
    else if (!type.startsWith('application/problem+json')) failures.push(`${where}: ${res.status} as ${type}`);
    else if (res.body?.status !== res.status || typeof res.body?.detail !== 'string' || !Array.isArray(res.body?.errors)) failures.push(`${where}: not a problem document`);
  }

  const urlOf = (o: Op, params: Record<string, string> = {}) =>
    '/api/v1' + o.path.replace(/\{([^}]+)\}/g, (_, name: string) => params[name] ?? missingParam(o.op, name));

  /** What the database holds, as one digest per table (token last-use times aside, which reads update). */
  async function snapshot(): Promise<Record<string, string>> {
    const tables = await sql<{ name: string }>`select table_name as name from information_schema.tables where table_schema = current_schema() and table_type = 'BASE TABLE' order by 1`.execute(t.db);
    const out: Record<string, string> = {};
    for (const { name } of tables.rows) {
      const source = name === 'api_tokens' ? sql`(select id, user_id, name, kind, prefix, token_hash, created_at, expires_at, revoked_at from api_tokens)` : sql.table(name);
      const r = await sql<{ digest: string; n: number }>`select md5(coalesce(string_agg(t::text, '|' order by t::text), '')) as digest, count(*) as n from ${source} as t`.execute(t.db);
      out[name] = `${r.rows[0].n}:${r.rows[0].digest}`;
    }
    return out;
  }

  test('the document lists operations to walk', () => {
    assert.ok(ops.length >= 15, `only ${ops.length} operations`);
  });

  test('every operation answers bad input with a 4xx problem, never a 5xx, and stores nothing', async () => {
    const before = await snapshot();
    for (const o of ops) {
      const url = urlOf(o);
      const params = (o.op.parameters ?? []) as any[];

      // Bad path parameters, one parameter at a time.
      for (const p of params.filter((x) => x.in === 'path')) {
        for (const bad of BAD_PARAMS) await send(o, { label: `path ${p.name}=${bad.slice(0, 20)}`, method: o.method, url: urlOf(o, { [p.name]: bad }), body: o.op.requestBody ? sample(jsonSchema(o.op) ?? {}) : undefined });
      }

      // Query parameters: bad cursors and limits, wrong types, unknown ones.
      const query = params.filter((x) => x.in === 'query');
      if (query.some((q) => q.name === 'cursor')) for (const c of BAD_CURSORS) await send(o, { label: 'bad cursor', method: o.method, url: `${url}?cursor=${c}` });
      if (query.some((q) => q.name === 'limit')) for (const l of BAD_LIMITS) await send(o, { label: `limit=${l}`, method: o.method, url: `${url}?limit=${l}` });
      for (const q of query.filter((x) => x.name !== 'cursor' && x.name !== 'limit')) {
        const s = main(q.schema ?? {});
        const bad = s.enum || s.const !== undefined ? ['zz-not-one-of-them'] : typeOf(s) === 'integer' || typeOf(s) === 'number' ? ['abc', '1e999'] : typeOf(s) === 'string' && s.maxLength ? ['x'.repeat(s.maxLength + 1)] : [];
        for (const v of bad) await send(o, { label: `query ${q.name}`, method: o.method, url: `${url}?${q.name}=${encodeURIComponent(v)}` });
      }
      if (query.length > 0 && o.method === 'GET') await send(o, { label: 'unknown query parameter', method: o.method, url: `${url}?zz_unknown=1` });

      const schema = jsonSchema(o.op);
      if (!schema) continue;
      // Bodies that are not JSON, not the right shape, or not JSON at all.
      await send(o, { label: 'malformed JSON', method: o.method, url, raw: '{"a": ', headers: { 'content-type': 'application/json' } });
      await send(o, { label: 'empty JSON body', method: o.method, url, raw: '', headers: { 'content-type': 'application/json' } });
      await send(o, { label: 'text/plain', method: o.method, url, raw: 'hello', headers: { 'content-type': 'text/plain' } });
      await send(o, { label: 'form', method: o.method, url, raw: 'a=1', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
      if (typeOf(schema) === 'object') {
        for (const body of [[], 'text', 42, null, true]) await send(o, { label: `body ${JSON.stringify(body)}`, method: o.method, url, body });
      }
      await send(o, { label: 'beyond the body limit', method: o.method, url, body: { ...(sample(schema) as object), zz_pad: 'x'.repeat(BODY_LIMIT + 10) } });
      if (typeOf(schema) !== 'object') continue;

      const base = sample(schema) as Record<string, unknown>;
      await send(o, { label: 'unknown field', method: o.method, url, body: { ...base, zz_unknown_field: 1 } });
      await send(o, { label: 'NUL in unknown field', method: o.method, url, body: { ...base, 'zz\u0000': 'a\u0000b' } });
      for (const [field, prop] of Object.entries<Schema>(main(schema).properties ?? {})) {
        for (const wrong of wrongTypes(prop)) await send(o, { label: `${field}: ${JSON.stringify(wrong)}`, method: o.method, url, body: { ...base, [field]: wrong } });
        const p = main(prop);
        if (typeOf(p) === 'string' && p.maxLength !== undefined && !p.enum && p.const === undefined && p.maxLength < BODY_LIMIT) {
          await send(o, { label: `${field} beyond maxLength ${p.maxLength}`, method: o.method, url, body: { ...base, [field]: 'x'.repeat(p.maxLength + 1) } });
        }
        if (typeOf(p) === 'array' && p.maxItems !== undefined && p.maxItems < 5000) {
          await send(o, { label: `${field} beyond maxItems ${p.maxItems}`, method: o.method, url, body: { ...base, [field]: Array.from({ length: p.maxItems + 1 }, () => sample(p.items ?? {})) } });
        }
        if (typeOf(p) === 'object' && p.additionalProperties === false) {
          await send(o, { label: `${field}.zz_unknown`, method: o.method, url, body: { ...base, [field]: { ...(sample(p) as object), zz_unknown: 1 } } });
        }
      }
    }
    const afterwards = await snapshot();
    assert.ok(sent > ops.length * 5, `sent ${sent}`);
    assert.deepEqual(failures, [], `${failures.length} of ${sent} bad requests were not answered with a 4xx problem:\n${failures.join('\n')}`);
    assert.deepEqual(afterwards, before, 'bad requests changed stored data');
  });

  test('bad writes to an existing user leave it as it was', async () => {
    const created = await t.request({ method: 'POST', url: '/api/v1/users', token: t.adminToken, body: { name: uniq('kept'), email: `${uniq('k')}@example.com`, role: 'operator' } });
    const url = `/api/v1/users/${created.body.id}`;
    const read = await t.request({ method: 'GET', url, token: t.adminToken });
    const etag = String(read.headers.etag);
    const bad: unknown[] = [
      { role: 'emperor' },
      { name: '' },
      { name: 'x'.repeat(101) },
      { email: 'nope' },
      { disabled: 'yes' },
      { name: 'ok-name', zz: 1 },
      { name: 'a\u0000b' },
      {},
      [],
    ];
    for (const body of bad) {
      const res = await t.request({ method: 'PATCH', url, token: t.adminToken, body, headers: { 'if-match': etag } });
      assert.equal(res.status, 400, JSON.stringify(body));
    }
    const stale = await t.request({ method: 'PATCH', url, token: t.adminToken, body: { name: uniq('new') }, headers: { 'if-match': '"1"' } });
    assert.equal(stale.status, 412);
    const again = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(again.headers.etag, etag);
    assert.deepEqual(again.body, read.body);
  });
});

function jsonSchema(op: any): Schema | null {
  return op.requestBody?.content?.['application/json']?.schema ?? null;
}

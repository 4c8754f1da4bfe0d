import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { makeAgent, makeEnvironment } from '../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../test/harness.ts';
import { PATTERN_WORDS } from './schemas.ts';
import { errorWords, fieldProblems } from './validation.ts';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** Text that reads as a regular expression or a JSON Schema keyword, not as words. */
const REGEX_LIKE = /\^\[|\]\{|\{\d+,\d*\}|\\S|\\d|\$$|must match|pattern|anyOf|must NOT|>=|<=/;
/** Text that names a route of the API. */
const API_PATH = /\/api\/|\b(GET|PUT|POST|PATCH|DELETE) \//;

/** Every schema inside a value of the served document, with its JSON pointer. */
function* schemasIn(x: unknown, at = ''): Generator<[string, Record<string, unknown>]> {
  if (Array.isArray(x)) {
    for (let i = 0; i < x.length; i++) yield* schemasIn(x[i], `${at}/${i}`);
  } else if (x !== null && typeof x === 'object') {
    yield [at, x as Record<string, unknown>];
    for (const [k, v] of Object.entries(x)) yield* schemasIn(v, `${at}/${k}`);
  }
}

/** The field problems of an answer, checked to be in words: each field once, no expression, no route. */
function assertWords(res: { status: number; body: any; text: string }) {
  assert.ok(res.status === 400 || res.status === 422, res.text);
  const errors: Array<{ field: string; message: string }> = res.body.errors;
  assert.ok(errors.length > 0, res.text);
  assert.equal(new Set(errors.map((e) => e.field)).size, errors.length, `each field is named once: ${res.text}`);
  for (const text of [res.body.detail, ...errors.map((e) => e.message)]) {
    assert.doesNotMatch(text, REGEX_LIKE, `in words: ${text}`);
    assert.doesNotMatch(text, API_PATH, `names no API path: ${text}`);
  }
  return new Map(errors.map((e) => [e.field, e.message]));
}

describe('validation messages in words', () => {
  let t: TestApp;
  let doc: any;
  before(async () => {
    t = await testApp();
    doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).body;
  });
  after(() => t.close());

  test('every pattern of the served contract says in words what it allows', () => {
    let patterns = 0;
    for (const [at, schema] of schemasIn(doc)) {
      if (typeof schema.pattern !== 'string') continue;
      patterns++;
      const words = schema[PATTERN_WORDS];
      assert.equal(typeof words, 'string', `${at} has a pattern without ${PATTERN_WORDS}`);
      assert.ok((words as string).length > 5, at);
      assert.doesNotMatch(words as string, REGEX_LIKE, `${at}: ${String(words)}`);
    }
    assert.ok(patterns >= 20, `the walk found the contract's patterns (${patterns})`);
  });

  test('no description in the served contract is a regular expression', () => {
    const found: string[] = [];
    for (const [at, schema] of schemasIn(doc)) if (typeof schema.description === 'string' && /^\^.*\$$/.test(schema.description)) found.push(`${at}: ${schema.description}`);
    assert.deepEqual(found, []);
  });

  test('every kind of schema error becomes words', () => {
    const ajv = addFormats(new Ajv({ allErrors: true, verbose: true, strict: false }));
    const validate = ajv.compile({
      type: 'object',
      required: ['name'],
      additionalProperties: false,
      properties: {
        name: { type: 'string', pattern: '^[a-z]+$', [PATTERN_WORDS]: 'lowercase letters' },
        bare: { type: 'string', pattern: '^[a-z]+$' },
        short: { type: 'string', minLength: 3, maxLength: 4 },
        empty: { type: 'string', minLength: 1 },
        count: { type: 'integer', minimum: 1, maximum: 9 },
        list: { type: 'array', items: { type: 'string' }, maxItems: 2, uniqueItems: true },
        when: { type: 'string', format: 'date-time' },
        either: { anyOf: [{ type: 'string', maxLength: 2 }, { type: 'null' }] },
        flag: { type: 'boolean' },
        policy: { anyOf: [{ const: 'never' }, { const: 'risky' }, { type: 'null' }] },
        solo: { anyOf: [{ const: 'only' }, { type: 'null' }] },
      },
    });
    const bad = { name: 'A1', bare: 'B', short: 'ab', empty: '', count: 0, list: ['x', 'y', 'z'], when: 'soon', either: 5, flag: 'yes', policy: 'sometimes', solo: 'other', extra: 1 };
    assert.equal(validate(bad), false);
    const byField = new Map(fieldProblems(validate.errors!, 'body').map((p) => [p.field, p.message]));
    assert.deepEqual(Object.fromEntries(byField), {
      name: 'must be lowercase letters',
      bare: 'is not in the form this field takes',
      short: 'must be at least 3 characters long',
      empty: 'must not be empty',
      count: 'must be at least 1',
      list: 'must hold at most 2 items',
      when: 'must be a date and time such as 2026-11-22T20:00:00Z',
      either: 'must be text or null',
      flag: 'must be true or false',
      // Every value of a union with null is named, not only its first.
      policy: 'must be one of "never", "risky" or null',
      solo: 'must be "only" or null',
      extra: 'is not a known field',
    });
    // A union's own error is folded into its branches' words by fieldProblems.
    for (const e of validate.errors!) if (e.keyword !== 'anyOf') assert.doesNotMatch(errorWords(e), REGEX_LIKE);
    assert.equal(validate({ name: 'ok', list: ['a', 'a'] }), false);
    assert.deepEqual(fieldProblems(validate.errors!, 'body'), [{ field: 'list', message: 'must not repeat an item (items 1 and 2 are the same)' }]);
  });

  test('a bad environment and destination: each field once, what is allowed in words', async () => {
    const env = assertWords(await t.request({ method: 'POST', url: '/api/v1/environments', token: t.adminToken, body: { name: 'Big Box', provider: 'local', vcpus: 'two', profile: '-x' } }));
    assert.equal(env.get('name'), 'must be lowercase letters, digits, "_" and "-", starting with a letter or digit; at most 63 characters');
    assert.match(env.get('vcpus')!, /^must be a whole number/);
    assert.match(env.get('profile')!, /^must be letters, digits/);

    const dest = assertWords(
      await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name: uniq('d'), host: 'api.example.com', methods: ['G E T'], paths: ['v1'], header_allowlist: ['x: y'] } }),
    );
    assert.match(dest.get('methods.0')!, /an HTTP method such as GET/);
    assert.equal(dest.get('paths.0'), 'must be a path starting with "/"');
    assert.match(dest.get('header_allowlist.0')!, /a header name such as content-type/);

    const secret = assertWords(await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name: uniq('d'), host: 'api.example.com', inject_secret: 'secret:nowhere' } }));
    assert.match(secret.get('inject_secret')!, /no secret named "nowhere"; an admin sets it first/);
  });

  test('names in the path and the services\' own rules are described in words too', async () => {
    assertWords(await t.request({ method: 'GET', url: '/api/v1/teams/Not%20A%20Team', token: t.adminToken }));
    assertWords(await t.request({ method: 'PUT', url: '/api/v1/secrets/bad%20name', token: t.adminToken, body: { value: 'x' } }));
    const env = await makeEnvironment(t);
    const agent = await makeAgent(t);
    const template = assertWords(
      await t.request({
        method: 'POST',
        url: '/api/v1/team-templates',
        token: t.adminToken,
        body: { name: uniq('tpl'), lead: 'lead', roles: { lead: { agent: agent.name, vm: env.name, model: 'no-such-model' } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 10 },
      }),
    );
    assert.match(template.get('roles.lead.model')!, /^no model alias named "no-such-model"; the aliases are .*\bfast\b/);
    const badAgent = assertWords(await t.request({ method: 'POST', url: '/api/v1/agents', token: t.adminToken, body: { name: 'Not An Agent', description: 'x', version: { system_prompt: 'x' } } }));
    assert.equal(badAgent.get('name'), 'must be lowercase letters, digits, ".", "_" and "-", starting with a letter or digit; at most 63 characters');
  });
});

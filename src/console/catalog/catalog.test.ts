import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Ajv } from 'ajv';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { DEFAULT_MODELS } from '../../models/catalog.ts';
import { TOOL_CATALOG, toolNamed, unknownTools } from '../../agent/tools/catalog.ts';

const V1 = '/api/v1';

describe('tool catalogue', () => {
  test('holds what a coding agent needs, each with a description, a risky flag and a JSON schema of its arguments', () => {
    const names = TOOL_CATALOG.map((t) => t.name);
    for (const n of ['shell', 'read_file', 'write_file', 'edit_file', 'list_files', 'search', 'git_status', 'git_diff', 'git_commit', 'git_push', 'http_request', 'ask_person', 'hand_off', 'finish']) {
      assert.ok(names.includes(n), n);
    }
    assert.equal(new Set(names).size, names.length, 'names are unique');
    const ajv = new Ajv({ strict: false });
    for (const tool of TOOL_CATALOG) {
      assert.match(tool.name, /^[a-z][a-z0-9_]{0,63}$/);
      assert.ok(tool.description.length > 10);
      assert.equal((tool.parameters as { type: string }).type, 'object');
      assert.equal((tool.parameters as { additionalProperties: boolean }).additionalProperties, false);
      ajv.compile(tool.parameters);
    }
    assert.equal(toolNamed('shell')?.risky, true);
    assert.equal(toolNamed('git_push')?.risky, true);
    assert.equal(toolNamed('http_request')?.risky, true);
    assert.equal(toolNamed('read_file')?.risky, false);
    assert.equal(toolNamed('finish')?.risky, false);
    assert.deepEqual(unknownTools(['shell', 'warp']), ['warp']);
    const edit = ajv.compile(toolNamed('edit_file')!.parameters);
    assert.equal(edit({ path: 'a.ts', old_text: 'x', new_text: 'y' }), true);
    assert.equal(edit({ path: 'a.ts', old_text: 'x' }), false);
  });
});

describe('GET /tools and GET /models', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(() => t.close());

  test('every role reads the tool catalogue, paged; no token is 401', async () => {
    for (const role of ['viewer', 'operator', 'admin'] as const) {
      const u = await t.user(role);
      const res = await t.request({ method: 'GET', url: `${V1}/tools?limit=200`, token: u.token });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.items.map((i: { name: string }) => i.name), TOOL_CATALOG.map((x) => x.name));
      const shell = res.body.items[0];
      assert.deepEqual(Object.keys(shell).sort(), ['description', 'name', 'parameters', 'risky']);
      assert.deepEqual(shell.parameters, JSON.parse(JSON.stringify(toolNamed('shell')!.parameters)));
    }
    const names: string[] = [];
    let cursor: string | null = null;
    do {
      const res: { status: number; body: { items: Array<{ name: string }>; next_cursor: string | null } } = await t.request({ method: 'GET', url: `${V1}/tools?limit=5${cursor ? `&cursor=${cursor}` : ''}`, token: t.adminToken });
      assert.equal(res.status, 200);
      names.push(...res.body.items.map((i) => i.name));
      cursor = res.body.next_cursor;
    } while (cursor);
    assert.deepEqual(names, TOOL_CATALOG.map((x) => x.name));
    assert.equal((await t.request({ method: 'GET', url: `${V1}/tools?cursor=WyJub3BlIl0`, token: t.adminToken })).status, 400);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/tools?limit=0`, token: t.adminToken })).status, 400);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/tools` })).status, 401);
    assert.equal((await t.request({ method: 'GET', url: `${V1}/models` })).status, 401);
  });

  test('GET /models lists the default aliases and the model each points at, without secrets', async () => {
    const u = await t.user('viewer');
    const res = await t.request({ method: 'GET', url: `${V1}/models`, token: u.token });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.items.map((m: { alias: string; model: string }) => [m.alias, m.model]), DEFAULT_MODELS.map((m) => [m.alias, m.model]));
    const local = res.body.items.find((m: { alias: string }) => m.alias === 'local');
    assert.equal(local.upstream_host, '127.0.0.1:11434');
    assert.equal(local.local, true);
    assert.equal(res.body.items[0].upstream_host, 'api.anthropic.com');
    assert.equal(res.text.includes('api_key_secret'), false);
    assert.equal(res.text.includes('models/anthropic'), false);
    assert.equal(res.body.next_cursor, null);
  });

  test('GET /models follows SERVICE_MODELS and never shows credentials in base_url', async () => {
    const models = JSON.stringify([
      { alias: 'house', model: 'qwen3-coder', base_url: 'https://bob:hunter2@llm.internal.example:8443/v1?key=sekret', api_key_secret: 'models/house' },
      { alias: 'cheap', model: 'gpt-4.1-nano', base_url: 'https://api.openai.com/v1' },
    ]);
    const t2 = await testApp({ config: { SERVICE_MODELS: models } });
    try {
      const res = await t2.request({ method: 'GET', url: `${V1}/models`, token: t2.adminToken });
      assert.equal(res.status, 200);
      assert.deepEqual(res.body.items.map((m: { alias: string }) => m.alias), ['house', 'cheap']);
      assert.equal(res.body.items[0].upstream_host, 'llm.internal.example:8443');
      for (const secret of ['bob', 'hunter2', 'sekret', 'models/house']) assert.equal(res.text.includes(secret), false, secret);
      const p1 = await t2.request({ method: 'GET', url: `${V1}/models?limit=1`, token: t2.adminToken });
      const p2 = await t2.request({ method: 'GET', url: `${V1}/models?limit=1&cursor=${p1.body.next_cursor}`, token: t2.adminToken });
      assert.deepEqual(p2.body.items.map((m: { alias: string }) => m.alias), ['cheap']);
      assert.equal(p2.body.next_cursor, null);
      // Agent versions name aliases of this deployment only.
      const bad = await t2.request({ method: 'POST', url: `${V1}/agents`, token: t2.adminToken, body: { name: 'a1', version: { system_prompt: 'x', model: 'smart' } } });
      assert.equal(bad.status, 422);
      const ok = await t2.request({ method: 'POST', url: `${V1}/agents`, token: t2.adminToken, body: { name: 'a1', version: { system_prompt: 'x', model: 'house' } } });
      assert.equal(ok.status, 201);
    } finally {
      await t2.close();
    }
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../audit/audit.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { createSecretsService } from '../secrets/secrets.service.ts';
import { awayFromClockEdges, captureLogger, testConfig, testDb, testModelProxy, uniq, waitFor, type TestDb } from '../../test/harness.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../test/fakes/openai-upstream.ts';
import { createModelProxyClient, ModelProxyFailedError, ModelProxyUnavailableError, type ModelProxyClient } from './client.ts';
import { serviceCredential } from './credential.ts';
import * as store from './admission/database.ts';
import type { RunningModelProxy } from './server.ts';

const UPSTREAM_KEY = 'sk-upstream-secret-0123456789';
// Prices high enough that a few tokens cost visible money: $0.001 a prompt token, $0.002 a completion token.
const PRICE_IN = 1000;
const PRICE_OUT = 2000;

function models(fake: FakeOpenAI) {
  return JSON.stringify([
    { alias: 'fake', model: 'gpt-fake-1', api: 'openai', base_url: fake.baseUrl, api_key_secret: 'models/fake', input_usd_per_mtok: PRICE_IN, output_usd_per_mtok: PRICE_OUT, max_output_tokens: 50 },
    { alias: 'other', model: 'gpt-fake-2', api: 'openai', base_url: fake.baseUrl, api_key_secret: 'models/fake', input_usd_per_mtok: 0, output_usd_per_mtok: 0 },
    { alias: 'nokey', model: 'gpt-fake-3', api: 'openai', base_url: fake.baseUrl, api_key_secret: 'models/unset' },
    { alias: 'dead', model: 'gpt-dead', api: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key_secret: null },
  ]);
}

const cost = (tokensIn: number, tokensOut: number) => (tokensIn * PRICE_IN + tokensOut * PRICE_OUT) / 1e6;

/** A response's JSON body, loosely typed for assertions. */
const json = (r: Response): Promise<any> => r.json();

describe('model proxy', () => {
  let tdb: TestDb;
  let fake: FakeOpenAI;
  let proxy: RunningModelProxy;
  let client: ModelProxyClient;
  let lines: string[];
  let overrides: Record<string, string>;

  before(async () => {
    tdb = await testDb();
    fake = await startFakeOpenAI({ apiKey: UPSTREAM_KEY });
    // 'dead' points at port 9 (discard), where nothing listens: a closed ephemeral port could be taken again.
    overrides = { SERVICE_MODELS: models(fake) };
    const config = testConfig(overrides);
    const secrets = createSecretsService({ db: tdb.db, cipher: loadCipher(config) });
    await secrets.put(systemActor('test'), 'models/fake', UPSTREAM_KEY);
    const captured = captureLogger();
    lines = captured.lines;
    proxy = await testModelProxy({ db: tdb.db, logger: captured.logger, config: overrides });
    client = createModelProxyClient(config, { baseUrl: proxy.url });
  });
  after(async () => {
    await proxy.stop();
    await fake.close();
    await tdb.close();
  });

  const chat = (key: string | null, body: Record<string, unknown>, headers: Record<string, string> = {}, signal?: AbortSignal) =>
    fetch(`${proxy.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}), ...headers },
      body: JSON.stringify(body),
      signal,
    });
  const hello = { model: 'fake', messages: [{ role: 'user', content: 'Say hello' }] };
  const mint = (limits: Record<string, unknown> = {}, team = uniq('team')) => client.mintKey({ team, role: 'dev', agent: 'coder', ...limits });
  const keyRow = (keyId: string) => tdb.db.selectFrom('mp_keys').selectAll().where('key_id', '=', keyId).executeTakeFirstOrThrow();
  const logRows = (team: string) => tdb.db.selectFrom('mp_request_log').selectAll().where('team', '=', team).orderBy('id').execute();
  // Settling happens after the answer went out; wait until the log line is there.
  async function settled(team: string, count: number) {
    for (let i = 0; i < 200; i++) {
      const rows = await logRows(team);
      if (rows.length >= count) return rows;
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error(`expected ${count} log rows for ${team}: ${JSON.stringify((await logRows(team)).map((r) => [r.status, r.error]))}`);
  }

  test('forwards a completion with the upstream credential, and charges the usage the upstream reports', async () => {
    await awayFromClockEdges();
    const k = await mint();
    assert.match(k.key, /^sk-ch-/);
    const res = await chat(k.key, hello);
    assert.equal(res.status, 200);
    const body = await json(res);
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.choices[0].message.content, 'word0 word1 word2 word3 word4');
    const seen = fake.requests.at(-1)!;
    assert.equal(seen.headers.authorization, `Bearer ${UPSTREAM_KEY}`);
    assert.equal(seen.body.model, 'gpt-fake-1');

    const [row] = await settled(k.team, 1);
    assert.equal(row.status, 200);
    assert.equal(row.tokens_in, body.usage.prompt_tokens);
    assert.equal(row.tokens_out, body.usage.completion_tokens);
    assert.ok(Math.abs(Number(row.cost_usd) - cost(body.usage.prompt_tokens, body.usage.completion_tokens)) < 1e-9);
    assert.equal(row.upstream_request_id, res.headers.get('x-upstream-request-id'));
    assert.equal(row.role, 'dev');
    assert.equal(row.key_id, k.key_id);

    const spend = await client.teamSpend(k.team, 3);
    assert.equal(spend.series.length, 3);
    assert.equal(spend.series[2].date, new Date().toISOString().slice(0, 10));
    assert.equal(spend.series[2].requests, 1);
    assert.equal(spend.series[2].tokens, body.usage.total_tokens);
    assert.ok(Math.abs(spend.spent_today_usd - cost(body.usage.prompt_tokens, body.usage.completion_tokens)) < 1e-6);
    assert.equal(spend.reserved_usd, 0);
    const key = await keyRow(k.key_id);
    assert.equal(Number(key.reserved), 0);
    assert.notEqual(key.key_hash, k.key);

    const all = lines.join('');
    assert.ok(!all.includes(k.key), 'the virtual key is never logged');
    assert.ok(!all.includes(UPSTREAM_KEY), 'the upstream key is never logged');
    assert.ok(!all.includes('Say hello'), 'the prompt is never logged');
  });

  test('streams server-sent events as they arrive, keeps the usage chunk away unless asked, and still charges', async () => {
    fake.options.chunkDelayMs = 40;
    try {
      const k = await mint();
      const res = await chat(k.key, { ...hello, stream: true });
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type')!, /^text\/event-stream/);
      const decoder = new TextDecoder();
      let text = '';
      let firstAt = 0;
      const startedAt = performance.now();
      for await (const chunk of res.body!) {
        if (!firstAt) firstAt = performance.now();
        text += decoder.decode(chunk, { stream: true });
      }
      const total = performance.now() - startedAt;
      assert.ok(firstAt - startedAt < total - 100, `the first chunk came at ${Math.round(firstAt - startedAt)} ms of ${Math.round(total)} ms`);
      const events = text.split('\n\n').filter(Boolean);
      assert.equal(events.at(-1), 'data: [DONE]');
      const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
      assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'word0 word1 word2 word3 word4');
      assert.ok(chunks.every((c) => !c.usage), 'no usage chunk when the client did not ask');
      assert.equal(fake.requests.at(-1)!.body.stream_options.include_usage, true);
      const [row] = await settled(k.team, 1);
      assert.equal(row.stream, true);
      assert.equal(row.tokens_out, 5);
      assert.ok(Number(row.cost_usd) > 0);

      const res2 = await chat(k.key, { ...hello, stream: true, stream_options: { include_usage: true } });
      const text2 = await res2.text();
      const usageChunk = text2
        .split('\n\n')
        .filter((e) => e.startsWith('data: {'))
        .map((e) => JSON.parse(e.slice(6)))
        .find((c) => c.usage);
      assert.equal(usageChunk.usage.completion_tokens, 5);
    } finally {
      fake.options.chunkDelayMs = 0;
    }
  });

  test('what an upstream says is stored cleaned: a NUL, a cut emoji and odd token counts hold up no settlement', async () => {
    const k = await mint();
    // A mid-stream error of 500 characters whose cut falls inside an emoji, with a NUL in it; the upstream key quoted.
    fake.failNext({ status: 200, dropAfterChunks: 1, streamError: `bad\u0000 ${UPSTREAM_KEY} ${'x'.repeat(480)}\u{1F600}tail` });
    let res = await chat(k.key, { ...hello, stream: true });
    const text = await res.text();
    assert.ok(!text.includes(UPSTREAM_KEY), 'the upstream key is not passed on');
    assert.match(text, /\[redacted\]/);
    fake.failNext({ status: 200, usage: { prompt_tokens: 1.5, completion_tokens: -5, total_tokens: 'many' } });
    res = await chat(k.key, hello);
    assert.equal(res.status, 200);
    await res.text();
    assert.equal((await chat(k.key, hello)).status, 200);
    const rows = await settled(k.team, 3);
    assert.equal(rows[0].status, 502);
    assert.ok(!rows[0].error!.includes('\u0000') && !rows[0].error!.includes(UPSTREAM_KEY));
    assert.deepEqual([rows[1].tokens_in, rows[1].tokens_out], [2, 0]);
    assert.ok(rows[2].tokens_out > 0);
  });

  test('a plain answer the upstream breaks off is a clean 502: nothing charged, the reservation released', async () => {
    const k = await mint({ max_budget: 1 });
    fake.failNext({ status: 200, dropAfterChunks: 0 });
    const res = await chat(k.key, hello);
    assert.equal(res.status, 502);
    const body = await json(res);
    assert.equal(body.error.code, 'upstream_error');
    assert.match(body.error.message, /broke off its answer/);
    const [row] = await settled(k.team, 1);
    assert.deepEqual([row.status, row.error, Number(row.cost_usd)], [502, 'upstream_error', 0]);
    const key = await waitFor('the reservation to be released', async () => {
      const r = await keyRow(k.key_id);
      return Number(r.reserved) === 0 && r;
    });
    assert.equal(Number(key.spend_total), 0);
    assert.equal((await chat(k.key, hello)).status, 200, 'the next request is answered');
  });

  test('a client that leaves mid-stream ends the upstream request, and what was streamed is charged', async () => {
    fake.options.chunkDelayMs = 50;
    try {
      const k = await mint({ max_budget: 1 });
      const res = await chat(k.key, { ...hello, stream: true });
      const reader = res.body!.getReader();
      await reader.read();
      await reader.cancel();
      const [row] = await settled(k.team, 1);
      assert.equal(row.status, 499);
      assert.equal(row.error, 'the client closed the stream');
      assert.ok(row.tokens_in > 0, 'the prompt estimate is charged');
      assert.ok(Number(row.cost_usd) > 0);
      let key = await keyRow(k.key_id);
      for (let i = 0; i < 50 && Number(key.reserved) !== 0; i++) {
        await new Promise((r) => setTimeout(r, 20));
        key = await keyRow(k.key_id);
      }
      assert.equal(Number(key.reserved), 0);
    } finally {
      fake.options.chunkDelayMs = 0;
    }
  });

  test('a client that leaves before the upstream answered ends the upstream request, and nothing but the log line is left', async () => {
    fake.options.latencyMs = 5_000;
    try {
      const k = await mint({ max_budget: 1 });
      const seen = fake.requests.length;
      const gone = new AbortController();
      const res = chat(k.key, hello, {}, gone.signal).catch((err: Error) => err);
      await waitFor('the upstream to receive the request', () => fake.requests.length > seen);
      gone.abort();
      assert.equal(((await res) as Error).name, 'AbortError');
      const [row] = await settled(k.team, 1);
      assert.equal(row.status, 499);
      assert.equal(row.error, 'client_closed');
      assert.equal(Number(row.cost_usd), 0, 'nothing came back, nothing is charged');
      const key = await waitFor('the reservation to be released', async () => {
        const r = await keyRow(k.key_id);
        return Number(r.reserved) === 0 && r;
      });
      assert.equal(Number(key.spend_total), 0);
    } finally {
      fake.options.latencyMs = 0;
    }
  });

  test('a stream without usage is charged the prompt estimate and what was streamed', async () => {
    fake.options.omitUsage = true;
    try {
      const k = await mint();
      const res = await chat(k.key, { ...hello, stream: true });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.match(text, /"content":" word4"/);
      const [row] = await settled(k.team, 1);
      assert.equal(row.status, 200);
      // 'word0 word1 word2 word3 word4' is 29 bytes: 10 tokens at 3 bytes a token.
      assert.equal(row.tokens_out, 10);
      assert.ok(row.tokens_in > 10, `the prompt estimate is charged (${row.tokens_in})`);
      assert.ok(Math.abs(Number(row.cost_usd) - cost(row.tokens_in, row.tokens_out)) < 1e-9);
    } finally {
      fake.options.omitUsage = false;
    }
  });

  test('a path without a route answers 404, a known path called with another method 405 with Allow, in the OpenAI format, whatever its Content-Type says of a body', async () => {
    const cases: Array<[string, string, number, string | null]> = [
      ['OPTIONS', '/v1/chat/completions', 405, 'POST'],
      ['GET', '/v1/chat/completions', 405, 'POST'],
      ['DELETE', '/v1/models', 405, 'GET, HEAD'],
      ['POST', '/v1/nothing', 404, null],
    ];
    for (const [method, path, status, allow] of cases) {
      for (const headers of [{}, { 'content-type': 'application/json' }]) {
        const res = await fetch(`${proxy.url}${path}`, { method, headers });
        assert.equal(res.status, status, `${method} ${path} ${JSON.stringify(headers)}`);
        assert.equal(res.headers.get('allow'), allow);
        const body = await json(res);
        if (allow === null) {
          assert.equal(body.error.code, 'not_found');
          assert.equal(body.error.message, `no route ${method} ${path}`);
        } else {
          assert.equal(body.error.code, 'method_not_allowed');
          assert.equal(body.error.message, `this endpoint does not take ${method}; it takes ${allow}`);
        }
      }
    }
  });

  test('null for stream, max_tokens, max_completion_tokens or n is taken as left out, as OpenAI takes it', async () => {
    const k = await mint();
    for (const field of ['stream', 'max_tokens', 'max_completion_tokens', 'n']) {
      const res = await chat(k.key, { ...hello, [field]: null });
      assert.equal(res.status, 200, field);
      assert.equal((await json(res)).object, 'chat.completion', field);
    }
    // A value that is there is still checked, and named.
    const res = await chat(k.key, { ...hello, max_tokens: 0 });
    assert.equal(res.status, 400);
    assert.equal((await json(res)).error.message, 'the body is not valid: max_tokens must be at least 1');
  });

  test('a spent lifetime budget answers 429 without Retry-After, telling SDKs not to retry it', async () => {
    const k = await mint({ max_budget: 0.00001 });
    assert.equal((await chat(k.key, hello)).status, 200);
    await settled(k.team, 1);
    const res = await chat(k.key, hello);
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), null);
    assert.equal(res.headers.get('x-should-retry'), 'false');
    const body = await json(res);
    assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
    assert.equal(body.error.code, 'key_budget_exceeded');
  });

  test('a max_tokens past the alias\'s max_output_tokens is lowered to it on the way upstream', async () => {
    const k = await mint();
    let res = await chat(k.key, { ...hello, max_tokens: 1e12 });
    assert.equal(res.status, 200);
    assert.equal(fake.requests.at(-1)!.body.max_tokens, 50);
    res = await chat(k.key, { ...hello, max_completion_tokens: 51 });
    assert.equal(res.status, 200);
    assert.equal(fake.requests.at(-1)!.body.max_completion_tokens, 50);
    // One within the limit passes as it came.
    res = await chat(k.key, { ...hello, max_tokens: 7 });
    assert.equal(res.status, 200);
    assert.equal(fake.requests.at(-1)!.body.max_tokens, 7);
  });

  test('n choices are reserved and, without reported usage, charged as n times the output worst case', async () => {
    fake.options.omitUsage = true;
    try {
      const k = await mint();
      const res = await chat(k.key, { ...hello, n: 3, max_tokens: 10 });
      assert.equal(res.status, 200);
      assert.equal(fake.requests.at(-1)!.body.n, 3);
      const [row] = await settled(k.team, 1);
      assert.equal(row.tokens_out, 30);
    } finally {
      fake.options.omitUsage = false;
    }
    const k = await mint();
    const res = await chat(k.key, { ...hello, n: 129 });
    assert.equal(res.status, 400);
    assert.equal((await json(res)).error.param, 'n');
  });

  test('rejects missing, unknown and revoked keys, unknown and forbidden models, in the OpenAI error format', async () => {
    let res = await chat(null, hello);
    assert.equal(res.status, 401);
    assert.equal((await json(res)).error.code, 'invalid_api_key');
    res = await chat('sk-ch-not-a-key', hello);
    assert.equal(res.status, 401);
    const k = await mint({ models: ['other'] });
    res = await chat(k.key, hello);
    assert.equal(res.status, 403);
    assert.equal((await json(res)).error.code, 'model_not_allowed');
    res = await chat(k.key, { ...hello, model: 'nope' });
    assert.equal(res.status, 404);
    assert.equal((await json(res)).error.code, 'model_not_found');
    res = await chat(k.key, { model: 'other', messages: 'hi' });
    assert.equal(res.status, 400);
    const bad = await json(res);
    assert.equal(bad.error.type, 'invalid_request_error');
    assert.equal(bad.error.param, 'messages');
    res = await fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${k.key}` }, body: '{"model":' });
    assert.equal(res.status, 400);
    assert.equal((await json(res)).error.type, 'invalid_request_error');

    res = await fetch(`${proxy.url}/v1/models`, { headers: { authorization: `Bearer ${k.key}` } });
    assert.deepEqual((await json(res)).data.map((m: { id: string }) => m.id), ['other']);
    res = await chat(k.key, { ...hello, model: 'other' });
    assert.equal(res.status, 200);
    await client.revokeTeamKeys(k.team);
    res = await chat(k.key, { ...hello, model: 'other' });
    assert.equal(res.status, 401);
    res = await fetch(`${proxy.url}/v1/models`, { headers: { authorization: `Bearer ${k.key}` } });
    assert.equal(res.status, 401);
    // Logged against the key's team once the key is known (an unknown model is logged without one).
    const rows = await settled(k.team, 3);
    assert.deepEqual(rows.map((r) => r.status), [403, 200, 401]);
  });

  test('the key comes first: without a valid key every request answers 401, whatever its body, model or path', async () => {
    const raw = (key: string | null, body: string, type = 'application/json') =>
      fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': type, ...(key ? { authorization: `Bearer ${key}` } : {}) }, body });
    const revoked = await mint();
    await client.revokeKey(revoked.key_id);
    for (const key of [null, 'sk-ch-not-a-key', revoked.key]) {
      const answers = [
        await chat(key, { messages: [{ role: 'user', content: 'x' }] }),
        await chat(key, { model: 42, messages: [] }),
        await chat(key, { model: 'no-such-alias', messages: [{ role: 'user', content: 'x' }] }),
        await chat(key, hello),
        await raw(key, '{"model":'),
        await raw(key, ''),
        await raw(key, 'model=fake', 'text/plain'),
        await raw(key, '['.repeat(10_000) + ']'.repeat(10_000)),
        await fetch(`${proxy.url}/v1/models/${'x'.repeat(300)}`, { headers: key ? { authorization: `Bearer ${key}` } : {} }),
        await fetch(`${proxy.url}/v1/models/fake`, { headers: key ? { authorization: `Bearer ${key}` } : {} }),
      ];
      for (const res of answers) {
        assert.equal(res.status, 401, `${key}: ${res.url}`);
        const body = await json(res);
        assert.equal(body.error.code, 'invalid_api_key');
        assert.equal(body.error.type, 'invalid_request_error');
      }
    }
    // With a valid key the same requests say what is wrong.
    const k = await mint();
    assert.equal((await chat(k.key, { messages: [{ role: 'user', content: 'x' }] })).status, 400);
    assert.equal((await chat(k.key, { model: 'no-such-alias', messages: [{ role: 'user', content: 'x' }] })).status, 404);
    const deep = await raw(k.key, '['.repeat(10_000) + ']'.repeat(10_000));
    assert.equal(deep.status, 400);
    const deepObject = await raw(k.key, '{"model":"fake","messages":[' + '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000) + ']}');
    assert.equal(deepObject.status, 400);
    assert.match((await json(deepObject)).error.message, /nests deeper/);
    // A path parameter is named as part of the path (not as Fastify's "params").
    const longModel = await fetch(`${proxy.url}/v1/models/${'x'.repeat(300)}`, { headers: { authorization: `Bearer ${k.key}` } });
    assert.equal(longModel.status, 400);
    const longBody = await json(longModel);
    assert.equal(longBody.error.param, 'model');
    assert.match(longBody.error.message, /^the path is not valid: model must be at most 200 characters long$/);
  });

  test('half of a surrogate pair is a 400 naming its field on /v1 and /admin/v1; a NUL is one on /admin/v1 (stored) but goes upstream in a completion', async () => {
    const admin = (body: unknown) =>
      fetch(`${proxy.url}/admin/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${proxyCredential()}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    // Without a valid key the body is not looked at.
    const half = { model: 'fake', messages: [{ role: 'user', content: 'Say hello' }, { role: 'user', content: 'cut \ud83d' }] };
    assert.equal((await chat(null, half)).status, 401);
    const k = await mint();
    const refused = await chat(k.key, half);
    assert.equal(refused.status, 400);
    const answer = (await json(refused)).error;
    assert.equal(answer.type, 'invalid_request_error');
    assert.equal(answer.param, 'messages.1.content');
    assert.match(answer.message, /^messages\.1\.content must be Unicode text: it holds half of a surrogate pair .*send the whole character or leave it out$/);
    // A NUL in a message is what the client sent: it goes upstream as sent.
    const withNul = await chat(k.key, { model: 'fake', messages: [{ role: 'user', content: 'a\u0000b' }] });
    assert.equal(withNul.status, 200, await withNul.clone().text());
    await withNul.arrayBuffer();
    // The admin API stores what it is sent: neither is taken, each named, and no key is made.
    const team = uniq('team');
    for (const [agent, what] of [['a\u0000b', /agent must not contain a NUL character/], ['a\udc00b', /agent must be Unicode text/]] as const) {
      const res = await admin({ team, role: 'dev', agent });
      assert.equal(res.status, 400);
      const error = (await json(res)).error;
      assert.equal(error.param, 'agent');
      assert.match(error.message, what);
    }
    assert.deepEqual(await tdb.db.selectFrom('mp_keys').select('key_id').where('team', '=', team).execute(), []);
  });

  test('rpm and tpm limits answer 429 with Retry-After', async () => {
    await awayFromClockEdges();
    const k = await mint({ rpm_limit: 2 });
    assert.equal((await chat(k.key, hello)).status, 200);
    assert.equal((await chat(k.key, hello)).status, 200);
    const res = await chat(k.key, hello);
    assert.equal(res.status, 429);
    const retry = Number(res.headers.get('retry-after'));
    assert.ok(retry >= 1 && retry <= 60, `retry-after ${retry}`);
    // Within a minute: the SDKs' own retry waits Retry-After and succeeds, so it is left to retry.
    assert.equal(res.headers.get('x-should-retry'), null);
    assert.equal((await json(res)).error.code, 'rpm_limit_exceeded');

    const t = await mint({ tpm_limit: 20 });
    assert.equal((await chat(t.key, hello)).status, 200);
    await settled(t.team, 1);
    // The first request's real tokens (prompt and completion) are charged to the minute; the next one is over.
    const over = await chat(t.key, { ...hello, messages: [{ role: 'user', content: 'x'.repeat(40) }] });
    const second = over.status === 200 ? await chat(t.key, hello) : over;
    assert.equal(second.status, 429);
    assert.equal((await json(second)).error.code, 'tpm_limit_exceeded');
    assert.ok(Number(second.headers.get('retry-after')) >= 1);
  });

  test('50 concurrent requests on one key never overshoot its budget by more than one reservation', async () => {
    fake.options.latencyMs = 30;
    try {
      const budget = 0.1;
      const k = await mint({ max_budget: budget, budget_duration: '1d' });
      const body = { ...hello, max_tokens: 10 };
      const results = await Promise.all(Array.from({ length: 50 }, () => chat(k.key, body).then(async (r) => ({ status: r.status, body: await json(r) }))));
      const ok = results.filter((r) => r.status === 200);
      const limited = results.filter((r) => r.status === 429);
      assert.equal(ok.length + limited.length, 50);
      assert.ok(ok.length >= 1, 'some requests got through');
      assert.ok(limited.length >= 1, 'the budget stopped the rest');
      assert.ok(limited.every((r) => r.body.error.code === 'key_budget_exceeded'));
      await settled(k.team, 50);
      const key = await keyRow(k.key_id);
      const spent = Number(key.window_spend);
      const charged = ok.reduce((a, r) => a + cost(r.body.usage.prompt_tokens, r.body.usage.completion_tokens), 0);
      assert.ok(Math.abs(spent - charged) < 1e-9, `charged ${charged}, recorded ${spent}`);
      // One request's reservation: the prompt estimate and max_tokens at the model's prices.
      const oneReservation = cost(Math.ceil(JSON.stringify({ ...body, model: 'gpt-fake-1' }).length / 3) + 10, 10);
      assert.ok(spent <= budget + oneReservation, `spent ${spent} of a ${budget} budget (one reservation is ${oneReservation})`);
      assert.equal(Number(key.reserved), 0, 'every reservation was settled');
      // Reservations are worst cases, so some budget may be left: spend it one by one until the key stops.
      let res = await chat(k.key, body);
      for (let i = 0; i < 20 && res.status === 200; i++) res = await chat(k.key, body);
      assert.equal(res.status, 429);
      assert.ok(Number(res.headers.get('retry-after')) > 3600, 'the key budget resets with its window');
      assert.equal(res.headers.get('x-should-retry'), 'false', 'an SDK is told not to retry a budget that frees in more than a minute');
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(Number((await keyRow(k.key_id)).window_spend) <= budget + oneReservation);
    } finally {
      fake.options.latencyMs = 0;
    }
  });

  test('the team daily budget caps every key of the team', async () => {
    await awayFromClockEdges();
    const team = uniq('team');
    await client.setTeamBudget(team, 0.05);
    const a = await mint({}, team);
    const b = await client.mintKey({ team, role: 'review', agent: 'reviewer' });
    let spentOut = 0;
    for (let i = 0; i < 20 && spentOut < 0.05; i++) {
      const r = await chat(i % 2 ? a.key : b.key, hello);
      if (r.status !== 200) break;
      const u = (await json(r)).usage;
      spentOut += cost(u.prompt_tokens, u.completion_tokens);
      await settled(team, i + 1);
    }
    const res = await chat(a.key, hello);
    assert.equal(res.status, 429);
    assert.equal((await json(res)).error.code, 'team_budget_exceeded');
    assert.ok(Number(res.headers.get('retry-after')) <= 86_400);
    const spend = await client.teamSpend(team, 1);
    assert.equal(spend.budget_usd_per_day, 0.05);
    assert.ok(spend.spent_today_usd >= 0.05);
    const rows = await client.spend({ days: 2 });
    const mine = rows.teams.find((t) => t.team === team)!;
    assert.equal(mine.series.length, 2);
    assert.ok(Math.abs(mine.totals.spend_usd - spend.spent_today_usd) < 1e-6);
    const byRole = await fetch(`${proxy.url}/admin/v1/spend/rows?from=2000-01-01&to=2999-01-01&team=${team}&role=review`, { headers: { authorization: `Bearer ${proxyCredential()}` } });
    const items = (await json(byRole)).items;
    assert.equal(items.length, 1);
    assert.equal(items[0].key_id, b.key_id);
    assert.equal(items[0].agent, 'reviewer');
    await client.setTeamBudget(team, null);
    assert.equal((await chat(a.key, hello)).status, 200);
  });

  const proxyCredential = () => serviceCredential(testConfig(overrides))!;

  test('upstream errors come back as clean errors, and release the reservation', async () => {
    const k = await mint({ max_budget: 10 });
    const cases: Array<{ failure: Parameters<FakeOpenAI['failNext']>[0]; status: number; code: string; includes?: string }> = [
      { failure: { status: 500 }, status: 502, code: 'upstream_error', includes: 'The server had an error' },
      { failure: { status: 429, headers: { 'retry-after': '7' }, body: { error: { message: 'Rate limit reached for gpt-fake-1', type: 'requests', code: 'rate_limit_exceeded' } } }, status: 429, code: 'upstream_rate_limited' },
      { failure: { status: 400, body: { error: { message: "This model's maximum context length is 10 tokens", type: 'invalid_request_error', code: 'context_length_exceeded' } } }, status: 400, code: 'upstream_invalid_request', includes: 'maximum context length' },
      { failure: { status: 401, body: { error: { message: `Incorrect API key provided: ${UPSTREAM_KEY}`, type: 'invalid_request_error' } } }, status: 502, code: 'upstream_auth_failed' },
      { failure: { status: 503, body: '<html>oops</html>' }, status: 503, code: 'upstream_overloaded' },
    ];
    for (const c of cases) {
      fake.failNext(c.failure);
      const res = await chat(k.key, hello);
      assert.equal(res.status, c.status, JSON.stringify(c.failure));
      const text = await res.text();
      assert.ok(!text.includes(UPSTREAM_KEY));
      const body = JSON.parse(text);
      assert.equal(body.error.code, c.code);
      if (c.includes) assert.ok(body.error.message.includes(c.includes), body.error.message);
      if (c.status === 429) assert.equal(res.headers.get('retry-after'), '7');
    }
    let res = await chat(k.key, { ...hello, model: 'dead' });
    assert.equal(res.status, 502);
    assert.equal((await json(res)).error.code, 'upstream_unreachable');
    res = await chat(k.key, { ...hello, model: 'nokey' });
    assert.equal(res.status, 503);
    assert.match((await json(res)).error.message, /models\/unset/);

    fake.failNext({ status: 200, dropAfterChunks: 2 });
    res = await chat(k.key, { ...hello, stream: true });
    assert.equal(res.status, 200);
    const text = await res.text();
    assert.match(text, /"code":"upstream_error"/);
    const rows = await settled(k.team, cases.length + 3);
    assert.deepEqual(rows.map((r) => r.status), [502, 429, 400, 502, 503, 502, 503, 502]);
    const key = await keyRow(k.key_id);
    assert.equal(Number(key.reserved), 0);
    assert.ok(!lines.join('').includes(UPSTREAM_KEY));
  });

  test('a reservation a dead process left behind is released by the sweeper', async () => {
    const k = await mint({ max_budget: 1 });
    const row = await keyRow(k.key_id);
    const r = await store.reserve(tdb.db, { keyHash: row.key_hash, model: 'fake', amount: 0.5, tokens: 10, ttlSeconds: 0 });
    assert.equal(r.outcome, 'ok');
    assert.equal(Number((await keyRow(k.key_id)).reserved), 0.5);
    assert.ok((await store.releaseExpired(tdb.db)) >= 1);
    assert.equal(Number((await keyRow(k.key_id)).reserved), 0);
  });

  test('the admin API needs the service credential and validates its input', async () => {
    let res = await fetch(`${proxy.url}/admin/v1/spend`);
    assert.equal(res.status, 401);
    res = await fetch(`${proxy.url}/admin/v1/spend`, { headers: { authorization: 'Bearer chp_wrong' } });
    assert.equal(res.status, 401);
    await assert.rejects(client.mintKey({ team: 'a b', role: 'dev', agent: 'x' }), (e: unknown) => e instanceof ModelProxyFailedError && e.status === 502 && e.upstreamStatus === 400);
    await assert.rejects(client.mintKey({ team: 't', role: 'dev', agent: 'x', models: ['nope'] }), (e: unknown) => e instanceof ModelProxyFailedError && e.upstreamStatus === 422);
    await assert.rejects(client.mintKey({ team: 't', role: 'dev', agent: 'x', budget_duration: '3 weeks' }), (e: unknown) => e instanceof ModelProxyFailedError && e.upstreamStatus === 422);
    const k = await mint({ rpm_limit: 1 });
    const updated = await client.updateKey(k.key_id, { rpm_limit: 100, max_budget: 5, budget_duration: '30d' });
    assert.equal(updated.rpm_limit, 100);
    assert.equal(updated.max_budget, 5);
    assert.equal((updated as unknown as { key?: string }).key, undefined, 'the key is shown once');
    const audit = await tdb.db.selectFrom('audit_log').selectAll().where('target', '=', k.key_id).execute();
    assert.deepEqual(audit.map((a) => a.action).sort(), ['modelproxy.key.create', 'modelproxy.key.update']);
    assert.ok(!JSON.stringify(audit).includes(k.key));

    // Every admin route, of every method, refuses a query parameter it does not take (400 naming
    // it) rather than ignoring it; those with a query string of their own refuse one they do not name.
    const admin: Array<[string, string, unknown?]> = [
      ['POST', '/keys', { team: 't', role: 'dev', agent: 'x' }],
      ['GET', '/keys'],
      ['GET', `/keys/${k.key_id}`],
      ['PATCH', `/keys/${k.key_id}`, { rpm_limit: 7 }],
      ['DELETE', `/keys/${k.key_id}`],
      ['POST', '/teams/t/revoke-keys'],
      ['PUT', '/teams/t/budget', { usd_per_day: 1 }],
      ['GET', '/teams/t/spend?days=1&'],
      ['GET', '/teams/t/requests'],
      ['GET', '/spend'],
      ['GET', '/spend/rows?from=2000-01-01&to=2000-01-02&'],
    ];
    for (const [method, path, body] of admin) {
      const url = `${proxy.url}/admin/v1${path}${path.endsWith('&') ? '' : '?'}not_a_parameter=1`;
      const headers: Record<string, string> = { authorization: `Bearer ${proxyCredential()}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) };
      const refused = await fetch(url, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
      const answer = (await refused.json()) as { error: { type: string; param: string | null; message: string } };
      assert.equal(refused.status, 400, `${method} ${path}: ${JSON.stringify(answer)}`);
      assert.equal(answer.error.type, 'invalid_request_error');
      assert.equal(answer.error.param, 'not_a_parameter', `${method} ${path}`);
      assert.match(answer.error.message, /not_a_parameter is not a known field/);
    }
    // Nothing was done by a refused request: the key is not revoked, its limit not changed.
    const kept = await keyRow(k.key_id);
    assert.equal(Number(kept.rpm_limit), 100);
    assert.equal(kept.revoked_at, null);

    const down = createModelProxyClient(testConfig(overrides), { baseUrl: 'http://127.0.0.1:1' });
    await assert.rejects(down.teamSpend('x', 1), (e: unknown) => e instanceof ModelProxyUnavailableError && e.status === 503);
    const unconfigured = createModelProxyClient({ ...testConfig({ SERVICE_SECRET_KEY: '' }), dataDir: ':memory:' }, { baseUrl: proxy.url });
    await assert.rejects(unconfigured.spend({ days: 1 }), (e: unknown) => e instanceof ModelProxyUnavailableError);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../audit/audit.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { createSecretsService } from '../secrets/secrets.service.ts';
import { testConfig, testDb, testModelProxy, uniq, type TestDb } from '../../test/harness.ts';
import { startFakeAnthropic, type FakeAnthropic } from '../../test/fakes/anthropic-upstream.ts';
import { createModelProxyClient } from './client.ts';
import type { RunningModelProxy } from './server.ts';

const KEY = 'sk-ant-fake-upstream-key-000';
const json = (r: Response): Promise<any> => r.json();

describe('model proxy: Anthropic upstream behind the OpenAI front', () => {
  let tdb: TestDb;
  let fake: FakeAnthropic;
  let proxy: RunningModelProxy;
  let key: string;
  let team: string;

  before(async () => {
    tdb = await testDb();
    fake = await startFakeAnthropic({ apiKey: KEY });
    const overrides = {
      SERVICE_MODELS: JSON.stringify([{ alias: 'claude', model: 'claude-fake', api: 'anthropic', base_url: fake.url, api_key_secret: 'models/anthropic', input_usd_per_mtok: 3, output_usd_per_mtok: 15, max_output_tokens: 1000 }]),
    };
    const config = testConfig(overrides);
    await createSecretsService({ db: tdb.db, cipher: loadCipher(config) }).put(systemActor('test'), 'models/anthropic', KEY);
    proxy = await testModelProxy({ db: tdb.db, config: overrides });
    team = uniq('team');
    key = (await createModelProxyClient(config, { baseUrl: proxy.url }).mintKey({ team, role: 'lead', agent: 'claude-agent' })).key;
  });
  after(async () => {
    await proxy.stop();
    await fake.close();
    await tdb.close();
  });

  const chat = (body: Record<string, unknown>) =>
    fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify({ model: 'claude', ...body }) });

  test('translates a chat request with a system prompt, and the answer and usage back', async () => {
    const res = await chat({ messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hi' }] });
    assert.equal(res.status, 200);
    const body = await json(res);
    assert.equal(body.object, 'chat.completion');
    assert.equal(body.choices[0].message.content, 'Hello from Claude');
    assert.equal(body.choices[0].finish_reason, 'stop');
    assert.deepEqual(body.usage, { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 });
    const sent = fake.requests.at(-1)!;
    assert.equal(sent.headers['x-api-key'], KEY);
    assert.equal(sent.body.system, 'Be brief.');
    assert.equal(sent.body.model, 'claude-fake');
    assert.equal(sent.body.max_tokens, 1000);
    assert.deepEqual(sent.body.messages, [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }]);
  });

  test('translates tools and tool calls', async () => {
    const res = await chat({
      messages: [{ role: 'user', content: 'Read the readme' }],
      tools: [{ type: 'function', function: { name: 'read_file', description: 'reads a file', parameters: { type: 'object', properties: { path: { type: 'string' } } } } }],
      tool_choice: 'required',
    });
    const body = await json(res);
    assert.equal(body.choices[0].finish_reason, 'tool_calls');
    assert.deepEqual(body.choices[0].message.tool_calls, [{ id: 'toolu_1', type: 'function', function: { name: 'read_file', arguments: '{"path":"README.md"}' } }]);
    const sent = fake.requests.at(-1)!.body;
    assert.equal(sent.tools[0].name, 'read_file');
    assert.deepEqual(sent.tool_choice, { type: 'any' });
  });

  test('streams Anthropic events as OpenAI chunks and charges the reported usage', async () => {
    const res = await chat({ messages: [{ role: 'user', content: 'Hi' }], stream: true, stream_options: { include_usage: true } });
    assert.equal(res.status, 200);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    assert.equal(events.at(-1), 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hello from Claude');
    assert.equal(chunks.find((c) => c.choices[0]?.finish_reason)?.choices[0].finish_reason, 'stop');
    assert.deepEqual(chunks.at(-1).usage, { prompt_tokens: 12, completion_tokens: 4, total_tokens: 16 });
    let rows: Array<{ tokens_in: number; tokens_out: number; cost_usd: number; upstream_request_id: string | null }> = [];
    for (let i = 0; i < 100 && rows.length < 3; i++) {
      rows = await tdb.db.selectFrom('mp_request_log').select(['tokens_in', 'tokens_out', 'cost_usd', 'upstream_request_id']).where('team', '=', team).orderBy('id').execute();
      if (rows.length < 3) await new Promise((r) => setTimeout(r, 10));
    }
    const last = rows.at(-1)!;
    assert.equal(last.tokens_in, 12);
    assert.equal(last.tokens_out, 4);
    assert.ok(Math.abs(Number(last.cost_usd) - (12 * 3 + 4 * 15) / 1e6) < 1e-12);
    assert.match(last.upstream_request_id!, /^req_ant_/);
  });

  test('an answer that is not JSON is a clean 502, and its reservation is released', async () => {
    fake.rawNext(200, 'text/html', '<html><body>Bad gateway</body></html>');
    const res = await chat({ messages: [{ role: 'user', content: 'Hi' }] });
    assert.equal(res.status, 502);
    assert.equal((await json(res)).error.code, 'upstream_error');
    let key: { reserved: number } | undefined;
    for (let i = 0; i < 100; i++) {
      const logged = await tdb.db.selectFrom('mp_request_log').select('status').where('team', '=', team).where('status', '=', 502).execute();
      key = await tdb.db.selectFrom('mp_keys').select('reserved').where('team', '=', team).executeTakeFirstOrThrow();
      if (logged.length === 1 && Number(key.reserved) === 0) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(Number(key!.reserved), 0);
  });

  test('n above 1 is refused: Anthropic answers one choice per request', async () => {
    const before = fake.requests.length;
    const res = await chat({ messages: [{ role: 'user', content: 'Hi' }], n: 2 });
    assert.equal(res.status, 400);
    const body = await json(res);
    assert.equal(body.error.type, 'invalid_request_error');
    assert.equal(body.error.param, 'n');
    assert.equal(fake.requests.length, before, 'nothing was sent upstream');
    assert.equal((await chat({ messages: [{ role: 'user', content: 'Hi' }], n: 1 })).status, 200);
  });

  test('a stream event that is JSON but not an object is skipped, and the stream still ends', async () => {
    const event = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    fake.rawNext(
      200,
      'text/event-stream',
      event('message_start', { type: 'message_start', message: { id: 'msg_odd', usage: { input_tokens: 5, output_tokens: 1 } } }) +
        'event: ping\ndata: null\n\n' +
        event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi there' } }) +
        'data: 7\n\n' +
        event('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }) +
        event('message_stop', { type: 'message_stop' }),
    );
    const res = await chat({ messages: [{ role: 'user', content: 'Hi' }], stream: true });
    assert.equal(res.status, 200);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    assert.equal(events.at(-1), 'data: [DONE]');
    const chunks = events.slice(0, -1).map((e) => JSON.parse(e.slice('data: '.length)));
    assert.equal(chunks.map((c) => c.choices[0]?.delta?.content ?? '').join(''), 'Hi there');
  });

  test('a stream event the translator cannot read ends the answer with an error event, logged 502, and the reservation is released', async () => {
    const event = (type: string, data: unknown) => `event: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
    fake.rawNext(
      200,
      'text/event-stream',
      event('message_start', { type: 'message_start', message: { id: 'msg_unreadable', usage: { input_tokens: 5, output_tokens: 1 } } }) +
        event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }) +
        // A text that is an object no string can be made of: reading it throws.
        event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: { toString: 1 } } }) +
        event('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: ' never sent' } }) +
        event('message_stop', { type: 'message_stop' }),
    );
    const res = await chat({ messages: [{ role: 'user', content: 'Hi' }], stream: true });
    assert.equal(res.status, 200);
    // The answer ends (it hung before) with an error event saying what failed, and nothing after the unreadable event.
    const events = (await res.text()).split('\n\n').filter(Boolean).map((e) => JSON.parse(e.slice('data: '.length)));
    assert.ok(!events.some((c) => c.choices?.[0]?.delta?.content === ' never sent'));
    assert.deepEqual(events.at(-1).error, { message: 'the upstream for "claude" sent an event that could not be read', type: 'upstream_error', param: null, code: 'upstream_error' });
    let row: { status: number; error: string | null } | undefined;
    let reserved = -1;
    for (let i = 0; i < 500 && !(row && reserved === 0); i++) {
      row = await tdb.db.selectFrom('mp_request_log').select(['status', 'error']).where('team', '=', team).where('error', '=', 'the upstream for "claude" sent an event that could not be read').executeTakeFirst();
      reserved = Number((await tdb.db.selectFrom('mp_keys').select('reserved').where('team', '=', team).executeTakeFirstOrThrow()).reserved);
      if (!(row && reserved === 0)) await new Promise((r) => setTimeout(r, 20));
    }
    assert.equal(row?.status, 502);
    assert.equal(reserved, 0);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { testDb, testModelProxy, testConfig, uniq, type TestDb } from '../../test/harness.ts';
import { agentConversation, asciiJson } from '../../test/conversations.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../test/fakes/openai-upstream.ts';
import { inspectJson, MAX_JSON_DEPTH } from '../db/json-values.ts';
import { loadModelCatalog, type ModelAlias } from '../models/catalog.ts';
import { createModelProxyClient } from './client.ts';
import { countKeys, readRawJson, rewriteMembers } from './raw-json.ts';
import type { RunningModelProxy } from './server.ts';
import { openaiAdapter, type ChatRequest } from './upstream.ts';

/** A JSON value with what trips a hand-written reader: escapes at string ends, empty containers, numbers of every form, keys that repeat or are escaped. */
function trickyValue(seed: number, depth = 0): unknown {
  let s = seed;
  const next = () => (s = (s * 1103515245 + 12345) % 2147483648);
  const strings = ['', 'a\\', '\\\\', '"', '\\"', 'x"y', '{[', ']}', ':', ',', 'é😀', '\u2028', '\t\n', '\u0001', 'model', '"model":1'];
  const numbers = [0, 1, -1, 0.5, 1e21, 1e-7, 123456789012, -2.5e-3];
  const one = (d: number): unknown => {
    const kind = next() % (d > 4 ? 4 : 7);
    if (kind === 0) return strings[next() % strings.length];
    if (kind === 1) return numbers[next() % numbers.length];
    if (kind === 2) return [true, false, null][next() % 3];
    if (kind === 3) return next() % 2 ? {} : [];
    if (kind === 4 || kind === 5) return Object.fromEntries(Array.from({ length: next() % 5 }, (_, i) => [`${strings[next() % strings.length]}${i}`, one(d + 1)]));
    return Array.from({ length: next() % 5 }, () => one(d + 1));
  };
  return one(depth);
}

/** `value` as JSON text with spaces, tabs and newlines around its tokens (as hand-written or pretty-printed JSON has). */
function spaced(value: unknown, seed: number): string {
  const ws = [' ', '\n', '\t', '\r\n', '', '  '];
  let i = seed;
  const w = () => ws[i++ % ws.length];
  const write = (v: unknown): string => {
    if (Array.isArray(v)) return `[${w()}${v.map((x) => `${w()}${write(x)}${w()}`).join(',')}${w()}]`;
    if (v !== null && typeof v === 'object') return `{${w()}${Object.entries(v).map(([k, x]) => `${w()}${JSON.stringify(k)}${w()}:${w()}${write(x)}${w()}`).join(',')}${w()}}`;
    return JSON.stringify(v);
  };
  return write(value);
}

/** The depth inspectJson counts to (the containers open at once), for comparing with the reader's. */
function openAtOnce(v: unknown): number {
  if (v === null || typeof v !== 'object') return 0;
  const children = Array.isArray(v) ? v : Object.values(v);
  return 1 + Math.max(0, ...children.map(openAtOnce));
}

const read = (text: string) => readRawJson(Buffer.from(text), text);

describe('model proxy: the body read as sent (raw-json)', () => {
  test('reads the top-level members, the depth and the keys of any object as JSON.parse does, however it is spaced', () => {
    for (let seed = 1; seed <= 300; seed++) {
      const value = { model: 'm', stuff: trickyValue(seed), last: trickyValue(seed + 1000) };
      for (const text of [JSON.stringify(value), spaced(value, seed), asciiJson(value), `\ufeff ${JSON.stringify(value)}\n`]) {
        const raw = read(text);
        assert.ok(raw, text);
        const parsed = JSON.parse(text.replace(/^\ufeff/, '')) as Record<string, unknown>;
        assert.deepEqual(
          raw.members.map((m) => m.key),
          Object.keys(parsed),
          text,
        );
        for (const m of raw.members) assert.deepEqual(JSON.parse(text.slice(m.valueStart, m.valueEnd)), parsed[m.key], text);
        assert.equal(raw.keys, countKeys(parsed), text);
        assert.equal(raw.maxOpen, openAtOnce(parsed), text);
        assert.equal(raw.plainNumbers, true);
        assert.equal(raw.suspectKey, false, text);
        // Byte offsets: the bytes of each member's value are its text.
        const bytes = Buffer.from(text);
        for (const m of raw.members) assert.equal(bytes.subarray(raw.byteOffset(m.valueStart), raw.byteOffset(m.valueEnd)).toString(), text.slice(m.valueStart, m.valueEnd));
      }
    }
  });

  test('rewriting members gives what writing the parsed body again gives, as JSON; or declines', () => {
    const set = new Map([
      ['model', '"upstream-name"'],
      ['max_tokens', '7'],
      ['stream_options', '{"include_usage":true}'],
    ]);
    const expected = (parsed: Record<string, unknown>) => ({ ...parsed, model: 'upstream-name', max_tokens: 7, stream_options: { include_usage: true } });
    for (let seed = 1; seed <= 200; seed++) {
      const value = { a: trickyValue(seed), model: 'x', b: trickyValue(seed + 7), ...(seed % 2 ? { max_tokens: 9000 } : {}) };
      const text = spaced(value, seed);
      const parsed = JSON.parse(text) as Record<string, unknown>;
      const out = rewriteMembers(read(text)!, parsed, set);
      assert.ok(out, text);
      assert.deepEqual(JSON.parse(out.toString()), expected(parsed), text);
    }
    // A key sent twice, at the top or inside: the bytes cannot stand for the parsed body.
    for (const text of ['{"model":"a","model":"b"}', '{"model":"a","m":[{"k":1,"k":2}]}', '{"model":"a","m":{"\\u006b":1,"k":2}}']) {
      assert.equal(rewriteMembers(read(text)!, JSON.parse(text), set), null, text);
    }
    // A number that would be written back as another value: an infinity (null), minus zero (0).
    for (const text of ['{"model":"a","t":1e400}', '{"model":"a","t":[-0]}', '{"model":"a","t":-0.0e5}', `{"model":"a","t":${'9'.repeat(400)}}`]) {
      const raw = read(text)!;
      assert.equal(raw.plainNumbers, false, text);
      assert.equal(rewriteMembers(raw, JSON.parse(text), set), null, text);
    }
    // Numbers that read back the same value pass as sent.
    for (const text of ['{"model":"a","t":1e2}', '{"model":"a","t":-0.5}', '{"model":"a","t":12345678901234567890}', '{"model":"a","t":1.0}']) {
      assert.equal(read(text)!.plainNumbers, true, text);
    }
    // An empty body object: the members are added.
    assert.deepEqual(JSON.parse(rewriteMembers(read('{ }')!, {}, set)!.toString()), expected({}));
  });

  test('notes what needs a closer look: escapes of surrogates or NUL, keys that may be __proto__ or constructor; not JSON objects read as null', () => {
    assert.equal(read('{"a":"\\ud83d\\ude00"}')!.suspectEscape, true);
    assert.equal(read('{"a":"\\u0000"}')!.suspectEscape, true);
    assert.equal(read('{"a":"\\u00e9 \\n"}')!.suspectEscape, false);
    for (const key of ['__proto__', '\\u005f_proto__', 'constructor', 'c\\u006fnstructor', 'content\\u0020', '\\u0061']) assert.equal(read(`{"x":{"${key}":1}}`)!.suspectKey, true, key);
    for (const key of ['content', 'constructors_', '_private', 'c']) assert.equal(read(`{"x":{"${key}":1}}`)!.suspectKey, false, key);
    for (const text of ['', ' ', '[]', '"x"', 'null', '1', '{"a":', '{"a":"x', 'x{}']) assert.equal(read(text), null, text);
    // Bytes that are not UTF-8 are not forwarded as sent: they were decoded into replacement characters.
    assert.equal(readRawJson(Buffer.from([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0x22, 0x7d]), '{"a":"\ufffd"}'), null);
  });
});

describe('model proxy: a completion forwarded as sent', () => {
  let tdb: TestDb;
  let fake: FakeOpenAI;
  let proxy: RunningModelProxy;
  let key: string;
  let alias: ModelAlias;

  before(async () => {
    tdb = await testDb();
    fake = await startFakeOpenAI();
    const overrides = { SERVICE_MODELS: JSON.stringify([{ alias: 'fake', model: 'gpt-fake-1', api: 'openai', base_url: fake.baseUrl, api_key_secret: null, input_usd_per_mtok: 0, output_usd_per_mtok: 0, max_output_tokens: 50 }]) };
    alias = loadModelCatalog(overrides.SERVICE_MODELS).get('fake')!;
    proxy = await testModelProxy({ db: tdb.db, config: overrides });
    key = (await createModelProxyClient(testConfig(overrides), { baseUrl: proxy.url }).mintKey({ team: uniq('team'), role: 'dev', agent: 'coder' })).key;
  });
  after(async () => {
    await proxy.stop();
    await fake.close();
    await tdb.close();
  });

  const send = (body: string | Buffer) =>
    fetch(`${proxy.url}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body });
  /** What the upstream got for `body`, and what writing the parsed body again (the proxy's way before it kept the bytes) gives. */
  async function forwarded(body: string | Buffer) {
    const before = fake.requests.length;
    const res = await send(body);
    assert.equal(res.status, 200, await res.clone().text());
    await res.arrayBuffer();
    assert.equal(fake.requests.length, before + 1);
    const got = fake.requests[before];
    const parsed = JSON.parse((Buffer.isBuffer(body) ? body.toString('utf8') : body).replace(/^\ufeff/, '')) as ChatRequest;
    const old = openaiAdapter.request(parsed, alias, null).payload;
    return { got, expected: JSON.parse(old.toString()) as unknown };
  }

  test('the upstream gets what the parsed body written again would say, for bodies of every kind', async () => {
    const big = agentConversation({ bytes: 200 * 1024, model: 'fake', maxTokens: 9000 });
    const bodies: Array<[string, string | Buffer]> = [
      ['200 KiB, plain', JSON.stringify(big)],
      ['200 KiB, streamed', JSON.stringify({ ...big, stream: true })],
      ['200 KiB, escaped as Python writes it', asciiJson({ ...big, stream: true, stream_options: { include_usage: false, extra: [1] } })],
      ['pretty-printed, model last', JSON.stringify({ messages: big.messages.slice(0, 20), max_completion_tokens: 10, model: 'fake' }, null, 2)],
      ['a byte order mark and spaces', `\ufeff \n${JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: 'hi' }] })}\n`],
      ['an escaped key for the model', '{"mo\\u0064el":"fake","messages":[{"role":"user","content":"hi"}]}'],
      ['the model sent twice (the last counts)', '{"model":"gpt-nope","messages":[{"role":"user","content":"hi"}],"model":"fake"}'],
      ['a key sent twice in a message', '{"model":"fake","messages":[{"role":"user","content":"one","content":"two"}]}'],
      ['model keys inside messages', JSON.stringify({ model: 'fake', messages: [{ role: 'user', content: [{ type: 'text', text: 'x', model: 'inner' }], model: 'm' }], metadata: { model: 'meta' } })],
      ['escapes: a pair, a slash, unicode', '{"model":"fake","messages":[{"role":"user","content":"\\ud83d\\ude00 \\/ \\u00e9 \\"q\\" \\\\"}]}'],
      ['numbers of every form', '{"model":"fake","messages":[{"role":"user","content":"n"}],"temperature":1.0,"top_p":1e-1,"seed":12345678901234567890,"logit_bias":{"50256":-100}}'],
      ['an infinity and minus zero', '{"model":"fake","messages":[{"role":"user","content":"n"}],"temperature":-0,"x":1e999}'],
      ['a NUL in a message', '{"model":"fake","messages":[{"role":"user","content":"a\\u0000b"}]}'],
      ['stream_options null', '{"model":"fake","stream":true,"stream_options":null,"messages":[{"role":"user","content":"s"}]}'],
      ['bytes that are not UTF-8', Buffer.concat([Buffer.from('{"model":"fake","messages":[{"role":"user","content":"'), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}]}')])],
    ];
    for (const [name, body] of bodies) {
      const { got, expected } = await forwarded(body);
      assert.deepStrictEqual(got.body, expected, name);
      // No key is sent twice, at the top or inside: the text the upstream got holds as many keys as its parsed value.
      assert.equal(readRawJson(Buffer.from(got.raw), got.raw)!.keys, countKeys(got.body), name);
    }
    // A large conversation goes as the bytes that came: its messages are the client's text, not written again.
    const text = asciiJson(big);
    const { got } = await forwarded(text);
    assert.ok(got.raw.includes(text.slice(text.indexOf('"messages":'), text.indexOf(',"max_tokens"'))));
  });

  test('what is wrong with a body is answered as before: not JSON, empty, __proto__, not an object, too deep, half a surrogate pair', async () => {
    const messages = '[{"role":"user","content":"x"}]';
    const cases: Array<[string | Buffer, number, RegExp]> = [
      ['{"model":', 400, /^the body is not valid JSON$/],
      [`{"model":"fake","messages":${messages}} x`, 400, /^the body is not valid JSON$/],
      [`{"model":"fake","messages":[{"role":"user","content":"a\u0001b"}]}`, 400, /^the body is not valid JSON$/],
      ['{"model":"fake","messages":[{"role":"user","content":"a\\qb"}]}', 400, /^the body is not valid JSON$/],
      ['', 400, /^the body is empty; send a JSON document$/],
      [' ', 400, /^the body is not valid JSON$/],
      ['\ufeff', 400, /^the body is not valid JSON$/],
      [`{"model":"fake","messages":${messages},"__proto__":{"x":1}}`, 400, /^the body is not valid JSON$/],
      [`{"model":"fake","messages":[{"\\u005f_proto__":{"x":1}}]}`, 400, /^the body is not valid JSON$/],
      [`{"model":"fake","messages":${messages},"constructor":{"prototype":{"x":1}}}`, 400, /^the body is not valid JSON$/],
      ['[]', 400, /^the body is not valid: \(body\) must be an object/],
      ['null', 400, /the body is not valid/],
      [`{"messages":${messages}}`, 400, /^the body is not valid: model is required/],
      ['{"model":"fake","messages":[]}', 400, /^the body is not valid: messages must/],
      [`{"model":"fake","messages":[${'['.repeat(200)}${']'.repeat(200)}]}`, 400, /^the body nests deeper than 100 levels$/],
      [`{"model":"fake","messages":[{"role":"user","content":"cut \\ud83d"}]}`, 400, /^messages\.0\.content must be Unicode text: it holds half of a surrogate pair/],
      [`{"model":"fake","messages":${messages},"m\\ud800":1}`, 400, /must be Unicode text/],
    ];
    for (const [body, status, message] of cases) {
      const res = await send(body);
      const error = ((await res.json()) as { error: { message: string; type: string } }).error;
      assert.equal(res.status, status, `${String(body).slice(0, 80)}: ${error.message}`);
      assert.equal(error.type, 'invalid_request_error');
      assert.match(error.message, message, String(body).slice(0, 80));
    }
    // The depth refused is the one inspectJson refuses, to the level: the reader counts as it walks.
    for (const levels of [MAX_JSON_DEPTH - 3, MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1]) {
      const body = `{"model":"fake","messages":[{"role":"user","content":"x","d":${'['.repeat(levels)}${']'.repeat(levels)}}]}`;
      const tooDeep = inspectJson(JSON.parse(body)) !== null;
      const res = await send(body);
      assert.equal(res.status, tooDeep ? 400 : 200, `${levels}: ${await res.clone().text()}`);
      await res.arrayBuffer();
    }
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { ModelAlias } from '../models/catalog.ts';
import { anthropicAdapter } from './anthropic.ts';
import { estimateTokens, openaiAdapter, type Adapter } from './upstream.ts';

const alias: ModelAlias = {
  alias: 'fast',
  model: 'gpt-fake-1',
  api: 'openai',
  base_url: 'http://127.0.0.1:1',
  api_key_secret: null,
  input_usd_per_mtok: 1,
  output_usd_per_mtok: 2,
  context_window: 1000,
  max_output_tokens: 100,
  description: '',
};

const WORDS = ['Hé', 'llo ', '😀', ' wörld', ' \\"usage\\":{\\"prompt_tokens\\":99}', ' 日本'];
const chunk = (delta: object, extra: object = {}) => JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'gpt-fake-1', choices: [{ index: 0, delta, finish_reason: null }], usage: null, ...extra });

/** An OpenAI stream as an upstream sends it: content (multi-byte characters included), the usage chunk, [DONE]. */
function openaiStream(eol: string, withUsage: boolean): { events: string[]; bytes: Buffer } {
  const events = [
    ...WORDS.map((w) => `data: ${chunk({ content: JSON.parse(`"${w}"`) })}`),
    `data: ${chunk({ tool_calls: [{ index: 0, function: { arguments: '{"a":"ü"}' } }] })}`,
    ...(withUsage ? [`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 12, completion_tokens: 7, total_tokens: 19 } })}`] : []),
    'data: [DONE]',
  ];
  return { events, bytes: Buffer.from(events.map((e) => e + eol + eol).join('')) };
}

/** Runs `bytes` through a fresh translator cut into the given pieces; answers what the client got and the usage. */
function run(adapter: Adapter, bytes: Buffer, cuts: number[], clientWantsUsage: boolean) {
  const t = adapter.stream({ clientWantsUsage, alias, promptTokens: 5 });
  const out: Buffer[] = [];
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    out.push(...t.push(bytes.subarray(from, cut)));
    from = cut;
  }
  out.push(...t.end());
  return { out: Buffer.concat(out), usage: t.usage(), error: t.error() };
}

/** Every way to cut `bytes` in two, and one byte at a time. */
function cuttings(bytes: Buffer): number[][] {
  const all: number[][] = [[]];
  for (let i = 1; i < bytes.length; i++) all.push([i]);
  all.push(Array.from({ length: bytes.length - 1 }, (_, i) => i + 1));
  return all;
}

describe('model proxy: streamed answers read as bytes', () => {
  for (const eol of ['\n', '\r\n']) {
    const name = eol === '\n' ? 'LF' : 'CRLF';

    test(`${name}: unchanged events pass as the bytes that came, cut anywhere, and the usage is exact`, () => {
      const { bytes } = openaiStream(eol, true);
      for (const cuts of cuttings(bytes)) {
        const r = run(openaiAdapter, bytes, cuts, true);
        assert.ok(r.out.equals(bytes), `cut at ${cuts.join(',')}`);
        assert.deepEqual(r.usage, { tokensIn: 12, tokensOut: 7, reported: true });
        assert.equal(r.error, null);
      }
    });

    test(`${name}: the usage chunk the client did not ask for is dropped, the rest passes unchanged, wherever the stream is cut`, () => {
      const { events, bytes } = openaiStream(eol, true);
      const expected = Buffer.from(events.filter((e) => !e.includes('"completion_tokens"')).map((e) => e + eol + eol).join(''));
      for (const cuts of cuttings(bytes)) {
        const r = run(openaiAdapter, bytes, cuts, false);
        assert.ok(r.out.equals(expected), `cut at ${cuts.join(',')}: ${r.out.toString()}`);
        assert.deepEqual(r.usage, { tokensIn: 12, tokensOut: 7, reported: true });
      }
    });

    test(`${name}: without usage, the estimate counts the streamed text the same wherever the stream is cut`, () => {
      const { bytes } = openaiStream(eol, false);
      // Content as written in the JSON (escapes as written), and the tool call's arguments.
      const written = WORDS.map((w) => JSON.stringify(JSON.parse(`"${w}"`)).slice(1, -1));
      const expected = estimateTokens(Buffer.byteLength(written.join('') + JSON.stringify('{"a":"ü"}').slice(1, -1)));
      for (const cuts of cuttings(bytes)) {
        const r = run(openaiAdapter, bytes, cuts, true);
        assert.ok(r.out.equals(bytes));
        assert.deepEqual(r.usage, { tokensIn: 5, tokensOut: expected, reported: false }, `cut at ${cuts.join(',')}`);
      }
    });
  }

  test('an error event is read, and a last event without its blank line is still passed on', () => {
    const bytes = Buffer.from(`data: ${chunk({ content: 'a' })}\n\ndata: {"error":{"message":"overloaded ✗"}}`);
    for (const cuts of cuttings(bytes)) {
      const r = run(openaiAdapter, bytes, cuts, true);
      assert.equal(r.out.toString(), bytes.toString() + '\n\n');
      assert.equal(r.error, 'overloaded ✗');
    }
  });

  test('the Anthropic translation gives the same chunks wherever its stream is cut, multi-byte characters included', () => {
    const ev = (type: string, body: object) => `event: ${type}\r\ndata: ${JSON.stringify({ type, ...body })}\r\n\r\n`;
    const bytes = Buffer.from(
      ev('message_start', { message: { id: 'msg_1', usage: { input_tokens: 9, output_tokens: 1 } } }) +
        ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'Grüße 😀' } }) +
        ev('message_delta', { delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 4 } }) +
        ev('message_stop', {}),
    );
    // The chunks carry the second they were made in: the same stream in two seconds differs there only.
    const text = (out: Buffer) => out.toString().replace(/"created":\d+/g, '"created":0');
    const whole = text(run(anthropicAdapter, bytes, [], true).out);
    assert.match(whole, /Grüße 😀/);
    for (const cuts of cuttings(bytes)) {
      const r = run(anthropicAdapter, bytes, cuts, true);
      assert.equal(text(r.out), whole, `cut at ${cuts.join(',')}`);
      assert.deepEqual(r.usage, { tokensIn: 9, tokensOut: 4, reported: true });
    }
  });
});

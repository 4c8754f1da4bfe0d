import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake OpenAI-compatible upstream on 127.0.0.1: `POST /v1/chat/completions` in the real wire
 * format (JSON, or server-sent events with `stream: true`, usage with
 * `stream_options.include_usage`), `x-request-id` on every answer, errors as
 * `{error: {message, type, code}}`. Usage is computed from the request: prompt tokens from the
 * messages' text (4 characters a token), completion tokens from the reply it writes.
 */
export interface FakeOpenAIOptions {
  /** The key the fake accepts (401 otherwise); null accepts any or none. */
  apiKey?: string | null;
  /** Delay before the answer starts (ms). */
  latencyMs?: number;
  /** Words in a reply, one streamed chunk each. */
  words?: number;
  /**
   * Delay between streamed chunks (ms), kept to a schedule from the first chunk: chunk i is due
   * i delays after it, however late the one before went out. A model's pace is set on its own
   * machine; this fake shares the CPU with what it is measured against, and sleeping a delay
   * after each write would let that load stretch every later gap (20 chunks at 2 ms came 2 to 3
   * ms later in all when the proxy was busy beside it), counting the fake's slowness as latency
   * the proxy added.
   */
  chunkDelayMs?: number;
  /** Leave usage out entirely (some OpenAI-compatible servers do). */
  omitUsage?: boolean;
}

export interface ScriptedFailure {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Stream this many chunks and then cut the connection; a plain answer sends half its body and is cut (whatever the number). */
  dropAfterChunks?: number;
  /** Stream `dropAfterChunks` chunks (0 by default), then an error event with this message (as OpenAI does mid-stream), then end. */
  streamError?: string;
  /** Answer normally but report this usage (what a misbehaving OpenAI-compatible server might send). */
  usage?: Record<string, unknown>;
}

export interface FakeOpenAI {
  url: string;
  /** The base URL a model alias points at (`${url}/v1`). */
  baseUrl: string;
  /** Every request received: headers, parsed body, and the body's text as it came. */
  requests: Array<{ headers: http.IncomingHttpHeaders; body: any; raw: string }>;
  /** The next requests fail like this, in order. */
  failNext(...failures: ScriptedFailure[]): void;
  options: FakeOpenAIOptions;
  close(): Promise<void>;
}

const sleep = (ms: number) => (ms > 0 ? new Promise((r) => setTimeout(r, ms)) : Promise.resolve());

function textOfMessages(messages: any[]): string {
  return messages
    .map((m) => (typeof m?.content === 'string' ? m.content : Array.isArray(m?.content) ? m.content.map((p: any) => p?.text ?? '').join('') : ''))
    .join('\n');
}

export async function startFakeOpenAI(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
  const requests: FakeOpenAI['requests'] = [];
  const failures: ScriptedFailure[] = [];
  let seq = 0;

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => void answer(req, res, Buffer.concat(chunks).toString('utf8')));
  });
  server.keepAliveTimeout = 60_000;

  const error = (res: http.ServerResponse, status: number, message: string, type: string, code: string | null, headers: Record<string, string> = {}) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify({ error: { message, type, param: null, code } }));
  };

  async function answer(req: http.IncomingMessage, res: http.ServerResponse, raw: string) {
    const id = `req_${(++seq).toString(36)}`;
    res.setHeader('x-request-id', id);
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') return error(res, 404, `Invalid URL (${req.method} ${req.url})`, 'invalid_request_error', null);
    let body: any;
    try {
      body = JSON.parse(raw);
    } catch {
      return error(res, 400, 'We could not parse the JSON body of your request.', 'invalid_request_error', null);
    }
    requests.push({ headers: req.headers, body, raw });
    if (options.apiKey && req.headers.authorization !== `Bearer ${options.apiKey}`) {
      return error(res, 401, `Incorrect API key provided: ${String(req.headers.authorization ?? '').slice(7, 12)}****. You can find your API key at https://platform.openai.com/account/api-keys.`, 'invalid_request_error', 'invalid_api_key');
    }
    const failure = failures.shift();
    if (failure && failure.dropAfterChunks === undefined && failure.streamError === undefined && failure.usage === undefined) {
      res.writeHead(failure.status, { 'content-type': 'application/json', ...(failure.headers ?? {}) });
      return res.end(JSON.stringify(failure.body ?? { error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } }));
    }
    if (!Array.isArray(body.messages) || body.messages.length === 0) return error(res, 400, "Invalid 'messages': empty array.", 'invalid_request_error', 'empty_array');

    await sleep(options.latencyMs ?? 0);
    const promptTokens = Math.max(1, Math.ceil(textOfMessages(body.messages).length / 4)) + 3 * body.messages.length;
    const cap = body.max_completion_tokens ?? body.max_tokens ?? Infinity;
    const words = Math.max(1, Math.min(options.words ?? 5, cap));
    const parts = Array.from({ length: words }, (_, i) => (i === 0 ? 'word0' : ` word${i}`));
    const completionTokens = words;
    const usage = failure?.usage ?? { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens };
    const created = Math.floor(Date.now() / 1000);
    const cid = `chatcmpl-${id}`;
    const finish = words < (options.words ?? 5) ? 'length' : 'stop';

    if (!body.stream) {
      const answer = JSON.stringify({
        id: cid,
        object: 'chat.completion',
        created,
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: parts.join(''), refusal: null }, logprobs: null, finish_reason: finish }],
        ...(options.omitUsage ? {} : { usage }),
        system_fingerprint: 'fp_fake',
      });
      if (failure?.dropAfterChunks !== undefined) {
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(answer)) });
        res.write(answer.slice(0, answer.length >> 1));
        setTimeout(() => res.socket?.destroy(), 10);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json' });
      return res.end(answer);
    }
    const withUsage = body.stream_options?.include_usage === true && !options.omitUsage;
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive' });
    const send = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      res.write(`data: ${JSON.stringify({ id: cid, object: 'chat.completion.chunk', created, model: body.model, system_fingerprint: 'fp_fake', choices, ...(withUsage ? { usage: null } : {}), ...extra })}\n\n`);
    send([{ index: 0, delta: { role: 'assistant', content: '' }, logprobs: null, finish_reason: null }]);
    const firstAt = performance.now();
    for (let i = 0; i < parts.length; i++) {
      if (failure?.streamError !== undefined && i >= (failure.dropAfterChunks ?? 0)) {
        res.write(`data: ${JSON.stringify({ error: { message: failure.streamError, type: 'server_error', param: null, code: null } })}\n\n`);
        return res.end();
      }
      if (failure?.dropAfterChunks !== undefined && i >= failure.dropAfterChunks) {
        // Let what was written reach the client, then cut the connection mid-stream.
        await sleep(20);
        res.socket?.destroy();
        return;
      }
      const delay = options.chunkDelayMs ?? 0;
      if (delay > 0) await sleep(firstAt + (i + 1) * delay - performance.now());
      send([{ index: 0, delta: { content: parts[i] }, logprobs: null, finish_reason: null }]);
    }
    send([{ index: 0, delta: {}, logprobs: null, finish_reason: finish }]);
    if (withUsage) send([], { usage });
    res.end('data: [DONE]\n\n');
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    baseUrl: `${url}/v1`,
    requests,
    options,
    failNext: (...f) => failures.push(...f),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

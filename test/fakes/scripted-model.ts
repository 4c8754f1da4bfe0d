import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A scripted model behind OpenAI's chat completions wire format, with tool calls, streamed
 * (server-sent events, tool-call arguments in pieces, usage last) and not. A test decides each
 * answer from the request (the system prompt names the role; the messages show what happened),
 * so a whole team can be driven through the real model proxy and gateway.
 */
export interface ScriptedToolCall {
  name: string;
  /** An object is sent as its JSON; a string is sent verbatim (to test malformed arguments). */
  arguments: Record<string, unknown> | string;
}

export type ScriptedAnswer =
  | { content?: string | null; tool_calls?: ScriptedToolCall[]; usage?: { prompt_tokens: number; completion_tokens: number } }
  | { status: number; body?: string; contentType?: string }
  | { hangMs: number };

export interface ScriptedRequest {
  headers: http.IncomingHttpHeaders;
  body: { model: string; messages: Array<{ role: string; content?: string | null; tool_calls?: any[]; tool_call_id?: string }>; tools?: any[]; stream?: boolean };
  /** The system prompt (the first message's text). */
  system: string;
  /** The newest message that is not the assistant's. */
  last: { role: string; content?: string | null; tool_call_id?: string } | undefined;
  /** When the whole answer was handed to the socket (`performance.timeOrigin + performance.now()`), once it was. */
  sentAt?: number;
}

export interface ScriptedModel {
  url: string;
  baseUrl: string;
  requests: ScriptedRequest[];
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function startScriptedModel(respond: (req: ScriptedRequest, n: number) => ScriptedAnswer | Promise<ScriptedAnswer>): Promise<ScriptedModel> {
  const requests: ScriptedRequest[] = [];
  let calls = 0;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      void answer(req, res, Buffer.concat(chunks).toString('utf8')).catch((err) => {
        res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: `the script failed: ${err instanceof Error ? err.message : String(err)}`, type: 'server_error', param: null, code: null } }));
      });
    });
  });

  async function answer(req: http.IncomingMessage, res: http.ServerResponse, raw: string) {
    if (req.method !== 'POST' || !req.url?.endsWith('/chat/completions')) {
      res.writeHead(404, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ error: { message: `Invalid URL (${req.method} ${req.url})`, type: 'invalid_request_error', param: null, code: null } }));
    }
    const body = JSON.parse(raw);
    const messages = Array.isArray(body.messages) ? body.messages : [];
    const scripted: ScriptedRequest = {
      headers: req.headers,
      body,
      system: typeof messages[0]?.content === 'string' ? messages[0].content : '',
      last: [...messages].reverse().find((m: any) => m.role !== 'assistant'),
    };
    requests.push(scripted);
    const n = calls++;
    const a = await respond(scripted, n);
    if ('hangMs' in a) {
      await sleep(a.hangMs);
      res.socket?.destroy();
      return;
    }
    if ('status' in a) {
      res.writeHead(a.status, { 'content-type': a.contentType ?? 'application/json' });
      return res.end(a.body ?? JSON.stringify({ error: { message: 'The server had an error while processing your request.', type: 'server_error', param: null, code: null } }));
    }
    const id = `chatcmpl-s${n}`;
    const created = Math.floor(Date.now() / 1000);
    const toolCalls = (a.tool_calls ?? []).map((c, i) => ({
      id: `call_${n}_${i}`,
      type: 'function',
      function: { name: c.name, arguments: typeof c.arguments === 'string' ? c.arguments : JSON.stringify(c.arguments) },
    }));
    const promptChars = messages.reduce((k: number, m: any) => k + (typeof m.content === 'string' ? m.content.length : 0), 0);
    const usage = a.usage ?? { prompt_tokens: Math.max(1, Math.ceil(promptChars / 4)), completion_tokens: 10 + toolCalls.length * 10 };
    const fullUsage = { ...usage, total_tokens: usage.prompt_tokens + usage.completion_tokens };
    const finish = toolCalls.length ? 'tool_calls' : 'stop';
    const sent = () => (scripted.sentAt = performance.timeOrigin + performance.now());
    if (!body.stream) {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          id,
          object: 'chat.completion',
          created,
          model: body.model,
          choices: [{ index: 0, message: { role: 'assistant', content: a.content ?? null, refusal: null, ...(toolCalls.length ? { tool_calls: toolCalls } : {}) }, logprobs: null, finish_reason: finish }],
          usage: fullUsage,
        }),
      );
      sent();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' });
    const send = (choices: unknown[], extra: Record<string, unknown> = {}) => res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: body.model, choices, ...extra })}\n\n`);
    send([{ index: 0, delta: { role: 'assistant', content: a.content ? '' : null }, finish_reason: null }]);
    if (a.content) for (const word of a.content.match(/\S+\s*/g) ?? [a.content]) send([{ index: 0, delta: { content: word }, finish_reason: null }]);
    toolCalls.forEach((c, index) => {
      send([{ index: 0, delta: { tool_calls: [{ index, id: c.id, type: 'function', function: { name: c.function.name, arguments: '' } }] }, finish_reason: null }]);
      const args = c.function.arguments;
      for (let i = 0; i < args.length; i += 16) send([{ index: 0, delta: { tool_calls: [{ index, function: { arguments: args.slice(i, i + 16) } }] }, finish_reason: null }]);
    });
    send([{ index: 0, delta: {}, finish_reason: finish }]);
    if (body.stream_options?.include_usage) send([], { usage: fullUsage });
    res.end('data: [DONE]\n\n');
    sent();
  }

  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    baseUrl: `${url}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

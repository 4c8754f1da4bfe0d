import http from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * A fake Anthropic Messages API on 127.0.0.1: `POST /v1/messages` with `x-api-key` and
 * `anthropic-version`, answering JSON or the real event stream (message_start,
 * content_block_*, message_delta with usage, message_stop); `request-id` on every answer.
 * It replies with text, or calls the first tool when the request offers tools.
 */
export interface FakeAnthropic {
  url: string;
  requests: Array<{ headers: http.IncomingHttpHeaders; body: any }>;
  /** The next answer is exactly this (as a proxy or gateway in front of the API might send). */
  rawNext(status: number, contentType: string, body: string): void;
  close(): Promise<void>;
}

export async function startFakeAnthropic(opts: { apiKey: string }): Promise<FakeAnthropic> {
  const requests: FakeAnthropic['requests'] = [];
  let seq = 0;
  const raw: Array<{ status: number; contentType: string; body: string }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      res.setHeader('request-id', `req_ant_${++seq}`);
      const scripted = raw.shift();
      if (scripted) {
        res.writeHead(scripted.status, { 'content-type': scripted.contentType });
        return res.end(scripted.body);
      }
      const fail = (status: number, type: string, message: string) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type, message } }));
      };
      if (req.method !== 'POST' || req.url !== '/v1/messages') return fail(404, 'not_found_error', 'Not found');
      if (req.headers['x-api-key'] !== opts.apiKey) return fail(401, 'authentication_error', 'invalid x-api-key');
      if (!req.headers['anthropic-version']) return fail(400, 'invalid_request_error', 'anthropic-version header is required');
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      requests.push({ headers: req.headers, body });
      if (typeof body.max_tokens !== 'number') return fail(400, 'invalid_request_error', 'max_tokens: Field required');
      if (body.messages?.some((m: any) => m.role === 'system')) return fail(400, 'invalid_request_error', 'messages: Unexpected role "system"');
      const id = `msg_${seq}`;
      const inputTokens = 12;
      const tool = Array.isArray(body.tools) && body.tools.length ? body.tools[0] : null;
      const text = 'Hello from Claude';
      const outputTokens = tool ? 9 : 4;
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(
          JSON.stringify({
            id,
            type: 'message',
            role: 'assistant',
            model: body.model,
            content: tool ? [{ type: 'tool_use', id: 'toolu_1', name: tool.name, input: { path: 'README.md' } }] : [{ type: 'text', text }],
            stop_reason: tool ? 'tool_use' : 'end_turn',
            stop_sequence: null,
            usage: { input_tokens: inputTokens, output_tokens: outputTokens },
          }),
        );
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const send = (event: string, data: unknown) => res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
      send('message_start', { type: 'message_start', message: { id, type: 'message', role: 'assistant', model: body.model, content: [], stop_reason: null, usage: { input_tokens: inputTokens, output_tokens: 1 } } });
      send('content_block_start', { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } });
      send('ping', { type: 'ping' });
      for (const piece of ['Hello', ' from', ' Claude']) send('content_block_delta', { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: piece } });
      send('content_block_stop', { type: 'content_block_stop', index: 0 });
      send('message_delta', { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: outputTokens } });
      send('message_stop', { type: 'message_stop' });
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    rawNext: (status, contentType, body) => raw.push({ status, contentType, body }),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

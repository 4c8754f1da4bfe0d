import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import type { ToolCall, Usage } from './protocol.ts';

/** A message of OpenAI's chat completions API, as far as the runtime uses it. */
export type ChatMessage =
  | { role: 'system' | 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }> }
  | { role: 'tool'; tool_call_id: string; content: string };

export interface ToolSpec {
  type: 'function';
  function: { name: string; description: string; parameters: unknown };
}

export interface ModelReply {
  content: string | null;
  tool_calls: ToolCall[];
  usage: Usage | null;
  finish_reason: string | null;
}

/** Why a model call failed, and whether trying again may help. */
export class ModelError extends Error {
  readonly retryable: boolean;
  readonly retryAfterMs: number | null;
  readonly code: string | null;
  constructor(message: string, opts: { retryable: boolean; retryAfterMs?: number | null; code?: string | null }) {
    super(message);
    this.retryable = opts.retryable;
    this.retryAfterMs = opts.retryAfterMs ?? null;
    this.code = opts.code ?? null;
  }
}

export interface ModelRequest {
  baseUrl: string;
  model: string;
  messages: ChatMessage[];
  /** `messages` as a JSON array in UTF-8 pieces, when the caller keeps them serialised (the loop's Conversation): sent instead of serialising them again. */
  messagesJson?: readonly Buffer[];
  tools: ToolSpec[];
  stream: boolean;
  temperature?: number | null;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Where the proxy variables are read (the sandbox's environment); none: a direct connection. */
  env?: NodeJS.ProcessEnv;
}

/** Kept-alive connections to the gateway (or the model's address when no proxy is set): one per call at a time. */
const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 8 });
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 8 });

/** How long a proxy may take to open a tunnel (to answer a CONNECT); the call's own timeout still bounds the call. */
const TUNNEL_TIMEOUT_MS = 30_000;

const bare = (hostname: string) => hostname.replace(/^\[|\]$/g, '');

/**
 * Kept-alive TLS connections to https endpoints through one plain-HTTP proxy: each connection is
 * a tunnel the proxy opens on a CONNECT, with TLS to the endpoint inside it (the proxy sees the
 * host and port only), as fetch's environment proxy agent made them.
 */
class TunnelAgent extends https.Agent {
  private readonly proxy: URL;
  constructor(proxy: URL) {
    super({ keepAlive: true, maxSockets: 8 });
    this.proxy = proxy;
  }

  override createConnection(options: https.RequestOptions, done?: (err: Error | null, stream: Duplex) => void): Duplex | null | undefined {
    const host = String(options.host);
    const target = `${host.includes(':') ? `[${host}]` : host}:${options.port}`;
    const connect = http.request({ host: bare(this.proxy.hostname), port: Number(this.proxy.port) || 80, method: 'CONNECT', path: target, headers: { host: target }, agent: false, timeout: TUNNEL_TIMEOUT_MS });
    const fail = (err: Error) => done?.(err, undefined as never);
    connect.once('connect', (res, socket, head) => {
      if (res.statusCode !== 200) {
        socket.destroy();
        return fail(new Error(`the proxy ${this.proxy.host} refused a tunnel to ${target} (${res.statusCode})`));
      }
      if (head.length) socket.unshift(head);
      // https.Agent's own connection (TLS, its session cache), over the tunnel.
      done?.(null, super.createConnection({ ...options, socket } as https.RequestOptions)!);
    });
    connect.once('timeout', () => connect.destroy(new Error(`the proxy ${this.proxy.host} did not open a tunnel to ${target} within ${TUNNEL_TIMEOUT_MS / 1000} s`)));
    connect.once('error', fail);
    connect.end();
    return undefined;
  }
}

/** One tunnelling agent per proxy, so that its tunnels are kept alive across calls. */
const tunnels = new Map<string, TunnelAgent>();

/**
 * The HTTP proxy a request to `url` goes through, from the environment as curl reads it:
 * `http_proxy`/`HTTP_PROXY` for http, `https_proxy`/`HTTPS_PROXY` for https (else the http one,
 * as fetch's environment proxy agent did), `no_proxy`/`NO_PROXY` with host, `.suffix`,
 * `host:port` or `*`. In a sandbox: the credential gateway, its only way out.
 */
export function proxyFor(url: URL, env: NodeJS.ProcessEnv): URL | null {
  const secure = url.protocol === 'https:';
  const raw = (secure && (env.https_proxy || env.HTTPS_PROXY)) || env.http_proxy || env.HTTP_PROXY;
  if (!raw) return null;
  const host = bare(url.hostname).toLowerCase();
  const port = url.port || (secure ? '443' : '80');
  for (const entry of (env.no_proxy ?? env.NO_PROXY ?? '').split(/[\s,]+/)) {
    const e = entry.trim().toLowerCase();
    if (!e) continue;
    if (e === '*') return null;
    const [name, p] = e.startsWith('[') ? [e.slice(1, e.indexOf(']')), e.slice(e.indexOf(']') + 2)] : e.split(':');
    if (p && p !== port) continue;
    const suffix = name.replace(/^\*?\./, '');
    if (host === suffix || host.endsWith(`.${suffix}`)) return null;
  }
  try {
    return new URL(raw.includes('://') ? raw : `http://${raw}`);
  } catch {
    return null;
  }
}

/**
 * POSTs a body by node:http or node:https on kept-alive connections, through the environment's
 * proxy: plain HTTP as an absolute-form request to the proxy, https in a CONNECT tunnel. Cheaper
 * per call than fetch, whose request, stream and proxy-agent machinery cost the runtime more
 * than a millisecond a step. Settles with the answer's head; the caller reads its body.
 */
function post(url: URL, body: Buffer, headers: Record<string, string>, signal: AbortSignal, env: NodeJS.ProcessEnv): Promise<http.IncomingMessage> {
  const proxy = proxyFor(url, env);
  const secure = url.protocol === 'https:';
  let agent: http.Agent = secure ? httpsAgent : httpAgent;
  let to = { host: bare(url.hostname), port: Number(url.port) || (secure ? 443 : 80), path: `${url.pathname}${url.search}` };
  if (proxy && secure) {
    agent = tunnels.get(proxy.href) ?? tunnels.set(proxy.href, new TunnelAgent(proxy)).get(proxy.href)!;
  } else if (proxy) {
    to = { host: bare(proxy.hostname), port: Number(proxy.port) || 80, path: url.href };
  }
  return new Promise((resolve, reject) => {
    const req = (secure ? https : http).request({ agent, method: 'POST', ...to, headers: { ...headers, host: url.host, 'content-length': String(body.length) }, signal }, resolve);
    req.on('error', reject);
    req.end(body);
  });
}

async function textOf(res: http.IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

/**
 * One call of `POST {base}/chat/completions`, over http or https. No key is sent: the
 * credential gateway adds the role's key on the way out. Answers that are not the wire format
 * (HTML, a cut stream, a choice without a message) are retryable errors; a refusal that will
 * not change (a spent budget, a bad request) is final.
 */
export async function callModel(req: ModelRequest): Promise<ModelReply> {
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
  let res: http.IncomingMessage;
  try {
    const url = new URL(`${req.baseUrl.replace(/\/+$/, '')}/chat/completions`);
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new Error(`the scheme ${url.protocol} is neither http nor https`);
    res = await post(url, bodyOf(req), { 'content-type': 'application/json', accept: req.stream ? 'text/event-stream' : 'application/json' }, signal, req.env ?? {});
  } catch (err) {
    if (req.signal?.aborted) throw err;
    throw new ModelError(`the model endpoint did not answer: ${describe(err)}`, { retryable: true });
  }
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) throw await errorOf(res);
  try {
    return req.stream ? await readStream(res) : readJson(await textOf(res));
  } catch (err) {
    if (req.signal?.aborted) throw err;
    if (err instanceof ModelError) throw err;
    throw new ModelError(`the model's answer was cut off: ${describe(err)}`, { retryable: true });
  }
}

/** The tools' JSON, made once per list (the loop passes the same list to each call of a turn). */
const toolsJson = new WeakMap<ToolSpec[], string>();

/**
 * The request's JSON body, UTF-8: what `JSON.stringify` makes of `{model, messages, stream,
 * tools, tool_choice, stream_options, temperature}`, with the pieces of `messagesJson` copied in
 * when given (nothing of the conversation serialised or encoded again) and the tools' JSON made
 * once per list.
 */
export function bodyOf(req: ModelRequest): Buffer {
  let tail = `,"stream":${req.stream}`;
  if (req.tools.length) tail += `,"tools":${toolsJson.get(req.tools) ?? toolsJson.set(req.tools, JSON.stringify(req.tools)).get(req.tools)!},"tool_choice":"auto"`;
  if (req.stream) tail += ',"stream_options":{"include_usage":true}';
  if (req.temperature !== undefined && req.temperature !== null) tail += `,"temperature":${JSON.stringify(req.temperature)}`;
  const messages = req.messagesJson ?? [Buffer.from(JSON.stringify(req.messages))];
  return Buffer.concat([Buffer.from(`{"model":${JSON.stringify(req.model)},"messages":`), ...messages, Buffer.from(`${tail}}`)]);
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.name === 'TimeoutError' ? 'timed out' : err.message;
  }
  return String(err);
}

async function errorOf(res: http.IncomingMessage): Promise<ModelError> {
  const status = res.statusCode ?? 0;
  const text = await textOf(res).catch(() => '');
  let message = `HTTP ${status}`;
  let code: string | null = null;
  let type: string | null = null;
  try {
    const parsed = JSON.parse(text) as { error?: { message?: unknown; code?: unknown; type?: unknown } };
    if (parsed.error && typeof parsed.error.message === 'string') message = parsed.error.message;
    if (typeof parsed.error?.code === 'string') code = parsed.error.code;
    if (typeof parsed.error?.type === 'string') type = parsed.error.type;
  } catch {
    // Not the wire format (a proxy's HTML page, say): the status alone says what happened.
  }
  const retryAfter = Number(res.headers['retry-after']);
  const retryAfterMs = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : null;
  if (type === 'budget_exceeded') return new ModelError(`the budget is spent: ${message}`, { retryable: false, code: code ?? 'budget_exceeded' });
  // The gateway refuses with 403 and a reason; a refusal will not change by retrying.
  const retryable = status === 429 || status === 408 || status >= 500;
  return new ModelError(`the model endpoint answered ${status}: ${message}`, { retryable, retryAfterMs, code });
}

function toolCallsOf(raw: unknown): ToolCall[] {
  if (!Array.isArray(raw)) return [];
  return raw.map((c: any, i: number) => ({
    id: typeof c?.id === 'string' && c.id ? c.id : `call_${i}`,
    name: typeof c?.function?.name === 'string' ? c.function.name : '',
    arguments: typeof c?.function?.arguments === 'string' ? c.function.arguments : JSON.stringify(c?.function?.arguments ?? {}),
  }));
}

function usageOf(raw: any): Usage | null {
  if (!raw || typeof raw !== 'object') return null;
  const p = Number(raw.prompt_tokens);
  const c = Number(raw.completion_tokens);
  return Number.isFinite(p) && Number.isFinite(c) ? { prompt_tokens: p, completion_tokens: c } : null;
}

function readJson(text: string): ModelReply {
  let parsed: any;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new ModelError('the model endpoint answered something that is not JSON', { retryable: true });
  }
  const choice = parsed?.choices?.[0];
  const message = choice?.message;
  if (!message || typeof message !== 'object') throw new ModelError('the model answered without a message', { retryable: true });
  return {
    content: typeof message.content === 'string' ? message.content : null,
    tool_calls: toolCallsOf(message.tool_calls),
    usage: usageOf(parsed.usage),
    finish_reason: typeof choice.finish_reason === 'string' ? choice.finish_reason : null,
  };
}

/**
 * Assembles a streamed answer: content deltas, tool-call deltas by index, the usage chunk. The
 * answer is whole at `[DONE]` and the call settles there, without waiting for the response's own
 * end to come through the proxies; the rest is still read, so that its connection is kept alive.
 */
function readStream(res: http.IncomingMessage): Promise<ModelReply> {
  const decoder = new StringDecoder('utf8');
  let buffer = '';
  let content = '';
  let sawContent = false;
  let finish: string | null = null;
  let usage: Usage | null = null;
  let done = false;
  const calls = new Map<number, { id: string; name: string; arguments: string }>();
  const handle = (data: string) => {
    if (data === '[DONE]') {
      done = true;
      return;
    }
    let chunk: any;
    try {
      chunk = JSON.parse(data);
    } catch {
      throw new ModelError('the model stream carried an event that is not JSON', { retryable: true });
    }
    if (chunk?.error) throw new ModelError(`the model failed mid-answer: ${String(chunk.error.message ?? 'unknown error')}`, { retryable: true });
    if (chunk?.usage) usage = usageOf(chunk.usage) ?? usage;
    const choice = chunk?.choices?.[0];
    if (!choice) return;
    const delta = choice.delta ?? {};
    if (typeof delta.content === 'string') {
      content += delta.content;
      sawContent = true;
    }
    if (Array.isArray(delta.tool_calls)) {
      for (const d of delta.tool_calls) {
        const index = Number.isInteger(d?.index) ? d.index : calls.size;
        const call = calls.get(index) ?? { id: '', name: '', arguments: '' };
        if (typeof d?.id === 'string') call.id = d.id;
        if (typeof d?.function?.name === 'string') call.name += d.function.name;
        if (typeof d?.function?.arguments === 'string') call.arguments += d.function.arguments;
        calls.set(index, call);
      }
    }
    if (typeof choice.finish_reason === 'string') finish = choice.finish_reason;
  };
  const reply = (): ModelReply => {
    const toolCalls = [...calls.entries()].sort((a, b) => a[0] - b[0]).map(([i, c]) => ({ id: c.id || `call_${i}`, name: c.name, arguments: c.arguments }));
    return { content: sawContent ? content : null, tool_calls: toolCalls, usage, finish_reason: finish };
  };
  return new Promise((resolve, reject) => {
    let settled = false;
    const settle = (err: unknown) => {
      if (settled) return;
      settled = true;
      if (err) {
        res.destroy();
        reject(err);
      } else resolve(reply());
    };
    res.on('data', (piece: Buffer) => {
      // After [DONE] what is left (the response's end) is only read, so the connection is reused.
      if (settled) return;
      buffer += decoder.write(piece);
      try {
        let cut: number;
        while (!done && (cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
          const block = buffer.slice(0, cut);
          buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
          const data = block
            .split(/\r?\n/)
            .filter((l) => l.startsWith('data:'))
            .map((l) => l.slice(5).trimStart())
            .join('\n');
          if (data) handle(data);
        }
      } catch (err) {
        return settle(err);
      }
      if (done) settle(null);
    });
    res.on('end', () => settle(done || finish !== null ? null : new ModelError('the model stream ended before the answer did', { retryable: true })));
    res.on('error', settle);
    res.on('close', () => settle(new Error('the connection closed before the answer ended')));
  });
}

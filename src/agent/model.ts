import http from 'node:http';
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
  tools: ToolSpec[];
  stream: boolean;
  temperature?: number | null;
  timeoutMs: number;
  signal?: AbortSignal;
  /** Where the proxy variables are read (the sandbox's environment); none: a direct connection. */
  env?: NodeJS.ProcessEnv;
}

/** What the runtime reads of an answer, whichever client carried it. */
interface Answer {
  status: number;
  header(name: string): string | null;
  text(): Promise<string>;
  body: AsyncIterable<Uint8Array>;
}

/** Kept-alive connections to the gateway (or the model's address when no proxy is set): one per call at a time. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 8 });

/**
 * The HTTP proxy a plain-HTTP request to `url` goes through, from the environment as curl reads
 * it (`http_proxy`/`HTTP_PROXY`, `no_proxy`/`NO_PROXY` with host, `.suffix`, `host:port` or `*`):
 * in a sandbox, the credential gateway, its only way out.
 */
export function proxyFor(url: URL, env: NodeJS.ProcessEnv): URL | null {
  const raw = env.http_proxy || env.HTTP_PROXY;
  if (!raw) return null;
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  const port = url.port || '80';
  for (const entry of (env.no_proxy ?? env.NO_PROXY ?? '').split(/[\s,]+/)) {
    const e = entry.trim().toLowerCase();
    if (!e) continue;
    if (e === '*') return null;
    const [name, p] = e.startsWith('[') ? [e.slice(1, e.indexOf(']')), e.slice(e.indexOf(']') + 2)] : e.split(':');
    if (p && p !== port) continue;
    const bare = name.replace(/^\*?\./, '');
    if (host === bare || host.endsWith(`.${bare}`)) return null;
  }
  try {
    return new URL(raw.includes('://') ? raw : `http://${raw}`);
  } catch {
    return null;
  }
}

/**
 * POSTs a JSON body over plain HTTP with node:http, through the environment's proxy (an
 * absolute-form request, as an HTTP proxy takes it). Cheaper per call than fetch, whose
 * request, stream and proxy-agent machinery cost the runtime more than a millisecond a step.
 */
function postHttp(url: URL, body: string, headers: Record<string, string>, signal: AbortSignal, env: NodeJS.ProcessEnv): Promise<Answer> {
  const proxy = proxyFor(url, env);
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        agent,
        method: 'POST',
        host: (proxy ?? url).hostname.replace(/^\[|\]$/g, ''),
        port: Number((proxy ?? url).port) || 80,
        path: proxy ? url.href : `${url.pathname}${url.search}`,
        headers: { ...headers, host: url.host, 'content-length': String(Buffer.byteLength(body)) },
        signal,
      },
      (res) => {
        resolve({
          status: res.statusCode ?? 0,
          header: (name) => {
            const v = res.headers[name.toLowerCase()];
            return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
          },
          async text() {
            const chunks: Buffer[] = [];
            for await (const c of res) chunks.push(c as Buffer);
            return Buffer.concat(chunks).toString('utf8');
          },
          body: res,
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

async function postFetch(url: URL, body: string, headers: Record<string, string>, signal: AbortSignal): Promise<Answer> {
  const res = await fetch(url, { method: 'POST', headers, body, signal });
  return {
    status: res.status,
    header: (name) => res.headers.get(name),
    text: () => res.text(),
    body: (res.body ?? (async function* () {})()) as unknown as AsyncIterable<Uint8Array>,
  };
}

/**
 * One call of `POST {base}/chat/completions`. No key is sent: the credential gateway adds the
 * role's key on the way out. Answers that are not the wire format (HTML, a cut stream, a
 * choice without a message) are retryable errors; a refusal that will not change (a spent
 * budget, a bad request) is final. Plain HTTP (the gateway's built-in model address) goes by
 * node:http; anything else by fetch.
 */
export async function callModel(req: ModelRequest): Promise<ModelReply> {
  const body: Record<string, unknown> = { model: req.model, messages: req.messages, stream: req.stream };
  if (req.tools.length) {
    body.tools = req.tools;
    body.tool_choice = 'auto';
  }
  if (req.stream) body.stream_options = { include_usage: true };
  if (req.temperature !== undefined && req.temperature !== null) body.temperature = req.temperature;
  const timeout = AbortSignal.timeout(req.timeoutMs);
  const signal = req.signal ? AbortSignal.any([req.signal, timeout]) : timeout;
  let res: Answer;
  try {
    const url = new URL(`${req.baseUrl.replace(/\/+$/, '')}/chat/completions`);
    const headers = { 'content-type': 'application/json', accept: req.stream ? 'text/event-stream' : 'application/json' };
    res = url.protocol === 'http:' ? await postHttp(url, JSON.stringify(body), headers, signal, req.env ?? {}) : await postFetch(url, JSON.stringify(body), headers, signal);
  } catch (err) {
    if (req.signal?.aborted) throw err;
    throw new ModelError(`the model endpoint did not answer: ${describe(err)}`, { retryable: true });
  }
  if (res.status < 200 || res.status > 299) throw await errorOf(res);
  try {
    return req.stream ? await readStream(res) : readJson(await res.text());
  } catch (err) {
    if (req.signal?.aborted) throw err;
    if (err instanceof ModelError) throw err;
    throw new ModelError(`the model's answer was cut off: ${describe(err)}`, { retryable: true });
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) {
    const cause = (err as { cause?: unknown }).cause;
    return cause instanceof Error ? `${err.message} (${cause.message})` : err.name === 'TimeoutError' ? 'timed out' : err.message;
  }
  return String(err);
}

async function errorOf(res: Answer): Promise<ModelError> {
  const text = await res.text().catch(() => '');
  let message = `HTTP ${res.status}`;
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
  const retryAfter = Number(res.header('retry-after'));
  const retryAfterMs = Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : null;
  if (type === 'budget_exceeded') return new ModelError(`the budget is spent: ${message}`, { retryable: false, code: code ?? 'budget_exceeded' });
  // The gateway refuses with 403 and a reason; a refusal will not change by retrying.
  const retryable = res.status === 429 || res.status === 408 || res.status >= 500;
  return new ModelError(`the model endpoint answered ${res.status}: ${message}`, { retryable, retryAfterMs, code });
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

/** Assembles a streamed answer: content deltas, tool-call deltas by index, the usage chunk. */
async function readStream(res: Answer): Promise<ModelReply> {
  const decoder = new TextDecoder();
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
  for await (const piece of res.body) {
    buffer += decoder.decode(piece, { stream: true });
    let cut: number;
    while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, '');
      const data = block
        .split(/\r?\n/)
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).trimStart())
        .join('\n');
      if (data) handle(data);
    }
  }
  if (!done && finish === null) throw new ModelError('the model stream ended before the answer did', { retryable: true });
  const toolCalls = [...calls.entries()].sort((a, b) => a[0] - b[0]).map(([i, c]) => ({ id: c.id || `call_${i}`, name: c.name, arguments: c.arguments }));
  return { content: sawContent ? content : null, tool_calls: toolCalls, usage, finish_reason: finish };
}

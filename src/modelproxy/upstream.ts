import http from 'node:http';
import https from 'node:https';
import type { ModelAlias } from '../models/catalog.ts';
import { proxyErrors, type ProxyError } from './errors.ts';

/** Token counts reported by the upstream (or estimated when it reported none). */
export interface Usage {
  tokensIn: number;
  tokensOut: number;
  /** True when the upstream said so; false when estimated from what was streamed. */
  reported: boolean;
}

/** An OpenAI chat completions request as the proxy reads it; other fields pass through untouched. */
export interface ChatRequest {
  model: string;
  messages: unknown[];
  stream?: boolean;
  max_tokens?: number;
  max_completion_tokens?: number;
  stream_options?: { include_usage?: boolean } & Record<string, unknown>;
  [field: string]: unknown;
}

/** Turns the upstream's server-sent events into the OpenAI chunks the client gets, watching usage. */
export interface StreamTranslator {
  /** Takes raw bytes as they arrive; answers the bytes to send on now (whole events only, possibly none). */
  push(chunk: Buffer): Buffer[];
  /** The stream ended: anything left to send. */
  end(): Buffer[];
  usage(): Usage | null;
  /** An error event the upstream sent inside the stream, if any. */
  error(): string | null;
}

export interface Adapter {
  /** The upstream request: URL, headers (with the credential) and the JSON body. */
  request(body: ChatRequest, alias: ModelAlias, credential: string | null): { url: string; headers: Record<string, string>; payload: string };
  /** The headers of a request built without a credential, with the credential added (the payload does not depend on it). */
  withCredential(headers: Record<string, string>, credential: string): Record<string, string>;
  /** A successful non-streaming answer, as the OpenAI body the client gets, and its usage. */
  response(raw: Buffer, alias: ModelAlias): { body: Buffer | string; usage: Usage | null };
  stream(opts: { clientWantsUsage: boolean; alias: ModelAlias; promptTokens: number }): StreamTranslator;
  /** The upstream's error message in its own format. */
  errorMessage(raw: Buffer): string | null;
  /** The upstream's request id header. */
  requestIdHeader: string;
}

const httpAgent = new http.Agent({ keepAlive: true, maxSockets: 1024, keepAliveMsecs: 10_000 });
const httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 1024, keepAliveMsecs: 10_000 });

export class UpstreamNetworkError extends Error {
  readonly timedOut: boolean;
  constructor(message: string, timedOut: boolean) {
    super(message);
    this.timedOut = timedOut;
  }
}

/** An upstream call under way: its response (as soon as the headers arrive), and how to give it up. */
export interface UpstreamCall {
  response: Promise<http.IncomingMessage>;
  /** Destroys the request (the client went away): `response` rejects with an AbortError, or the response being read breaks off. */
  cancel(): void;
}

interface Target {
  protocol: string;
  hostname: string;
  port: string;
  path: string;
  host: string;
  agent: http.Agent;
  lib: typeof http | typeof https;
}

/** Upstream URLs parsed once each: the catalogue names a few, and every request goes to one of them. */
const targets = new Map<string, Target>();
function targetOf(url: string): Target {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    const secure = u.protocol === 'https:';
    t = { protocol: u.protocol, hostname: u.hostname.replace(/^\[|\]$/g, ''), port: u.port, path: u.pathname + u.search, host: u.host, agent: secure ? httpsAgent : httpAgent, lib: secure ? https : http };
    if (targets.size < 1000) targets.set(url, t);
  }
  return t;
}

/**
 * POSTs to the upstream on a kept-alive connection. A plain cancel function rather than an
 * AbortSignal: a signal per request costs a controller, an event target and listeners on the
 * request's path, for a cancellation that almost never happens.
 */
export function post(url: string, headers: Record<string, string>, payload: string, opts: { idleTimeoutMs: number }): UpstreamCall {
  const t = targetOf(url);
  let req: http.ClientRequest;
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    req = t.lib.request(
      {
        protocol: t.protocol,
        hostname: t.hostname,
        port: t.port,
        path: t.path,
        method: 'POST',
        agent: t.agent,
        headers: { ...headers, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(payload)), accept: 'application/json, text/event-stream' },
      },
      resolve,
    );
    req.setTimeout(opts.idleTimeoutMs, () => req.destroy(new UpstreamNetworkError(`the upstream at ${t.host} did not answer within ${Math.round(opts.idleTimeoutMs / 1000)} s`, true)));
    req.on('error', (err) => {
      if (err instanceof UpstreamNetworkError) return reject(err);
      if ((err as Error).name === 'AbortError') return reject(err);
      reject(new UpstreamNetworkError(`the upstream at ${t.host} could not be reached (${(err as NodeJS.ErrnoException).code ?? 'network error'})`, false));
    });
    req.end(payload);
  });
  return {
    response,
    cancel: () => req.destroy(Object.assign(new Error('the client closed the request'), { name: 'AbortError' })),
  };
}

/** Reads a body up to a limit (with listeners: an async iterator costs a promise and its turns per chunk). */
export function readBody(res: http.IncomingMessage, limit = 64 * 1024 * 1024): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    res.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        res.destroy(new UpstreamNetworkError('the upstream answer is too large', false));
        return;
      }
      chunks.push(chunk);
    });
    res.once('error', reject);
    res.once('end', () => resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks)));
    // Destroyed without an error (the client went away, and the call was cancelled): no 'end' comes.
    res.once('close', () => {
      if (!res.complete) reject(new UpstreamNetworkError('the upstream broke off its answer', false));
    });
  });
}

/** Splits server-sent events out of text (the adapters that translate every event); answers whole events (without their blank line). */
export class SseSplitter {
  #pending = '';
  push(chunk: string): string[] {
    this.#pending += chunk;
    const events: string[] = [];
    for (;;) {
      const m = /\r?\n\r?\n/.exec(this.#pending);
      if (!m) break;
      events.push(this.#pending.slice(0, m.index));
      this.#pending = this.#pending.slice(m.index + m[0].length);
    }
    return events;
  }
  rest(): string {
    const r = this.#pending;
    this.#pending = '';
    return r;
  }
}

const LF = 0x0a;
const CR = 0x0d;
const EMPTY = Buffer.alloc(0);

/**
 * Splits server-sent events out of bytes without decoding them: an event ends at a blank line
 * (LF or CRLF, as `SseSplitter`), found with `indexOf` on the bytes. Each whole event is handed
 * to `onEvent` as a range of `buf`: its text ends at `end` and its blank line at `next`, so an
 * unchanged event passes on as the bytes that came. A part event (split anywhere, inside a line
 * ending or a multi-byte character included) waits for the rest.
 */
export class SseByteSplitter {
  #pending: Buffer = EMPTY;
  /** Where to resume looking for a line feed in what is pending (all before it was looked at). */
  #scanFrom = 0;
  push(chunk: Buffer, onEvent: (buf: Buffer, start: number, end: number, next: number) => void): void {
    const buf = this.#pending.length ? Buffer.concat([this.#pending, chunk]) : chunk;
    let start = 0;
    let i = this.#scanFrom;
    for (;;) {
      const nl = buf.indexOf(LF, i);
      if (nl < 0) {
        i = buf.length;
        break;
      }
      let next = -1;
      if (buf[nl + 1] === LF) next = nl + 2;
      else if (buf[nl + 1] === CR && buf[nl + 2] === LF) next = nl + 3;
      if (next < 0) {
        // Not yet known whether this line feed ends the event: look again when more arrives.
        if (nl + 1 === buf.length || (buf[nl + 1] === CR && nl + 2 === buf.length)) {
          i = nl;
          break;
        }
        i = nl + 1;
        continue;
      }
      onEvent(buf, start, nl > start && buf[nl - 1] === CR ? nl - 1 : nl, next);
      start = i = next;
    }
    this.#pending = start === buf.length ? EMPTY : buf.subarray(start);
    this.#scanFrom = i - start;
  }
  rest(): Buffer {
    const r = this.#pending;
    this.#pending = EMPTY;
    this.#scanFrom = 0;
    return r;
  }
}

const isJsonSpace = (b: number | undefined) => b === 0x20 || b === 0x09 || b === LF || b === CR;
function skipSpace(b: Buffer, i: number): number {
  while (isJsonSpace(b[i])) i++;
  return i;
}

/**
 * Whether `b` holds the JSON key `key` (given with its quotes) followed by a colon, and, when
 * `then` is given, by that byte as the value's first. A key inside a string value is escaped
 * (\") and never matches.
 */
function hasKey(b: Buffer, key: Buffer, then: number | null): boolean {
  for (let i = b.indexOf(key); i >= 0; i = b.indexOf(key, i + key.length)) {
    let j = skipSpace(b, i + key.length);
    if (b[j] !== 0x3a) continue;
    if (then === null) return true;
    j = skipSpace(b, j + 1);
    if (b[j] === then) return true;
  }
  return false;
}

const USAGE_KEY = Buffer.from('"usage"');
const ERROR_KEY = Buffer.from('"error"');
const TEXT_KEYS = [Buffer.from('"content"'), Buffer.from('"arguments"')];

/** The bytes of content and tool-arguments string values in `b`, as written in the JSON (escapes counted as written: an estimate). */
function streamedTextBytes(b: Buffer): number {
  let n = 0;
  for (const key of TEXT_KEYS) {
    for (let i = b.indexOf(key); i >= 0; ) {
      let j = skipSpace(b, i + key.length);
      if (b[j] === 0x3a && b[(j = skipSpace(b, j + 1))] === 0x22) {
        let k = j + 1;
        while (k < b.length && b[k] !== 0x22) k += b[k] === 0x5c ? 2 : 1;
        if (k < b.length) {
          n += k - j - 1;
          i = b.indexOf(key, k + 1);
          continue;
        }
      }
      i = b.indexOf(key, i + key.length);
    }
  }
  return n;
}

/** The data of an event (its `data:` lines joined), and its `event:` name. */
export function eventData(event: string): { name: string | null; data: string | null } {
  let name: string | null = null;
  const data: string[] = [];
  for (const line of event.split(/\r?\n/)) {
    if (line.startsWith('data:')) data.push(line.slice(line[5] === ' ' ? 6 : 5));
    else if (line.startsWith('event:')) name = line.slice(6).trim();
  }
  return { name, data: data.length ? data.join('\n') : null };
}

/** A token count an upstream reported, as a whole number in range (anything else counts as 0). */
export function tokenCount(x: unknown): number {
  const n = Number(x);
  return Number.isFinite(n) && n > 0 ? Math.min(Math.round(n), 2_000_000_000) : 0;
}

/** Text from an upstream made safe to store: no NUL, well-formed UTF-16, at most `max` characters. */
export function storableText(text: string, max = 500): string {
  return text.replaceAll('\u0000', '').slice(0, max).toWellFormed();
}

/** Rough token count of text: about 3 bytes a token, rounded up (errs on the high side for reservations). */
export const estimateTokens = (bytes: number) => Math.ceil(bytes / 3);

function parseJson(text: string): any {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

const joinUrl = (base: string, path: string) => base.replace(/\/+$/, '') + path;

/** Any OpenAI-compatible upstream: the body passes through with the model renamed. */
export const openaiAdapter: Adapter = {
  requestIdHeader: 'x-request-id',
  request(body, alias, credential) {
    const out: ChatRequest = { ...body, model: alias.model };
    // Usage is how the request is charged; asked for always, and dropped again below when the client did not ask.
    if (body.stream) out.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
    return {
      url: joinUrl(alias.base_url, '/chat/completions'),
      headers: credential ? openaiAdapter.withCredential({}, credential) : ({} as Record<string, string>),
      payload: JSON.stringify(out),
    };
  },
  withCredential: (headers, credential) => ({ ...headers, authorization: `Bearer ${credential}` }),
  response(raw) {
    const parsed = parseJson(raw.toString('utf8'));
    const u = parsed?.usage;
    const usage = u && typeof u === 'object' ? { tokensIn: tokenCount(u.prompt_tokens), tokensOut: tokenCount(u.completion_tokens), reported: true } : null;
    return { body: raw, usage };
  },
  stream({ clientWantsUsage, promptTokens }) {
    const sse = new SseByteSplitter();
    let usage: Usage | null = null;
    let streamedBytes = 0;
    let error: string | null = null;
    /** An event that may hold usage or an error, as text: null to pass it on unchanged, else what to send instead ('' for nothing). */
    const parsed = (event: string): string | null => {
      const { data } = eventData(event);
      if (data === null || data === '[DONE]') return null;
      const chunk = parseJson(data);
      if (chunk?.error) error = String(chunk.error.message ?? 'the upstream failed mid-stream').slice(0, 500);
      if (chunk?.usage && typeof chunk.usage === 'object') {
        usage = { tokensIn: tokenCount(chunk.usage.prompt_tokens), tokensOut: tokenCount(chunk.usage.completion_tokens), reported: true };
        if (!clientWantsUsage) {
          if (Array.isArray(chunk.choices) && chunk.choices.length === 0) return '';
          delete chunk.usage;
          return `data: ${JSON.stringify(chunk)}\n\n`;
        }
      } else if (Array.isArray(chunk?.choices)) {
        for (const c of chunk.choices) {
          const d = c?.delta;
          if (typeof d?.content === 'string') streamedBytes += Buffer.byteLength(d.content);
          if (Array.isArray(d?.tool_calls)) for (const t of d.tool_calls) streamedBytes += Buffer.byteLength(String(t?.function?.arguments ?? ''));
        }
      }
      return null;
    };
    /** One event's bytes: null to pass them on unchanged, else what to send instead. */
    const handle = (event: Buffer): string | null => {
      // Most events are a token of content: passed on as the bytes that came, neither decoded nor
      // parsed. Only an event that can hold usage (an object, not the `"usage":null` of every
      // chunk) or an error is decoded and parsed.
      if (!hasKey(event, USAGE_KEY, 0x7b) && !hasKey(event, ERROR_KEY, null)) {
        streamedBytes += streamedTextBytes(event);
        return null;
      }
      return parsed(event.toString('utf8'));
    };
    return {
      push: (chunk) => {
        const out: Buffer[] = [];
        // Unchanged events next to each other go on as one slice of the bytes that came.
        let run: Buffer | null = null;
        let runStart = 0;
        let runEnd = 0;
        sse.push(chunk, (buf, start, end, next) => {
          const instead = handle(buf.subarray(start, end));
          if (instead === null) {
            if (run !== buf || runEnd !== start) {
              if (run) out.push(run.subarray(runStart, runEnd));
              run = buf;
              runStart = start;
            }
            runEnd = next;
            return;
          }
          if (run) out.push(run.subarray(runStart, runEnd));
          run = null;
          if (instead) out.push(Buffer.from(instead));
        });
        if (run) out.push((run as Buffer).subarray(runStart, runEnd));
        return out;
      },
      end: () => {
        const rest = sse.rest();
        if (rest.findIndex((b) => !isJsonSpace(b)) < 0) return [];
        const instead = handle(rest);
        return [instead === null ? Buffer.concat([rest, Buffer.from('\n\n')]) : Buffer.from(instead)].filter((b) => b.length);
      },
      // No usage reported: the prompt estimate and what was streamed, so a silent upstream still pays for its prompt.
      usage: () => usage ?? { tokensIn: promptTokens, tokensOut: estimateTokens(streamedBytes), reported: false },
      error: () => error,
    };
  },
  errorMessage(raw) {
    const parsed = parseJson(raw.toString('utf8'));
    const m = parsed?.error?.message ?? parsed?.message ?? parsed?.detail;
    return typeof m === 'string' ? m : null;
  },
};

/**
 * Maps an upstream's failure to a clean error for the client. The upstream's own message is
 * passed on (bounded, the credential scrubbed) except on 401/403, which are the proxy's
 * credential problem, not the client's.
 */
export function upstreamError(status: number, message: string | null, alias: ModelAlias, credential: string | null, retryAfter: string | undefined): ProxyError {
  let msg = (message ?? '').slice(0, 500);
  if (credential) msg = msg.split(credential).join('[redacted]');
  const said = msg ? `: ${msg}` : '';
  if (status === 401 || status === 403) return proxyErrors.upstream(502, `the upstream for "${alias.alias}" rejected the proxy's credential; an admin must check the secret ${alias.api_key_secret ?? '(none configured)'}`, 'upstream_auth_failed');
  if (status === 404) return proxyErrors.upstream(502, `the upstream for "${alias.alias}" answered 404${said}`, 'upstream_not_found');
  if (status === 429) {
    const seconds = retryAfter && /^\d+$/.test(retryAfter) ? retryAfter : '1';
    return proxyErrors.upstream(429, `the upstream for "${alias.alias}" is rate limiting${said}`, 'upstream_rate_limited', { 'retry-after': seconds });
  }
  if (status === 408 || status === 504) return proxyErrors.upstream(504, `the upstream for "${alias.alias}" timed out${said}`, 'upstream_timeout');
  if (status === 529 || status === 503) return proxyErrors.upstream(503, `the upstream for "${alias.alias}" is overloaded${said}`, 'upstream_overloaded');
  if (status >= 400 && status < 500) return proxyErrors.upstream(status === 413 || status === 422 ? status : 400, `the upstream rejected the request${said}`, 'upstream_invalid_request');
  return proxyErrors.upstream(502, `the upstream for "${alias.alias}" failed with ${status}${said}`, 'upstream_error');
}

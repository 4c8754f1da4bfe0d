import { Pool, type Dispatcher } from 'undici';
import type { ModelAlias } from '../models/catalog.ts';
import { proxyErrors, type ProxyError } from './errors.ts';
import { storableText as storableString } from '../db/json-values.ts';
import { rewriteMembers, type RawJson } from './raw-json.ts';

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
  stream?: boolean | null;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  n?: number | null;
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
  /**
   * The upstream request: URL, headers (with the credential) and the JSON body. `raw`, when the
   * body's text was kept, lets an adapter that changes only top-level members forward the rest as sent.
   */
  request(body: ChatRequest, alias: ModelAlias, credential: string | null, raw?: RawJson): { url: string; headers: Record<string, string>; payload: string | Buffer };
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

/**
 * The upstream client: undici (the Node project's own HTTP/1.1 client) through its lowest-level
 * interface, a dispatch handler per call. One pool of kept-alive connections per upstream origin
 * (at most 1,024 connections each); TLS as Node's `tls.connect` does it for `https:` upstreams,
 * with Node's CA store (so `NODE_EXTRA_CA_CERTS` and `--use-system-ca` apply, as they did to the
 * `https.Agent` before). Neither client reads proxy settings from the environment: upstreams are
 * reached directly. No Readable per answer, no AbortSignal per call: the body goes to one sink.
 */
const pools = new Map<string, Pool>();

export class UpstreamNetworkError extends Error {
  readonly timedOut: boolean;
  constructor(message: string, timedOut: boolean) {
    super(message);
    this.timedOut = timedOut;
  }
}

/** Where an upstream answer's body goes: its chunks as they arrive, then its end (with an error when it broke off). */
export interface BodySink {
  data(chunk: Buffer): void;
  end(error: Error | null): void;
}

/** An upstream's answer: its status and headers as soon as they arrive, its body through `consume`. */
export class UpstreamResponse {
  readonly statusCode: number;
  /** True once the whole body arrived. */
  complete = false;
  readonly #rawHeaders: Buffer[];
  readonly #call: Call;
  #sink: BodySink | null = null;
  /** Chunks that came before `consume` (in the same read as the headers). */
  #early: Buffer[] = [];
  #ended: { error: Error | null } | null = null;
  #paused = false;

  constructor(statusCode: number, rawHeaders: Buffer[], call: Call) {
    this.statusCode = statusCode;
    this.#rawHeaders = rawHeaders;
    this.#call = call;
  }

  /** A header's value (the first, when repeated); `name` in lower case. */
  header(name: string): string | undefined {
    const raw = this.#rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) {
      if (raw[i].length === name.length && raw[i].toString('latin1').toLowerCase() === name) return raw[i + 1].toString('latin1');
    }
    return undefined;
  }

  /** Hands the body to `sink`: what came already, then the rest as it arrives. */
  consume(sink: BodySink): void {
    this.#sink = sink;
    const early = this.#early;
    this.#early = [];
    for (const chunk of early) sink.data(chunk);
    if (this.#ended) sink.end(this.#ended.error);
  }

  /** Stops reading from the upstream until `resume` (the client is slow). */
  pause(): void {
    this.#paused = true;
  }

  resume(): void {
    if (!this.#paused) return;
    this.#paused = false;
    this.#call.resume?.();
  }

  /** Gives the answer up: the connection is closed and the sink ends with `error`. */
  destroy(error: Error): void {
    this.#call.cancelWith(error);
  }

  /** From the handler: a chunk; false to stop reading for now. */
  push(chunk: Buffer): boolean {
    if (this.#sink) this.#sink.data(chunk);
    else this.#early.push(chunk);
    return !this.#paused;
  }

  /** From the handler: the body ended, or broke off with `error`. */
  finish(error: Error | null): void {
    if (this.#ended) return;
    this.#ended = { error };
    if (!error) this.complete = true;
    if (this.#sink && !this.#early.length) this.#sink.end(error);
  }
}

/** One upstream call: undici's dispatch handler (its own, allocation-free interface). */
class Call implements Dispatcher.DispatchHandler {
  readonly response: Promise<UpstreamResponse>;
  resume: (() => void) | null = null;
  #resolve!: (res: UpstreamResponse) => void;
  #reject!: (err: Error) => void;
  #abort: ((err?: Error) => void) | null = null;
  #cancelled: Error | null = null;
  #res: UpstreamResponse | null = null;
  readonly #host: string;
  readonly #timeoutMs: number;

  constructor(host: string, timeoutMs: number) {
    this.#host = host;
    this.#timeoutMs = timeoutMs;
    this.response = new Promise((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
  }

  cancelWith(err: Error): void {
    if (this.#cancelled) return;
    this.#cancelled = err;
    // Not yet written to a connection: undici hands over the abort when it is.
    this.#abort?.(err);
  }

  onConnect(abort: (err?: Error) => void): void {
    this.#abort = abort;
    if (this.#cancelled) abort(this.#cancelled);
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    this.resume = resume;
    this.#res = new UpstreamResponse(statusCode, rawHeaders, this);
    this.#resolve(this.#res);
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.#res!.push(chunk);
  }

  onComplete(): void {
    this.#res!.finish(null);
  }

  onError(err: Error): void {
    const mapped = this.#mapped(err);
    if (this.#res) this.#res.finish(mapped);
    else this.#reject(mapped);
  }

  /** What the forwarder sees: the cancellation as given, a timeout or an unreachable upstream as an UpstreamNetworkError. */
  #mapped(err: Error): Error {
    if (this.#cancelled) return this.#cancelled;
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT') {
      return new UpstreamNetworkError(`the upstream at ${this.#host} did not answer within ${Math.round(this.#timeoutMs / 1000)} s`, true);
    }
    if (this.#res) return new UpstreamNetworkError(`the upstream at ${this.#host} broke off its answer (${code ?? 'network error'})`, false);
    return new UpstreamNetworkError(`the upstream at ${this.#host} could not be reached (${code ?? 'network error'})`, false);
  }
}

/** An upstream call under way: its response (as soon as the headers arrive), and how to give it up. */
export interface UpstreamCall {
  response: Promise<UpstreamResponse>;
  /** Closes the request (the client went away): `response` rejects with an AbortError, or the body being read ends with it. */
  cancel(): void;
}

interface Target {
  origin: string;
  path: string;
  host: string;
  pool: Pool;
}

/** Upstream URLs parsed once each: the catalogue names a few, and every request goes to one of them. */
const targets = new Map<string, Target>();
function targetOf(url: string): Target {
  let t = targets.get(url);
  if (!t) {
    const u = new URL(url);
    let pool = pools.get(u.origin);
    if (!pool) {
      pool = new Pool(u.origin, { connections: 1024 });
      if (pools.size < 1000) pools.set(u.origin, pool);
    }
    t = { origin: u.origin, path: u.pathname + u.search, host: u.host, pool };
    if (targets.size < 1000) targets.set(url, t);
  }
  return t;
}

/**
 * POSTs to the upstream on a kept-alive connection. A plain cancel function rather than an
 * AbortSignal: a signal per request costs a controller, an event target and listeners on the
 * request's path, for a cancellation that almost never happens. `idleTimeoutMs` bounds the wait
 * for the answer's headers and every wait between two chunks of its body.
 */
export function post(url: string, headers: Record<string, string>, payload: string | Buffer, opts: { idleTimeoutMs: number }): UpstreamCall {
  const t = targetOf(url);
  const call = new Call(t.host, opts.idleTimeoutMs);
  t.pool.dispatch(
    {
      origin: t.origin,
      path: t.path,
      method: 'POST',
      headers: { ...headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: payload,
      headersTimeout: opts.idleTimeoutMs,
      bodyTimeout: opts.idleTimeoutMs,
    },
    call,
  );
  return {
    response: call.response,
    cancel: () => call.cancelWith(Object.assign(new Error('the client closed the request'), { name: 'AbortError' })),
  };
}

/** Reads a body up to a limit. */
export function readBody(res: UpstreamResponse, limit = 64 * 1024 * 1024): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    res.consume({
      data(chunk) {
        if (done) return;
        size += chunk.length;
        if (size > limit) {
          done = true;
          reject(new UpstreamNetworkError('the upstream answer is too large', false));
          res.destroy(new UpstreamNetworkError('the upstream answer is too large', false));
          return;
        }
        chunks.push(chunk);
      },
      end(error) {
        if (done) return;
        done = true;
        if (error) reject(error);
        else resolve(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
      },
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
  // Cut after the shared clean-up; a pair the cut splits is mended again.
  return storableString(text).slice(0, max).toWellFormed();
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
  request(body, alias, credential, raw) {
    // What changes, by top-level member: the rest of the body passes through.
    const set: Partial<ChatRequest> = { model: alias.model };
    // The alias's max_output_tokens is what the reservation counts on: a larger limit asked for
    // is lowered to it, so an answer cannot outspend its reservation (or be refused upstream for a
    // limit past the model's own).
    if (typeof body.max_tokens === 'number') set.max_tokens = Math.min(body.max_tokens, alias.max_output_tokens);
    if (typeof body.max_completion_tokens === 'number') set.max_completion_tokens = Math.min(body.max_completion_tokens, alias.max_output_tokens);
    // Usage is how the request is charged; asked for always, and dropped again below when the client did not ask.
    if (body.stream) set.stream_options = { ...(body.stream_options ?? {}), include_usage: true };
    // The client's bytes with those members rewritten, when they stand for the parsed body (see
    // rewriteMembers); else the parsed body written again.
    const rewritten = raw ? rewriteMembers(raw, body, new Map(Object.entries(set).map(([k, v]) => [k, JSON.stringify(v)]))) : null;
    return {
      url: joinUrl(alias.base_url, '/chat/completions'),
      headers: credential ? openaiAdapter.withCredential({}, credential) : ({} as Record<string, string>),
      payload: rewritten ?? JSON.stringify({ ...body, ...set }),
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

import { IncomingMessage, ServerResponse } from 'node:http';
import type net from 'node:net';
import { PassThrough, type Readable, type Transform } from 'node:stream';
import zlib from 'node:zlib';
import {
  BodyReader,
  chunk,
  connectionTokens,
  framingOf,
  headerOf,
  LAST_CHUNK,
  parseHead,
  reasonOf,
  writeHead,
  type Framing,
  type Head,
  type Headers,
} from './http1.ts';
import type { LocalHandler } from '../http/local-handlers.ts';
import { createScrubber, redactStream, redactText, scrubForms } from './redact.ts';
import { UpstreamConnection, type UpstreamAddress, type UpstreamPool } from './upstreams.ts';

/**
 * The gateway's HTTP/1.1 data path: a connection from a sandbox is read request by request
 * (each one decided on its own), and a request that passes is written to a kept-alive upstream
 * connection and its answer streamed back. Bodies go through without being buffered, and with
 * their bytes untouched unless a credential was injected (then the answer is decoded, scrubbed
 * of the credential and framed again). Heads are always written by the gateway from what it
 * parsed, never copied.
 */

/** A sandbox connection with nothing to say for this long is closed. */
const CLIENT_IDLE_MS = 300_000;
/** A request head must be complete this long after its first byte (a client dribbling one is cut off). */
export const HEAD_DEADLINE_MS = 60_000;
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'content-length']);

export interface ConnectionHooks {
  /** A request: decide it, then answer or forward it; the exchange ends when its answer is written. */
  request(x: Exchange): Promise<void>;
  /** A CONNECT request: the socket is the caller's from here (`rest` is what followed the CONNECT head). */
  connect(head: Head, socket: net.Socket, rest: Buffer): void;
  /** A request that does not parse: its answer has been written and the connection closes. */
  malformed(socket: net.Socket, reason: string): void;
  /** What the handler threw (after its answer, or the connection's end). */
  failed(err: unknown): void;
}

/** One request from a sandbox and its answer. */
export class Exchange {
  readonly method: string;
  readonly target: string;
  readonly minor: 0 | 1;
  readonly headers: Headers;
  readonly framing: Framing;
  /** Whether the client waits for `100 Continue` before it sends the body. */
  readonly expectsContinue: boolean;
  /** Whether the connection may carry another request after this one. */
  keepAlive: boolean;
  /** Bytes have been written toward the client: a failure now can only end the connection. */
  headSent = false;
  answered = false;
  aborted = false;
  private reader: BodyReader | null = null;
  private bodyEnded: Promise<void> | null = null;
  private onAbort: Array<() => void> = [];

  readonly socket: net.Socket;
  private readonly conn: Connection;

  constructor(head: Head, framing: Framing, socket: net.Socket, conn: Connection) {
    this.socket = socket;
    this.conn = conn;
    this.method = head.method.toUpperCase();
    this.target = head.target;
    this.minor = head.minor;
    this.headers = head.headers;
    this.framing = framing;
    const tokens = connectionTokens(head.headers);
    this.keepAlive = head.minor === 1 ? !tokens.has('close') : tokens.has('keep-alive');
    this.expectsContinue = head.minor === 1 && (headerOf(head.headers, 'expect') ?? '').toLowerCase() === '100-continue';
  }

  get(name: string): string | undefined {
    return headerOf(this.headers, name);
  }

  get hasBody(): boolean {
    return this.framing.kind !== 'none';
  }

  get bodyDone(): boolean {
    return this.framing.kind === 'none' || (this.reader?.done ?? false);
  }

  /** Calls `fn` if the client goes away before the exchange ends. */
  whenAborted(fn: () => void) {
    if (this.aborted) fn();
    else this.onAbort.push(fn);
  }

  abort() {
    if (this.aborted) return;
    this.aborted = true;
    for (const fn of this.onAbort.splice(0)) fn();
  }

  /**
   * Reads the request body, handing its payload (framing taken off) to `onPayload`; resolves
   * when it has ended, rejects if the connection ends first or the framing is broken. Once.
   */
  readBody(onPayload: (payload: Buffer) => void): Promise<void> {
    if (this.bodyEnded) throw new Error('the request body is read once');
    if (this.framing.kind === 'none') return (this.bodyEnded = Promise.resolve());
    if (this.expectsContinue && !this.headSent) this.socket.write('HTTP/1.1 100 Continue\r\n\r\n');
    this.reader = new BodyReader(this.framing, onPayload);
    this.bodyEnded = this.conn.readBody(this.reader);
    return this.bodyEnded;
  }

  /** The request body's payload as a stream (for a body the gateway must read into: a git push). */
  bodyStream(): Readable {
    const out = new PassThrough();
    this.readBody((payload) => {
      if (!out.write(payload)) {
        this.pauseBody();
        out.once('drain', () => this.resumeBody());
      }
    }).then(
      () => out.end(),
      (err: Error) => out.destroy(err),
    );
    return out;
  }

  pauseBody() {
    this.socket.pause();
  }

  resumeBody() {
    if (!this.bodyDone) this.socket.resume();
  }

  /** Writes bytes of the answer. */
  write(data: string | Buffer): boolean {
    this.headSent = true;
    return this.socket.write(data);
  }

  /** A whole answer from the gateway itself (a refusal, the health check). */
  answer(status: number, headers: Headers, body: string | Buffer) {
    if (this.headSent) {
      this.socket.destroy();
      return;
    }
    const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
    const head = writeHead(`HTTP/1.1 ${status} ${reasonOf(status)}`, [...headers, ['content-length', String(bytes.length)], ['connection', this.keepAlive ? 'keep-alive' : 'close']]);
    this.socket.cork();
    this.write(head);
    if (this.method !== 'HEAD') this.write(bytes);
    this.socket.uncork();
    this.end();
  }

  /** The answer is complete: the connection reads the next request (after the rest of this one's body), or closes. */
  end() {
    if (this.answered) return;
    this.answered = true;
    this.conn.ended(this);
  }
}

/** Reads requests off one sandbox connection, one at a time. */
class Connection {
  private buf: Buffer | null = null;
  private current: Exchange | null = null;
  private body: { reader: BodyReader; resolve: () => void; reject: (err: Error) => void } | null = null;
  private closed = false;
  /** When the first byte of a head that is not yet complete arrived (0: none pending). */
  private headSince = 0;

  private readonly socket: net.Socket;
  private readonly hooks: ConnectionHooks;

  private readonly headDeadlineMs: number;

  constructor(socket: net.Socket, hooks: ConnectionHooks, headDeadlineMs: number) {
    this.socket = socket;
    this.hooks = hooks;
    this.headDeadlineMs = headDeadlineMs;
    socket.setNoDelay?.(true);
    socket.setTimeout(CLIENT_IDLE_MS, () => socket.destroy());
    socket.on('data', this.onData);
    socket.on('error', () => socket.destroy());
    socket.on('close', this.onClose);
    socket.resume();
  }

  private onData = (data: Buffer) => {
    if (this.body) {
      const at = this.body.reader.feed(data, 0);
      if (typeof at !== 'number') return this.bodyFailed(at.error);
      if (at < data.length) this.buf = this.buf ? Buffer.concat([this.buf, data.subarray(at)]) : data.subarray(at);
      if (this.body.reader.done) this.bodyDone();
      return;
    }
    this.buf = this.buf ? Buffer.concat([this.buf, data]) : data;
    if (this.current) {
      // The next request arrived before this one's answer went out: it waits.
      this.socket.pause();
      return;
    }
    this.next();
  };

  private onClose = () => {
    this.closed = true;
    if (this.body) {
      const { reader, reject } = this.body;
      this.body = null;
      if (!reader.finish()) reject(Object.assign(new Error('the client closed the connection during the request body'), { code: 'ECONNRESET' }));
    }
    this.current?.abort();
  };

  private bodyFailed(reason: string) {
    const body = this.body!;
    this.body = null;
    body.reject(Object.assign(new Error(reason), { code: 'HPE_INVALID_CHUNK' }));
    this.socket.destroy();
  }

  private bodyDone() {
    const body = this.body!;
    this.body = null;
    this.socket.pause();
    body.resolve();
    if (this.current?.answered) this.finish(this.current);
  }

  /** Starts reading a body: first what is buffered, then the socket. */
  readBody(reader: BodyReader): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.closed) return reject(Object.assign(new Error('the client closed the connection'), { code: 'ECONNRESET' }));
      this.body = { reader, resolve, reject };
      if (this.buf) {
        const data = this.buf;
        this.buf = null;
        const at = reader.feed(data, 0);
        if (typeof at !== 'number') return this.bodyFailed(at.error);
        if (at < data.length) this.buf = data.subarray(at);
      }
      if (reader.done) this.bodyDone();
      else this.socket.resume();
    });
  }

  /** Reads and handles the next request in the buffer, if a whole head is there. */
  private next() {
    if (this.current || this.closed || !this.buf) {
      if (!this.current && !this.closed) this.socket.resume();
      return;
    }
    const r = parseHead(this.buf, 0, 'request');
    if (r.state === 'more') {
      this.headSince ||= Date.now();
      if (Date.now() - this.headSince > this.headDeadlineMs) return this.malformed(408, `the request head did not arrive within ${this.headDeadlineMs / 1000} s`);
      this.socket.resume();
      return;
    }
    this.headSince = 0;
    if (r.state === 'bad') return this.malformed(r.status, r.reason);
    const rest = this.buf.subarray(r.end);
    this.buf = rest.length ? rest : null;
    if (r.head.method === 'CONNECT') {
      this.socket.off('data', this.onData);
      this.socket.off('close', this.onClose);
      this.socket.setTimeout(0);
      this.socket.pause();
      this.buf = null;
      this.hooks.connect(r.head, this.socket, rest);
      return;
    }
    const framing = framingOf(r.head, 'request');
    if (!framing.ok) return this.malformed(400, framing.reason);
    this.socket.pause();
    const x = new Exchange(r.head, framing.framing, this.socket, this);
    this.current = x;
    this.hooks.request(x).catch((err) => {
      this.hooks.failed(err);
      if (!x.answered) x.answer(502, [['content-type', 'text/plain']], 'Crewhouse gateway error\n');
    });
  }

  private malformed(status: 400 | 408 | 431, reason: string) {
    this.socket.off('data', this.onData);
    this.buf = null;
    answerAndClose(this.socket, status, `Crewhouse gateway: the request is not valid HTTP/1.1: ${reason} [rule: bad_request]\n`, 'bad_request');
    this.hooks.malformed(this.socket, reason);
  }

  /** The exchange's answer is written. */
  ended(x: Exchange) {
    if (x !== this.current) return;
    if (!x.keepAlive || this.closed) return this.close(x);
    if (!x.bodyDone) {
      // Not forwarded (a refusal): a client waiting for 100 Continue will not send the body;
      // any other is read to its end and dropped, so the connection can go on.
      if (x.expectsContinue || this.body) return this.close(x);
      x.readBody(() => {}).catch(() => this.socket.destroy());
      return;
    }
    this.finish(x);
  }

  private finish(x: Exchange) {
    if (x !== this.current || !x.answered) return;
    if (!x.keepAlive) return this.close(x);
    this.current = null;
    this.next();
  }

  private close(x: Exchange) {
    this.current = x;
    this.buf = null;
    this.socket.end();
  }
}

/** A whole answer from the gateway on a connection that then closes (a request that does not parse, a refused CONNECT). */
export function answerAndClose(socket: net.Socket, status: number, body: string, rule: string) {
  if (!socket.writable) return socket.destroy();
  socket.end(writeHead(`HTTP/1.1 ${status} ${reasonOf(status)}`, [['content-type', 'text/plain; charset=utf-8'], ['content-length', String(Buffer.byteLength(body))], ['x-crewhouse-gateway-rule', rule], ['connection', 'close']]) + body);
}

/**
 * Writes a payload toward `to` (as one chunk of a chunked body when `chunked`); when `to` is
 * full, `from` is paused until it drains.
 */
function relay(to: net.Socket, payload: Buffer, chunked: boolean, from: { pause(): unknown; resume(): unknown }) {
  let ok = true;
  if (chunked) for (const part of chunk(payload)) ok = to.write(part) && ok;
  else ok = to.write(payload);
  if (!ok) {
    from.pause();
    to.once('drain', () => from.resume());
  }
}

/** The codings the gateway decodes to scrub an answer; `identity` is none. */
const DECODABLE = new Set(['gzip', 'x-gzip', 'deflate', 'br']);
/** Codings of IANA's HTTP Content Coding Registry the gateway does not decode (named in its refusal). */
const REGISTERED = new Set(['zstd', 'compress', 'x-compress', 'exi', 'pack200-gzip', 'aes128gcm', 'dcb', 'dcz']);

/**
 * Decoders for an answer's Content-Encoding (in the order to apply them: the last coding applied
 * is undone first), or why the gateway cannot read it.
 */
function decodersFor(headers: Headers): { ok: true; decoders: Transform[] } | { ok: false; reason: string } {
  const codings = headers
    .filter(([n]) => n === 'content-encoding')
    .flatMap(([, v]) => v.split(','))
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== '' && c !== 'identity');
  const unknown = codings.find((c) => !DECODABLE.has(c));
  if (unknown !== undefined) {
    // Only a registered coding is named: whatever else the upstream wrote there could be the credential itself.
    const which = REGISTERED.has(unknown) ? `the content encoding "${unknown}"` : 'a content encoding the gateway does not know';
    return { ok: false, reason: `the upstream answered in ${which}, which the gateway cannot decode to take the injected credential out of it, so the answer was not passed on` };
  }
  if (codings.length > 4) return { ok: false, reason: `the upstream answered with ${codings.length} content encodings stacked, more than the gateway decodes to take the injected credential out of an answer` };
  return { ok: true, decoders: codings.reverse().map((c) => (c === 'br' ? zlib.createBrotliDecompress() : c === 'deflate' ? inflateEither() : zlib.createGunzip())) };
}

/** HTTP's `deflate` is zlib-wrapped, but some servers send it raw: the first byte tells which. */
function inflateEither(): Transform {
  let inner: zlib.Inflate | zlib.InflateRaw | null = null;
  return new (class extends PassThrough {
    override _transform(chunk: Buffer, _enc: BufferEncoding, cb: (err?: Error | null) => void) {
      if (!inner) {
        // A zlib header: compression method 8 in the low nibble and a checksum over the first two bytes (RFC 1950).
        const zlibHeader = (chunk[0] & 0x0f) === 8 && (chunk.length < 2 || ((chunk[0] << 8) | chunk[1]) % 31 === 0);
        inner = zlibHeader ? zlib.createInflate() : zlib.createInflateRaw();
        inner.on('data', (d: Buffer) => this.push(d));
        inner.on('error', (err) => this.destroy(err));
      }
      if (inner.write(chunk)) cb();
      else inner.once('drain', () => cb());
    }
    override _flush(cb: (err?: Error | null) => void) {
      if (!inner) return cb();
      inner.once('end', () => cb());
      inner.end();
    }
  })();
}

/** Serves HTTP/1.1 requests on a sandbox's connection (the proxy connection, or what a CONNECT tunnel carries). */
export function serveConnection(socket: net.Socket, hooks: ConnectionHooks, headDeadlineMs = HEAD_DEADLINE_MS): void {
  new Connection(socket, hooks, headDeadlineMs);
}

export interface Forward {
  upstream: UpstreamAddress;
  /** The request line and headers to send, without framing headers (the gateway frames the body itself). */
  method: string;
  path: string;
  headers: Headers;
  /** The body to send instead of the request's own (already decoded; sent chunked). */
  body?: Readable;
  /** Values that must not come back to the sandbox: with any, the answer is decoded, scrubbed and framed again. */
  secrets: string[];
  /** Sees each piece of the answer's body as it came (unframed), before it goes on (the record of a git push reads its report). */
  observe?: (payload: Buffer) => void;
}

export type ForwardResult = { ok: true } | { ok: false; error: NodeJS.ErrnoException };

/**
 * Sends the request to the upstream on a kept-alive connection and streams the answer back.
 * Resolves `ok: false` only while nothing has been written to the client (the caller answers);
 * after that a failure ends the client connection.
 */
export async function forward(x: Exchange, pool: UpstreamPool, f: Forward, retried = false): Promise<ForwardResult> {
  let lease: UpstreamConnection;
  try {
    const taken = pool.take(f.upstream);
    lease = taken instanceof UpstreamConnection ? taken : await taken;
  } catch (err) {
    return { ok: false, error: err as NodeJS.ErrnoException };
  }
  const up = lease.socket;
  if (x.aborted) {
    lease.destroy();
    return { ok: true };
  }
  const own = f.body ? ({ kind: 'chunked' } as const) : x.framing;
  const framingHeaders: Headers = own.kind === 'length' ? [['content-length', String(own.length)]] : own.kind === 'chunked' ? [['transfer-encoding', 'chunked']] : x.get('content-length') !== undefined ? [['content-length', '0']] : [];
  const head = writeHead(`${f.method} ${f.path} HTTP/1.1`, [...f.headers, ...framingHeaders]);
  const redacting = f.secrets.length > 0;
  // The credential as an upstream might echo it: as it is and in its common encodings.
  const needles = redacting ? scrubForms(f.secrets) : [];
  const lowerNeedles = needles.map((n) => n.toLowerCase());

  return new Promise<ForwardResult>((resolve) => {
    let settled = false;
    let buf: Buffer | null = null;
    let reader: BodyReader | null = null;
    let responseHead: Head | null = null;
    let sentAll = own.kind === 'none';
    let out: ((payload: Buffer) => void) | null = null;
    /** Ends what is written toward the client; `done` once the last byte is written. */
    let finishOut: ((done: () => void) => void) | null = null;
    let closeClient = false;
    const settle = (r: ForwardResult) => {
      if (settled) return;
      settled = true;
      lease.owner = null;
      resolve(r);
    };
    const fail = (error: NodeJS.ErrnoException) => {
      lease.destroy();
      if (settled) return;
      if (x.headSent) {
        x.socket.destroy();
        settle({ ok: true });
        return;
      }
      // A kept-alive connection the upstream closed as the request went out: once more on a new one, if nothing needs replaying.
      if (lease.reused && !retried && own.kind === 'none' && responseHead === null && !buf) {
        settled = true;
        resolve(forward(x, pool, f, true));
        return;
      }
      settle({ ok: false, error });
    };
    const complete = () => {
      const reusable = sentAll && !buf?.length && responseHead!.minor === 1 && !connectionTokens(responseHead!.headers).has('close') && reader!.framing.kind !== 'close';
      settle({ ok: true });
      if (reusable) pool.give(lease);
      else lease.destroy();
      if (closeClient) x.keepAlive = false;
      if (finishOut) finishOut(() => x.end());
      else x.end();
    };

    const startAnswer = (h: Head): boolean => {
      const fr = framingOf(h, 'response', x.method);
      if (!fr.ok) {
        fail(Object.assign(new Error(fr.reason), { code: 'HPE_UPSTREAM_FRAMING' }));
        return false;
      }
      const framing = fr.framing;
      // Where a credential was injected the body is scrubbed, so it is decoded first: an encoding the gateway cannot decode is not passed on.
      const decoding = redacting && framing.kind !== 'none' ? decodersFor(h.headers) : { ok: true as const, decoders: [] };
      if (!decoding.ok) {
        fail(Object.assign(new Error(decoding.reason), { code: 'EGATEWAY_ENCODING' }));
        return false;
      }
      const named = connectionTokens(h.headers);
      const headers: Headers = [];
      for (const [n, v] of h.headers) {
        if (HOP_BY_HOP.has(n) || named.has(n) || n.startsWith('proxy-')) continue;
        if (n === 'content-encoding' && decoding.decoders.length > 0) continue;
        // A name can carry the credential as well as a value can (a token is a valid header name).
        const name = redacting && lowerNeedles.some((l) => n.includes(l)) ? 'x-redacted-by-the-gateway' : n;
        headers.push([name, redacting ? redactText(v, needles) : v]);
      }
      // Passed through as it came, or decoded (to scrub a credential, or for an HTTP/1.0 client) and framed again.
      const raw = !redacting && (framing.kind !== 'chunked' || x.minor === 1);
      if (framing.kind === 'close') closeClient = true;
      if (raw) {
        if (framing.kind === 'length') headers.push(['content-length', String(framing.length)]);
        else if (framing.kind === 'chunked') headers.push(['transfer-encoding', 'chunked']);
        else if (framing.kind === 'none') {
          const cl = headerOf(h.headers, 'content-length');
          if (cl !== undefined && /^\d+$/.test(cl)) headers.push(['content-length', cl]);
        }
      } else if (framing.kind !== 'none') {
        if (x.minor === 1) headers.push(['transfer-encoding', 'chunked']);
        else closeClient = true;
      }
      if (closeClient) x.keepAlive = false;
      headers.push(['connection', x.keepAlive ? 'keep-alive' : 'close']);
      x.socket.cork();
      const reason = redacting && h.reason ? redactText(h.reason, needles) : h.reason;
      x.write(writeHead(`HTTP/1.1 ${h.status} ${reason || reasonOf(h.status)}`, headers));
      process.nextTick(() => x.socket.uncork());
      if (raw) {
        reader = new BodyReader(framing, (p) => f.observe?.(p));
        out = null;
      } else {
        const chunked = x.minor === 1;
        if (redacting) {
          // upstream -> decoders (if any) -> scrub -> client; a full client pauses the scrub, and that pauses the upstream in turn.
          const chain: Transform[] = [...decoding.decoders, redactStream(needles)];
          for (let i = 1; i < chain.length; i++) chain[i - 1].pipe(chain[i]);
          const first = chain[0];
          const last = chain.at(-1)!;
          // An answer that does not decode can only end the connection (its head is sent).
          for (const s of chain) s.on('error', () => x.socket.destroy());
          last.on('data', (b: Buffer) => {
            if (b.length > 0) relay(x.socket, b, chunked, last);
          });
          let waiting = false;
          out = (p) => {
            if (!first.write(p) && !waiting) {
              waiting = true;
              up.pause();
              first.once('drain', () => {
                waiting = false;
                up.resume();
              });
            }
          };
          finishOut = (done) => {
            last.once('end', () => {
              if (chunked) x.write(LAST_CHUNK);
              done();
            });
            first.end();
          };
        } else {
          out = (b: Buffer) => {
            if (b.length > 0) relay(x.socket, b, chunked, up);
          };
          finishOut = (done) => {
            if (chunked) x.write(LAST_CHUNK);
            done();
          };
        }
        if (framing.kind === 'none') finishOut = null;
        reader = new BodyReader(framing, (p) => {
          f.observe?.(p);
          out!(p);
        });
      }
      return true;
    };

    const onData = (data: Buffer) => {
      let at = 0;
      if (!reader) {
        buf = buf ? Buffer.concat([buf, data]) : data;
        for (;;) {
          const r = parseHead(buf, 0, 'response');
          if (r.state === 'more') return;
          if (r.state === 'bad') return fail(Object.assign(new Error(`the upstream's answer is not HTTP/1.1: ${r.reason}`), { code: 'HPE_UPSTREAM' }));
          const rest = buf.subarray(r.end);
          buf = rest.length ? rest : null;
          // Interim answers (100 Continue, 103) are the gateway's to take: the sandbox's Expect is answered by the gateway itself.
          if (r.head.status >= 100 && r.head.status < 200) {
            if (r.head.status === 101) return fail(Object.assign(new Error('the upstream switched protocols, which the gateway does not pass'), { code: 'HPE_UPSTREAM' }));
            if (!buf) return;
            continue;
          }
          responseHead = r.head;
          if (!startAnswer(r.head)) return;
          data = buf ?? Buffer.alloc(0);
          buf = null;
          break;
        }
      }
      const r = reader!;
      const end = r.feed(data, at);
      if (typeof end !== 'number') return fail(Object.assign(new Error(`the upstream's answer is broken: ${end.error}`), { code: 'HPE_UPSTREAM' }));
      if (out === null && end > at) relay(x.socket, at === 0 && end === data.length ? data : data.subarray(at, end), false, up);
      at = end;
      if (at < data.length) buf = data.subarray(at);
      if (r.done) complete();
    };
    const onEnd = () => {
      if (settled) return;
      if (reader && reader.finish()) return complete();
      fail(Object.assign(new Error('the upstream closed the connection before its answer ended'), { code: 'ECONNRESET' }));
    };
    const onError = (err: Error) => fail(err as NodeJS.ErrnoException);
    const onTimeout = () => fail(Object.assign(new Error('timed out'), { code: 'ETIMEDOUT' }));

    lease.owner = { data: onData, ended: onEnd, error: onError, timeout: onTimeout };
    x.whenAborted(() => {
      // Only while this exchange holds the connection: once given back, it may be another's.
      if (settled) return;
      lease.destroy();
      settle({ ok: true });
    });
    up.resume();

    if (f.body) {
      up.write(head);
      const body = f.body;
      body.on('data', (p: Buffer) => relay(up, p, true, body));
      body.once('end', () => {
        sentAll = true;
        up.write(LAST_CHUNK);
      });
      body.once('error', (err: Error) => fail(err as NodeJS.ErrnoException));
    } else if (own.kind === 'none') {
      up.write(head);
    } else {
      const chunked = own.kind === 'chunked';
      up.cork();
      up.write(head);
      x.readBody((p) => relay(up, p, chunked, { pause: () => x.pauseBody(), resume: () => x.resumeBody() })).then(
        () => {
          sentAll = true;
          if (chunked) up.write(LAST_CHUNK);
        },
        (err: Error) => fail(err as NodeJS.ErrnoException),
      );
      process.nextTick(() => up.uncork());
    }
  });
}

export interface HandOff {
  /** The request line and headers the handler sees, without framing headers (the exchange's own framing is added). */
  method: string;
  path: string;
  headers: Headers;
  /** Values that must not come back to the sandbox (the injected credential), as for `forward`. */
  secrets: string[];
}

/**
 * Hands the request to a server of this process (the model proxy) instead of forwarding it:
 * the handler gets Node's request, whose body is the exchange's payload as it arrives, and a
 * response written straight to the sandbox's connection. So the request is not written as HTTP
 * and parsed again, nor its answer; the handler still sees everything an HTTP request carries
 * (method, path, headers, framing, body as a stream, the connection's close) and answers as it
 * would on its own socket. Resolves when the answer is written. HTTP/1.1 only: the caller
 * forwards an HTTP/1.0 request as before.
 */
export function handOff(x: Exchange, handler: LocalHandler, h: HandOff): Promise<void> {
  const socket = x.socket;
  const req = new IncomingMessage(socket);
  req.method = h.method;
  req.url = h.path;
  req.httpVersion = '1.1';
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  const framing: Headers = x.framing.kind === 'length' ? [['content-length', String(x.framing.length)]] : x.framing.kind === 'chunked' ? [['transfer-encoding', 'chunked']] : [];
  const all = [...h.headers, ...framing];
  // As Node's parser gives them: names in lower case, a repeated header's values joined (set-cookie's kept apart).
  const headers: Record<string, string | string[]> = {};
  const raw: string[] = [];
  for (const [name, value] of all) {
    raw.push(name, value);
    const had = headers[name];
    if (had === undefined) headers[name] = name === 'set-cookie' ? [value] : value;
    else if (Array.isArray(had)) had.push(value);
    else headers[name] = `${had}, ${value}`;
  }
  req.headers = headers;
  req.rawHeaders = raw;
  // The body comes from the exchange (framing taken off), paced by what the handler reads.
  req._read = () => x.resumeBody();
  const bodyRead = x.readBody((payload) => {
    if (!req.push(payload)) x.pauseBody();
  });
  bodyRead.then(
    () => {
      req.complete = true;
      req.push(null);
    },
    // The sandbox went away or broke the framing: the handler sees its request aborted.
    (err: Error) => req.destroy(err),
  );

  const res = new ServerResponse(req);
  res.shouldKeepAlive = x.keepAlive;
  if (h.secrets.length > 0) scrubAnswer(res, scrubForms(h.secrets));
  return new Promise<void>((resolve) => {
    // The sandbox closing its connection closes the response (the handler stops its upstream call); the exchange ends with the connection.
    const onClose = () => resolve();
    socket.once('close', onClose);
    res.once('finish', () => {
      socket.off('close', onClose);
      res.detachSocket(socket);
      // An answer that closes the connection (a body over the limit), or one given before the body was read, ends it.
      if (!res.shouldKeepAlive || String(res.getHeader('connection') ?? '').toLowerCase() === 'close' || !x.bodyDone) x.keepAlive = false;
      // As Node's server does after an answer: 'close' follows 'finish'.
      process.nextTick(() => res.emit('close'));
      x.end();
      resolve();
    });
    res.assignSocket(socket);
    try {
      handler(req, res);
    } catch (err) {
      socket.off('close', onClose);
      if (!res.headersSent) res.detachSocket(socket);
      throw err;
    }
    // From here a failure can only end the connection: the handler may have begun its answer.
    x.headSent = true;
  });
}

type Chunk = string | Uint8Array;
/** Node's write and end take an encoding and a callback in either place. */
type Callback = (err?: Error | null) => void;
type WriteArgs = [(BufferEncoding | Callback)?, Callback?];
const bytesOf = (chunk: Chunk, encoding: WriteArgs[0]) => (typeof chunk === 'string' ? Buffer.from(chunk, typeof encoding === 'string' ? encoding : 'utf8') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength));

/**
 * Takes the values out of what a handler answers, as `forward` does out of an upstream's answer:
 * header names and values and the status text before the head goes out, the body as it is
 * written (createScrubber: nothing that cannot start a value is held back, so a streamed event
 * goes on whole). The body's length may change, so it is framed by the response itself (chunked,
 * or the length of what `end` writes), never by a Content-Length the handler set.
 */
function scrubAnswer(res: ServerResponse, needles: readonly string[]) {
  const lowerNeedles = needles.map((n) => n.toLowerCase());
  const scrubber = createScrubber(needles);
  // Called with what they take in every form: typed as loosely as Node's own overloads allow.
  const writeHead = res.writeHead as (this: ServerResponse, status: number, reason?: string) => ServerResponse;
  const write = res.write as (this: ServerResponse, chunk: Buffer, cb?: Callback) => boolean;
  const end = res.end as (this: ServerResponse, chunk?: Buffer, cb?: Callback) => ServerResponse;
  res.writeHead = function (this: ServerResponse, status: number, ...rest: unknown[]) {
    const reason = typeof rest[0] === 'string' ? (rest.shift() as string) : undefined;
    const given = rest[0];
    if (Array.isArray(given)) {
      // [name, value] pairs, or names and values in turn.
      const flat = Array.isArray(given[0]) ? (given as string[][]).flat() : (given as string[]);
      for (let i = 0; i + 1 < flat.length; i += 2) this.appendHeader(flat[i], flat[i + 1]);
    } else if (given && typeof given === 'object') {
      for (const [name, value] of Object.entries(given)) if (value !== undefined) this.setHeader(name, value as string | number | string[]);
    }
    this.removeHeader('content-length');
    for (const name of this.getHeaderNames()) {
      const value = this.getHeader(name)!;
      const values = (Array.isArray(value) ? value : [String(value)]).map((v) => redactText(v, needles));
      this.removeHeader(name);
      // A name can carry the credential as well as a value can.
      this.setHeader(lowerNeedles.some((l) => name.includes(l)) ? 'x-redacted-by-the-gateway' : name, values.length === 1 ? values[0] : values);
    }
    return writeHead.call(this, status, reason === undefined ? undefined : redactText(reason, needles));
  } as ServerResponse['writeHead'];
  res.write = function (this: ServerResponse, chunk: Chunk, ...args: WriteArgs) {
    const out = scrubber.push(bytesOf(chunk, args[0]));
    const cb = typeof args[0] === 'function' ? args[0] : args[1];
    if (out.length === 0) {
      // All of it could begin a value: it waits for what follows.
      if (cb) process.nextTick(cb);
      return true;
    }
    return write.call(this, out, cb);
  } as ServerResponse['write'];
  res.end = function (this: ServerResponse, chunk?: Chunk | (() => void), ...args: WriteArgs) {
    if (typeof chunk === 'function') return end.call(this, scrubber.end(), chunk);
    const last = chunk === undefined || chunk === null ? scrubber.end() : Buffer.concat([scrubber.push(bytesOf(chunk, args[0])), scrubber.end()]);
    const cb = typeof args[0] === 'function' ? args[0] : args[1];
    const body = last.length > 0 ? last : undefined;
    return end.call(this, body, cb);
  } as ServerResponse['end'];
}

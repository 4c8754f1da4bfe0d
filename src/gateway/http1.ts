/**
 * HTTP/1.1 on the wire, as the gateway needs it: message heads parsed strictly from bytes, and
 * bodies framed (Content-Length, chunked, or to the end of the connection) without buffering.
 *
 * The gateway reads requests from a sandbox it does not trust and answers from upstreams it
 * does not control, so parsing refuses what is ambiguous instead of guessing: a line that does
 * not end in CRLF, a folded header, a name that is not a token, a value with control bytes,
 * Content-Length and Transfer-Encoding together, Content-Lengths that disagree, a transfer
 * coding other than `chunked`. What it forwards it writes itself, from what it parsed.
 */

/** Longest head (request or status line and headers) the gateway reads. */
export const MAX_HEAD_BYTES = 64 * 1024;
const MAX_HEADERS = 256;
const MAX_CHUNK_LINE = 4096;

export type Headers = Array<[name: string, value: string]>;

export interface Head {
  /** Request: the method; response: empty. */
  method: string;
  /** Request: the request target as sent. */
  target: string;
  /** Response: the status code and reason phrase. */
  status: number;
  reason: string;
  /** The minor version: 1 for HTTP/1.1, 0 for HTTP/1.0. */
  minor: 0 | 1;
  /** Header names in lower case, in the order they came, repeated names kept apart. */
  headers: Headers;
}

export type Framing = { kind: 'none' } | { kind: 'length'; length: number } | { kind: 'chunked' } | { kind: 'close' };

export type HeadResult = { state: 'more' } | { state: 'done'; head: Head; end: number } | { state: 'bad'; reason: string; status: 400 | 431 };

// Token characters (RFC 9110 5.6.2), by byte.
const TOKEN = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TOKEN[c.charCodeAt(0)] = 1;
const isToken = (s: string) => {
  if (s.length === 0) return false;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c > 127 || !TOKEN[c]) return false;
  }
  return true;
};
/** A field value may hold visible bytes, spaces and tabs (and obs-text), never other control bytes. */
const badValue = (s: string) => {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if ((c < 32 && c !== 9) || c === 127) return true;
  }
  return false;
};
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP\/1\.([01])$/;
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9][0-9]{2})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;

/** Parses a request (`request`) or response head from `buf` at `from`: `more` until the empty line arrives. */
export function parseHead(buf: Buffer, from: number, kind: 'request' | 'response'): HeadResult {
  const end = buf.indexOf('\r\n\r\n', from, 'latin1');
  if (end < 0) return buf.length - from > MAX_HEAD_BYTES ? { state: 'bad', reason: 'the head is too large', status: 431 } : { state: 'more' };
  if (end - from > MAX_HEAD_BYTES) return { state: 'bad', reason: 'the head is too large', status: 431 };
  const bad = (reason: string): HeadResult => ({ state: 'bad', reason, status: 400 });
  const lines = buf.toString('latin1', from, end).split('\r\n');
  const head: Head = { method: '', target: '', status: 0, reason: '', minor: 1, headers: [] };
  const first = lines[0];
  if (kind === 'request') {
    const m = REQUEST_LINE.exec(first);
    if (!m) return bad('the request line is not HTTP/1.x');
    head.method = m[1];
    head.target = m[2];
    head.minor = m[3] === '1' ? 1 : 0;
  } else {
    const m = STATUS_LINE.exec(first);
    if (!m) return bad('the status line is not HTTP/1.x');
    head.minor = m[1] === '1' ? 1 : 0;
    head.status = Number(m[2]);
    head.reason = m[3] ?? '';
  }
  if (lines.length - 1 > MAX_HEADERS) return { state: 'bad', reason: 'too many header fields', status: 431 };
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i];
    if (line.includes('\n') || line.includes('\r')) return bad('a header line does not end in CRLF');
    const colon = line.indexOf(':');
    if (colon <= 0) return bad(line.length && (line[0] === ' ' || line[0] === '\t') ? 'folded header lines are not accepted' : 'a header line has no name');
    const name = line.slice(0, colon);
    if (!isToken(name)) return bad(`the header name "${name.slice(0, 60)}" is not a token`);
    const value = line.slice(colon + 1).trim();
    if (badValue(value)) return bad(`the header ${name.slice(0, 60)} holds control characters`);
    head.headers.push([name.toLowerCase(), value]);
  }
  return { state: 'done', head, end: end + 4 };
}

/** The values of a header, joined as a list (`a, b`), or undefined when it is absent. */
export function headerOf(headers: Headers, name: string): string | undefined {
  let out: string | undefined;
  for (const [n, v] of headers) if (n === name) out = out === undefined ? v : `${out}, ${v}`;
  return out;
}

/** The tokens of the Connection header, lower case: the hop-by-hop headers it names, `close`, `keep-alive`. */
export function connectionTokens(headers: Headers): Set<string> {
  const c = headerOf(headers, 'connection');
  return c ? new Set(c.toLowerCase().split(',').map((s) => s.trim())) : new Set();
}

/** How a message's body is framed, or why it cannot be read safely. */
export function framingOf(head: Head, kind: 'request' | 'response', requestMethod = ''): { ok: true; framing: Framing } | { ok: false; reason: string } {
  if (kind === 'response' && (requestMethod === 'HEAD' || head.status < 200 || head.status === 204 || head.status === 304)) return { ok: true, framing: { kind: 'none' } };
  const te = headerOf(head.headers, 'transfer-encoding');
  let length: string | undefined;
  for (const [n, v] of head.headers) {
    if (n !== 'content-length') continue;
    for (const part of v.split(',')) {
      const p = part.trim();
      if (!/^[0-9]{1,15}$/.test(p)) return { ok: false, reason: 'the Content-Length is not a number' };
      if (length !== undefined && Number(length) !== Number(p)) return { ok: false, reason: 'the Content-Length headers disagree' };
      length = p;
    }
  }
  if (te !== undefined) {
    if (kind === 'request' && length !== undefined) return { ok: false, reason: 'a request has both Transfer-Encoding and Content-Length' };
    if (te.trim().toLowerCase() !== 'chunked') return { ok: false, reason: `the transfer coding "${te.slice(0, 60)}" is not supported (only chunked)` };
    return { ok: true, framing: { kind: 'chunked' } };
  }
  if (length !== undefined) return { ok: true, framing: Number(length) === 0 ? { kind: 'none' } : { kind: 'length', length: Number(length) } };
  return { ok: true, framing: kind === 'request' ? { kind: 'none' } : { kind: 'close' } };
}

/**
 * Reads one body off a byte stream: each `feed` says how many of the bytes belong to the body
 * (the rest is the next message), hands the payload (chunked framing taken off) to `onPayload`,
 * and whether the body has ended. A close-delimited body ends with `finish`.
 */
export class BodyReader {
  done: boolean;
  private left: number;
  private state: 'size' | 'data' | 'data-crlf' | 'trailer' = 'size';
  private line = '';
  readonly framing: Framing;
  private readonly onPayload: (payload: Buffer) => void;

  constructor(framing: Framing, onPayload: (payload: Buffer) => void) {
    this.framing = framing;
    this.onPayload = onPayload;
    this.done = framing.kind === 'none';
    this.left = framing.kind === 'length' ? framing.length : 0;
  }

  /** Consumes from `buf` at `from`; returns the offset where the body's bytes stop, or an error. */
  feed(buf: Buffer, from: number): number | { error: string } {
    if (this.done) return from;
    const f = this.framing;
    if (f.kind === 'close') {
      if (from < buf.length) this.onPayload(from === 0 ? buf : buf.subarray(from));
      return buf.length;
    }
    if (f.kind === 'length') {
      const take = Math.min(this.left, buf.length - from);
      if (take > 0) this.onPayload(from === 0 && take === buf.length ? buf : buf.subarray(from, from + take));
      this.left -= take;
      if (this.left === 0) this.done = true;
      return from + take;
    }
    let at = from;
    while (at < buf.length && !this.done) {
      if (this.state === 'data') {
        const take = Math.min(this.left, buf.length - at);
        this.onPayload(buf.subarray(at, at + take));
        this.left -= take;
        at += take;
        if (this.left === 0) {
          this.state = 'data-crlf';
          this.line = '';
        }
        continue;
      }
      // A line: a chunk's size, the CRLF after its data, or a trailer line.
      const nl = buf.indexOf(10, at);
      const upto = nl < 0 ? buf.length : nl + 1;
      this.line += buf.toString('latin1', at, upto);
      at = upto;
      if (this.line.length > MAX_CHUNK_LINE) return { error: 'a chunk line is too long' };
      if (nl < 0) break;
      if (!this.line.endsWith('\r\n')) return { error: 'a chunk line does not end in CRLF' };
      const line = this.line.slice(0, -2);
      this.line = '';
      if (this.state === 'data-crlf') {
        if (line !== '') return { error: 'a chunk does not end where its size says' };
        this.state = 'size';
      } else if (this.state === 'size') {
        const m = /^([0-9a-fA-F]{1,12})[ \t]*(;.*)?$/.exec(line);
        if (!m) return { error: 'a chunk size is not hexadecimal' };
        this.left = parseInt(m[1], 16);
        this.state = this.left === 0 ? 'trailer' : 'data';
      } else if (line === '') {
        this.done = true;
      }
    }
    return at;
  }

  /** The connection ended: a close-delimited body is complete; any other is cut short. */
  finish(): boolean {
    if (this.framing.kind === 'close') this.done = true;
    return this.done;
  }
}

/** A chunk of a chunked body. */
export const chunk = (payload: Buffer): Buffer[] => [Buffer.from(`${payload.length.toString(16)}\r\n`, 'latin1'), payload, CRLF];
export const CRLF = Buffer.from('\r\n', 'latin1');
export const LAST_CHUNK = Buffer.from('0\r\n\r\n', 'latin1');

/** A head as bytes to write: the start line, then each header. */
export function writeHead(startLine: string, headers: Headers): string {
  let s = `${startLine}\r\n`;
  for (const [n, v] of headers) s += `${n}: ${v}\r\n`;
  return `${s}\r\n`;
}

const REASONS: Record<number, string> = { 100: 'Continue', 200: 'OK', 400: 'Bad Request', 403: 'Forbidden', 404: 'Not Found', 408: 'Request Timeout', 413: 'Content Too Large', 429: 'Too Many Requests', 431: 'Request Header Fields Too Large', 502: 'Bad Gateway', 504: 'Gateway Timeout' };
export const reasonOf = (status: number) => REASONS[status] ?? 'Status';

import { isUtf8 } from 'node:buffer';

/**
 * A chat body as the client sent it, kept beside its parsed value so that the OpenAI-compatible
 * path can forward the client's own bytes with only the top-level members it changes rewritten,
 * instead of serialising the whole conversation again (at 800 KiB, JSON.stringify, measuring its
 * UTF-8 length and encoding it for the socket cost about 5 ms a request; see docs/benchmarks.md).
 *
 * `readRawJson` reads the text once: the top-level members with their spans, how deep it nests,
 * how many object keys it holds, whether it holds a \u escape that could be half of a surrogate
 * pair or a NUL, a key that could read as __proto__ or constructor, and a number JSON.parse reads
 * as something JSON.stringify writes differently in value (an infinity, minus zero). Strings are
 * skipped with indexOf, so the cost is in the structure and the quotes, not the text.
 */
export interface RawJson {
  /** The body's bytes, as received. */
  bytes: Buffer;
  /** The top-level members in document order (a key sent twice appears twice). */
  members: Array<{ key: string; valueStart: number; valueEnd: number }>;
  /** Char offsets of the top-level object's braces in the text. */
  open: number;
  close: number;
  /** The most containers open at once (the top-level object counts as 1). */
  maxOpen: number;
  /** Object keys in the whole text, every occurrence counted. */
  keys: number;
  /** A \u escape of a surrogate or of NUL somewhere (the strings must then be looked at one by one). */
  suspectEscape: boolean;
  /** Every number reads back the same through JSON.stringify (none overflows to an infinity, none is minus zero). */
  plainNumbers: boolean;
  /**
   * A key that may read as __proto__ or constructor (it has an escape, or is one of them): only
   * such a body needs the prototype-poisoning checks of Fastify's parser.
   */
  suspectKey: boolean;
  /** The text starts with a byte order mark (JSON.parse takes the text after it). */
  bom: boolean;
  /** Char offset to byte offset in `bytes`. */
  byteOffset(charOffset: number): number;
}

const SUSPECT_ESCAPE = /\\u(?:[dD][89abAB]|[dD][c-fC-F]|0000)/;

const isSpace = (c: number) => c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09;

/**
 * `text` (the UTF-8 decoding of `bytes`) read as described above; null when it is not an object,
 * or its bytes are not UTF-8 as sent. Read before it is parsed: what it says holds only once
 * JSON.parse accepted the text (a text that is not JSON may read as anything, or as null).
 */
export function readRawJson(bytes: Buffer, text: string): RawJson | null {
  // Bytes that are not UTF-8 were decoded into replacement characters: what goes upstream is then the decoded text, not these bytes.
  if (!isUtf8(bytes)) return null;
  const bom = text.charCodeAt(0) === 0xfeff;
  let i = bom ? 1 : 0;
  while (isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 0x7b) return null;
  const open = i;
  let keys = 0;
  let open_ = 0;
  let maxOpen = 0;
  let plainNumbers = true;
  let suspectKey = false;
  const members: RawJson['members'] = [];
  /** Notes a key (from its opening quote to past its closing one) that may read as __proto__ or constructor. */
  const noteKey = (start: number, end: number) => {
    const c = text.charCodeAt(start + 1);
    if (c === 0x5c) suspectKey = true;
    else if ((c === 0x5f && end - start >= 11) || (c === 0x63 && end - start >= 13)) {
      const quoted = text.slice(start, end);
      if (quoted.includes('\\') || quoted === '"__proto__"' || quoted === '"constructor"') suspectKey = true;
    }
  };

  /** Past the closing quote of the string whose opening quote is at `at`. */
  const stringEnd = (at: number): number => {
    for (let q = text.indexOf('"', at + 1); ; q = text.indexOf('"', q + 1)) {
      if (q < 0) throw new Error('unterminated string');
      let k = q - 1;
      while (text.charCodeAt(k) === 0x5c) k--;
      if ((q - 1 - k) % 2 === 0) return q + 1;
    }
  };
  /** Past the number at `at`; notes one that does not read back the same. */
  const numberEnd = (at: number): number => {
    let j = at;
    let exponent = false;
    for (;;) {
      const c = text.charCodeAt(j);
      if ((c >= 0x30 && c <= 0x39) || c === 0x2d || c === 0x2b || c === 0x2e) j++;
      else if (c === 0x65 || c === 0x45) {
        exponent = true;
        j++;
      } else break;
    }
    // Only an exponent, 300 digits or more, or a leading "-0" can give an infinity or minus zero.
    if (exponent || j - at >= 300 || (text.charCodeAt(at) === 0x2d && text.charCodeAt(at + 1) === 0x30)) {
      const v = Number(text.slice(at, j));
      if (!Number.isFinite(v) || Object.is(v, -0)) plainNumbers = false;
    }
    return j;
  };
  /** Past the value at `at` (after any space). */
  const valueEnd = (at: number): number => {
    const c = text.charCodeAt(at);
    if (c === 0x22) return stringEnd(at);
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) return numberEnd(at);
    if (c !== 0x7b && c !== 0x5b) {
      // true, false, null
      let j = at;
      while (j < text.length && text.charCodeAt(j) >= 0x61 && text.charCodeAt(j) <= 0x7a) j++;
      return j;
    }
    const base = open_;
    let j = at;
    for (;;) {
      const d = text.charCodeAt(j);
      if (d === 0x22) {
        const start = j;
        j = stringEnd(j);
        let k = j;
        while (isSpace(text.charCodeAt(k))) k++;
        if (text.charCodeAt(k) === 0x3a) {
          keys++;
          noteKey(start, j);
        }
      } else if (d === 0x7b || d === 0x5b) {
        if (++open_ > maxOpen) maxOpen = open_;
        j++;
      } else if (d === 0x7d || d === 0x5d) {
        j++;
        if (--open_ === base) return j;
      } else if (d === 0x2d || (d >= 0x30 && d <= 0x39)) {
        j = numberEnd(j);
      } else if (Number.isNaN(d)) {
        throw new Error('unterminated value');
      } else j++;
    }
  };

  try {
    open_ = maxOpen = 1;
    i++;
    for (;;) {
      while (isSpace(text.charCodeAt(i))) i++;
      const c = text.charCodeAt(i);
      if (c === 0x7d) break;
      if (c === 0x2c) {
        i++;
        continue;
      }
      if (c !== 0x22) return null;
      const keyEnd = stringEnd(i);
      noteKey(i, keyEnd);
      const quoted = text.slice(i, keyEnd);
      const key = quoted.includes('\\') ? (JSON.parse(quoted) as string) : quoted.slice(1, -1);
      keys++;
      i = keyEnd;
      while (isSpace(text.charCodeAt(i))) i++;
      if (text.charCodeAt(i) !== 0x3a) return null;
      i++;
      while (isSpace(text.charCodeAt(i))) i++;
      const valueStart = i;
      i = valueEnd(i);
      members.push({ key, valueStart, valueEnd: i });
    }
  } catch {
    return null;
  }
  const close = i;
  const length = bytes.length;
  return {
    bytes,
    members,
    open,
    close,
    maxOpen,
    keys,
    suspectEscape: SUSPECT_ESCAPE.test(text),
    plainNumbers,
    suspectKey,
    bom,
    // Measured from whichever end is nearer: the members the proxy rewrites sit before or after the long messages.
    byteOffset: (at) => (at < text.length / 2 ? Buffer.byteLength(text.slice(0, at)) : length - Buffer.byteLength(text.slice(at))),
  };
}

/** How many keys the objects in a parsed JSON value hold (nesting already bounded by the depth check). */
export function countKeys(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  let n = 0;
  if (Array.isArray(value)) {
    for (const v of value) if (v !== null && typeof v === 'object') n += countKeys(v);
    return n;
  }
  for (const k in value) {
    n++;
    const v = (value as Record<string, unknown>)[k];
    if (v !== null && typeof v === 'object') n += countKeys(v);
  }
  return n;
}

/**
 * The client's bytes with the top-level members in `set` given new values (JSON text), the
 * others as sent; a member not in the body is added at its end. Null when the bytes cannot
 * stand for the parsed body: a key sent twice anywhere (JSON.parse keeps the last, an upstream
 * might refuse the body or keep another), or a number that would not read back the same.
 */
export function rewriteMembers(raw: RawJson, parsed: unknown, set: Map<string, string>): Buffer | null {
  if (!raw.plainNumbers) return null;
  const seen = new Set<string>();
  for (const m of raw.members) {
    if (seen.has(m.key)) return null;
    seen.add(m.key);
  }
  if (countKeys(parsed) !== raw.keys) return null;
  const parts: Buffer[] = [];
  let from = raw.byteOffset(raw.open);
  for (const m of raw.members) {
    const value = set.get(m.key);
    if (value === undefined) continue;
    parts.push(raw.bytes.subarray(from, raw.byteOffset(m.valueStart)), Buffer.from(value));
    from = raw.byteOffset(m.valueEnd);
  }
  const close = raw.byteOffset(raw.close);
  parts.push(raw.bytes.subarray(from, close));
  let first = raw.members.length === 0;
  for (const [key, value] of set) {
    if (seen.has(key)) continue;
    parts.push(Buffer.from(`${first ? '' : ','}${JSON.stringify(key)}:${value}`));
    first = false;
  }
  parts.push(raw.bytes.subarray(close, close + 1));
  return Buffer.concat(parts);
}

/**
 * Raw JSON of parsed bodies, by the body: what the content parser read, for the route that
 * forwards it. The parsed body must not change on its way there (the chat route's schema sets
 * no defaults and coerces nothing): the bytes are forwarded for it.
 */
const rawOfBody = new WeakMap<object, RawJson>();

export const keepRawJson = (body: object, raw: RawJson) => rawOfBody.set(body, raw);
export const rawJsonOf = (body: object): RawJson | undefined => rawOfBody.get(body);
/** The raw JSON of a body, let go of: the bytes and the text are not kept for the rest of a long answer. */
export const takeRawJson = (body: object): RawJson | undefined => {
  const raw = rawOfBody.get(body);
  rawOfBody.delete(body);
  return raw;
};

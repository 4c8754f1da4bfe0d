import { Transform } from 'node:stream';

const MASK = '[redacted by the gateway]';
/** A base64 run shorter than this is too common to take out of an answer (a credential is far longer). */
const MIN_CORE = 8;

/** The forms of the credentials seen lately, by the values (each request of a role carries the same ones). */
const formsOf = new Map<string, readonly string[]>();
/** How many sets of values formsOf keeps; past that the oldest is dropped. */
const FORMS_KEPT = 256;

/**
 * The forms a credential takes when an upstream echoes it back encoded, each to be taken out of
 * the answer: the value itself; base64 and base64url, with and without padding, and (for a value
 * inside a longer encoded text) the characters that depend on the value alone at each of the
 * three alignments; URL-encoding (upper and lower case escapes, and `+` for spaces as forms
 * write it); hex in lower and upper case. Longest first, so a longer form is replaced whole.
 * Worked out once per set of values (they are the same for every request of a role, and were
 * about a tenth of the gateway's work on each model request), then kept for the next request.
 */
export function scrubForms(values: readonly string[]): readonly string[] {
  const key = JSON.stringify(values);
  const kept = formsOf.get(key);
  if (kept) return kept;
  const forms = Object.freeze(formsIn(values));
  if (formsOf.size >= FORMS_KEPT) formsOf.delete(formsOf.keys().next().value!);
  formsOf.set(key, forms);
  return forms;
}

function formsIn(values: readonly string[]): string[] {
  const forms = new Set<string>();
  for (const value of values) {
    if (!value) continue;
    const bytes = Buffer.from(value, 'utf8');
    forms.add(value);
    for (const alphabet of ['base64', 'base64url'] as const) {
      const padded = alphabet === 'base64' ? bytes.toString('base64') : bytes.toString('base64').replace(/\+/g, '-').replace(/\//g, '_');
      forms.add(padded);
      forms.add(padded.replace(/=+$/, ''));
      for (let k = 0; k < 3; k++) {
        // The value after k other bytes: the characters that carry only its bits.
        const encoded = Buffer.concat([Buffer.alloc(k), bytes]).toString(alphabet).replace(/=+$/, '');
        const core = encoded.slice(Math.ceil((8 * k) / 6), Math.floor((8 * (k + bytes.length)) / 6));
        if (core.length >= MIN_CORE) forms.add(core);
      }
    }
    const url = encodeURIComponent(value);
    forms.add(url);
    forms.add(url.replace(/%[0-9A-F]{2}/g, (e) => e.toLowerCase()));
    forms.add(url.replace(/%20/g, '+'));
    // What encodeURIComponent leaves alone, some encoders escape too (RFC 3986 reserved characters).
    forms.add(url.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`));
    forms.add(bytes.toString('hex'));
    forms.add(bytes.toString('hex').toUpperCase());
  }
  return [...forms].filter(Boolean).sort((a, b) => b.length - a.length);
}

/** Replaces every occurrence of the values in a string (a response header an upstream echoed back). */
export function redactText(text: string, values: readonly string[]): string {
  let out = text;
  for (const v of values) if (v) out = out.split(v).join(MASK);
  return out;
}

/**
 * Replaces every occurrence of the values in a body given piece by piece, also across the
 * pieces' boundaries: `push` answers what can go on now, holding back only an end that could
 * be the start of a value (so text that cannot be one, an event ending in a blank line, goes on
 * whole and at once); `end` answers what was held back. A match is taken only where every value
 * that could start there is whole in what it has (so a longer form of the credential is never
 * cut short by a shorter one that happens to end first).
 */
export function createScrubber(values: readonly string[]): { push(chunk: Buffer): Buffer; end(): Buffer } {
  const needles = values.filter(Boolean).map((v) => Buffer.from(v, 'utf8'));
  const mask = Buffer.from(MASK, 'utf8');
  const keep = Math.max(0, ...needles.map((n) => n.length - 1));
  const firsts = new Set(needles.map((n) => n[0]));
  let tail: Buffer = Buffer.alloc(0);
  /** Replaces the matches that start before `limit` (the leftmost first, the longest at a place); answers the pieces and where the rest, not yet looked at, begins. */
  const scan = (buf: Buffer, limit: number): { parts: Buffer[]; rest: number } => {
    const parts: Buffer[] = [];
    let from = 0;
    for (;;) {
      let at = -1;
      let length = 0;
      for (const n of needles) {
        const i = buf.indexOf(n, from);
        if (i >= 0 && (at < 0 || i < at || (i === at && n.length > length))) {
          at = i;
          length = n.length;
        }
      }
      if (at < 0 || at >= limit) break;
      parts.push(buf.subarray(from, at), mask);
      from = at + length;
    }
    const rest = Math.max(from, limit);
    parts.push(buf.subarray(from, rest));
    return { parts, rest };
  };
  /** Where the longest end of `buf` that some value begins with (and goes on past) starts: what must wait for more. */
  const holdFrom = (buf: Buffer): number => {
    for (let s = Math.max(0, buf.length - keep); s < buf.length; s++) {
      if (!firsts.has(buf[s])) continue;
      const rest = buf.length - s;
      for (const n of needles) if (n.length > rest && buf.compare(n, 0, rest, s) === 0) return s;
    }
    return buf.length;
  };
  return {
    push(chunk) {
      const all = tail.length ? Buffer.concat([tail, chunk]) : chunk;
      const { parts, rest } = scan(all, holdFrom(all));
      tail = all.subarray(rest);
      return parts.length === 1 ? parts[0] : Buffer.concat(parts);
    },
    end() {
      const out = Buffer.concat(scan(tail, tail.length).parts);
      tail = Buffer.alloc(0);
      return out;
    },
  };
}

/** A stream that takes the values out of what passes through it (createScrubber). */
export function redactStream(values: readonly string[]): Transform {
  const scrubber = createScrubber(values);
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      cb(null, scrubber.push(chunk));
    },
    flush(cb) {
      cb(null, scrubber.end());
    },
  });
}

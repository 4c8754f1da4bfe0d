import { Transform } from 'node:stream';

const MASK = '[redacted by the gateway]';
/** A base64 run shorter than this is too common to take out of an answer (a credential is far longer). */
const MIN_CORE = 8;

/**
 * The forms a credential takes when an upstream echoes it back encoded, each to be taken out of
 * the answer: the value itself; base64 and base64url, with and without padding, and (for a value
 * inside a longer encoded text) the characters that depend on the value alone at each of the
 * three alignments; URL-encoding (upper and lower case escapes, and `+` for spaces as forms
 * write it); hex in lower and upper case. Longest first, so a longer form is replaced whole.
 */
export function scrubForms(values: readonly string[]): string[] {
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
 * A stream that replaces every occurrence of the values in a body, also across chunk
 * boundaries: it holds back the last (longest value - 1) bytes until more arrive.
 */
export function redactStream(values: readonly string[]): Transform {
  const needles = values.filter(Boolean).map((v) => Buffer.from(v, 'utf8'));
  const mask = Buffer.from(MASK, 'utf8');
  const keep = Math.max(0, ...needles.map((n) => n.length - 1));
  let tail: Buffer = Buffer.alloc(0);
  const scrub = (buf: Buffer): Buffer => {
    let out: Buffer = buf;
    for (const n of needles) {
      if (out.indexOf(n) < 0) continue;
      const parts: Buffer[] = [];
      let from = 0;
      for (let i = out.indexOf(n); i >= 0; i = out.indexOf(n, from)) {
        parts.push(out.subarray(from, i), mask);
        from = i + n.length;
      }
      parts.push(out.subarray(from));
      out = Buffer.concat(parts);
    }
    return out;
  };
  return new Transform({
    transform(chunk: Buffer, _enc, cb) {
      const all = scrub(Buffer.concat([tail, chunk]));
      const cut = Math.max(0, all.length - keep);
      tail = all.subarray(cut);
      cb(null, all.subarray(0, cut));
    },
    flush(cb) {
      cb(null, scrub(tail));
    },
  });
}

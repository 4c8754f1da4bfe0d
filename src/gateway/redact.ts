import { Transform } from 'node:stream';

const MASK = '[redacted by the gateway]';

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

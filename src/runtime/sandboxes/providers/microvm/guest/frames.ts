/**
 * The control channel's framing, shared by the host (the provider) and the guest agent: each
 * frame is an 8-byte prefix (header length, body length; big-endian u32), a JSON header and a
 * binary body. Copied into the image as is, so it imports nothing but Node's own modules.
 */

export interface Frame {
  h: Record<string, unknown> & { t: string };
  body: Buffer;
}

/** The largest frame header (JSON) either side sends or takes. */
export const MAX_HEADER_BYTES = 64 * 1024;
/** The largest frame body either side sends or takes (a chunk of a command's output, a file to write). */
export const MAX_BODY_BYTES = 16 * 1024 * 1024;

/** The other side sent what cannot be a frame; the channel is reset. The message is written for people. */
export class FrameError extends Error {
  /** The good frames that came before the bad one in the same push. */
  frames: Frame[] = [];
  constructor(message: string) {
    super(message);
    this.name = 'FrameError';
  }
}

export function encodeFrame(h: Frame['h'], body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.from(JSON.stringify(h), 'utf8');
  if (head.length > MAX_HEADER_BYTES) throw new FrameError(`a frame header of ${head.length} bytes is over the limit of ${MAX_HEADER_BYTES}`);
  if (body.length > MAX_BODY_BYTES) throw new FrameError(`a frame body of ${body.length} bytes is over the limit of ${MAX_BODY_BYTES}`);
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(head.length, 0);
  prefix.writeUInt32BE(body.length, 4);
  return Buffer.concat([prefix, head, body]);
}

/**
 * Splits a byte stream into frames; throws FrameError on one that cannot be (the channel is then
 * reset). A frame's declared lengths are checked against the limits as soon as its prefix is
 * in, before anything of it is held, and its bytes are kept as the chunks they came in until
 * the frame is whole, so a frame costs one copy whatever the chunking.
 */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private held = 0;
  /** The lengths of the frame under way, once its prefix is in. */
  private next: { hl: number; bl: number } | null = null;

  push(chunk: Buffer): Frame[] {
    if (chunk.length) {
      this.chunks.push(chunk);
      this.held += chunk.length;
    }
    const out: Frame[] = [];
    try {
      this.decode(out);
    } catch (err) {
      if (err instanceof FrameError) err.frames = out;
      throw err;
    }
    return out;
  }

  private decode(out: Frame[]) {
    for (;;) {
      if (!this.next) {
        if (this.held < 8) break;
        const prefix = this.take(8);
        const hl = prefix.readUInt32BE(0);
        const bl = prefix.readUInt32BE(4);
        if (hl === 0 || hl > MAX_HEADER_BYTES) this.fail(`a frame declared a header of ${hl} bytes (the limit is ${MAX_HEADER_BYTES})`);
        if (bl > MAX_BODY_BYTES) this.fail(`a frame declared a body of ${bl} bytes (the limit is ${MAX_BODY_BYTES})`);
        this.next = { hl, bl };
      }
      const { hl, bl } = this.next;
      if (this.held < hl + bl) break;
      this.next = null;
      let h: Frame['h'];
      try {
        h = JSON.parse(this.take(hl).toString('utf8')) as Frame['h'];
      } catch {
        this.fail('a frame header is not JSON');
      }
      if (!h || typeof h !== 'object' || Array.isArray(h) || typeof h.t !== 'string') this.fail('a frame header has no type');
      out.push({ h, body: this.take(bl) });
    }
  }

  reset(): void {
    this.chunks = [];
    this.held = 0;
    this.next = null;
  }

  private fail(message: string): never {
    this.reset();
    throw new FrameError(message);
  }

  /** The next `n` bytes held, as one Buffer of their own. */
  private take(n: number): Buffer {
    const out = Buffer.allocUnsafe(n);
    let off = 0;
    while (off < n) {
      const c = this.chunks[0];
      const k = Math.min(c.length, n - off);
      c.copy(out, off, 0, k);
      off += k;
      if (k === c.length) this.chunks.shift();
      else this.chunks[0] = c.subarray(k);
    }
    this.held -= n;
    return out;
  }
}

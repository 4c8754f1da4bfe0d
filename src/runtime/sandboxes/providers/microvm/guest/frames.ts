/**
 * The control channel's framing, shared by the host (the provider) and the guest agent: each
 * frame is an 8-byte prefix (header length, body length; big-endian u32), a JSON header and a
 * binary body. Copied into the image as is, so it imports nothing but Node's own modules.
 */

export interface Frame {
  h: Record<string, unknown> & { t: string };
  body: Buffer;
}

const MAX_HEADER = 64 * 1024;
const MAX_BODY = 16 * 1024 * 1024;

export function encodeFrame(h: Frame['h'], body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.from(JSON.stringify(h), 'utf8');
  if (head.length > MAX_HEADER) throw new Error(`frame header of ${head.length} bytes is over ${MAX_HEADER}`);
  if (body.length > MAX_BODY) throw new Error(`frame body of ${body.length} bytes is over ${MAX_BODY}`);
  const prefix = Buffer.alloc(8);
  prefix.writeUInt32BE(head.length, 0);
  prefix.writeUInt32BE(body.length, 4);
  return Buffer.concat([prefix, head, body]);
}

/** Splits a byte stream into frames; throws on a frame that cannot be one (the channel is then reset). */
export class FrameDecoder {
  private buf: Buffer = Buffer.alloc(0);

  push(chunk: Buffer): Frame[] {
    this.buf = this.buf.length ? Buffer.concat([this.buf, chunk]) : chunk;
    const out: Frame[] = [];
    while (this.buf.length >= 8) {
      const hl = this.buf.readUInt32BE(0);
      const bl = this.buf.readUInt32BE(4);
      if (hl > MAX_HEADER || bl > MAX_BODY || hl === 0) throw new Error(`bad frame prefix (header ${hl}, body ${bl})`);
      if (this.buf.length < 8 + hl + bl) break;
      const h = JSON.parse(this.buf.subarray(8, 8 + hl).toString('utf8')) as Frame['h'];
      if (!h || typeof h !== 'object' || typeof h.t !== 'string') throw new Error('frame header without a type');
      out.push({ h, body: Buffer.from(this.buf.subarray(8 + hl, 8 + hl + bl)) });
      this.buf = this.buf.subarray(8 + hl + bl);
    }
    return out;
  }

  reset(): void {
    this.buf = Buffer.alloc(0);
  }
}

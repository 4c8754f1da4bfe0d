import crypto from 'node:crypto';
import type http from 'node:http';
import type { Duplex } from 'node:stream';

/**
 * The server side of a WebSocket (RFC 6455) for the fakes of chat servers (Mattermost, Slack):
 * the upgrade handshake over node:http's `upgrade`, frames read (masked, any length) and
 * written, a ping answered with a pong, a close frame echoed. Written here because the project
 * has no WebSocket server package; the official clients connect to it with their own WebSocket
 * (Node's, undici's) unchanged.
 */

export interface WsPeer {
  /** Sends a text frame (nothing when the connection is gone). */
  sendText(text: string): void;
  /** Cuts the connection without a close frame, as a network failure would. */
  destroy(): void;
  readonly closed: boolean;
}

/**
 * Answers the upgrade of `req` on `conn` (101 with the accept key) and calls `onText` for each
 * text frame, `onClose` once when the connection ends however it ends. A request that is not a
 * WebSocket upgrade gets a 400 and null.
 */
export function acceptWebSocket(req: http.IncomingMessage, conn: Duplex, handlers: { onText: (text: string) => void; onClose: () => void }): WsPeer | null {
  const key = req.headers['sec-websocket-key'];
  if (typeof key !== 'string' || req.headers.upgrade?.toLowerCase() !== 'websocket') {
    refuseUpgrade(conn, 400, 'Bad Request');
    return null;
  }
  const accept = crypto.createHash('sha1').update(`${key}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  conn.write(['HTTP/1.1 101 Switching Protocols', 'Upgrade: websocket', 'Connection: Upgrade', `Sec-WebSocket-Accept: ${accept}`, '', ''].join('\r\n'));
  let buffer = Buffer.alloc(0);
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    handlers.onClose();
  };

  function writeFrame(opcode: number, payload: Buffer) {
    if (conn.destroyed) return;
    let head: Buffer;
    if (payload.length < 126) head = Buffer.from([0x80 | opcode, payload.length]);
    else if (payload.length < 65536) {
      head = Buffer.alloc(4);
      head[0] = 0x80 | opcode;
      head[1] = 126;
      head.writeUInt16BE(payload.length, 2);
    } else {
      head = Buffer.alloc(10);
      head[0] = 0x80 | opcode;
      head[1] = 127;
      head.writeBigUInt64BE(BigInt(payload.length), 2);
    }
    conn.write(Buffer.concat([head, payload]));
  }

  function readFrames() {
    for (;;) {
      const buf = buffer;
      if (buf.length < 2) return;
      const opcode = buf[0]! & 0x0f;
      const masked = (buf[1]! & 0x80) !== 0;
      let len = buf[1]! & 0x7f;
      let off = 2;
      if (len === 126) {
        if (buf.length < 4) return;
        len = buf.readUInt16BE(2);
        off = 4;
      } else if (len === 127) {
        if (buf.length < 10) return;
        len = Number(buf.readBigUInt64BE(2));
        off = 10;
      }
      const maskOff = off;
      if (masked) off += 4;
      if (buf.length < off + len) return;
      const payload = Buffer.from(buf.subarray(off, off + len));
      if (masked) for (let i = 0; i < payload.length; i++) payload[i]! ^= buf[maskOff + (i % 4)]!;
      buffer = buf.subarray(off + len);
      if (opcode === 0x8) {
        writeFrame(0x8, payload.subarray(0, 2));
        conn.end();
        end();
        return;
      }
      if (opcode === 0x9) writeFrame(0xa, payload);
      else if (opcode === 0x1) handlers.onText(payload.toString('utf8'));
    }
  }

  conn.on('data', (chunk: Buffer) => {
    buffer = Buffer.concat([buffer, chunk]);
    readFrames();
  });
  conn.on('close', end);
  conn.on('error', end);
  return {
    sendText: (text) => writeFrame(0x1, Buffer.from(text)),
    destroy() {
      conn.destroy();
      end();
    },
    get closed() {
      return ended || conn.destroyed;
    },
  };
}

/** Refuses an upgrade with a plain HTTP status. */
export function refuseUpgrade(conn: Duplex, status: number, reason: string): void {
  conn.end(`HTTP/1.1 ${status} ${reason}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
}

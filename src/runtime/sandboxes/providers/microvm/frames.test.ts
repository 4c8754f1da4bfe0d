// The microVM control channel's framing against a hostile guest: declared lengths over the
// limits are refused from the prefix alone, before anything is held, on both ends (the decoder
// is the one the guest agent runs too); the host's channel closes on a bad frame and fails what
// the guest owed, with a reason for people, and bounds a command's unread output. The guest is a
// unix socket speaking the real framing, standing for a sandbox whose guest agent was taken over.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { finished } from 'node:stream/promises';
import { after, describe, it } from 'node:test';
import { SandboxError } from '../../provider.ts';
import { Channel, MAX_UNREAD_BYTES } from './channel.ts';
import { encodeFrame, FrameDecoder, FrameError, MAX_BODY_BYTES, MAX_HEADER_BYTES, type Frame } from './guest/frames.ts';

const prefix = (hl: number, bl: number) => {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(hl, 0);
  b.writeUInt32BE(bl, 4);
  return b;
};

describe('microVM frames', () => {
  it('decodes frames however the bytes are cut', () => {
    const bytes = Buffer.concat([encodeFrame({ t: 'out', id: 'a' }, Buffer.from('hello')), encodeFrame({ t: 'exit', id: 'a', code: 0 })]);
    const d = new FrameDecoder();
    const got: Frame[] = [];
    for (let i = 0; i < bytes.length; i++) got.push(...d.push(bytes.subarray(i, i + 1)));
    assert.deepEqual(
      got.map((f) => [f.h, f.body.toString()]),
      [
        [{ t: 'out', id: 'a' }, 'hello'],
        [{ t: 'exit', id: 'a', code: 0 }, ''],
      ],
    );
  });

  it('refuses a declared length over the limits from the prefix alone, before the frame arrives', () => {
    assert.throws(() => new FrameDecoder().push(prefix(10, MAX_BODY_BYTES + 1)), (e: Error) => e instanceof FrameError && e.message === `a frame declared a body of ${MAX_BODY_BYTES + 1} bytes (the limit is ${MAX_BODY_BYTES})`);
    assert.throws(() => new FrameDecoder().push(prefix(0xffffffff, 0)), /declared a header of 4294967295 bytes/);
    assert.throws(() => new FrameDecoder().push(prefix(0, 0)), /declared a header of 0 bytes/);
    // A frame exactly at the limits is taken.
    const head = Buffer.from(JSON.stringify({ t: 'out', pad: 'x'.repeat(MAX_HEADER_BYTES - 20) }));
    const exact = Buffer.concat([prefix(head.length, MAX_BODY_BYTES), head, Buffer.alloc(MAX_BODY_BYTES)]);
    assert.ok(head.length <= MAX_HEADER_BYTES);
    assert.equal(new FrameDecoder().push(exact)[0].body.length, MAX_BODY_BYTES);
  });

  it('refuses a header that is not JSON or has no type, and starts clean after reset', () => {
    const bad = Buffer.from('{nope');
    const d = new FrameDecoder();
    assert.throws(() => d.push(Buffer.concat([prefix(bad.length, 0), bad])), /a frame header is not JSON/);
    const untyped = Buffer.from('[1]');
    assert.throws(() => d.push(Buffer.concat([prefix(untyped.length, 0), untyped])), /a frame header has no type/);
    assert.deepEqual(
      d.push(encodeFrame({ t: 'hello' })).map((f) => f.h),
      [{ t: 'hello' }],
    );
  });

  it('will not encode a frame over the limits', () => {
    assert.throws(() => encodeFrame({ t: 'out' }, Buffer.alloc(MAX_BODY_BYTES + 1)), FrameError);
  });
});

describe('the host end of the microVM channel against a hostile guest', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'ch-frames-'));
  const servers: net.Server[] = [];
  after(() => {
    for (const s of servers) s.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  /** A guest that answers hello, then does `onExec` with the socket when asked to run a command. */
  async function guest(onExec: (sock: net.Socket, id: string) => void, seen: Frame[] = []): Promise<string> {
    const socketPath = path.join(dir, `g${servers.length}.sock`);
    const server = net.createServer((sock) => {
      const d = new FrameDecoder();
      sock.on('error', () => {});
      sock.on('data', (b: Buffer) => {
        for (const f of d.push(b)) {
          seen.push(f);
          if (f.h.t === 'hello') sock.write(encodeFrame({ t: 'hello', nonce: f.h.nonce, boot: 'boot-1' }));
          if (f.h.t === 'exec') onExec(sock, String(f.h.id));
        }
      });
    });
    servers.push(server);
    await new Promise<void>((r) => server.listen(socketPath, r));
    return socketPath;
  }

  it('a declared length of 4 GiB closes the channel and fails the command with a reason, and the process goes on', async () => {
    const socketPath = await guest((sock, id) => {
      sock.write(encodeFrame({ t: 'out', id }, Buffer.from('partial output')));
      sock.write(prefix(16, 0xffffffff));
    });
    const { channel } = await Channel.open(socketPath, Date.now() + 10_000, () => true);
    const h = channel.exec({ argv: ['/bin/true'] }, {});
    let out = '';
    h.stdout.on('data', (c: Buffer) => (out += c.toString()));
    await assert.rejects(h.exit, (e: Error) => e instanceof SandboxError && e.message === "the sandbox's guest agent broke the control channel's protocol (a frame declared a body of 4294967295 bytes (the limit is 16777216)); the channel was closed and what ran in the sandbox was stopped");
    await finished(h.stdout);
    assert.equal(out, 'partial output', 'what came before the bad frame was passed on');
    assert.equal(channel.closed, true);
    await assert.rejects(channel.exec({ argv: ['/bin/true'] }, {}).exit, /broke the control channel's protocol/);
  });

  it("a command's output the host does not read is bounded: past it the command is killed and fails", async () => {
    const seen: Frame[] = [];
    const socketPath = await guest((sock, id) => {
      const chunk = Buffer.alloc(MAX_BODY_BYTES, 0x61);
      for (let i = 0; i <= MAX_UNREAD_BYTES / MAX_BODY_BYTES; i++) sock.write(encodeFrame({ t: 'out', id }, chunk));
    }, seen);
    const { channel } = await Channel.open(socketPath, Date.now() + 10_000, () => true);
    try {
      // Nobody reads stdout.
      const h = channel.exec({ argv: ['/bin/yes'] }, {});
      await assert.rejects(h.exit, /wrote more than 64 MiB of output faster than it was read; it was stopped/);
      const kill = await (async () => {
        for (let i = 0; i < 100; i++) {
          const k = seen.find((f) => f.h.t === 'kill');
          if (k) return k;
          await new Promise((r) => setTimeout(r, 20));
        }
        return null;
      })();
      assert.ok(kill, 'the guest is told to kill the command');
      assert.equal(channel.closed, false, 'the channel stays for the next command');
    } finally {
      channel.close();
    }
  });
});

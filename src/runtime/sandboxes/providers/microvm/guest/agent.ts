/**
 * The guest agent: runs inside a microVM (started by the guest's init, respawned if it dies) and
 * serves the provider over the virtio-serial port `crewhouse.ctl`: exec with streamed stdin,
 * stdout and stderr and an exit code, writing files under /workspace, clock resync after a wake,
 * and sync before a stop. Copied into the image beside frames.ts; runs on the image's Node.
 *
 * The host side may go away at any time (the VM sleeps, the host restarts): a read then answers
 * nothing and a write fails with ENODEV, and the agent waits for the next host. Each host
 * connection opens with a `hello` carrying a fresh nonce; frames queued for an earlier host are
 * dropped then, because no one is left to read them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { encodeFrame, FrameDecoder, type Frame } from './frames.ts';

const PORT_NAME = 'crewhouse.ctl';
const WORKSPACE = '/workspace';
const bootId = crypto.randomBytes(8).toString('hex');
const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

function findPort(): string | null {
  const dir = '/sys/class/virtio-ports';
  let names: string[] = [];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return null;
  }
  for (const n of names) {
    try {
      if (fs.readFileSync(path.join(dir, n, 'name'), 'utf8').trim() === PORT_NAME) return `/dev/${n}`;
    } catch {
      // a port without a name is not ours
    }
  }
  return null;
}

let fd = -1;
const queue: Buffer[] = [];
let writing = false;
let lastNonce: unknown = null;
const children = new Map<string, ChildProcess>();

function send(h: Frame['h'], body?: Buffer) {
  queue.push(encodeFrame(h, body));
  void flush();
}

async function flush() {
  if (writing) return;
  writing = true;
  try {
    while (queue.length) {
      const frame = queue[0];
      let off = 0;
      while (off < frame.length) {
        try {
          off += await new Promise<number>((resolve, reject) => fs.write(fd, frame, off, frame.length - off, null, (e, n) => (e ? reject(e) : resolve(n))));
        } catch {
          // No host on the other end: a frame partly sent is lost with that host; keep the
          // rest for the next one (a hello may drop them), and try again shortly.
          if (off > 0) break;
          await wait(100);
          if (queue[0] !== frame) break;
        }
      }
      if (queue[0] === frame) queue.shift();
    }
  } finally {
    writing = false;
  }
}

function reply(id: unknown, err?: unknown) {
  if (err) send({ t: 'error', id, message: err instanceof Error ? err.message : String(err) });
  else send({ t: 'done', id });
}

function run(argv: string[]): Promise<number> {
  return new Promise((resolve) => {
    const c = spawn(argv[0], argv.slice(1), { stdio: 'ignore' });
    c.on('error', () => resolve(127));
    c.on('close', (code) => resolve(code ?? 1));
  });
}

const SIGNALS: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };

function exec(h: Frame['h']) {
  const id = String(h.id);
  const argv = h.argv as string[];
  let child: ChildProcess;
  try {
    child = spawn(argv[0], argv.slice(1), {
      cwd: typeof h.cwd === 'string' ? h.cwd : WORKSPACE,
      env: (h.env as Record<string, string>) ?? {},
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
    });
  } catch (err) {
    send({ t: 'exit', id, code: 127, error: (err as Error).message });
    return;
  }
  children.set(id, child);
  let done = false;
  child.on('error', (err) => {
    if (done) return;
    done = true;
    children.delete(id);
    send({ t: 'exit', id, code: 127, error: err.message });
  });
  child.stdout!.on('data', (b: Buffer) => send({ t: 'out', id }, b));
  child.stderr!.on('data', (b: Buffer) => send({ t: 'err', id }, b));
  child.stdin!.on('error', () => {});
  child.on('close', (code, signal) => {
    if (done) return;
    done = true;
    children.delete(id);
    send({ t: 'exit', id, code: code ?? 128 + (SIGNALS[signal ?? ''] ?? 9) });
  });
}

/** Resolves a path under /workspace, refusing one that leaves it. */
function workspacePath(rel: unknown): string {
  if (typeof rel !== 'string' || rel === '' || path.isAbsolute(rel)) throw new Error('path must be relative to /workspace');
  const full = path.resolve(WORKSPACE, rel);
  if (!full.startsWith(WORKSPACE + '/')) throw new Error(`path ${rel} leaves /workspace`);
  return full;
}

async function handle(f: Frame) {
  const { h } = f;
  switch (h.t) {
    case 'hello':
      if (h.nonce !== lastNonce) {
        lastNonce = h.nonce;
        queue.splice(writing ? 1 : 0);
      }
      send({ t: 'hello', nonce: h.nonce, boot: bootId });
      return;
    case 'exec':
      if (!Array.isArray(h.argv) || h.argv.length === 0 || !h.argv.every((a) => typeof a === 'string')) {
        send({ t: 'exit', id: h.id, code: 127, error: 'argv must be a non-empty list of strings' });
        return;
      }
      exec(h);
      return;
    case 'stdin':
      children.get(String(h.id))?.stdin?.write(f.body);
      return;
    case 'stdin_end':
      children.get(String(h.id))?.stdin?.end();
      return;
    case 'kill': {
      const c = children.get(String(h.id));
      const sig = typeof h.signal === 'string' && h.signal in SIGNALS ? (h.signal as NodeJS.Signals) : 'SIGKILL';
      if (c?.pid) {
        try {
          process.kill(-c.pid, sig);
        } catch {
          c.kill(sig);
        }
      }
      return;
    }
    case 'write':
      try {
        const full = workspacePath(h.path);
        await fs.promises.mkdir(path.dirname(full), { recursive: true });
        const tmp = `${full}.${crypto.randomBytes(4).toString('hex')}.tmp`;
        await fs.promises.writeFile(tmp, f.body, { mode: typeof h.mode === 'number' ? h.mode : 0o644 });
        await fs.promises.chmod(tmp, typeof h.mode === 'number' ? h.mode : 0o644);
        await fs.promises.rename(tmp, full);
        reply(h.id);
      } catch (err) {
        reply(h.id, err);
      }
      return;
    case 'clock': {
      const seconds = Math.floor(Number(h.ms) / 1000);
      const code = Number.isFinite(seconds) ? await run(['date', '-u', '-s', `@${seconds}`]) : 2;
      reply(h.id, code === 0 ? undefined : `date exited with ${code}`);
      return;
    }
    case 'sync':
      await run(['sync']);
      reply(h.id);
      return;
    default:
      send({ t: 'error', id: h.id, message: `unknown frame type ${h.t}` });
  }
}

async function main() {
  let port = findPort();
  while (!port) {
    await wait(100);
    port = findPort();
  }
  fd = fs.openSync(port, 'r+');
  const decoder = new FrameDecoder();
  const buf = Buffer.alloc(256 * 1024);
  for (;;) {
    const n = await new Promise<number>((resolve) => fs.read(fd, buf, 0, buf.length, null, (e, n) => resolve(e ? 0 : n)));
    if (n === 0) {
      // No host connected (or it just left): the next host starts with a clean stream.
      decoder.reset();
      await wait(50);
      continue;
    }
    let frames: Frame[];
    try {
      frames = decoder.push(Buffer.from(buf.subarray(0, n)));
    } catch {
      decoder.reset();
      continue;
    }
    for (const f of frames) void handle(f);
  }
}

void main();

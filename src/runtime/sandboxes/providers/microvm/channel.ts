/**
 * The host end of a microVM's control channel: a connection to QEMU's unix socket behind the
 * guest's virtio-serial port, speaking guest/frames.ts to the guest agent.
 *
 * QEMU keeps the socket open whatever happens inside the guest, so a guest agent that dies and
 * is respawned (with its commands' pipes) never closes it: the exits it owed would be awaited
 * forever. While anything is awaited, the host therefore repeats its hello: an answer from
 * another agent instance (another boot id) fails what the old one owed, and an agent silent for
 * AGENT_SILENT_MS fails it and closes the channel (the next verb connects again).
 */
import crypto from 'node:crypto';
import net from 'node:net';
import { PassThrough, Writable } from 'node:stream';
import type { ExecHandle, ExecRequest } from '../../provider.ts';
import { SandboxError } from '../../provider.ts';
import { encodeFrame, FrameDecoder, FrameError, type Frame } from './guest/frames.ts';

/** How often a hello goes out while a command or request is awaited. */
const HEARTBEAT_MS = 2_000;
/** How long an agent may say nothing while something is awaited (generous: a guest under TCG on a loaded host is slow). */
const AGENT_SILENT_MS = 60_000;
/** How much of one command's output (stdout or stderr) may wait unread on the host. */
export const MAX_UNREAD_BYTES = 64 * 1024 * 1024;

interface Running {
  stdout: PassThrough;
  stderr: PassThrough;
  resolve: (code: number) => void;
  reject: (e: Error) => void;
}

export class Channel {
  private readonly sock: net.Socket;
  private readonly decoder = new FrameDecoder();
  private readonly execs = new Map<string, Running>();
  private readonly requests = new Map<string, { resolve: () => void; reject: (e: Error) => void }>();
  private hello: { nonce: string; resolve: (boot: string) => void } | null = null;
  private closedWith: Error | null = null;
  /** This connection's hello nonce: the agent drops what it queued for an earlier host on a new one, so heartbeats reuse it. */
  private nonce = '';
  /** The agent instance that answered the opening hello. */
  private boot: string | null = null;
  private lastHeard = Date.now();
  private heartbeat: NodeJS.Timeout | null = null;

  private constructor(sock: net.Socket) {
    this.sock = sock;
    sock.on('data', (b: Buffer) => {
      this.lastHeard = Date.now();
      // Nothing the guest sends may throw out of this listener: a frame that cannot be one, or
      // anything that goes wrong handling one, closes this sandbox's channel and fails what it owed.
      try {
        let frames: Frame[];
        try {
          frames = this.decoder.push(b);
        } catch (err) {
          // What came before the bad frame is passed on; then the channel closes.
          if (err instanceof FrameError) for (const f of err.frames) this.onFrame(f);
          throw err;
        }
        for (const f of frames) this.onFrame(f);
      } catch (err) {
        const why = err instanceof FrameError ? err.message : 'a frame could not be handled';
        this.close(new SandboxError('failed', `the sandbox's guest agent broke the control channel's protocol (${why}); the channel was closed and what ran in the sandbox was stopped`));
      }
    });
    sock.on('error', () => {});
    sock.on('close', () => this.close(new SandboxError('failed', 'the control channel to the guest closed')));
  }

  /**
   * Connects and waits for the guest agent to answer a hello (it may still be booting: the
   * hello is repeated until `deadline`). Answers the channel and the guest's boot id.
   */
  static async open(socketPath: string, deadline: number, alive: () => boolean): Promise<{ channel: Channel; boot: string }> {
    const sock = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(socketPath);
      s.once('connect', () => resolve(s));
      s.once('error', (e) => reject(new SandboxError('failed', `cannot reach the guest's control socket: ${e.message}`)));
    });
    const ch = new Channel(sock);
    const nonce = crypto.randomBytes(8).toString('hex');
    ch.nonce = nonce;
    const answered = new Promise<string>((resolve) => (ch.hello = { nonce, resolve }));
    let boot: string | null = null;
    void answered.then((b) => (boot = b));
    while (boot === null) {
      if (ch.closedWith) throw ch.closedWith;
      if (!alive()) {
        ch.close();
        throw new SandboxError('failed', 'QEMU exited before the guest agent answered');
      }
      if (Date.now() > deadline) {
        ch.close();
        throw new SandboxError('failed', 'the guest agent did not answer in time');
      }
      ch.send({ t: 'hello', nonce });
      await Promise.race([answered, new Promise((r) => setTimeout(r, 500))]);
    }
    ch.hello = null;
    ch.boot = boot;
    ch.heartbeat = setInterval(() => ch.beat(), HEARTBEAT_MS);
    ch.heartbeat.unref();
    return { channel: ch, boot };
  }

  private send(h: Frame['h'], body?: Buffer) {
    if (this.closedWith) throw this.closedWith;
    this.sock.write(encodeFrame(h, body));
  }

  private onFrame(f: Frame) {
    const id = String(f.h.id ?? '');
    switch (f.h.t) {
      case 'hello':
        if (this.hello && f.h.nonce === this.hello.nonce) this.hello.resolve(String(f.h.boot));
        else if (f.h.nonce === this.nonce && this.boot !== null && String(f.h.boot) !== this.boot) this.agentRestarted(String(f.h.boot));
        return;
      case 'out':
      case 'err': {
        const r = this.execs.get(id);
        if (!r) return;
        const stream = f.h.t === 'out' ? r.stdout : r.stderr;
        // A command's output the host has not read yet is bounded: past it the command is stopped.
        if (stream.writableLength + stream.readableLength + f.body.length > MAX_UNREAD_BYTES) {
          this.execs.delete(id);
          try {
            this.send({ t: 'kill', id, signal: 'SIGKILL' });
          } catch {
            // closed meanwhile
          }
          r.stdout.end();
          r.stderr.end();
          r.reject(new SandboxError('failed', `a command in the sandbox wrote more than ${MAX_UNREAD_BYTES / (1024 * 1024)} MiB of output faster than it was read; it was stopped`));
          return;
        }
        stream.write(f.body);
        return;
      }
      case 'exit': {
        const r = this.execs.get(id);
        if (!r) return;
        this.execs.delete(id);
        if (typeof f.h.error === 'string') r.stderr.write(`${f.h.error}\n`);
        r.stdout.end();
        r.stderr.end();
        r.resolve(Number(f.h.code));
        return;
      }
      case 'done':
      case 'error': {
        const r = this.requests.get(id);
        if (!r) return;
        this.requests.delete(id);
        if (f.h.t === 'done') r.resolve();
        else r.reject(new SandboxError('failed', `the guest refused: ${String(f.h.message)}`));
        return;
      }
    }
  }

  /** While something is awaited: ask the agent who it is, and give up on one that stays silent. */
  private beat() {
    if (this.closedWith) return;
    if (this.execs.size === 0 && this.requests.size === 0) {
      // Nothing owed: silence is fine, and counts from when something is next awaited.
      this.lastHeard = Date.now();
      return;
    }
    if (Date.now() - this.lastHeard > AGENT_SILENT_MS) {
      this.close(new SandboxError('failed', `the guest agent stopped answering for ${AGENT_SILENT_MS / 1000} s; the command's outcome is unknown`));
      return;
    }
    try {
      this.send({ t: 'hello', nonce: this.nonce });
    } catch {
      // closed meanwhile: close() failed everything awaited
    }
  }

  /** Another agent instance answers: what the old one owed will never come. The channel stays, for the new one. */
  private agentRestarted(boot: string) {
    this.boot = boot;
    const why = new SandboxError('failed', 'the guest agent restarted while the command ran; its outcome is unknown');
    for (const r of this.execs.values()) {
      r.stdout.end();
      r.stderr.end();
      r.reject(why);
    }
    this.execs.clear();
    for (const r of this.requests.values()) r.reject(why);
    this.requests.clear();
  }

  /** One request answered by done or error (write a file, set the clock, sync); a guest that never answers fails it after `timeoutMs`. */
  request(h: Record<string, unknown> & { t: string }, body?: Buffer, timeoutMs = 60_000): Promise<void> {
    const id = crypto.randomBytes(8).toString('hex');
    return new Promise<void>((res, rej) => {
      const timer = setTimeout(() => {
        this.requests.delete(id);
        rej(new SandboxError('failed', `the guest agent did not answer ${h.t} within ${Math.round(timeoutMs / 1000)} s`));
      }, timeoutMs);
      const resolve = () => (clearTimeout(timer), res());
      const reject = (e: Error) => (clearTimeout(timer), rej(e));
      this.requests.set(id, { resolve, reject });
      try {
        this.send({ ...h, id }, body);
      } catch (err) {
        this.requests.delete(id);
        reject(err as Error);
      }
    });
  }

  exec(req: ExecRequest, env: Record<string, string>): ExecHandle {
    const id = crypto.randomBytes(8).toString('hex');
    const stdout = new PassThrough();
    const stderr = new PassThrough();
    let resolve!: (code: number) => void;
    let reject!: (e: Error) => void;
    const exit = new Promise<number>((res, rej) => ((resolve = res), (reject = rej)));
    // The caller may never await exit; a channel that closes must not crash the host.
    exit.catch(() => {});
    this.execs.set(id, { stdout, stderr, resolve, reject });
    const stdin = new Writable({
      write: (chunk: Buffer, _enc, cb) => {
        try {
          this.send({ t: 'stdin', id }, chunk);
          cb();
        } catch (err) {
          cb(err as Error);
        }
      },
      final: (cb) => {
        try {
          this.send({ t: 'stdin_end', id });
        } catch {
          // the command is gone with the channel; nothing to end
        }
        cb();
      },
    });
    stdin.on('error', () => {});
    const onAbort = () => {
      try {
        this.send({ t: 'kill', id, signal: 'SIGKILL' });
      } catch {
        // channel closed: the exec already failed
      }
    };
    if (req.signal) {
      if (req.signal.aborted) queueMicrotask(onAbort);
      else req.signal.addEventListener('abort', onAbort, { once: true });
      void exit.finally(() => req.signal!.removeEventListener('abort', onAbort)).catch(() => {});
    }
    try {
      this.send({ t: 'exec', id, argv: req.argv, cwd: req.cwd, env });
    } catch (err) {
      this.execs.delete(id);
      reject(err as Error);
    }
    return { stdin, stdout, stderr, exit };
  }

  get closed(): boolean {
    return this.closedWith !== null;
  }

  /** Ends the connection; running commands and requests fail with `why`. */
  close(why: Error = new SandboxError('wrong_state', 'the sandbox stopped')) {
    if (this.closedWith) return;
    this.closedWith = why;
    if (this.heartbeat) clearInterval(this.heartbeat);
    this.sock.destroy();
    for (const r of this.execs.values()) {
      r.stdout.end();
      r.stderr.end();
      r.reject(why);
    }
    this.execs.clear();
    for (const r of this.requests.values()) r.reject(why);
    this.requests.clear();
  }
}

/** A small client of QEMU's machine protocol (QMP): one command at a time, events ignored. */
import net from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { SandboxError } from '../../provider.ts';

export class Qmp {
  private buf = '';
  private pending: { resolve: (v: unknown) => void; reject: (e: Error) => void } | null = null;
  private chain: Promise<unknown> = Promise.resolve();
  private closed: Error | null = null;
  private greeted: Promise<void>;
  private readonly out: Writable;
  private readonly end: () => void;

  constructor(input: Readable, output: Writable, end: () => void) {
    this.out = output;
    this.end = end;
    let greet!: () => void;
    let fail!: (e: Error) => void;
    this.greeted = new Promise((res, rej) => ((greet = res), (fail = rej)));
    this.greeted.catch(() => {});
    input.setEncoding('utf8');
    input.on('data', (s: string) => {
      this.buf += s;
      let nl: number;
      while ((nl = this.buf.indexOf('\n')) >= 0) {
        const line = this.buf.slice(0, nl).trim();
        this.buf = this.buf.slice(nl + 1);
        if (!line) continue;
        let msg: Record<string, any>;
        try {
          msg = JSON.parse(line);
        } catch {
          continue;
        }
        if (msg.QMP) greet();
        else if ('return' in msg) this.settle(null, msg.return);
        else if (msg.error) this.settle(new SandboxError('failed', `QEMU refused: ${msg.error.desc ?? msg.error.class}`), null);
      }
    });
    const gone = () => {
      this.closed = new SandboxError('failed', 'QEMU closed its control socket');
      fail(this.closed);
      this.settle(this.closed, null);
    };
    input.on('close', gone);
    input.on('end', gone);
    input.on('error', gone);
  }

  private settle(err: Error | null, value: unknown) {
    const p = this.pending;
    this.pending = null;
    if (!p) return;
    if (err) p.reject(err);
    else p.resolve(value);
  }

  /** Connects to a QMP unix socket and leaves capabilities negotiation done. */
  static async connect(socketPath: string): Promise<Qmp> {
    const sock = await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(socketPath);
      s.once('connect', () => resolve(s));
      s.once('error', (e) => reject(new SandboxError('failed', `cannot reach QEMU's control socket: ${e.message}`)));
    });
    const q = new Qmp(sock, sock, () => sock.destroy());
    await q.greeted;
    await q.execute('qmp_capabilities');
    return q;
  }

  /** Negotiates over an existing pair of streams (QEMU's stdio). */
  static async over(input: Readable, output: Writable, end: () => void): Promise<Qmp> {
    const q = new Qmp(input, output, end);
    await q.greeted;
    await q.execute('qmp_capabilities');
    return q;
  }

  execute<T = any>(command: string, args?: Record<string, unknown>): Promise<T> {
    const next = this.chain.then(
      () =>
        new Promise<T>((resolve, reject) => {
          if (this.closed) return reject(this.closed);
          this.pending = { resolve: resolve as (v: unknown) => void, reject };
          this.out.write(JSON.stringify(args ? { execute: command, arguments: args } : { execute: command }) + '\n');
        }),
    );
    this.chain = next.catch(() => {});
    return next;
  }

  close() {
    this.end();
  }
}

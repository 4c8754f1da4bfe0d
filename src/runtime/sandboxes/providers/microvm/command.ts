import { spawn } from 'node:child_process';
import { SandboxError } from '../../provider.ts';

/** The Debian package each outside program comes from, named when it is missing. */
export const DEBIAN_PACKAGE: Record<string, string> = {
  'qemu-system-x86_64': 'qemu-system-x86',
  'qemu-img': 'qemu-utils',
  mmdebstrap: 'mmdebstrap',
  'mke2fs': 'e2fsprogs',
  busybox: 'busybox-static',
  'apt-get': 'apt',
  'dpkg': 'dpkg',
  ip: 'iproute2',
  strip: 'binutils',
};

export interface RunOptions {
  signal?: AbortSignal;
  input?: string;
  /** Called with each line the program writes to stderr (progress). */
  onLine?: (line: string) => void;
  cwd?: string;
}

function packageOf(bin: string): string {
  const base = bin.split('/').pop()!;
  return DEBIAN_PACKAGE[base] ?? base;
}

/**
 * Runs a program to completion and answers its stdout. A missing program is a SandboxError
 * ('unavailable') naming the Debian package to install; a failure carries the end of stderr.
 */
export function run(bin: string, args: string[], opts: RunOptions = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { stdio: ['pipe', 'pipe', 'pipe'], signal: opts.signal, cwd: opts.cwd });
    const out: Buffer[] = [];
    let err = '';
    let partial = '';
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => {
      const s = b.toString('utf8');
      err = (err + s).slice(-4000);
      if (opts.onLine) {
        const lines = (partial + s).split('\n');
        partial = lines.pop()!;
        for (const l of lines) if (l.trim()) opts.onLine(l);
      }
    });
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
    child.on('error', (e: NodeJS.ErrnoException) => {
      if (e.code === 'ENOENT') reject(new SandboxError('unavailable', `${bin} is not installed; install the Debian package ${packageOf(bin)}`));
      else if (e.name === 'AbortError') reject(new SandboxError('failed', `${bin} was interrupted`, { cause: e }));
      else reject(new SandboxError('failed', `${bin} could not start: ${e.message}`, { cause: e }));
    });
    child.on('close', (code, signal) => {
      if (code === 0) resolve(Buffer.concat(out).toString('utf8'));
      else if (code !== null || signal) {
        const tail = err.trim().split('\n').slice(-3).join(' / ');
        reject(new SandboxError('failed', `${bin} ${args[0] ?? ''} failed (${code ?? signal})${tail ? `: ${tail}` : ''}`));
      }
    });
  });
}

import { spawn } from 'node:child_process';
import { clip } from './context.ts';

export interface ProcessResult {
  code: number;
  stdout: string;
  stderr: string;
  timedOut: boolean;
}

/**
 * Runs a program in its own process group and collects its output (each stream cut to its
 * tail); the whole group is killed on timeout or when `signal` aborts, so a tool leaves nothing
 * running behind it.
 */
export function runProcess(argv: string[], opts: { cwd: string; env: NodeJS.ProcessEnv; timeoutMs: number; signal: AbortSignal; input?: string }): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0], argv.slice(1), { cwd: opts.cwd, env: opts.env, detached: true, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    let outLen = 0;
    let errLen = 0;
    const keep = (list: Buffer[], chunk: Buffer, len: number): number => {
      list.push(chunk);
      len += chunk.length;
      while (len > 512 * 1024 && list.length > 1) len -= list.shift()!.length;
      return len;
    };
    child.stdout.on('data', (c: Buffer) => (outLen = keep(out, c, outLen)));
    child.stderr.on('data', (c: Buffer) => (errLen = keep(err, c, errLen)));
    let timedOut = false;
    const kill = () => {
      try {
        if (child.pid) process.kill(-child.pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    };
    const timer = setTimeout(() => {
      timedOut = true;
      kill();
    }, opts.timeoutMs);
    const onAbort = () => kill();
    opts.signal.addEventListener('abort', onAbort, { once: true });
    child.on('error', (e) => {
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
      reject(e);
    });
    child.on('close', (code, sig) => {
      clearTimeout(timer);
      opts.signal.removeEventListener('abort', onAbort);
      // Children the command left in its group go with it.
      kill();
      resolve({
        code: code ?? 128 + (sig ? signalNumber(sig) : 0),
        stdout: clip(Buffer.concat(out).toString('utf8')),
        stderr: clip(Buffer.concat(err).toString('utf8')),
        timedOut,
      });
    });
    child.stdin.on('error', () => {
      // A command that does not read its input closes the pipe early; nothing was lost.
    });
    child.stdin.end(opts.input ?? '');
  });
}

function signalNumber(sig: NodeJS.Signals): number {
  const table: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 };
  return table[sig] ?? 0;
}

import { execFile, spawn } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * A network namespace standing in for a sandbox's network: one veth pair, host end on the
 * host, sandbox end inside, a random /30 of 10.213.0.0/16, and no route but the link (so a
 * program inside reaches the host end and nothing else). Real clients run inside with
 * `ip netns exec`. Names are random (other tests run at the same time); `close` removes all.
 */
export interface Netns {
  name: string;
  hostAddress: string;
  sandboxAddress: string;
  hostInterface: string;
  exec(argv: string[], opts?: { env?: Record<string, string>; cwd?: string; input?: string; timeoutMs?: number }): Promise<{ code: number; stdout: string; stderr: string }>;
  close(): Promise<void>;
}

/** Why namespaces cannot be made here, or null when they can. */
export function netnsSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces and veth pairs)';
  if (!['/usr/sbin/ip', '/sbin/ip', '/usr/bin/ip', '/bin/ip'].some((p) => fs.existsSync(p))) return 'needs iproute2 (`ip`)';
  return null;
}

async function subnetInUse(prefix: string): Promise<boolean> {
  const { stdout } = await run('ip', ['-4', '-o', 'addr', 'show']);
  return stdout.includes(` ${prefix}`);
}

export async function createNetns(): Promise<Netns> {
  const id = crypto.randomBytes(4).toString('hex');
  const name = `chns-${id}`;
  const hostInterface = `chh${id}`;
  const inside = `chs${id}`;
  let hostAddress = '';
  let sandboxAddress = '';
  for (let attempt = 0; ; attempt++) {
    const k = crypto.randomInt(0, 16384);
    const base = `10.213.${k >> 6}.`;
    const last = (k & 63) * 4;
    hostAddress = `${base}${last + 1}`;
    sandboxAddress = `${base}${last + 2}`;
    if (!(await subnetInUse(hostAddress)) && !(await subnetInUse(sandboxAddress))) break;
    if (attempt > 20) throw new Error('no free /30 in 10.213.0.0/16');
  }
  const close = async () => {
    await run('ip', ['netns', 'del', name]).catch(() => {});
    await run('ip', ['link', 'del', hostInterface]).catch(() => {});
  };
  try {
    await run('ip', ['netns', 'add', name]);
    await run('ip', ['link', 'add', hostInterface, 'type', 'veth', 'peer', 'name', inside]);
    await run('ip', ['link', 'set', inside, 'netns', name]);
    await run('ip', ['addr', 'add', `${hostAddress}/30`, 'dev', hostInterface]);
    await run('ip', ['link', 'set', hostInterface, 'up']);
    await run('ip', ['netns', 'exec', name, 'ip', 'addr', 'add', `${sandboxAddress}/30`, 'dev', inside]);
    await run('ip', ['netns', 'exec', name, 'ip', 'link', 'set', inside, 'up']);
    await run('ip', ['netns', 'exec', name, 'ip', 'link', 'set', 'lo', 'up']);
  } catch (err) {
    await close();
    throw err;
  }
  return {
    name,
    hostAddress,
    sandboxAddress,
    hostInterface,
    exec(argv, opts = {}) {
      return new Promise((resolve, reject) => {
        const child = spawn('ip', ['netns', 'exec', name, ...argv], { env: opts.env ?? { PATH: process.env.PATH ?? '/usr/bin:/bin' }, cwd: opts.cwd });
        let stdout = '';
        let stderr = '';
        child.stdout.on('data', (c) => (stdout += c));
        child.stderr.on('data', (c) => (stderr += c));
        const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
        child.on('error', reject);
        child.on('close', (code, signal) => {
          clearTimeout(timer);
          resolve({ code: code ?? 128 + (signal ? 9 : 0), stdout, stderr });
        });
        // A program that exits without reading its input (curl) closes the pipe first: not a failure, its exit code says how it went.
        child.stdin.on('error', () => undefined);
        child.stdin.end(opts.input ?? '');
      });
    },
    close,
  };
}

/**
 * Running the host tools sandboxes are made with (ip, nft, nsenter, bwrap), and naming the
 * Debian package to install when one is missing.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { SandboxError } from './provider.ts';

/** The Debian package each tool comes from: what an error tells the operator to install. */
export const DEBIAN_PACKAGE: Record<string, string> = {
  bwrap: 'bubblewrap',
  ip: 'iproute2',
  nft: 'nftables',
  nsenter: 'util-linux',
  'mkfs.ext4': 'e2fsprogs',
  mount: 'mount',
  umount: 'mount',
  setpriv: 'util-linux',
  'qemu-system-x86_64': 'qemu-system-x86',
};

/** Host tools are looked up on the system's own path, not on whatever PATH the service was started with. */
const SYSTEM_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** The absolute path of a program (as given when it has a slash, else found on the system path), or null. */
export function findProgram(program: string, searchPath = SYSTEM_PATH): string | null {
  const candidates = program.includes('/') ? [program] : searchPath.split(':').filter(Boolean).map((d) => path.join(d, program));
  for (const c of candidates) {
    try {
      fs.accessSync(c, fs.constants.X_OK);
      if (fs.statSync(c).isFile()) return c;
    } catch {
      // not here
    }
  }
  return null;
}

/** Like findProgram, but a missing program is a SandboxError naming the Debian package to install. */
export function requireProgram(program: string, tool = path.basename(program)): string {
  const found = findProgram(program);
  if (found) return found;
  const pkg = DEBIAN_PACKAGE[tool];
  throw new SandboxError('unavailable', `${tool} was not found${program.includes('/') ? ` at ${program}` : ''}: install the Debian package ${pkg ?? tool} (apt-get install ${pkg ?? tool})`);
}

export class CommandError extends Error {
  readonly stderr: string;
  readonly code: number | null;
  constructor(message: string, stderr: string, code: number | null) {
    super(message);
    this.stderr = stderr;
    this.code = code;
  }
}

/** Runs a program to completion; rejects with its stderr when it fails. */
export function run(program: string, args: string[], opts: { input?: string; allowFail?: boolean } = {}): Promise<{ stdout: string; stderr: string; code: number }> {
  return new Promise((resolve, reject) => {
    const child = execFile(program, args, { encoding: 'utf8', maxBuffer: 16 * 1024 * 1024, env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' } }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === 'number' ? ((err as { code: number }).code) : 1) : 0;
      if (err && !opts.allowFail) {
        reject(new CommandError(`${path.basename(program)} ${args.join(' ')} failed: ${(stderr || err.message).trim()}`, stderr, code));
        return;
      }
      resolve({ stdout, stderr, code });
    });
    if (opts.input !== undefined) child.stdin!.end(opts.input);
  });
}

/** Polls `check` until it holds, at most `tries` times `everyMs` apart; false when it never did. */
export async function pollUntil(check: () => Promise<boolean> | boolean, tries = 200, everyMs = 25): Promise<boolean> {
  for (let i = 0; i < tries; i++) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  return false;
}

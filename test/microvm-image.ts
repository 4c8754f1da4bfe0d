/**
 * The microVM image tests and the bench boot: the `minimal` variant of `crewhouse images build`
 * (busybox, Node, the guest agent; Debian's cloud kernel), built once and cached under
 * `.cache/microvm-test/<hash of its inputs>/`, so a test run builds it at most once.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { runtimeImageFiles } from '../src/runtime/engine/runtime-install.ts';
import { buildImage } from '../src/runtime/sandboxes/providers/microvm/images.ts';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const microvmDir = path.join(repo, 'src/runtime/sandboxes/providers/microvm');

/** Why the microVM tests cannot run on this machine, or null when they can. */
export function microvmSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (tap devices); CI runs as root';
  if (!fs.existsSync('/dev/net/tun')) return 'needs /dev/net/tun';
  for (const [bin, pkg] of [['/usr/bin/qemu-system-x86_64', 'qemu-system-x86'], ['/usr/bin/qemu-img', 'qemu-utils'], ['/bin/busybox', 'busybox-static'], ['/usr/sbin/mke2fs', 'e2fsprogs']]) {
    if (!fs.existsSync(bin)) return `needs ${bin} (Debian package ${pkg})`;
  }
  return null;
}

async function inputsHash(): Promise<string> {
  const h = crypto.createHash('sha256');
  for (const f of ['images.ts', 'guest/agent.ts', 'guest/frames.ts']) h.update(await fsp.readFile(path.join(microvmDir, f)));
  // The image carries the agent runtime: a change to it is a new image.
  for (const f of await runtimeImageFiles()) if (!f.source.includes('node_modules')) h.update(await fsp.readFile(f.source));
  for (const f of [process.execPath, '/bin/busybox']) {
    const st = await fsp.stat(f);
    h.update(`${f}:${st.size}:${st.mtimeMs}`);
  }
  return h.digest('hex').slice(0, 16);
}

/** An images directory holding the test image (built now if no run built it before). */
export async function testImagesDir(): Promise<string> {
  const key = await inputsHash();
  const root = path.join(repo, '.cache', 'microvm-test');
  const done = path.join(root, key);
  if (fs.existsSync(path.join(done, 'images'))) return path.join(done, 'images');
  // Built aside and renamed into place: a parallel run building the same image loses the race harmlessly.
  const tmp = path.join(root, `${key}.tmp-${crypto.randomBytes(4).toString('hex')}`);
  await fsp.mkdir(tmp, { recursive: true });
  try {
    await buildImage({ imagesDir: path.join(tmp, 'images'), workDir: path.join(tmp, 'work'), name: 'crewhouse-test', variant: 'minimal', version: '1' });
    await fsp.rm(path.join(tmp, 'work'), { recursive: true, force: true });
    await fsp.rename(tmp, done).catch(async (err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOTEMPTY' && err.code !== 'EEXIST') throw err;
    });
  } finally {
    await fsp.rm(tmp, { recursive: true, force: true });
  }
  for (const old of await fsp.readdir(root)) if (old !== key && !old.includes('.tmp-')) await fsp.rm(path.join(root, old), { recursive: true, force: true });
  return path.join(done, 'images');
}

/** A /30 and a tap name no other test is likely to hold at the same time. */
export function randomLink(): { hostAddress: string; sandboxAddress: string; hostInterface: string } {
  const b = crypto.randomBytes(3);
  const base = `10.${200 + (b[0] % 50)}.${b[1]}.${b[2] & 0xfc}`;
  const parts = base.split('.').map(Number);
  return {
    hostAddress: `${parts[0]}.${parts[1]}.${parts[2]}.${parts[3] + 1}`,
    sandboxAddress: `${parts[0]}.${parts[1]}.${parts[2]}.${parts[3] + 2}`,
    hostInterface: `chm${crypto.randomBytes(4).toString('hex')}`,
  };
}

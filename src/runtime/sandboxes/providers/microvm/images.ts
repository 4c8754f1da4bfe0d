/**
 * Building microVM images: a kernel (Debian's cloud kernel), an initramfs of ours (busybox and
 * the virtio modules: it brings up the disk, the network link and the control port, then hands
 * over to the root file system), and an ext4 root file system with the guest agent and the Node
 * it runs on. `crewhouse images build` makes the full image (Debian from mmdebstrap, with git,
 * a shell, build tools and the deployment CA); tests make the `minimal` variant (busybox only)
 * from the same steps.
 *
 * Every step leaves its result in a work directory with a marker written last, so an
 * interrupted build re-run reuses what finished; the image files are moved into the images
 * directory and the manifest is written last, to a temporary name renamed into place.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import zlib from 'node:zlib';
import { manifestProblem } from '../../../../console/environments/manifest.ts';
import { SandboxError } from '../../provider.ts';
import { runtimeImageFiles } from '../../../engine/runtime-install.ts';
import { run } from './command.ts';

const GUEST_DIR = path.join(path.dirname(fileURLToPath(import.meta.url)), 'guest');
/** Loaded in this order by the initramfs (each needs only the ones before it). */
const MODULES = ['virtio_ring', 'virtio', 'virtio_mmio', 'virtio_blk', 'virtio_console', 'failover', 'net_failover', 'virtio_net'];
const DEBIAN_PACKAGES = ['git', 'ca-certificates', 'build-essential', 'curl', 'openssh-client', 'procps', 'less', 'xz-utils', 'unzip', 'python3', 'e2fsprogs'];

export interface BuildOptions {
  imagesDir: string;
  name: string;
  variant: 'debian' | 'minimal';
  /** PEM file of the deployment CA, added to the image's trust store. */
  caPem?: string | null;
  /** Where finished steps are kept between runs; default `<imagesDir>/.build-<name>`. */
  workDir?: string;
  /** The Node binary copied into the image (default: the one running this). */
  nodeBinary?: string;
  busybox?: string;
  /** Size of the root file system in MiB (default: what it holds plus room to work). */
  rootfsMib?: number;
  version?: string;
  progress?: (message: string) => void;
  signal?: AbortSignal;
}

export interface ImageManifest {
  name: string;
  version: string;
  kernel: { file: string; sha256: string };
  initrd: { file: string; sha256: string };
  rootfs: { file: string; sha256: string };
  built_at: string;
  variant: string;
}

export async function sha256File(file: string): Promise<string> {
  const h = crypto.createHash('sha256');
  for await (const chunk of fs.createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/** Runs `make` unless `marker` (and `output`) exist; the marker is written only after `make` finished. */
async function step(workDir: string, marker: string, label: string, progress: (m: string) => void, make: () => Promise<void>, output?: string) {
  const done = path.join(workDir, `${marker}.done`);
  if (fs.existsSync(done) && (!output || fs.existsSync(output))) {
    progress(`${label}: done earlier, reused`);
    return;
  }
  progress(`${label}...`);
  const t = Date.now();
  await make();
  await fsp.writeFile(done, new Date().toISOString());
  progress(`${label}: done in ${((Date.now() - t) / 1000).toFixed(1)} s`);
}

/** Debian's cloud kernel and its modules, unpacked under `<workDir>/kernel`. */
async function fetchKernel(workDir: string, signal?: AbortSignal): Promise<void> {
  const debs = path.join(workDir, 'kernel-debs');
  await fsp.rm(debs, { recursive: true, force: true });
  await fsp.mkdir(debs, { recursive: true });
  const depends = await run('apt-cache', ['depends', 'linux-image-cloud-amd64'], { signal });
  const pkgs = ['linux-image-cloud-amd64', ...[...depends.matchAll(/Depends:\s+(linux-image-\S+)/g)].map((m) => m[1])];
  await run('apt-get', ['download', ...pkgs], { cwd: debs, signal });
  const out = path.join(workDir, 'kernel');
  await fsp.rm(out, { recursive: true, force: true });
  for (const deb of await fsp.readdir(debs)) await run('dpkg', ['-x', path.join(debs, deb), out], { signal });
  if (!(await fsp.readdir(path.join(out, 'boot'))).some((f) => f.startsWith('vmlinuz-'))) throw new SandboxError('image', 'the cloud kernel package held no vmlinuz');
}

async function kernelFiles(workDir: string): Promise<{ vmlinuz: string; modulesDir: string }> {
  const boot = path.join(workDir, 'kernel', 'boot');
  const vmlinuz = (await fsp.readdir(boot)).find((f) => f.startsWith('vmlinuz-'))!;
  const release = vmlinuz.slice('vmlinuz-'.length);
  return { vmlinuz: path.join(boot, vmlinuz), modulesDir: path.join(workDir, 'kernel', 'lib', 'modules', release) };
}

/** A gzip'd cpio archive (newc) of `entries`, as the kernel unpacks an initramfs. */
export function cpioNewc(entries: Array<{ name: string; mode: number; data?: Buffer; target?: string }>): Buffer {
  const parts: Buffer[] = [];
  const pad = (n: number) => Buffer.alloc((4 - (n % 4)) % 4);
  let ino = 1;
  const put = (name: string, mode: number, data: Buffer) => {
    const hex = (n: number) => n.toString(16).padStart(8, '0');
    const nameBuf = Buffer.from(name + '\0');
    const header = '070701' + [ino++, mode, 0, 0, 1, 0, data.length, 0, 0, 0, 0, nameBuf.length, 0].map(hex).join('');
    parts.push(Buffer.from(header), nameBuf, pad(110 + nameBuf.length), data, pad(data.length));
  };
  for (const e of entries) put(e.name, e.mode, e.target !== undefined ? Buffer.from(e.target) : (e.data ?? Buffer.alloc(0)));
  put('TRAILER!!!', 0, Buffer.alloc(0));
  return zlib.gzipSync(Buffer.concat(parts), { level: 6 });
}

const INIT = `#!/bin/busybox sh
# crewhouse initramfs: load the virtio drivers, set up the sandbox's one link, mount the disk
# and hand over to busybox init on it.
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /newroot
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in ${MODULES.join(' ')}; do insmod /modules/$m.ko; done
ip link set lo up
for arg in $(cat /proc/cmdline); do
  case "$arg" in crewhouse.ip=*) addr="\${arg#crewhouse.ip=}" ;; esac
done
if [ -n "$addr" ]; then ip addr add "$addr" dev eth0 && ip link set eth0 up; fi
i=0
while [ ! -b /dev/vda ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done
mount -t ext4 -o rw /dev/vda /newroot || { echo "crewhouse: cannot mount /dev/vda"; poweroff -f; }
for d in proc sys dev; do mkdir -p /newroot/$d; mount --move /$d /newroot/$d; done
exec switch_root /newroot /opt/crewhouse/busybox init
`;

const RCS = `#!/opt/crewhouse/busybox sh
B=/opt/crewhouse/busybox
$B mkdir -p /dev/pts /dev/shm /tmp /run /workspace
$B mount -t devpts devpts /dev/pts
$B mount -t tmpfs tmpfs /dev/shm
$B mount -t tmpfs tmpfs /tmp
$B mount -t tmpfs tmpfs /run
$B hostname sandbox
# The disk may be larger than the image's file system (the environment's disk size): grow into it.
if command -v resize2fs >/dev/null 2>&1; then resize2fs /dev/vda >/dev/null 2>&1; fi
`;

const INITTAB = `::sysinit:/opt/crewhouse/rcS
::respawn:/opt/crewhouse/node /opt/crewhouse/agent.ts
`;

async function buildInitramfs(workDir: string, busybox: string, out: string) {
  const { modulesDir } = await kernelFiles(workDir);
  const all = new Map<string, string>();
  const walk = async (d: string) => {
    for (const e of await fsp.readdir(d, { withFileTypes: true })) {
      if (e.isDirectory()) await walk(path.join(d, e.name));
      else if (e.name.endsWith('.ko')) all.set(e.name.slice(0, -3), path.join(d, e.name));
    }
  };
  await walk(path.join(modulesDir, 'kernel'));
  const entries: Array<{ name: string; mode: number; data?: Buffer; target?: string }> = [
    { name: 'bin', mode: 0o40755 },
    { name: 'modules', mode: 0o40755 },
    { name: 'bin/busybox', mode: 0o100755, data: await fsp.readFile(busybox) },
    { name: 'init', mode: 0o100755, data: Buffer.from(INIT) },
  ];
  for (const m of MODULES) {
    const file = all.get(m);
    if (!file) throw new SandboxError('image', `the kernel has no module ${m}`);
    entries.push({ name: `modules/${m}.ko`, mode: 0o100644, data: await fsp.readFile(file) });
  }
  await fsp.writeFile(out, cpioNewc(entries));
}

/** The libraries a dynamically linked binary loads, as ldd resolves them on this host. */
async function libsOf(binary: string): Promise<string[]> {
  const out = await run('ldd', [binary]);
  return [...out.matchAll(/(\/\S+\.so[.\d]*)/g)].map((m) => m[1]);
}

async function copyInto(root: string, src: string, dest: string, mode?: number) {
  const to = path.join(root, dest);
  await fsp.mkdir(path.dirname(to), { recursive: true });
  await fsp.copyFile(src, to);
  if (mode !== undefined) await fsp.chmod(to, mode);
}

/** Our part of every image: busybox, Node, the guest agent, init's table. */
async function addGuest(root: string, opts: { nodeBinary: string; busybox: string; signal?: AbortSignal }) {
  const opt = path.join(root, 'opt', 'crewhouse');
  await fsp.mkdir(opt, { recursive: true });
  await copyInto(root, opts.busybox, 'opt/crewhouse/busybox', 0o755);
  // The npm Node carries debug info the guest never needs: strip it where binutils is present.
  await run('strip', ['--strip-debug', '-o', path.join(opt, 'node'), opts.nodeBinary], { signal: opts.signal }).catch(() => fsp.copyFile(opts.nodeBinary, path.join(opt, 'node')));
  await fsp.chmod(path.join(opt, 'node'), 0o755);
  for (const f of ['agent.ts', 'frames.ts']) await copyInto(root, path.join(GUEST_DIR, f), `opt/crewhouse/${f}`, 0o644);
  // The agent runtime a run execs in the guest (the local provider mounts the same files instead).
  for (const f of await runtimeImageFiles()) await copyInto(root, f.source, f.target, 0o644);
  await fsp.writeFile(path.join(opt, 'package.json'), '{"type":"module"}\n');
  await fsp.writeFile(path.join(opt, 'rcS'), RCS, { mode: 0o755 });
  await fsp.mkdir(path.join(root, 'etc'), { recursive: true });
  await fsp.writeFile(path.join(root, 'etc', 'inittab'), INITTAB);
  await fsp.mkdir(path.join(root, 'workspace'), { recursive: true });
}

/** busybox alone for a shell and tools, with the host's libraries for Node: small and quick to make. */
async function minimalRoot(root: string, opts: { nodeBinary: string; busybox: string }) {
  for (const d of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'etc', 'proc', 'sys', 'dev', 'tmp', 'run', 'root', 'lib64']) await fsp.mkdir(path.join(root, d), { recursive: true });
  await copyInto(root, opts.busybox, 'bin/busybox', 0o755);
  const applets = (await run(opts.busybox, ['--list'])).split('\n').filter((a) => /^[a-z0-9_.[-]+$/.test(a) && a !== 'busybox');
  for (const a of applets) await fsp.symlink('busybox', path.join(root, 'bin', a)).catch(() => {});
  for (const lib of await libsOf(opts.nodeBinary)) await copyInto(root, lib, lib.replace(/^\//, ''));
  await fsp.writeFile(path.join(root, 'etc', 'passwd'), 'root:x:0:0:root:/root:/bin/sh\n');
  await fsp.writeFile(path.join(root, 'etc', 'group'), 'root:x:0:\n');
}

async function debianRoot(root: string, opts: { caPem?: string | null; progress: (m: string) => void; signal?: AbortSignal }) {
  await run('mmdebstrap', ['--variant=minbase', `--include=${DEBIAN_PACKAGES.join(',')}`, 'bookworm', root], {
    signal: opts.signal,
    onLine: (l) => opts.progress(`  ${l.replace(/^I: /, '')}`),
  });
  if (opts.caPem) {
    await copyInto(root, opts.caPem, 'usr/local/share/ca-certificates/crewhouse-deployment-ca.crt', 0o644);
    await run('chroot', [root, 'update-ca-certificates'], { signal: opts.signal });
  }
}

async function dirMib(dir: string): Promise<number> {
  const out = await run('du', ['-sm', '--apparent-size', dir]);
  return Number(out.split(/\s/)[0]) || 0;
}

/** Builds an image into `imagesDir` and answers its manifest (also written there as `<name>-<version>.json`). */
export async function buildImage(opts: BuildOptions): Promise<ImageManifest> {
  const progress = opts.progress ?? (() => {});
  const workDir = opts.workDir ?? path.join(opts.imagesDir, `.build-${opts.name}`);
  const busybox = opts.busybox ?? '/bin/busybox';
  const nodeBinary = opts.nodeBinary ?? process.execPath;
  if (!fs.existsSync(busybox)) throw new SandboxError('unavailable', `${busybox} is missing; install the Debian package busybox-static`);
  if (opts.caPem && !fs.existsSync(opts.caPem)) throw new SandboxError('image', `the CA file ${opts.caPem} does not exist`);
  await fsp.mkdir(workDir, { recursive: true });
  await fsp.mkdir(opts.imagesDir, { recursive: true });

  await step(workDir, 'kernel', 'kernel (Debian linux-image-cloud-amd64)', progress, () => fetchKernel(workDir, opts.signal));
  await step(workDir, 'initrd', 'initramfs', progress, () => buildInitramfs(workDir, busybox, path.join(workDir, 'initrd.img')), path.join(workDir, 'initrd.img'));
  const root = path.join(workDir, 'root');
  await step(workDir, 'root', `root file system (${opts.variant})`, progress, async () => {
    for (const later of ['guest', 'ext4']) await fsp.rm(path.join(workDir, `${later}.done`), { force: true });
    await fsp.rm(root, { recursive: true, force: true });
    if (opts.variant === 'debian') await debianRoot(root, { caPem: opts.caPem, progress, signal: opts.signal });
    else {
      await fsp.mkdir(root, { recursive: true });
      await minimalRoot(root, { nodeBinary, busybox });
    }
  });
  await step(workDir, 'guest', 'guest agent and Node', progress, () => addGuest(root, { nodeBinary, busybox, signal: opts.signal }));
  await step(workDir, 'ext4', 'ext4 image', progress, async () => {
    const out = path.join(workDir, 'rootfs.ext4');
    await fsp.rm(out, { force: true });
    const mib = opts.rootfsMib ?? Math.ceil((await dirMib(root)) * 1.3) + (opts.variant === 'debian' ? 2048 : 256);
    await run('mke2fs', ['-q', '-F', '-t', 'ext4', '-L', 'crewhouse-root', '-d', root, out, `${mib}M`], { signal: opts.signal });
  }, path.join(workDir, 'rootfs.ext4'));

  const version = opts.version ?? new Date().toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);
  progress('checksums...');
  const { vmlinuz } = await kernelFiles(workDir);
  const files = {
    kernel: { from: vmlinuz, file: `vmlinuz-${opts.name}-${version}` },
    initrd: { from: path.join(workDir, 'initrd.img'), file: `initrd-${opts.name}-${version}.img` },
    rootfs: { from: path.join(workDir, 'rootfs.ext4'), file: `rootfs-${opts.name}-${version}.ext4` },
  };
  const manifest: ImageManifest = {
    name: opts.name,
    version,
    kernel: { file: files.kernel.file, sha256: await sha256File(files.kernel.from) },
    initrd: { file: files.initrd.file, sha256: await sha256File(files.initrd.from) },
    rootfs: { file: files.rootfs.file, sha256: await sha256File(files.rootfs.from) },
    built_at: new Date().toISOString(),
    variant: opts.variant,
  };
  const problem = manifestProblem(manifest);
  if (problem) throw new SandboxError('image', `the manifest would be invalid: ${problem}`);
  for (const f of Object.values(files)) {
    const to = path.join(opts.imagesDir, f.file);
    // The kernel stays in the work dir (a re-run reuses it); the others move.
    if (f.from === vmlinuz) await fsp.copyFile(f.from, to);
    else await fsp.rename(f.from, to);
  }
  // The next build makes a fresh root file system; the kernel and initramfs are reused.
  for (const m of ['ext4', 'guest', 'root']) await fsp.rm(path.join(workDir, `${m}.done`), { force: true });
  await fsp.rm(root, { recursive: true, force: true });
  await fsp.copyFile(path.join(opts.imagesDir, files.initrd.file), path.join(workDir, 'initrd.img'));
  const manifestFile = path.join(opts.imagesDir, `${opts.name}-${version}.json`);
  const tmp = `${manifestFile}.${crypto.randomBytes(4).toString('hex')}.tmp`;
  await fsp.writeFile(tmp, JSON.stringify(manifest, null, 2) + '\n');
  await fsp.rename(tmp, manifestFile);
  progress(`image ${opts.name} ${version} written: ${manifestFile}`);
  return manifest;
}

/**
 * The `microvm` sandbox provider: each sandbox is a QEMU `microvm` guest booted from the
 * current image (kernel, initramfs, root file system), with a qcow2 overlay over the image's
 * root file system as its own disk, a tap device as its one network link (the host end is
 * where the gateway answers), and a virtio-serial port to the guest agent for exec and files.
 *
 * Everything a sandbox has on the host lives in `<dir>/<id>/`: state.json (what it is and
 * which image it boots), disk.qcow2, the QMP and control sockets, console.log, and while it
 * sleeps snapshot.bin with snapshot.json (what the snapshot depends on). QEMU runs daemonized,
 * so a VM outlives a host restart and is found again from its pid file.
 *
 * Sleep migrates the VM to snapshot.bin and stops QEMU; wake starts QEMU with the snapshot as
 * incoming migration. A snapshot is renamed away before it is resumed, so it is never resumed
 * twice; one that does not match this QEMU, image or machine arguments is discarded and the
 * guest cold-boots from its disk (`coldBooted: true`). Deep sleep keeps only the disk.
 *
 * A sleep is marked in state.json before it pauses the VM, and renaming snapshot.tmp to
 * snapshot.bin is its commit point. A host killed anywhere in between leaves the mark; the next
 * verb (the host's recovery at start reads every status) finishes the sleep from what is on disk:
 * QEMU stopped, the tap removed, and the sandbox sleeping when the snapshot was committed, else in
 * deep sleep with any partial snapshot dropped (its wake cold-boots and says so). A QEMU found
 * running for a sandbox that sleeps (a wake cut short) is stopped the same way.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../../../../config.ts';
import type { Registry } from '../../../../metrics.ts';
import { logIgnored } from '../../../../logger.ts';
import {
  SandboxError,
  type ExecHandle,
  type ExecRequest,
  type SandboxProvider,
  type SandboxSpec,
  type SandboxState,
  type SandboxStatus,
} from '../../provider.ts';
import { Channel } from './channel.ts';
import { run } from './command.ts';
import { sha256File, type ImageManifest } from './images.ts';
import { manifestProblem } from '../../../../console/environments/manifest.ts';
import { accelerator } from './kvm.ts';
import { Qmp } from './qmp.ts';

export interface MicrovmOptions {
  /** Where each sandbox's files live (`<dir>/<id>/`). */
  dir: string;
  imagesDir: string;
  logger: Logger;
  /** Bytes all sleeping snapshots on this host may take; a sleep past it becomes a deep sleep. */
  snapshotBudgetBytes: number;
  accel?: 'auto' | 'kvm' | 'tcg';
  qemu?: string;
  qemuImg?: string;
  ip?: string;
  /** How long a boot or a restore may take before it is a failure. */
  bootTimeoutMs?: number;
  /** Called with how long each wake took, and whether it cold-booted (metrics). */
  onWake?: (seconds: number, kind: 'restore' | 'cold_boot') => void;
  /** Awaited at each step of a sleep or a wake: lets a test stop a host there and kill it, as a crash would. */
  onStep?: (id: string, step: LifecycleStep) => Promise<void>;
}

/**
 * The steps of a sleep, in order: after the guest synced, after QEMU paused, the snapshot
 * written, committed, QEMU stopped; and of a wake from a snapshot: QEMU started to restore it.
 */
export type LifecycleStep = 'synced' | 'paused' | 'written' | 'committed' | 'stopped' | 'restoring';

interface ImageRef {
  name: string;
  version: string;
  kernel: { path: string; sha256: string };
  initrd: { path: string; sha256: string };
  rootfs: { path: string; sha256: string };
}

interface StateFile {
  id: string;
  spec: SandboxSpec;
  image: ImageRef;
  state: SandboxState;
  coldBooted: boolean;
  /** Set while a sleep is under way (from before the VM pauses until the state is written): a host that finds it was killed meanwhile. */
  sleeping?: 'sleep' | 'deep';
}

interface SnapshotMeta {
  qemu: string;
  kernel: string;
  initrd: string;
  rootfs: string;
  machine: string;
  bytes: number;
  taken_at: string;
}

const PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/opt/crewhouse';
const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
const IFNAME = /^[A-Za-z0-9_.-]{1,15}$/;

export function createMicrovmProvider(opts: MicrovmOptions): SandboxProvider {
  const qemu = opts.qemu ?? 'qemu-system-x86_64';
  const qemuImg = opts.qemuImg ?? 'qemu-img';
  const ip = opts.ip ?? 'ip';
  const bootTimeoutMs = opts.bootTimeoutMs ?? 180_000;
  const log = opts.logger;
  const channels = new Map<string, Channel>();
  const locks = new Map<string, Promise<unknown>>();
  const verified = new Map<string, string>();
  let qemuVersion: Promise<string> | null = null;

  const dirOf = (id: string) => path.join(opts.dir, id);
  const file = (id: string, name: string) => path.join(dirOf(id), name);

  /** One verb at a time per sandbox; different sandboxes go in parallel. */
  function locked<T>(id: string, fn: () => Promise<T>): Promise<T> {
    if (!ID.test(id)) return Promise.reject(new SandboxError('not_found', `no sandbox ${JSON.stringify(id).slice(0, 80)}`));
    const prev = locks.get(id) ?? Promise.resolve();
    const next = prev.then(fn, fn);
    const tail = next.catch(() => {});
    locks.set(id, tail);
    void tail.then(() => {
      if (locks.get(id) === tail) locks.delete(id);
    });
    return next;
  }

  function version(): Promise<string> {
    qemuVersion ??= run(qemu, ['--version']).then((out) => out.split('\n')[0].trim());
    qemuVersion.catch(() => (qemuVersion = null));
    return qemuVersion;
  }

  async function readState(id: string): Promise<StateFile> {
    try {
      return JSON.parse(await fsp.readFile(file(id, 'state.json'), 'utf8')) as StateFile;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw new SandboxError('not_found', `no sandbox ${id}`);
      throw new SandboxError('failed', `sandbox ${id}: its state file is unreadable`, { cause: err });
    }
  }

  async function writeState(s: StateFile) {
    const tmp = file(s.id, `state.json.${crypto.randomBytes(4).toString('hex')}`);
    await fsp.writeFile(tmp, JSON.stringify(s));
    await fsp.rename(tmp, file(s.id, 'state.json'));
  }

  function statusOf(s: StateFile): SandboxStatus {
    const out: SandboxStatus = { state: s.state, network: s.state === 'destroyed' ? null : s.spec.network };
    if (s.coldBooted) out.coldBooted = true;
    return out;
  }

  async function pidOf(id: string): Promise<number | null> {
    try {
      const pid = Number((await fsp.readFile(file(id, 'qemu.pid'), 'utf8')).trim());
      if (!Number.isInteger(pid) || pid <= 1) return null;
      process.kill(pid, 0);
      // A reused pid is not our QEMU: its command line names this sandbox's directory.
      const cmd = await fsp.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '');
      return cmd.includes(dirOf(id)) ? pid : null;
    } catch {
      return null;
    }
  }

  async function waitGone(pid: number, ms: number): Promise<boolean> {
    const until = Date.now() + ms;
    for (;;) {
      try {
        process.kill(pid, 0);
      } catch {
        return true;
      }
      if (Date.now() > until) return false;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** Stops QEMU for good: quit over QMP, then SIGKILL if it lingers. */
  async function stopQemu(id: string) {
    channels.get(id)?.close();
    channels.delete(id);
    const pid = await pidOf(id);
    if (pid) {
      const q = await Qmp.connect(file(id, 'qmp.sock')).catch((err) => (logIgnored(log, 'could not reach QEMU to quit it; killing it', { sandbox: id })(err), null));
      if (q) {
        await q.execute('quit').catch(logIgnored(log, 'QEMU did not take quit; killing it', { sandbox: id }));
        q.close();
      }
      if (!(await waitGone(pid, 5000))) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
        await waitGone(pid, 5000);
      }
    }
    await fsp.rm(file(id, 'qemu.pid'), { force: true });
  }

  async function tapUp(spec: SandboxSpec) {
    const name = spec.network.hostInterface;
    await tapDown(name);
    await run(ip, ['tuntap', 'add', 'dev', name, 'mode', 'tap']);
    await run(ip, ['addr', 'add', `${spec.network.hostAddress}/30`, 'dev', name]);
    await run(ip, ['link', 'set', name, 'up']);
  }

  async function tapDown(name: string) {
    if (fs.existsSync(`/sys/class/net/${name}`)) await run(ip, ['link', 'del', name]).catch(logIgnored(log, 'could not remove a tap device', { device: name }));
  }

  /** The image a sandbox boots: the newest valid manifest of that name (or of any name). */
  async function resolveImage(name: string | null): Promise<ImageRef> {
    let files: string[] = [];
    try {
      files = (await fsp.readdir(opts.imagesDir)).filter((f) => f.endsWith('.json'));
    } catch {
      // no images directory: no images
    }
    let best: ImageManifest | null = null;
    for (const f of files) {
      let m: ImageManifest;
      try {
        m = JSON.parse(await fsp.readFile(path.join(opts.imagesDir, f), 'utf8'));
      } catch {
        continue;
      }
      if (manifestProblem(m) || !m.initrd || typeof m.initrd.file !== 'string' || m.initrd.file.includes('/')) continue;
      if (name && m.name !== name) continue;
      if (!best || m.built_at > best.built_at) best = m;
    }
    if (!best) throw new SandboxError('image', name ? `no microVM image named ${name} in ${opts.imagesDir}; run crewhouse images build --name ${name}` : `no microVM image in ${opts.imagesDir}; run crewhouse images build`);
    const ref: ImageRef = {
      name: best.name,
      version: best.version,
      kernel: { path: path.join(opts.imagesDir, best.kernel.file), sha256: best.kernel.sha256 },
      initrd: { path: path.join(opts.imagesDir, best.initrd.file), sha256: best.initrd.sha256 },
      rootfs: { path: path.join(opts.imagesDir, best.rootfs.file), sha256: best.rootfs.sha256 },
    };
    for (const part of ['kernel', 'initrd', 'rootfs'] as const) await verify(ref, part);
    return ref;
  }

  /** Checks a file of the image against its manifest's sha256 (once per file version). */
  async function verify(ref: ImageRef, part: 'kernel' | 'initrd' | 'rootfs') {
    const f = ref[part];
    let st: fs.Stats;
    try {
      st = await fsp.stat(f.path);
    } catch {
      throw new SandboxError('image', `image ${ref.name} ${ref.version}: its ${part} file ${path.basename(f.path)} is missing`);
    }
    const key = `${f.path}:${st.size}:${st.mtimeMs}`;
    let sum = verified.get(key);
    if (!sum) {
      sum = await sha256File(f.path);
      verified.set(key, sum);
    }
    if (sum !== f.sha256) throw new SandboxError('image', `image ${ref.name} ${ref.version}: its ${part} file ${path.basename(f.path)} does not match the manifest's sha256 (corrupt)`);
  }

  function mac(id: string): string {
    const h = crypto.createHash('sha256').update(id).digest();
    return `52:54:00:${[h[0], h[1], h[2]].map((b) => b.toString(16).padStart(2, '0')).join(':')}`;
  }

  /** The machine: everything a snapshot must be restored with, identically. */
  function machineArgs(s: StateFile, accel: 'kvm' | 'tcg'): string[] {
    const d = dirOf(s.id);
    return [
      '-M', 'microvm,x-option-roms=off,isa-serial=on,rtc=on',
      // TCG's translation cache defaults to 1 GiB of host memory per VM; 128 MiB holds a guest's hot code.
      '-accel', accel === 'tcg' ? 'tcg,tb-size=128' : 'kvm',
      '-cpu', accel === 'kvm' ? 'host' : 'max',
      '-m', String(s.spec.memoryMib),
      '-smp', String(s.spec.vcpus),
      '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot',
      '-kernel', s.image.kernel.path,
      '-initrd', s.image.initrd.path,
      // TCG has no PIT to calibrate the TSC against: give its rate, or the kernel waits forever.
      '-append', `console=ttyS0 quiet panic=-1 tsc_early_khz=2000000 crewhouse.ip=${s.spec.network.sandboxAddress}/30`,
      '-drive', `id=root,file=${path.join(d, 'disk.qcow2')},format=qcow2,if=none,cache=writeback`,
      '-device', 'virtio-blk-device,drive=root',
      '-netdev', `tap,id=net0,ifname=${s.spec.network.hostInterface},script=no,downscript=no`,
      '-device', `virtio-net-device,netdev=net0,mac=${mac(s.id)}`,
      '-device', 'virtio-serial-device',
      '-chardev', `socket,id=ctl,path=${path.join(d, 'ctl.sock')},server=on,wait=off`,
      '-device', 'virtserialport,chardev=ctl,name=crewhouse.ctl',
    ];
  }

  async function launch(s: StateFile, accel: 'kvm' | 'tcg', incoming: boolean) {
    const d = dirOf(s.id);
    await fsp.rm(file(s.id, 'qmp.sock'), { force: true });
    await fsp.rm(file(s.id, 'ctl.sock'), { force: true });
    const args = [
      ...machineArgs(s, accel),
      '-qmp', `unix:${path.join(d, 'qmp.sock')},server=on,wait=off`,
      '-serial', `file:${path.join(d, 'console.log')}`,
      '-pidfile', path.join(d, 'qemu.pid'),
      '-daemonize',
      ...(incoming ? ['-S', '-incoming', 'defer'] : []),
    ];
    await run(qemu, args);
  }

  function alive(id: string): () => boolean {
    let pid: number | null = null;
    try {
      pid = Number(fs.readFileSync(file(id, 'qemu.pid'), 'utf8').trim());
      process.kill(pid, 0);
      return () => {
        try {
          process.kill(pid!, 0);
          return true;
        } catch {
          return false;
        }
      };
    } catch {
      return () => false;
    }
  }

  async function connect(id: string, deadline: number): Promise<Channel> {
    const { channel } = await Channel.open(file(id, 'ctl.sock'), deadline, alive(id));
    channels.set(id, channel);
    return channel;
  }

  /** The channel to a running sandbox, reconnecting after a host restart. */
  async function channelOf(id: string): Promise<Channel> {
    const c = channels.get(id);
    if (c && !c.closed) return c;
    if (!(await pidOf(id))) throw new SandboxError('failed', `sandbox ${id}: its VM is not running`);
    return connect(id, Date.now() + 30_000);
  }

  async function coldBoot(s: StateFile, accel: 'kvm' | 'tcg') {
    await tapUp(s.spec);
    await launch(s, accel, false);
    await connect(s.id, Date.now() + bootTimeoutMs);
  }

  /** Restores from the snapshot; the snapshot file is renamed away first, so never resumed twice. */
  async function restore(s: StateFile, accel: 'kvm' | 'tcg') {
    const consumed = file(s.id, `snapshot.resuming`);
    await fsp.rename(file(s.id, 'snapshot.bin'), consumed);
    await fsp.rm(file(s.id, 'snapshot.json'), { force: true });
    try {
      await tapUp(s.spec);
      await launch(s, accel, true);
      await opts.onStep?.(s.id, 'restoring');
      const q = await Qmp.connect(file(s.id, 'qmp.sock'));
      try {
        await q.execute('migrate-incoming', { uri: `exec:cat ${shellQuote(consumed)}` });
        const deadline = Date.now() + bootTimeoutMs;
        for (;;) {
          const st = await q.execute<{ status: string }>('query-status');
          if (st.status === 'paused' || st.status === 'postmigrate') break;
          if (st.status !== 'inmigrate') throw new SandboxError('failed', `restoring the snapshot left the VM ${st.status}`);
          if (Date.now() > deadline) throw new SandboxError('failed', 'restoring the snapshot took too long');
          await new Promise((r) => setTimeout(r, 50));
        }
        await q.execute('cont');
      } finally {
        q.close();
      }
      const ch = await connect(s.id, Date.now() + 60_000);
      // The guest's clock stood still while it slept.
      await ch.request({ t: 'clock', ms: Date.now() });
    } finally {
      await fsp.rm(consumed, { force: true });
    }
  }

  async function snapshotUsable(s: StateFile, accel: 'kvm' | 'tcg'): Promise<string | null> {
    let meta: SnapshotMeta;
    try {
      meta = JSON.parse(await fsp.readFile(file(s.id, 'snapshot.json'), 'utf8'));
    } catch {
      return 'its description is missing or unreadable';
    }
    const st = await fsp.stat(file(s.id, 'snapshot.bin')).catch(() => null);
    if (!st) return 'the snapshot file is missing';
    if (st.size !== meta.bytes) return 'the snapshot file is not the size it was written at';
    if (meta.qemu !== (await version())) return `it was taken by ${meta.qemu}`;
    if (meta.kernel !== s.image.kernel.sha256 || meta.initrd !== s.image.initrd.sha256 || meta.rootfs !== s.image.rootfs.sha256) return 'it was taken on another image';
    if (meta.machine !== machineHash(s, accel)) return 'it was taken with other machine arguments';
    return null;
  }

  function machineHash(s: StateFile, accel: 'kvm' | 'tcg') {
    return crypto.createHash('sha256').update(JSON.stringify(machineArgs(s, accel))).digest('hex');
  }

  async function snapshotBytes(): Promise<number> {
    let total = 0;
    for (const id of await fsp.readdir(opts.dir).catch(() => [] as string[])) {
      const st = await fsp.stat(file(id, 'snapshot.bin')).catch(() => null);
      if (st) total += st.size;
    }
    return total;
  }

  async function dropSnapshot(id: string) {
    for (const f of ['snapshot.bin', 'snapshot.json', 'snapshot.tmp', 'snapshot.resuming']) await fsp.rm(file(id, f), { force: true });
  }

  /** Wakes a sandbox: from its snapshot when usable, otherwise a cold boot from its disk. */
  async function wakeUp(s: StateFile): Promise<SandboxStatus> {
    const accel = await accelerator(qemu, log, opts.accel, s.image.kernel.path);
    // A restore cut short by a host crash may have left its QEMU behind: never two on one disk.
    await stopQemu(s.id);
    const started = performance.now();
    let cold = true;
    if (s.state === 'sleeping') {
      const problem = await snapshotUsable(s, accel);
      if (problem) {
        log.warn({ sandbox: s.id, reason: problem }, 'microvm: snapshot unusable, discarded; cold boot');
      } else {
        try {
          await restore(s, accel);
          cold = false;
        } catch (err) {
          log.warn({ sandbox: s.id, err: (err as Error).message }, 'microvm: snapshot failed to restore; cold boot');
          await stopQemu(s.id);
        }
      }
      await dropSnapshot(s.id);
    }
    if (cold) {
      try {
        await coldBoot(s, accel);
      } catch (err) {
        await stopQemu(s.id);
        await tapDown(s.spec.network.hostInterface);
        s.state = 'deep_sleep';
        await writeState(s);
        throw failure(s.id, 'cold boot', err);
      }
    }
    s.state = 'running';
    s.coldBooted = cold;
    await writeState(s);
    opts.onWake?.((performance.now() - started) / 1000, cold ? 'cold_boot' : 'restore');
    return statusOf(s);
  }

  function failure(id: string, what: string, err: unknown): SandboxError {
    const tail = (() => {
      try {
        return fs.readFileSync(file(id, 'console.log'), 'utf8').trim().split('\n').slice(-3).join(' / ');
      } catch {
        return '';
      }
    })();
    const msg = err instanceof Error ? err.message : String(err);
    log.error({ sandbox: id, err: msg, console: tail || undefined }, `microvm: ${what} failed`);
    if (err instanceof SandboxError && err.code !== 'failed') return err;
    return new SandboxError('failed', `sandbox ${id}: ${what} failed: ${msg}`, { cause: err });
  }

  /** A running sandbox whose QEMU died (host reboot, crash) keeps its disk: it is in deep sleep now. */
  async function reconcile(s: StateFile): Promise<StateFile> {
    if (s.sleeping) {
      // A sleep cut short by a host that died: finish it from what is on disk. Only a committed
      // snapshot (snapshot.bin, renamed after its description was written) is one to wake from.
      const committed = fs.existsSync(file(s.id, 'snapshot.bin'));
      log.warn({ sandbox: s.id, snapshot: committed }, committed ? 'microvm: a sleep was cut short after its snapshot was saved; finished: the sandbox sleeps' : 'microvm: a sleep was cut short before its snapshot was saved; the sandbox is in deep sleep and cold-boots on wake');
      await stopQemu(s.id);
      await tapDown(s.spec.network.hostInterface);
      await fsp.rm(file(s.id, 'snapshot.tmp'), { force: true });
      if (!committed) await dropSnapshot(s.id);
      s.state = committed ? 'sleeping' : 'deep_sleep';
      s.coldBooted = false;
      delete s.sleeping;
      await writeState(s);
      return s;
    }
    if ((s.state === 'sleeping' || s.state === 'deep_sleep') && (await pidOf(s.id))) {
      // A wake cut short: its QEMU (restored or booting) is no one's; the snapshot it took is spent.
      log.warn({ sandbox: s.id }, 'microvm: a VM was left running by a wake cut short; stopped');
      await stopQemu(s.id);
      await tapDown(s.spec.network.hostInterface);
      await fsp.rm(file(s.id, 'snapshot.resuming'), { force: true });
    }
    if (s.state === 'sleeping' && !fs.existsSync(file(s.id, 'snapshot.bin'))) {
      // Nothing left to restore (a wake cut short renamed it away): disk only, which is a deep sleep.
      await dropSnapshot(s.id);
      s.state = 'deep_sleep';
      await writeState(s);
    }
    if ((s.state === 'running' || s.state === 'starting') && !(await pidOf(s.id))) {
      log.warn({ sandbox: s.id }, 'microvm: VM process is gone; the sandbox keeps its disk and cold-boots on wake');
      channels.get(s.id)?.close();
      channels.delete(s.id);
      await tapDown(s.spec.network.hostInterface);
      s.state = 'deep_sleep';
      await writeState(s);
    }
    return s;
  }

  const provider: SandboxProvider = {
    name: 'microvm',

    async check() {
      await version();
      await run(qemuImg, ['--version']);
      if (!fs.existsSync('/dev/net/tun')) throw new SandboxError('unavailable', '/dev/net/tun is missing: the microvm provider needs tap devices');
    },

    create(spec) {
      return locked(spec.id, async () => {
        const bad = specProblem(spec);
        if (bad) throw new SandboxError('failed', `sandbox ${spec.id}: ${bad}`);
        if (fs.existsSync(file(spec.id, 'state.json'))) throw new SandboxError('wrong_state', `sandbox ${spec.id} exists already`);
        await provider.check();
        const image = await resolveImage(spec.image);
        const accel = await accelerator(qemu, log, opts.accel, image.kernel.path);
        const s: StateFile = { id: spec.id, spec, image, state: 'starting', coldBooted: false };
        const started = performance.now();
        await fsp.mkdir(dirOf(spec.id), { recursive: true });
        try {
          const base = (await fsp.stat(image.rootfs.path)).size;
          const size = Math.max(base, spec.diskGib * 1024 ** 3);
          await run(qemuImg, ['create', '-q', '-f', 'qcow2', '-F', 'raw', '-b', image.rootfs.path, file(spec.id, 'disk.qcow2'), String(size)]);
          await writeState(s);
          await coldBoot(s, accel);
          s.state = 'running';
          await writeState(s);
        } catch (err) {
          // Nothing of a failed create stays behind: no process, no tap, no files.
          const e = failure(spec.id, 'create', err);
          await stopQemu(spec.id).catch(logIgnored(log, 'could not stop QEMU of a failed create', { sandbox: spec.id }));
          await tapDown(spec.network.hostInterface);
          await fsp.rm(dirOf(spec.id), { recursive: true, force: true });
          throw e;
        }
        opts.onWake?.((performance.now() - started) / 1000, 'cold_boot');
        return statusOf(s);
      });
    },

    async exec(id, req: ExecRequest): Promise<ExecHandle> {
      if (!Array.isArray(req.argv) || req.argv.length === 0) throw new SandboxError('failed', 'exec needs a command');
      return locked(id, async () => {
        const s = await reconcile(await readState(id));
        if (s.state !== 'running') throw new SandboxError('wrong_state', `sandbox ${id} is ${s.state}; wake it first`);
        const ch = await channelOf(id);
        return ch.exec(req, { PATH, HOME: '/workspace', ...s.spec.env, ...req.env });
      });
    },

    copyIn(id, files) {
      return locked(id, async () => {
        const s = await reconcile(await readState(id));
        if (s.state !== 'running') throw new SandboxError('wrong_state', `sandbox ${id} is ${s.state}; wake it first`);
        const ch = await channelOf(id);
        for (const f of files) {
          if (path.isAbsolute(f.path) || path.normalize(f.path).split('/').includes('..')) throw new SandboxError('failed', `copy-in path ${f.path} must stay under /workspace`);
          await ch.request({ t: 'write', path: f.path, mode: f.mode ?? 0o644 }, Buffer.isBuffer(f.content) ? f.content : Buffer.from(f.content));
        }
      });
    },

    sleep(id, depth) {
      return locked(id, async () => {
        const s = await reconcile(await readState(id));
        if (s.state === (depth === 'deep' ? 'deep_sleep' : 'sleeping')) return statusOf(s);
        if (depth === 'deep' && s.state === 'sleeping') {
          await dropSnapshot(id);
          s.state = 'deep_sleep';
          s.coldBooted = false;
          await writeState(s);
          return statusOf(s);
        }
        if (s.state !== 'running') throw new SandboxError('wrong_state', `sandbox ${id} is ${s.state}; only a running sandbox can ${depth === 'deep' ? 'deep-sleep' : 'sleep'}`);
        const step = (name: LifecycleStep) => opts.onStep?.(id, name);
        const accel = await accelerator(qemu, log, opts.accel, s.image.kernel.path);
        let snapshot = depth === 'sleep';
        if (snapshot) {
          const used = await snapshotBytes();
          const need = s.spec.memoryMib * 1024 * 1024;
          if (used + need > opts.snapshotBudgetBytes) {
            log.warn({ sandbox: id, used, need, budget: opts.snapshotBudgetBytes }, 'microvm: snapshot disk budget full; deep sleep instead');
            snapshot = false;
          }
        }
        // The disk must hold what the guest wrote, whatever happens to the memory snapshot
        // later (discarded, deep sleep): a cold boot then starts from that disk.
        await channelOf(id)
          .then((ch) => ch.request({ t: 'sync' }))
          .catch((err) => log.warn({ sandbox: id, err: (err as Error).message }, 'microvm: the guest did not sync before sleep'));
        s.sleeping = depth;
        await writeState(s);
        await step('synced');
        if (snapshot) {
          const tmp = file(id, 'snapshot.tmp');
          const q = await Qmp.connect(file(id, 'qmp.sock'));
          try {
            await q.execute('stop');
            await step('paused');
            await q.execute('migrate', { uri: `exec:cat > ${shellQuote(tmp)}` });
            for (;;) {
              const m = await q.execute<{ status?: string; 'error-desc'?: string }>('query-migrate');
              if (m.status === 'completed') break;
              if (m.status === 'failed' || m.status === 'cancelled') throw new SandboxError('failed', `the snapshot could not be written: ${m['error-desc'] ?? m.status}`);
              await new Promise((r) => setTimeout(r, 50));
            }
            await step('written');
            const meta: SnapshotMeta = {
              qemu: await version(),
              kernel: s.image.kernel.sha256,
              initrd: s.image.initrd.sha256,
              rootfs: s.image.rootfs.sha256,
              machine: machineHash(s, accel),
              bytes: (await fsp.stat(tmp)).size,
              taken_at: new Date().toISOString(),
            };
            await fsp.writeFile(file(id, 'snapshot.json'), JSON.stringify(meta));
            await fsp.rename(tmp, file(id, 'snapshot.bin'));
            await step('committed');
          } catch (err) {
            // The VM keeps running as it was; the half-written snapshot goes.
            await q.execute('cont').catch(logIgnored(log, 'could not resume a VM after a failed snapshot', { sandbox: id }));
            await dropSnapshot(id);
            delete s.sleeping;
            await writeState(s);
            throw failure(id, 'sleep', err);
          } finally {
            q.close();
          }
        }
        await stopQemu(id);
        await step('stopped');
        await tapDown(s.spec.network.hostInterface);
        s.state = snapshot ? 'sleeping' : 'deep_sleep';
        s.coldBooted = false;
        delete s.sleeping;
        await writeState(s);
        return statusOf(s);
      });
    },

    wake(id) {
      return locked(id, async () => {
        const s = await reconcile(await readState(id));
        if (s.state === 'running') return statusOf(s);
        if (s.state !== 'sleeping' && s.state !== 'deep_sleep') throw new SandboxError('wrong_state', `sandbox ${id} is ${s.state}`);
        return wakeUp(s);
      });
    },

    destroy(id) {
      return locked(id, async () => {
        let s: StateFile | null = null;
        try {
          s = await readState(id);
        } catch (err) {
          if (!(err instanceof SandboxError && err.code === 'not_found')) throw err;
        }
        await stopQemu(id);
        if (s) await tapDown(s.spec.network.hostInterface);
        await fsp.rm(dirOf(id), { recursive: true, force: true });
      });
    },

    status(id) {
      return locked(id, async () => statusOf(await reconcile(await readState(id))));
    },

    async list() {
      const out: string[] = [];
      for (const id of await fsp.readdir(opts.dir).catch(() => [] as string[])) if (ID.test(id) && fs.existsSync(file(id, 'state.json'))) out.push(id);
      return out.sort();
    },
  };
  return provider;
}

const IPV4 = /^(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}$/;

/** What is wrong with a spec, or null: its values reach QEMU's and ip's command lines. */
function specProblem(spec: SandboxSpec): string | null {
  if (!IFNAME.test(spec.network?.hostInterface ?? '')) return `bad host interface name ${String(spec.network?.hostInterface).slice(0, 40)}`;
  for (const k of ['hostAddress', 'sandboxAddress'] as const) if (!IPV4.test(spec.network[k] ?? '')) return `network.${k} must be an IPv4 address`;
  if (!Number.isInteger(spec.vcpus) || spec.vcpus < 1 || spec.vcpus > 64) return 'vcpus must be 1 to 64';
  if (!Number.isInteger(spec.memoryMib) || spec.memoryMib < 128 || spec.memoryMib > 1024 * 1024) return 'memoryMib must be at least 128';
  if (!Number.isInteger(spec.diskGib) || spec.diskGib < 1 || spec.diskGib > 16 * 1024) return 'diskGib must be at least 1';
  return null;
}

function shellQuote(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/** The provider as the composition root makes it: settings from the configuration, wake timings into the metrics. */
export function microvmProviderFromConfig(
  config: Pick<Config, 'microvmDir' | 'imagesDir' | 'microvmSnapshotBudgetBytes' | 'microvmAccel'>,
  deps: { logger: Logger; metrics?: Registry },
): SandboxProvider {
  const wakes = deps.metrics?.histogram('crewhouse_sandbox_wake_seconds', 'Time to wake a sandbox until its guest answers, by provider and kind (restore or cold_boot)', [0.5, 1, 2, 5, 10, 20, 30, 60, 120]);
  return createMicrovmProvider({
    dir: config.microvmDir,
    imagesDir: config.imagesDir,
    logger: deps.logger,
    snapshotBudgetBytes: config.microvmSnapshotBudgetBytes,
    accel: config.microvmAccel,
    onWake: wakes ? (seconds, kind) => wakes.observe({ provider: 'microvm', kind }, seconds) : undefined,
  });
}

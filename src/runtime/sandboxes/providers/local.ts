/**
 * The `local` provider: a sandbox is a process tree on this host in its own user, mount, PID,
 * IPC, UTS and cgroup namespaces (bubblewrap), inside a network namespace whose one interface
 * is a veth pair to the host, with CPU and memory limits from its cgroup.
 *
 * What it mounts: the host's /usr read-only (with /bin, /lib, /lib64, /sbin as links or
 * read-only binds), an /etc of the sandboxes' own, one per CA (passwd and group naming the sandbox
 * user, hosts, an empty resolv.conf, the deployment CA as the trust store) with a few host files bound
 * read-only (alternatives, ld.so cache, localtime, openssl.cnf), its own /proc and /dev, a tmpfs
 * /tmp and a private /workspace on disk under SERVICE_SANDBOX_DIR that survives restarts. It needs
 * no image.
 *
 * The disk size is real: /workspace is an ext4 file system in a sparse file beside the sandbox
 * (`workspace.img`, `disk_gib` large), loop-mounted on the host before the sandbox starts, so a
 * write past it fails with ENOSPC inside while the host's disk keeps the rest. The mount is made
 * again wherever it is missing (a host that rebooted). A host without loop devices falls back to
 * a plain directory with no size limit, says so once in the log, and records it per sandbox. Processes run as uid/gid 1000 inside, an unprivileged host uid outside.
 *
 * Every exec of a sandbox is its own bubblewrap: joined to the
 * sandbox's network namespace and cgroup, with the same mounts, in a PID namespace of its own
 * (when an exec's command ends the kernel ends everything it started), under a seccomp filter
 * (seccomp.ts) with no_new_privs and no nested user namespaces, with only the descriptors it
 * needs and an empty environment. /tmp is a tmpfs of a quarter of the sandbox's memory, shared
 * by its execs. docs/sandboxes-security.md says what is allowed and denied, and why.
 *
 * States: running (an init process marks it: `sleep` in the cgroup as the host uid, in none of the
 * sandbox's namespaces); sleeping (the cgroup is frozen:
 * memory stays, nothing runs); deep_sleep (every process is gone, /tmp with them; /workspace
 * and the link stay); wake thaws, or starts a new init after a deep sleep.
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { existsSync, lstatSync, readFileSync } from 'node:fs';
import fs from 'node:fs/promises';
import type { Socket } from 'node:net';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Logger } from '../../../logger.ts';
import { Cgroup, cgroupVersion, type CgroupVersion } from '../cgroups.ts';
import { createKeyedQueue } from '../keyed-queue.ts';
import { claimPooledLink, ensureFirewall, ensureVethNamespace, makePooledLink, pooledLinkWhole, removeFirewall, removePooledLink, removeVethNamespace, resourceTag, vethInPlace, type PooledLink } from '../network.ts';
import {
  SANDBOX_CA_PATH,
  SandboxError,
  type ExecHandle,
  type ExecRequest,
  type SandboxProvider,
  type SandboxSpec,
  type SandboxState,
  type SandboxStatus,
} from '../provider.ts';
import { sandboxFilter } from '../seccomp.ts';
import { pollUntil, requireProgram, run } from '../system.ts';

export interface LocalProviderOptions {
  /** Where each sandbox's directory lives (SERVICE_SANDBOX_DIR). */
  root: string;
  /** The gateway's port: the only one a sandbox may reach, on its link's host address. */
  gatewayPort: number;
  /** The bubblewrap program (a name on PATH or a path). */
  bwrap?: string;
  /** The host uid and gid sandbox processes run as (mapped to 1000 inside). */
  hostUid?: number;
  /** Host paths bound read-only into every sandbox (the agent runtime); never a secret. */
  readOnly?: ReadonlyArray<{ source: string; target: string }>;
  /**
   * The Node binary the agent runtime runs with, bound at `target` from a copy the sandbox user
   * may execute but not read: the kernel makes a process that runs it non-dumpable, so the
   * agent's tools (the same uid) cannot ptrace the runtime or open its descriptors.
   */
  node?: { source: string; target: string };
  logger?: Logger;
  /** The loop control device; where it is missing, /workspace is a plain directory without a size limit. */
  loopControl?: string;
  /**
   * How many network links (namespace, veth pair, firewall) to keep made ahead of demand
   * (SERVICE_SANDBOX_POOL); 0, the default here, makes each on demand. A pool is
   * released by close().
   */
  poolSize?: number;
  /** Told how long each step of a create or a wake took (the bench's breakdown). */
  onStep?: (step: string, ms: number) => void;
}

/** What a sandbox's directory records about it, so a restarted host finds it again. */
interface SandboxRecord {
  spec: Omit<SandboxSpec, 'caPem'>;
  state: SandboxState;
  /** Host pid of the init process (PID 1 of the sandbox). */
  pid: number | null;
  /** volume: /workspace is workspace.img loop-mounted; directory (or absent, from before volumes): a plain directory. */
  disk?: 'volume' | 'directory';
  /** Its /etc: a directory in SHARED_DIR shared by every sandbox with the same CA (absent: its own, from before). */
  etc?: string;
  /** The network namespace, when it is not the one named after the sandbox (a link taken from the pool). */
  netns?: string;
}

const ID = /^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$/;
/** Where the provider keeps what it shares between sandboxes (the execute-only Node); not a sandbox id. */
const SHARED_DIR = '.shared';
/** How the volumes formatted ahead of demand are named in SHARED_DIR. */
const SPARE_PREFIX = 'spare-volume-';
/**
 * Where each pooled link is registered (a file named after it, holding its names and the pid of
 * the process that made it) before any of it is made; taking it renames the file into the
 * sandbox's directory (POOLED_FILE), so at every moment one of the two names what to remove.
 */
const POOL_DIR = 'network-pool';
const POOLED_FILE = 'pooled-network.json';
/** What a shared /etc being written is named with (a process killed meanwhile leaves it; check removes it). */
const ETC_TMP = '.tmp-';
const INSIDE_UID = 1000;
/**
 * What marks a sandbox running (and is frozen with it): a process in its cgroup, as its host uid,
 * outside every namespace of the sandbox (nothing inside can see or reach it). It runs nothing of
 * the sandbox's and holds nothing open: each exec is a bubblewrap of its own.
 */
const INIT_COMMAND = ['/usr/bin/sleep', 'infinity'];
const DEFAULT_PATH = '/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin';
/**
 * Run by bash before anything else: closes every descriptor above CH_KEEP_FDS (whatever the
 * service inherited from what started it), enters the cgroup (so no child is ever outside it),
 * makes an exec's processes the kernel's first pick when memory runs out (raising needs no
 * privilege; the init stays at 0, so a sandbox out of memory loses the process that used it, not
 * its init), and clears the environment (nothing of the host's reaches bubblewrap or the sandbox).
 *
 * An exec's bubblewrap (with --die-with-parent) dies with its parent: there bash stays, outside the
 * cgroup, as that parent, so that an exec outlives a host process that is killed, as the init does.
 */
const ENTER_CGROUP = [
  'for p in /proc/$$/fd/*; do n=${p##*/}; if [ "$n" -gt "$CH_KEEP_FDS" ] 2>/dev/null; then eval "exec $n>&-"; fi; done',
  'enter() { for f in $CH_CGROUP_PROCS; do echo $BASHPID > "$f" || exit 125; done; echo "$CH_OOM_SCORE_ADJ" > /proc/self/oom_score_adj; }',
  'if [ "$CH_STAY" = 1 ]; then (enter; exec /usr/bin/env -i "$@"); exit $?; fi',
  'enter; exec /usr/bin/env -i "$@"',
].join('\n');
/** The descriptors bubblewrap reads: its options (so that no host path shows in a command line inside) and the seccomp filter. */
const ARGS_FD = 3;
const SECCOMP_FD = 4;
/**
 * After a command ends, how long its output may stay idle, and at most how long it may take to
 * drain, before its pipes are closed (a copy held elsewhere cannot keep an exec open).
 */
const OUTPUT_GRACE_MS = 2000;
const OUTPUT_CAP_MS = 30_000;
/** What an exec's processes add to their OOM score (the init's stays 0). */
const EXEC_OOM_SCORE_ADJ = 500;
/** Host files bound read-only into the sandbox's own /etc when they exist. */
const HOST_ETC = ['alternatives', 'ld.so.cache', 'ld.so.conf', 'ld.so.conf.d', 'localtime', 'ssl/openssl.cnf', 'nsswitch.conf', 'mime.types', 'gitconfig'];

/** /run, each exec's own scratch tmpfs. */
const RUN_BYTES = 16 * 1024 * 1024;
/** /tmp: a quarter of the sandbox's memory (its pages count against it), within these bounds. */
const TMP_MIN_MIB = 16;
const TMP_MAX_MIB = 2048;
export const tmpSizeMib = (memoryMib: number) => Math.min(TMP_MAX_MIB, Math.max(TMP_MIN_MIB, Math.floor(memoryMib / 4)));

/** The smallest volume made (ext4 with a journal needs a few MiB to be worth mounting). */
const MIN_VOLUME_MIB = 16;

const signalNumbers: Record<string, number> = { SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGABRT: 6, SIGKILL: 9, SIGSEGV: 11, SIGPIPE: 13, SIGALRM: 14, SIGTERM: 15 };

export function createLocalProvider(opts: LocalProviderOptions): SandboxProvider & { memoryBytes(id: string): Promise<number>; oomKills(id: string): Promise<number>; close(): Promise<void>; pooled(): Promise<PooledLink[]> } {
  const root = opts.root;
  const hostUid = opts.hostUid ?? 2_000_000;
  const bwrapName = opts.bwrap ?? 'bwrap';
  let tools: { bwrap: string; ip: string; nft: string; nsenter: string; mkfs: string | null; mount: string; umount: string; cgroups: CgroupVersion } | null = null;
  let warnedNoLoop = false;
  let hardening: { bash: string; disableUserns: boolean; tmpfsSize: boolean; node: string | null; seccomp: Buffer } | null = null;

  async function check() {
    const bwrap = requireProgram(bwrapName, 'bwrap');
    const loop = existsSync(opts.loopControl ?? '/dev/loop-control');
    const found = {
      bwrap,
      ip: requireProgram('ip'),
      nft: requireProgram('nft'),
      nsenter: requireProgram('nsenter'),
      // Only needed where volumes can be made; without loop devices the fallback needs none.
      mkfs: loop ? requireProgram('mkfs.ext4') : null,
      mount: requireProgram('mount'),
      umount: requireProgram('umount'),
    };
    if (process.getuid?.() !== 0) throw new SandboxError('unavailable', 'the local provider must run as root: it makes network namespaces, veth pairs and cgroups');
    const cgroups = cgroupVersion();
    if (!cgroups) throw new SandboxError('unavailable', 'no usable cgroup hierarchy under /sys/fs/cgroup (need v2, or v1 with the memory and freezer controllers)');
    await fs.mkdir(root, { recursive: true });
    // bubblewrap runs as the unprivileged sandbox uid and must reach each sandbox's directory.
    await fs.chmod(root, 0o711);
    for (let dir = path.dirname(path.resolve(root)); ; dir = path.dirname(dir)) {
      const mode = (await fs.stat(dir)).mode;
      if ((mode & 0o001) === 0) {
        throw new SandboxError(
          'unavailable',
          `${dir} is closed to the unprivileged sandbox user (mode ${(mode & 0o777).toString(8).padStart(4, '0')}), which must pass through every directory above the sandbox directory ${root}: set SERVICE_SANDBOX_DIR to a directory whose parents every user may enter (such as /var/lib/crewhouse/sandboxes), or open ${dir} with chmod o+x ${dir}`,
        );
      }
      if (dir === path.dirname(dir)) break;
    }
    tools = { ...found, cgroups };
    // Volumes formatted ahead of demand by an earlier process: nothing will take them now.
    const shared = path.join(root, SHARED_DIR);
    for (const f of await fs.readdir(shared).catch(() => [] as string[])) {
      if (f.startsWith(SPARE_PREFIX)) await removeSpare(path.join(shared, f));
      // A shared /etc a killed process was writing.
      if (f.startsWith('etc-') && f.includes(ETC_TMP)) await fs.rm(path.join(shared, f), { recursive: true, force: true });
    }
    // Shared /etc directories no sandbox uses any more (their last one destroyed by an earlier process).
    await removeUnusedEtc();
    await findPooled();
    refill();
  }
  async function ready() {
    if (!tools) await check();
    if (!hardening) hardening = await prepareHardening();
    return { ...tools!, ...hardening };
  }

  /**
   * What every sandbox process runs under, found or made once: the seccomp filter, whether this
   * bubblewrap can disable nested user namespaces, bash (to close inherited descriptors), and
   * the execute-only copy of the runtime's Node.
   */
  async function prepareHardening() {
    const bash = requireProgram('bash');
    const help = await run(tools!.bwrap, ['--help'], { allowFail: true });
    const disableUserns = help.stdout.includes('--disable-userns');
    if (!disableUserns) opts.logger?.warn('this bubblewrap cannot disable nested user namespaces (--disable-userns needs bubblewrap 0.8): the seccomp filter alone refuses them');
    let node: string | null = null;
    if (opts.node) {
      const shared = path.join(root, SHARED_DIR);
      await fs.mkdir(shared, { recursive: true, mode: 0o711 });
      await fs.chmod(shared, 0o711);
      node = path.join(shared, 'node');
      const src = await fs.stat(opts.node.source);
      const have = await fs.stat(node).catch(() => null);
      // Owned by root, execute-only for everyone else: the sandbox user can run it, never read it.
      if (!have || have.size !== src.size || have.mtimeMs !== src.mtimeMs || (have.mode & 0o777) !== 0o711 || have.uid !== 0) {
        // A name of its own: two providers of one process (or two processes) may copy at once.
        const tmp = `${node}.${randomUUID()}`;
        await fs.copyFile(opts.node.source, tmp);
        await fs.chown(tmp, 0, 0);
        await fs.chmod(tmp, 0o711);
        await fs.utimes(tmp, src.atime, src.mtime);
        await fs.rename(tmp, node);
      }
    }
    return { bash, disableUserns, tmpfsSize: help.stdout.includes('--size'), node, seccomp: sandboxFilter() };
  }

  /**
   * The network pool: links made ahead of demand, so a create only renames and addresses one
   * (the namespace, the veth pair and the firewall are most of a create's processes). Taken
   * first come first served; each take starts a refill in the background; an empty pool makes
   * the link on demand as before.
   */
  const poolSize = Math.max(0, Math.floor(opts.poolSize ?? 0));
  const poolDir = path.join(root, SHARED_DIR, POOL_DIR);
  const pool: PooledLink[] = [];
  const making = new Set<Promise<void>>();
  /** Settles once the refills after the last create have started (they start after it answers). */
  let refillsStarted = Promise.resolve();
  let closed = false;
  /**
   * Who made a pooled link: a pid and that process's start time (a restarted service may get the
   * same pid, as PID 1 of a container does), and the gateway port its firewall lets through.
   */
  interface PoolEntry extends PooledLink {
    pid: number;
    started: string;
    gatewayPort: number;
  }
  /** A process's start time (field 22 of /proc/PID/stat, in clock ticks since boot), or null when there is none. */
  const startedAt = (pid: number) => {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
    } catch {
      return null;
    }
  };
  const ownStart = startedAt(process.pid) ?? '';
  const ownerAlive = (e: PoolEntry) => Number.isInteger(e.pid) && e.pid > 0 && startedAt(e.pid) === e.started;
  const registerPooled = (item: PooledLink) => fs.writeFile(path.join(poolDir, item.link), JSON.stringify({ netns: item.netns, link: item.link, pid: process.pid, started: ownStart, gatewayPort: opts.gatewayPort } satisfies PoolEntry));

  /**
   * At start: links a process made ahead of demand and no longer holds (it was killed, or
   * stopped without closing) are used when whole and the pool has room, else removed. Links
   * of a process still running (another provider on this directory) are left to it.
   */
  async function findPooled() {
    const t = tools!;
    for (const f of await fs.readdir(poolDir).catch(() => [] as string[])) {
      const file = path.join(poolDir, f);
      const entry = await fs.readFile(file, 'utf8').then((x) => JSON.parse(x) as PoolEntry, () => null);
      if (entry && ownerAlive(entry)) continue;
      const item = entry && /^chp-[0-9a-f]{12}$/.test(entry.netns) && /^chp[0-9a-f]{12}$/.test(entry.link) ? { netns: entry.netns, link: entry.link } : null;
      // Its firewall must let through this gateway's port, no other.
      if (item && !closed && pool.length < poolSize && entry!.gatewayPort === opts.gatewayPort && (await pooledLinkWhole(t.nft, item))) {
        await registerPooled(item);
        pool.push(item);
        continue;
      }
      if (item) await removePooledLink(t, item).catch((err) => opts.logger?.warn({ err, link: item.link }, 'a network link made ahead of demand could not be removed'));
      await fs.rm(file, { force: true });
    }
  }

  function refill() {
    while (!closed && tools && pool.length + making.size < poolSize) {
      const tag = randomBytes(6).toString('hex');
      const item: PooledLink = { netns: `chp-${tag}`, link: `chp${tag}` };
      const made: Promise<void> = (async () => {
        // SHARED_DIR must stay open to the sandbox user (its /etc is there); the registry need not.
        await fs.mkdir(path.join(root, SHARED_DIR), { recursive: true, mode: 0o711 });
        await fs.mkdir(poolDir, { recursive: true, mode: 0o700 });
        await registerPooled(item);
        try {
          await makePooledLink(tools!, item, opts.gatewayPort);
        } catch (err) {
          await removePooledLink(tools!, item).catch(() => {});
          await fs.rm(path.join(poolDir, item.link), { force: true });
          throw err;
        }
        if (closed) {
          await removePooledLink(tools!, item);
          await fs.rm(path.join(poolDir, item.link), { force: true });
        } else pool.push(item);
      })()
        .catch((err) => opts.logger?.warn({ err }, 'a network link could not be made ahead of demand; sandboxes make theirs on demand'))
        .finally(() => making.delete(made));
      making.add(made);
    }
  }

  /** Takes a pooled link for a sandbox (its registration moves into the sandbox's directory); null when the pool is empty. The create refills once it is done. */
  async function takePooled(dir: string): Promise<PooledLink | null> {
    const item = pool.shift();
    if (!item) return null;
    try {
      await fs.rename(path.join(poolDir, item.link), path.join(dir, POOLED_FILE));
    } catch {
      // Removed behind our back (another start cleaning up): not ours to use.
      return null;
    }
    return item;
  }

  /** Runs one step of a create or wake, telling onStep how long it took. */
  async function timed<T>(step: string, fn: () => Promise<T>): Promise<T> {
    if (!opts.onStep) return fn();
    const started = performance.now();
    try {
      return await fn();
    } finally {
      opts.onStep(step, performance.now() - started);
    }
  }

  const dirOf = (id: string) => {
    if (!ID.test(id)) throw new SandboxError('not_found', `"${id}" is not a sandbox id`);
    return path.join(root, id);
  };
  const names = (id: string) => {
    const tag = resourceTag(id);
    return { netns: `chs-${tag}`, cgroup: `chs-${tag}` };
  };
  const cgroupOf = async (id: string) => new Cgroup((await ready()).cgroups, names(id).cgroup);

  async function readRecord(id: string): Promise<SandboxRecord> {
    const text = await fs.readFile(path.join(dirOf(id), 'sandbox.json'), 'utf8').catch(() => null);
    if (text === null) throw new SandboxError('not_found', `no sandbox ${id} on this host`);
    return JSON.parse(text) as SandboxRecord;
  }
  async function writeRecord(id: string, rec: SandboxRecord) {
    const file = path.join(dirOf(id), 'sandbox.json');
    await fs.writeFile(`${file}.tmp`, JSON.stringify(rec));
    await fs.rename(`${file}.tmp`, file);
  }

  const serial = createKeyedQueue();

  async function initAlive(id: string, rec: SandboxRecord): Promise<boolean> {
    if (!rec.pid || !existsSync(`/proc/${rec.pid}`)) return false;
    return (await cgroupOf(id)).holds(rec.pid);
  }

  async function statusOf(id: string, rec: SandboxRecord): Promise<SandboxStatus> {
    let state = rec.state;
    // Processes gone behind our back (a reboot, an OOM kill of init) leave a deep sleep: disk only.
    if ((state === 'running' || state === 'sleeping') && !(await initAlive(id, rec))) state = 'deep_sleep';
    return { state, network: rec.spec.network };
  }

  /**
   * The /etc of every sandbox with this CA (and these host files present), written once into
   * SHARED_DIR (under a name of its own, then renamed into place: what is there is whole) and
   * bound read-only: a create writes no files for it. Resolves with its name there. Made and
   * removed one at a time per name (etcSerial); `etcTaken` counts the creates between asking for
   * one and recording it, whose /etc no record names yet.
   */
  const etcDirs = new Map<string, Promise<string>>();
  const etcSerial = createKeyedQueue();
  const etcTaken = new Map<string, number>();
  const etcNameOf = (caPem: string | null | undefined) => {
    const present = HOST_ETC.filter((f) => existsSync(path.join('/etc', f)));
    return `etc-${createHash('sha256').update(`${caPem ?? ''}\0${present.join('\0')}`).digest('hex').slice(0, 16)}`;
  };
  function sharedEtc(name: string, caPem: string | null | undefined): Promise<string> {
    let made = etcDirs.get(name);
    if (!made) {
      made = etcSerial(name, async () => {
        const final = path.join(root, SHARED_DIR, name);
        if (existsSync(final)) return name;
        const tmp = `${final}${ETC_TMP}${randomUUID()}`;
        await fs.mkdir(path.join(root, SHARED_DIR), { recursive: true, mode: 0o711 });
        await fs.chmod(path.join(root, SHARED_DIR), 0o711);
        await writeEtc(tmp, caPem);
        // Another process may have put it there first: either copy is the same.
        await fs.rename(tmp, final).catch(() => fs.rm(tmp, { recursive: true, force: true }));
        return name;
      });
      made.catch(() => etcDirs.delete(name));
      etcDirs.set(name, made);
    }
    return made;
  }

  /** The shared /etc directories the sandboxes' records name. */
  async function etcInUse(): Promise<Set<string>> {
    const used = new Set<string>();
    for (const e of await fs.readdir(root, { withFileTypes: true }).catch(() => [])) {
      if (!e.isDirectory() || !ID.test(e.name)) continue;
      const rec = await readRecord(e.name).catch(() => null);
      if (rec?.etc) used.add(rec.etc);
    }
    return used;
  }

  /**
   * Removes a shared /etc once no sandbox uses it (a CA replaced, the last sandbox with it
   * destroyed): none is being created with it and no record names it. Without a name, every
   * unused one (at start-up: what an earlier process left).
   */
  async function removeUnusedEtc(only?: string): Promise<void> {
    const shared = path.join(root, SHARED_DIR);
    const names = only ? [only] : (await fs.readdir(shared).catch(() => [] as string[])).filter((f) => f.startsWith('etc-') && !f.includes(ETC_TMP));
    if (names.length === 0) return;
    const used = await etcInUse();
    for (const name of names) {
      await etcSerial(name, async () => {
        if ((etcTaken.get(name) ?? 0) > 0 || used.has(name)) return;
        // A record written since the first look names it: read again, inside the queue.
        if ((await etcInUse()).has(name)) return;
        etcDirs.delete(name);
        await fs.rm(path.join(shared, name), { recursive: true, force: true });
      });
    }
  }

  /** A sandbox's /etc (`etc` of its record): what its user, name lookups and TLS see. */
  async function writeEtc(etc: string, caPem: string | null | undefined) {
    await fs.mkdir(path.join(etc, 'ssl', 'certs'), { recursive: true });
    await fs.writeFile(path.join(etc, 'passwd'), `root:x:0:0:root:/root:/usr/sbin/nologin\nagent:x:${INSIDE_UID}:${INSIDE_UID}:agent:/workspace:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n`);
    await fs.writeFile(path.join(etc, 'group'), `root:x:0:\nagent:x:${INSIDE_UID}:\nnogroup:x:65534:\n`);
    await fs.writeFile(path.join(etc, 'hostname'), 'sandbox\n');
    await fs.writeFile(path.join(etc, 'hosts'), '127.0.0.1 localhost sandbox\n');
    // No DNS: the gateway resolves names; the sandbox only speaks to it as a proxy.
    await fs.writeFile(path.join(etc, 'resolv.conf'), '');
    await fs.writeFile(path.join(etc, SANDBOX_CA_PATH.replace(/^\/etc\//, '')), caPem ?? '');
    for (const f of HOST_ETC) {
      const host = path.join('/etc', f);
      if (!existsSync(host)) continue;
      const target = path.join(etc, f);
      await fs.mkdir(path.dirname(target), { recursive: true });
      if (lstatSync(host).isDirectory()) await fs.mkdir(target, { recursive: true });
      else await fs.writeFile(target, '', { flag: 'a' });
    }
  }

  /**
   * bubblewrap's options for one process tree of a sandbox (one exec): its own user,
   * PID, IPC, UTS and cgroup namespaces (the network namespace is the sandbox's, joined before),
   * the seccomp filter, no nested user namespaces; the same mounts each time.
   */
  function bwrapArgs(dir: string, etc: string, h: { disableUserns: boolean; tmpfsSize: boolean; node: string | null }): string[] {
    const args = ['--unshare-user', '--unshare-pid', '--unshare-ipc', '--unshare-uts', '--unshare-cgroup-try', '--uid', String(INSIDE_UID), '--gid', String(INSIDE_UID), '--hostname', 'sandbox', '--cap-drop', 'ALL'];
    args.push('--seccomp', String(SECCOMP_FD));
    // An exec's PID 1 (bubblewrap's reaper) dies with the outer bubblewrap, which exits when the
    // command does: the kernel then ends everything else in the exec's namespace.
    args.push('--die-with-parent');
    if (h.disableUserns) args.push('--disable-userns', '--assert-userns-disabled');
    args.push('--ro-bind', '/usr', '/usr');
    for (const d of ['bin', 'lib', 'lib64', 'sbin', 'lib32', 'libx32']) {
      const host = `/${d}`;
      if (!existsSync(host)) continue;
      if (lstatSync(host).isSymbolicLink()) args.push('--symlink', `usr/${d}`, host);
      else args.push('--ro-bind', host, host);
    }
    args.push('--ro-bind', etc, '/etc');
    // Only where the sandbox's /etc has a place for it (a host file added since has none there).
    for (const f of HOST_ETC) if (existsSync(path.join('/etc', f)) && existsSync(path.join(etc, f))) args.push('--ro-bind', path.join('/etc', f), path.join('/etc', f));
    for (const m of opts.readOnly ?? []) args.push('--ro-bind', m.source, m.target);
    if (h.node && opts.node) args.push('--ro-bind', h.node, opts.node.target);
    // /tmp is the sandbox's (shared by its execs, bounded: see mountTmp); /run is each exec's own, small.
    args.push('--proc', '/proc', '--dev', '/dev', '--bind', path.join(dir, 'tmp'), '/tmp', ...(h.tmpfsSize ? ['--size', String(RUN_BYTES)] : []), '--tmpfs', '/run', '--bind', path.join(dir, 'workspace'), '/workspace', '--chdir', '/workspace');
    return args;
  }

  /** What ENTER_CGROUP reads: the cgroup to enter, the descriptors to keep, the OOM score, whether bash stays as the parent. */
  const enterEnv = (cg: Cgroup, keepFds: number, oomScoreAdj: number, stay: boolean) => ({ PATH: DEFAULT_PATH, CH_CGROUP_PROCS: cg.procsFiles().join(' '), CH_KEEP_FDS: String(keepFds), CH_OOM_SCORE_ADJ: String(oomScoreAdj), CH_STAY: stay ? '1' : '0' });

  /**
   * Starts one exec of a sandbox: bash enters the cgroup, drops inherited descriptors and the
   * environment, nsenter joins the network namespace and becomes the sandbox's host uid and gid
   * with no supplementary groups (one process where `ip netns exec` and setpriv were two), and
   * bubblewrap reads its options and the filter from descriptors.
   */
  async function spawnSandboxed(id: string, rec: SandboxRecord, command: string[]) {
    const t = await ready();
    const netns = rec.netns ?? names(id).netns;
    const cg = await cgroupOf(id);
    const child = spawn(t.bash, ['--norc', '--noprofile', '-c', ENTER_CGROUP, 'bash', t.nsenter, `--net=/run/netns/${netns}`, `--setuid=${hostUid}`, `--setgid=${hostUid}`, '--', t.bwrap, '--args', String(ARGS_FD), '--', ...command], {
      // Detached: its own process group, which an abort kills whole.
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
      env: enterEnv(cg, SECCOMP_FD, EXEC_OOM_SCORE_ADJ, true),
    });
    const feed = (fd: number, data: Buffer) => {
      const w = (child.stdio as unknown[])[fd] as NodeJS.WritableStream & { on(e: 'error', f: () => void): void };
      // A bubblewrap that failed before reading must not crash the host with EPIPE.
      w.on('error', () => {});
      w.end(data);
    };
    const etc = rec.etc ? path.join(root, SHARED_DIR, rec.etc) : path.join(dirOf(id), 'etc');
    feed(ARGS_FD, Buffer.from(bwrapArgs(dirOf(id), etc, t).map((a) => `${a}\0`).join('')));
    feed(SECCOMP_FD, t.seccomp);
    return child;
  }

  /**
   * Starts the init (INIT_COMMAND) in the sandbox's cgroup as its host uid and gid, with no
   * supplementary groups, descriptors or environment of the host's: bash enters the cgroup and
   * execs env, which execs nsenter (for the uid and gid only), which execs the command, so the
   * pid spawned is the init's. Resolves with it once the command runs.
   */
  async function startInit(id: string): Promise<number> {
    const t = await ready();
    const cg = await cgroupOf(id);
    // Detached with no stdio of ours: the sandbox outlives a host process that is killed.
    const child = spawn(t.bash, ['--norc', '--noprofile', '-c', ENTER_CGROUP, 'bash', t.nsenter, `--setuid=${hostUid}`, `--setgid=${hostUid}`, '--', ...INIT_COMMAND], {
      detached: true,
      stdio: ['ignore', 'ignore', 'pipe'],
      env: enterEnv(cg, 2, 0, false),
    });
    let stderr = '';
    let exited: string | null = null;
    child.stderr!.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-4000)));
    child.on('exit', (code, signal) => (exited = `its init exited (${signal ?? code})`));
    child.on('error', (err) => (exited = err.message));
    const pid = child.pid ?? 0;
    const want = `${INIT_COMMAND.join('\0')}\0`;
    let running = false;
    // Every millisecond (one small read of /proc): a create and a wake wait on this, and the
    // three execs take a few milliseconds.
    await pollUntil(async () => {
      running = pid > 0 && (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')) === want;
      return running || exited !== null;
    }, 10_000, 1);
    child.stderr!.destroy();
    child.unref();
    if (!running || !(await cg.holds(pid))) {
      if (!exited) {
        try {
          process.kill(-pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      throw new SandboxError('failed', `sandbox ${id} did not start: ${exited ?? 'its init process never ran'}${stderr.trim() ? `: ${stderr.trim()}` : ''}`);
    }
    return pid;
  }

  const workspaceOf = (id: string) => path.join(dirOf(id), 'workspace');
  const volumeOf = (id: string) => path.join(dirOf(id), 'workspace.img');

  const mounted = async (mountPoint: string): Promise<boolean> => (await superOptions(mountPoint)) !== null;

  /** The options of the file system mounted at a mount point (such as "rw,size=65536k,mode=1777"), or null when nothing is. */
  async function superOptions(mountPoint: string): Promise<string | null> {
    const info = await fs.readFile('/proc/self/mountinfo', 'utf8');
    // Field 5 is the mount point, with spaces and the like octal-escaped; after " - " come the
    // file system's type, source and options.
    const line = info.split('\n').findLast((l) => l.split(' ')[4]?.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8))) === mountPoint);
    return line === undefined ? null : (line.split(' - ')[1]?.split(' ')[2] ?? '');
  }

  /** Formats a new sparse volume file of `bytes`, its top owned by the sandbox user. */
  async function formatVolume(file: string, bytes: number) {
    const t = await ready();
    // Sparse: the host's disk holds only what the sandbox writes.
    const handle = await fs.open(file, 'wx', 0o600);
    try {
      await handle.truncate(bytes);
    } finally {
      await handle.close();
    }
    // No blocks reserved for root (nothing inside is root); the sandbox user owns the top. A
    // sparse file reads as zeros already: zeroing the journal and inode tables would only turn
    // holes into host disk (69 MiB for 10 GiB), so neither mkfs nor the kernel (noinit_itable) does.
    await run(t.mkfs!, ['-q', '-F', '-m', '0', '-L', 'workspace', '-E', `root_owner=${hostUid}:${hostUid},lazy_itable_init=1,lazy_journal_init=1`, file]);
  }

  /**
   * One volume per size formatted ahead of demand (mkfs is the longest step of a create), and
   * mounted where the provider keeps a pool (the loop mount was the next longest): made after a
   * create takes one, in the background, in a directory of its own in the provider's shared
   * directory, which the create renames into the sandbox's. Each is formatted on its own (its own
   * file system UUID); close() removes them, and what a killed process leaves is removed at the
   * next check.
   */
  const spares = new Map<number, Promise<string | null>>();
  function makeSpare(bytes: number, memoryMib: number) {
    if (closed) return;
    const shared = path.join(root, SHARED_DIR);
    const spare = path.join(shared, `${SPARE_PREFIX}${bytes}-${randomUUID()}`);
    const made = (async () => {
      await fs.mkdir(shared, { recursive: true, mode: 0o711 });
      await fs.mkdir(spare, { mode: 0o711 });
      await formatVolume(path.join(spare, 'workspace.img'), bytes);
      // With a pool, mounted too: the create that takes it mounts nothing.
      // With a pool, mounted too, and a /tmp beside it (sized for the sandbox that took the last
      // one; a create of another memory size resizes it): the create that takes it mounts nothing.
      if (poolSize > 0) {
        await mountVolumeAt(path.join(spare, 'workspace.img'), path.join(spare, 'workspace'), 'a volume made ahead of demand');
        await mountTmpAt(path.join(spare, 'tmp'), memoryMib);
      }
      return spare;
    })().catch(async (err) => {
      opts.logger?.warn({ err }, 'a volume formatted ahead of demand could not be made; the next sandbox formats its own');
      await removeSpare(spare).catch(() => {});
      return null;
    });
    spares.set(bytes, made);
  }

  /** Removes a spare volume's directory (unmounting what is mounted there first), or an older spare's file. */
  async function removeSpare(spare: string) {
    for (const target of [path.join(spare, 'workspace'), path.join(spare, 'tmp')]) {
      if (!(await mounted(target))) continue;
      const r = await run(tools!.umount, [target], { allowFail: true });
      if (r.code !== 0) await run(tools!.umount, ['-l', target]);
    }
    await fs.rm(spare, { recursive: true, force: true });
  }

  const volumeBytes = (diskGib: number) => Math.max(MIN_VOLUME_MIB, Math.round(diskGib * 1024)) * 1024 * 1024;

  /**
   * Takes the spare volume of this disk size for a sandbox about to be made: its directory (the
   * volume, mounted or not) becomes the sandbox's directory, one rename (a mount inside moves with
   * it). False when there is none, or the sandbox's directory is already there.
   */
  async function takeSpare(diskGib: number, dir: string): Promise<boolean> {
    if (!(Number.isFinite(diskGib) && diskGib > 0)) return false;
    const bytes = volumeBytes(diskGib);
    const spare = spares.get(bytes);
    spares.delete(bytes);
    const spareDir = spare ? await spare : null;
    if (!spareDir) return false;
    if (await fs.rename(spareDir, dir).then(() => true, () => false)) return true;
    await removeSpare(spareDir).catch((err) => opts.logger?.warn({ err }, 'a volume made ahead of demand could not be removed'));
    return false;
  }

  /** The sandbox's /workspace volume where no spare was taken: a sparse file of the disk size, formatted now, owned by the sandbox user. */
  async function makeVolume(id: string, diskGib: number) {
    await ready();
    if (!(Number.isFinite(diskGib) && diskGib > 0)) throw new SandboxError('resources', `sandbox ${id}: the disk size must be a positive number of GiB, not ${diskGib}`);
    await formatVolume(volumeOf(id), volumeBytes(diskGib));
  }

  const mountVolume = (id: string) => mountVolumeAt(volumeOf(id), workspaceOf(id), `sandbox ${id}`);

  async function mountVolumeAt(file: string, target: string, whose: string) {
    const t = await ready();
    if (await mounted(target)) return;
    await fs.mkdir(target, { recursive: true });
    try {
      await run(t.mount, ['-o', 'loop,nosuid,nodev,noatime,noinit_itable', '-t', 'ext4', file, target]);
    } catch (err) {
      const text = (err as Error).message;
      if (/loop device|losetup/i.test(text)) throw new SandboxError('resources', `${whose}: no free loop device to mount its /workspace (${text})`, { cause: err });
      throw new SandboxError('failed', `${whose}: its /workspace volume could not be mounted: ${text}`, { cause: err });
    }
    // mkfs leaves lost+found, owned by root and unreadable inside: not the agent's business.
    await fs.rm(path.join(target, 'lost+found'), { recursive: true, force: true });
  }

  async function unmountVolume(id: string) {
    const t = await ready();
    const target = workspaceOf(id);
    if (!(await mounted(target))) return;
    // A process still holding it (a stray exec) must not keep the disk: detach it lazily then.
    const r = await run(t.umount, [target], { allowFail: true });
    if (r.code !== 0) await run(t.umount, ['-l', target]);
  }

  const tmpOf = (id: string) => path.join(dirOf(id), 'tmp');

  /**
   * The sandbox's /tmp: a tmpfs of a quarter of its memory, mounted on the host and bound into
   * every exec (so they share it). Its pages count against the sandbox's memory, but it can
   * never take all of it: a full /tmp is ENOSPC inside, not an OOM kill of the runtime.
   */
  const mountTmp = (id: string, memoryMib: number) => mountTmpAt(tmpOf(id), memoryMib);

  /** Mounts a /tmp at `target` where none is, or sizes the one there (a spare's, made for another memory size). */
  async function mountTmpAt(target: string, memoryMib: number) {
    const t = await ready();
    const size = tmpSizeMib(memoryMib);
    const now = await superOptions(target);
    if (now !== null) {
      if (now.split(',').includes(`size=${size * 1024}k`)) return;
      await run(t.mount, ['-o', `remount,size=${size}m`, target]);
      return;
    }
    await fs.mkdir(target, { recursive: true });
    await run(t.mount, ['-t', 'tmpfs', '-o', `size=${size}m,mode=1777,nosuid,nodev`, 'tmpfs', target]);
  }

  async function unmountTmp(id: string) {
    const t = await ready();
    const target = tmpOf(id);
    if (!(await mounted(target))) return;
    const r = await run(t.umount, [target], { allowFail: true });
    if (r.code !== 0) await run(t.umount, ['-l', target]);
  }

  /**
   * Everything a sandbox holds on the host besides its directory, made (again) where missing;
   * `creating` formats the volume first (a create); `pooled` is a link taken from the pool for it
   * (renamed and addressed, where otherwise the link and its firewall are made). Then starts the
   * init, which needs only the cgroup (it is in no namespace or mount of the sandbox's), meanwhile;
   * resolves with its pid once everything is in place.
   */
  async function ensureHostSide(id: string, rec: SandboxRecord, creating = false, pooled: PooledLink | null = null, volumeTaken = false): Promise<number> {
    const t = await ready();
    const { spec, disk } = rec;
    const netns = rec.netns ?? names(id).netns;
    // Independent of one another, so made at once (most of the time is waiting on processes and
    // the kernel); every step has ended, done or failed, before this returns, so a teardown
    // after a failure never races a step still under way.
    const steps = await Promise.allSettled([
      timed('volume', async () => {
        if (disk === 'volume') {
          if (creating && !volumeTaken) await makeVolume(id, spec.diskGib);
          await mountVolume(id);
        }
        if (creating) await fs.chown(workspaceOf(id), hostUid, hostUid);
      }),
      timed('tmp', () => mountTmp(id, spec.memoryMib)),
      timed('network', async () => {
        if (pooled) return claimPooledLink(t.ip, pooled, spec.network);
        // A create makes both at once (one cut short is never woken: its host removes it). After,
        // the firewall is always made before the link, so a link in place has its firewall (a
        // pooled link's table is made with it and goes only with the sandbox): a wake whose link
        // survived starts no nft.
        if (creating) {
          const both = await Promise.allSettled([ensureVethNamespace(t, netns, spec.network), ensureFirewall(t.nft, spec.network, opts.gatewayPort)]);
          for (const r of both) if (r.status === 'rejected') throw r.reason;
          return;
        }
        if (vethInPlace(netns, spec.network.hostInterface)) return;
        await ensureFirewall(t.nft, spec.network, opts.gatewayPort);
        await ensureVethNamespace(t, netns, spec.network);
      }),
      (async () => {
        await timed('cgroup', async () => (await cgroupOf(id)).ensure({ vcpus: spec.vcpus, memoryMib: spec.memoryMib }));
        return timed('init', () => startInit(id));
      })(),
    ]);
    const failed = steps.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed) throw failed.reason;
    return (steps[3] as PromiseFulfilledResult<number>).value;
  }

  /** Frees every host resource of a sandbox; each step runs even when an earlier one failed. */
  async function teardown(id: string, network: SandboxRecord['spec']['network'] | null, keepDir: boolean) {
    const t = await ready();
    const n = names(id);
    const failures: string[] = [];
    const step = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        failures.push(`${what}: ${(err as Error).message}`);
      }
    };
    await step('processes', async () => (await cgroupOf(id)).remove());
    await step('disk', () => unmountVolume(id));
    await step('tmp', () => unmountTmp(id));
    await step('network', () => removeVethNamespace(t.ip, n.netns, network?.hostInterface ?? `chv${resourceTag(id)}`));
    if (network) await step('firewall', () => removeFirewall(t.nft, network.hostInterface));
    // A link taken from the pool keeps its own namespace name and firewall table.
    const pooledFile = path.join(dirOf(id), POOLED_FILE);
    const pooled = await fs.readFile(pooledFile, 'utf8').then((x) => JSON.parse(x) as PooledLink, () => null);
    if (pooled) await step('pooled network', () => removePooledLink(t, pooled, network?.hostInterface));
    if (!keepDir) await step('files', () => fs.rm(dirOf(id), { recursive: true, force: true }));
    if (failures.length) throw new SandboxError('failed', `sandbox ${id} was not fully removed: ${failures.join('; ')}`);
  }

  async function requireRunning(id: string): Promise<SandboxRecord> {
    const rec = await readRecord(id);
    const status = await statusOf(id, rec);
    if (status.state !== 'running') throw new SandboxError('wrong_state', `sandbox ${id} is ${status.state}, not running; wake it first`);
    return rec;
  }

  async function exec(id: string, req: ExecRequest): Promise<ExecHandle> {
    if (!Array.isArray(req.argv) || req.argv.length === 0 || req.argv.some((a) => typeof a !== 'string' || a.includes('\0'))) throw new SandboxError('failed', 'exec needs a command: argv is empty or holds a non-string');
    // env(1) would read a first word with "=" as a variable, not as the command.
    if (req.argv[0].includes('=')) throw new SandboxError('failed', `exec: "${req.argv[0].slice(0, 100)}" is not a command name`);
    const rec = await requireRunning(id);
    // A sandbox made before /tmp was a mount of its own (adopted after an upgrade) gets it now.
    if (!(await mounted(tmpOf(id)))) await serial(id, () => mountTmp(id, rec.spec.memoryMib));
    const env: Record<string, string> = { PATH: DEFAULT_PATH, HOME: '/workspace', USER: 'agent', LANG: 'C.UTF-8', ...rec.spec.env, ...req.env };
    const assignments = Object.entries(env).filter(([k]) => /^[A-Za-z_][A-Za-z0-9_]*$/.test(k)).map(([k, v]) => `${k}=${v}`);
    const cwd = req.cwd ?? '/workspace';
    // Each exec is its own bubblewrap with its own PID namespace: when the command ends, the
    // kernel ends everything it started (a daemon, a setsid), whoever holds its pipes.
    const child = await spawnSandboxed(id, rec, ['/usr/bin/env', '-i', '-C', cwd, ...assignments, ...req.argv]);
    const killTree = () => {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already ended
      }
    };
    if (req.signal?.aborted) killTree();
    req.signal?.addEventListener('abort', killTree, { once: true });
    const stdout = child.stdout!;
    const stderr = child.stderr!;
    const ended = (s: Readable) => s.readableEnded || s.destroyed;
    /** Resolves once stdout and stderr have ended, or have been idle for the grace (or the cap is reached). */
    const settled = () =>
      new Promise<void>((done) => {
        if (ended(stdout) && ended(stderr)) return done();
        const started = Date.now();
        const received = () => (stdout as Socket).bytesRead + (stderr as Socket).bytesRead + stdout.readableLength + stderr.readableLength;
        let last = received();
        let idleSince = started;
        const timer = setInterval(() => {
          const now = received();
          if (now !== last) [last, idleSince] = [now, Date.now()];
          if ((ended(stdout) && ended(stderr)) || Date.now() - idleSince >= OUTPUT_GRACE_MS || Date.now() - started >= OUTPUT_CAP_MS) {
            clearInterval(timer);
            done();
          }
        }, 50);
      });
    // Resolves once the command has ended and its output is read to the end: output still
    // coming is waited for, but a copy of its pipes held by some other process cannot keep the
    // exec open (idle for the grace, or at most the cap, and the pipes are closed).
    const exit = new Promise<number>((resolve, reject) => {
      child.on('error', (err) => reject(new SandboxError('failed', `exec in sandbox ${id} failed: ${err.message}`)));
      child.on('exit', (code, signal) => {
        req.signal?.removeEventListener('abort', killTree);
        const result = code ?? 128 + (signal ? (signalNumbers[signal] ?? 1) : 1);
        void settled().then(() => {
          stdout.destroy();
          stderr.destroy();
          resolve(result);
        });
      });
    });
    // A command that stops reading its stdin must not crash the host with EPIPE.
    child.stdin!.on('error', () => {});
    return { stdin: child.stdin!, stdout, stderr, exit };
  }

  /** Runs a command to its end with `input` on stdin; resolves with its exit code and stderr. */
  async function execCollect(id: string, argv: string[], input: Buffer | string): Promise<{ code: number; stderr: string }> {
    const h = await exec(id, { argv });
    let stderr = '';
    h.stdout.resume();
    h.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    h.stdin.end(input);
    return { code: await h.exit, stderr };
  }

  return {
    name: 'local',
    check,

    create: (spec) =>
      serial(spec.id, async () => {
        await ready();
        const dir = dirOf(spec.id);
        if (existsSync(path.join(dir, 'sandbox.json'))) throw new SandboxError('wrong_state', `sandbox ${spec.id} already exists on this host`);
        const { caPem, ...kept } = spec;
        const t = await ready();
        const rec: SandboxRecord = { spec: kept, state: 'starting', pid: null, disk: t.mkfs ? 'volume' : 'directory' };
        if (!t.mkfs && !warnedNoLoop) {
          warnedNoLoop = true;
          opts.logger?.warn(`this host has no loop devices (${opts.loopControl ?? '/dev/loop-control'} is missing): local sandboxes get a plain /workspace directory and their disk size is not enforced`);
        }
        // Taken from here until the record names it (or the create failed).
        const etcName = etcNameOf(caPem);
        etcTaken.set(etcName, (etcTaken.get(etcName) ?? 0) + 1);
        let made = false;
        try {
          let volumeTaken = false;
          const pooled = await timed('directory and record', async () => {
            // A spare volume's directory becomes the sandbox's (before anything else is put there).
            if (rec.disk === 'volume') volumeTaken = await takeSpare(spec.diskGib, dir);
            await fs.mkdir(path.join(dir, 'workspace'), { recursive: true });
            await fs.chmod(dir, 0o711);
            const taken = await takePooled(dir);
            if (taken) rec.netns = taken.netns;
            await writeRecord(spec.id, rec);
            return taken;
          });
          // Its /etc is read only by its execs' bubblewraps: found (or written) meanwhile.
          const etc = timed('etc', () => sharedEtc(etcName, caPem));
          const host = timed('host side and init', () => ensureHostSide(spec.id, rec, true, pooled, volumeTaken));
          const done = await Promise.allSettled([etc, host]);
          for (const r of done) if (r.status === 'rejected') throw r.reason;
          rec.etc = await etc;
          rec.pid = await host;
          rec.state = 'running';
          await timed('record', () => writeRecord(spec.id, rec));
          made = true;
        } catch (err) {
          // Nothing stays running or mounted after a failed create.
          await teardown(spec.id, spec.network, false).catch((e) => opts.logger?.error({ err: e, sandbox: spec.id }, 'cleanup after a failed create was incomplete'));
          if (err instanceof SandboxError) throw err;
          throw new SandboxError('failed', `sandbox ${spec.id} could not be made: ${(err as Error).message}`, { cause: err });
        } finally {
          const left = (etcTaken.get(etcName) ?? 1) - 1;
          if (left > 0) etcTaken.set(etcName, left);
          else etcTaken.delete(etcName);
          if (!made) await removeUnusedEtc(etcName).catch((e) => opts.logger?.warn({ err: e }, 'a shared /etc no sandbox uses could not be removed'));
          // What this create took is made again once it has answered (not meanwhile: it would compete).
          refillsStarted = new Promise<void>((started) =>
            setImmediate(() => {
              refill();
              if (rec.disk === 'volume' && Number.isFinite(spec.diskGib) && spec.diskGib > 0 && !spares.has(volumeBytes(spec.diskGib))) makeSpare(volumeBytes(spec.diskGib), spec.memoryMib);
              started();
            }),
          );
        }
        return timed('status', () => statusOf(spec.id, rec));
      }),

    exec,

    async copyIn(id, files) {
      for (const f of files) {
        const rel = f.path;
        if (typeof rel !== 'string' || rel === '' || rel.length > 4096 || rel.startsWith('/') || rel.includes('\0') || rel.split('/').some((p) => p === '..' || p === '')) {
          throw new SandboxError('failed', `cannot copy "${String(rel).slice(0, 200)}": a path must be relative to /workspace, without empty or .. parts`);
        }
        const mode = (f.mode ?? 0o644) & 0o7777;
        // Written from inside, as the sandbox user: a link the sandbox made cannot point the write outside it.
        const r = await execCollect(id, ['/bin/sh', '-c', 'umask 022; d=$(dirname -- "$1"); mkdir -p -- "$d" && rm -f -- "$1" && cat > "$1" && chmod "$2" -- "$1"', 'sh', `/workspace/${rel}`, mode.toString(8)], f.content);
        if (r.code !== 0) throw new SandboxError('failed', `cannot copy ${rel} into sandbox ${id}: ${r.stderr.trim() || `exit ${r.code}`}`);
      }
    },

    sleep: (id, depth) =>
      serial(id, async () => {
        const rec = await readRecord(id);
        const now = (await statusOf(id, rec)).state;
        const cg = await cgroupOf(id);
        if (depth === 'sleep') {
          if (now !== 'running') throw new SandboxError('wrong_state', `sandbox ${id} is ${now}; only a running sandbox sleeps`);
          await cg.freeze();
          rec.state = 'sleeping';
        } else {
          if (now !== 'running' && now !== 'sleeping' && now !== 'deep_sleep') throw new SandboxError('wrong_state', `sandbox ${id} is ${now}; it cannot go into deep sleep`);
          await cg.killAll();
          // Nothing of memory stays in deep sleep: /tmp goes with the processes, and the page cache
          // charged to the sandbox (the files its processes read and wrote) is given back.
          await unmountTmp(id);
          await cg.reclaim();
          rec.state = 'deep_sleep';
          rec.pid = null;
        }
        await writeRecord(id, rec);
        return statusOf(id, rec);
      }),

    wake: (id) =>
      serial(id, async () => {
        const rec = await readRecord(id);
        const now = (await statusOf(id, rec)).state;
        if (now === 'sleeping') {
          await (await cgroupOf(id)).thaw();
        } else if (now === 'deep_sleep') {
          rec.pid = await timed('host side and init', () => ensureHostSide(id, rec));
        } else {
          throw new SandboxError('wrong_state', `sandbox ${id} is ${now}; only a sleeping sandbox wakes`);
        }
        rec.state = 'running';
        await writeRecord(id, rec);
        return { ...(await statusOf(id, rec)), coldBooted: now === 'deep_sleep' };
      }),

    destroy: (id) =>
      serial(id, async () => {
        const rec = await readRecord(id).catch((err) => {
          if (err instanceof SandboxError && err.code === 'not_found') return null;
          throw err;
        });
        await teardown(id, rec?.spec.network ?? null, false);
        // Its /etc goes with the last sandbox that uses it.
        if (rec?.etc) await removeUnusedEtc(rec.etc).catch((err) => opts.logger?.warn({ err, sandbox: id }, 'a shared /etc no sandbox uses could not be removed'));
      }),

    async status(id) {
      return statusOf(id, await readRecord(id));
    },

    async list() {
      const entries = await fs.readdir(root, { withFileTypes: true }).catch(() => []);
      // A directory without its record is a create cut short: listed, so that it is cleaned up.
      return entries.filter((e) => e.isDirectory() && ID.test(e.name)).map((e) => e.name);
    },

    /** How many of the sandbox's processes the kernel has killed for want of memory (since its cgroup was made). */
    async oomKills(id) {
      return (await cgroupOf(id)).oomKills();
    },

    /** Removes the links made ahead of demand (waiting for those being made); sandboxes keep theirs. */
    async close() {
      closed = true;
      await refillsStarted;
      while (making.size) await Promise.all(making);
      // Spare volumes go too (mounted ones hold a loop device); the next start makes them again.
      for (const [bytes, spare] of [...spares]) {
        spares.delete(bytes);
        const made = await spare;
        if (made) await removeSpare(made).catch((err) => opts.logger?.warn({ err }, 'a volume made ahead of demand could not be removed'));
      }
      for (const item of pool.splice(0)) {
        await removePooledLink(tools!, item).catch((err) => opts.logger?.warn({ err, link: item.link }, 'a network link made ahead of demand could not be removed'));
        await fs.rm(path.join(poolDir, item.link), { force: true });
      }
    },

    /** The links ready in the pool now, once what is being made ahead of demand (links, volumes) is done (for tests and the bench). */
    async pooled() {
      await refillsStarted;
      while (making.size) await Promise.all(making);
      await Promise.all(spares.values());
      return [...pool];
    },

    /** Memory the sandbox's processes use now (for metrics and the bench). */
    async memoryBytes(id) {
      return (await cgroupOf(id)).memoryBytes();
    },
  };
}

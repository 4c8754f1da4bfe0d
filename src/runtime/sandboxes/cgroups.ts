/**
 * A sandbox's cgroup: CPU, memory and process-count limits, freezing for sleep, killing every process in it.
 * cgroup v2 (one tree with cgroup.freeze and cgroup.kill) where the host has it, else v1
 * (a directory per controller, freezer.state). Everything lives under a `crewhouse` parent.
 */
import fs from 'node:fs/promises';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pollUntil } from './system.ts';

const ROOT = '/sys/fs/cgroup';
const PARENT = 'crewhouse';
const V1_CONTROLLERS = ['cpu', 'memory', 'pids', 'freezer'] as const;
/** Processes one sandbox may have at once: a fork bomb stops there, not at the host's limit. */
export const MAX_PROCESSES = 4096;

export type CgroupVersion = 1 | 2;

export function cgroupVersion(root = ROOT): CgroupVersion | null {
  if (existsSync(path.join(root, 'cgroup.controllers'))) return 2;
  if (existsSync(path.join(root, 'freezer')) && existsSync(path.join(root, 'memory'))) return 1;
  return null;
}

const write = (file: string, value: string) => fs.writeFile(file, value).catch((err: NodeJS.ErrnoException) => {
  throw new Error(`cannot write ${value.trim()} to ${file}: ${err.code ?? err.message}`);
});
/** Waits for every one to end (none left running behind a failure), then throws the first failure. */
async function settleAll(steps: Promise<unknown>[]): Promise<void> {
  const failed = (await Promise.allSettled(steps)).find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) throw failed.reason;
}
const readOr = (file: string, fallback = '') => fs.readFile(file, 'utf8').catch(() => fallback);

/** Polls (25 ms apart) for a freeze to take: 30 s, for a machine whose disk is very busy. */
const FREEZE_POLLS = 1_200;

export class Cgroup {
  readonly version: CgroupVersion;
  readonly name: string;
  private readonly root: string;
  constructor(version: CgroupVersion, name: string, root = ROOT) {
    this.version = version;
    this.name = name;
    this.root = root;
  }

  /** Directories of this cgroup: one on v2, one per controller on v1. */
  private dirs(): string[] {
    return this.version === 2 ? [path.join(this.root, PARENT, this.name)] : V1_CONTROLLERS.map((c) => path.join(this.root, c, PARENT, this.name));
  }
  private dir(controller: (typeof V1_CONTROLLERS)[number]): string {
    return this.version === 2 ? path.join(this.root, PARENT, this.name) : path.join(this.root, controller, PARENT, this.name);
  }

  /** The files a process writes its pid to, to enter this cgroup (every controller on v1). */
  procsFiles(): string[] {
    return this.dirs().map((d) => path.join(d, 'cgroup.procs'));
  }

  /** Makes the cgroup (again) and sets its limits. */
  async ensure(limits: { vcpus: number; memoryMib: number }): Promise<void> {
    const period = 100_000;
    const memory = String(limits.memoryMib * 1024 * 1024);
    // Each write is a few round trips to the file system's threads: the independent ones go at once.
    if (this.version === 2) {
      const parent = path.join(this.root, PARENT);
      const dir = this.dirs()[0];
      if (!existsSync(dir)) {
        await fs.mkdir(parent, { recursive: true });
        // Controllers must be handed down each level before a child can use them. A write refused
        // here (already delegated, or not ours to change) is not the failure: the limit writes below
        // fail, with the file named, when a controller really is missing.
        await fs.writeFile(path.join(this.root, 'cgroup.subtree_control'), '+cpu +memory +pids').catch(() => {});
        await fs.writeFile(path.join(parent, 'cgroup.subtree_control'), '+cpu +memory +pids').catch(() => {});
        await fs.mkdir(dir, { recursive: true });
      }
      await settleAll([write(path.join(dir, 'memory.max'), memory), write(path.join(dir, 'cpu.max'), `${limits.vcpus * period} ${period}`), write(path.join(dir, 'pids.max'), String(MAX_PROCESSES))]);
      return;
    }
    await settleAll(this.dirs().map((d) => fs.mkdir(d, { recursive: true })));
    await write(path.join(this.dir('cpu'), 'cpu.cfs_period_us'), String(period));
    await settleAll([write(path.join(this.dir('memory'), 'memory.limit_in_bytes'), memory), write(path.join(this.dir('cpu'), 'cpu.cfs_quota_us'), String(limits.vcpus * period)), write(path.join(this.dir('pids'), 'pids.max'), String(MAX_PROCESSES))]);
  }

  exists(): boolean {
    return this.dirs().every((d) => existsSync(d));
  }

  async pids(): Promise<number[]> {
    const text = await readOr(path.join(this.dir('freezer'), 'cgroup.procs'));
    return text.split('\n').filter(Boolean).map(Number);
  }

  async frozen(): Promise<boolean> {
    if (this.version === 2) return /^frozen 1$/m.test(await readOr(path.join(this.dirs()[0], 'cgroup.events')));
    return (await readOr(path.join(this.dir('freezer'), 'freezer.state'))).trim() === 'FROZEN';
  }

  /**
   * Stops every process where it is; memory stays. Resolves once the kernel says frozen. The
   * request is written again every second while the kernel says freezing: a task caught in a
   * fork, or in an uninterruptible wait (a write under heavy disk load) when the freeze began,
   * is caught by the next one (cgroup v1 leaves such a cgroup FREEZING until asked again).
   */
  async freeze(): Promise<void> {
    const ask = () => (this.version === 2 ? write(path.join(this.dirs()[0], 'cgroup.freeze'), '1') : write(path.join(this.dir('freezer'), 'freezer.state'), 'FROZEN'));
    await ask();
    let polls = 0;
    const done = await pollUntil(async () => {
      if (await this.frozen()) return true;
      if (++polls % 40 === 0) await ask();
      return false;
    }, FREEZE_POLLS, 25);
    if (!done) throw new Error(`cgroup ${this.name} did not freeze within ${(FREEZE_POLLS * 25) / 1000} s`);
  }

  async thaw(): Promise<void> {
    if (this.version === 2) await write(path.join(this.dirs()[0], 'cgroup.freeze'), '0');
    else await write(path.join(this.dir('freezer'), 'freezer.state'), 'THAWED');
    if (!(await pollUntil(async () => !(await this.frozen()), 400, 25))) throw new Error(`cgroup ${this.name} did not thaw`);
  }

  /** Kills every process in the cgroup and waits until none is left. */
  async killAll(): Promise<void> {
    if (!this.exists()) return;
    const kill = path.join(this.dirs()[0], 'cgroup.kill');
    if (this.version === 2 && existsSync(kill)) {
      await write(kill, '1');
    } else {
      // Frozen, nothing can fork away between reading the list and the kill; the kills land on thaw.
      // A freeze that fails only loses that guarantee: the wait below reports processes that remain.
      await this.freeze().catch(() => {});
      for (const pid of await this.pids()) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // already gone
        }
      }
    }
    // As above: a thaw that fails shows up as processes that do not end.
    await this.thaw().catch(() => {});
    if (!(await pollUntil(async () => (await this.pids()).length === 0, 400, 25))) throw new Error(`processes of cgroup ${this.name} did not end`);
  }

  /**
   * Gives back the memory still charged to an empty cgroup: the page cache of the files its
   * processes read and wrote (v1 memory.force_empty, v2 memory.reclaim). Dirty pages are written
   * first; nothing is lost, a later reader reads the disk again. Best effort: a kernel without
   * the file, or pages it cannot drop now, leave the charge as it was.
   */
  async reclaim(): Promise<void> {
    if (!this.exists()) return;
    if (this.version === 2) {
      const used = await this.memoryBytes();
      if (used > 0) await fs.writeFile(path.join(this.dirs()[0], 'memory.reclaim'), String(used)).catch(() => {});
    } else {
      await fs.writeFile(path.join(this.dir('memory'), 'memory.force_empty'), '0').catch(() => {});
    }
  }

  /** Kills what is left and removes the cgroup's directories. */
  async remove(): Promise<void> {
    await this.killAll();
    for (const d of this.dirs()) await fs.rmdir(d).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  /** Bytes of memory the cgroup's processes use now. */
  async memoryBytes(): Promise<number> {
    const file = this.version === 2 ? path.join(this.dirs()[0], 'memory.current') : path.join(this.dir('memory'), 'memory.usage_in_bytes');
    return Number((await readOr(file, '0')).trim()) || 0;
  }

  /**
   * How many processes the kernel has killed in this cgroup for want of memory since it was made
   * (v2: memory.events; v1: memory.oom_control); 0 when the cgroup or the counter is missing.
   */
  async oomKills(): Promise<number> {
    const file = this.version === 2 ? path.join(this.dirs()[0], 'memory.events') : path.join(this.dir('memory'), 'memory.oom_control');
    return Number(/^oom_kill (\d+)$/m.exec(await readOr(file))?.[1] ?? 0);
  }

  /** Whether a process is in this cgroup (guards against a recycled pid). */
  async holds(pid: number): Promise<boolean> {
    const text = await readOr(`/proc/${pid}/cgroup`);
    return text.includes(`/${PARENT}/${this.name}\n`) || text.endsWith(`/${PARENT}/${this.name}`);
  }
}

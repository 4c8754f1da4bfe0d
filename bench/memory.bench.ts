// Memory of `crewhouse serve` on the embedded database: the service runs as a child process on
// a fresh data directory, then again on the same directory (a restart), and its resident set
// is read from /proc/<pid>/status (VmRSS, and VmHWM for the peak) while it starts and once it
// has been idle for a while, started as bin/crewhouse.js starts it. The peak counts the processes
// the service starts as well (a first start creates the database's files in a child process):
// the service's resident set plus the peaks of its children, sampled while it starts. The baseline, measured in the same run, is PGlite alone with its
// default settings after `select 1` on a fresh directory. Goal: at most 250 MB idle.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BenchReport } from './lib.ts';

const IDLE_GOAL_MB = 250;
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 10);
const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
// The flags bin/crewhouse.js starts the service with.
const NODE_FLAGS = JSON.parse(fs.readFileSync(path.join(root, 'bin', 'node-flags.json'), 'utf8')) as string[];

interface Sample {
  idleMb: number;
  /** The service's own peak (VmHWM). */
  peakMb: number;
  /** The service and the processes it started, together, at their highest while it started. */
  treePeakMb: number;
  startMs: number;
}

const mb = (kb: number) => Math.round(kb / 1024);

function status(pid: number): { rss: number; hwm: number } | null {
  try {
    const text = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
    const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0);
    return { rss: field('VmRSS'), hwm: field('VmHWM') };
  } catch {
    return null;
  }
}

/** The processes whose parent is pid, and theirs. */
function descendants(pid: number): number[] {
  const parents = new Map<number, number[]>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The parent is the second field after the command name, which may itself hold spaces.
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      parents.set(ppid, [...(parents.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  for (let queue = [pid]; queue.length; ) {
    const children = parents.get(queue.shift()!) ?? [];
    out.push(...children);
    queue.push(...children);
  }
  return out;
}

/**
 * Samples, until stopped, the service's resident set plus the peak so far (VmHWM) of each process
 * it has running, and keeps the highest sum. A child's last moments between two samples are missed.
 */
function watchTree(pid: number): () => number {
  let highest = 0;
  const sample = () => {
    const own = status(pid);
    if (!own) return;
    const children = descendants(pid).map((child) => status(child)?.hwm ?? 0);
    highest = Math.max(highest, own.rss + children.reduce((a, b) => a + b, 0));
  };
  const timer = setInterval(sample, 50);
  return () => {
    clearInterval(timer);
    sample();
    return highest;
  };
}

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as net.AddressInfo).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function until(what: string, seconds: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + seconds * 1000;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

async function stop(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

/** Starts `crewhouse serve` on dataDir, waits until it answers, lets it idle, and reads its memory. */
async function serve(dataDir: string): Promise<Sample> {
  const [port, proxy, chat, gateway] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const started = performance.now();
  const child = spawn(process.execPath, [...NODE_FLAGS, path.join(root, 'src', 'main.ts'), 'serve'], {
    env: {
      PATH: process.env.PATH,
      SERVICE_DATA_DIR: dataDir,
      SERVICE_HOST: '127.0.0.1',
      SERVICE_PORT: String(port),
      SERVICE_MODEL_PROXY_PORT: String(proxy),
      SERVICE_CHAT_PORT: String(chat),
      SERVICE_GATEWAY_PORT: String(gateway),
      SERVICE_WEB_DIR: path.join(dataDir, 'no-web'),
      SERVICE_ADMIN_TOKEN: 'bench-admin-token-0123456789',
      SERVICE_LOG_LEVEL: 'warn',
    },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const treePeak = watchTree(child.pid!);
  try {
    await until('the service to answer', 300, async () => {
      if (child.exitCode !== null) throw new Error(`crewhouse serve exited with ${child.exitCode}`);
      try {
        return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
      } catch {
        return false;
      }
    });
    const startMs = performance.now() - started;
    const tree = treePeak();
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const s = status(child.pid!);
    if (!s) throw new Error('the service is gone');
    return { idleMb: mb(s.rss), peakMb: mb(s.hwm), treePeakMb: mb(Math.max(tree, s.hwm)), startMs };
  } finally {
    treePeak();
    await stop(child);
  }
}

/** PGlite alone, default settings, `select 1` on a fresh directory, in a process of its own. */
async function pgliteAlone(dataDir: string): Promise<Sample> {
  const script = `
    import { PGlite } from '@electric-sql/pglite';
    const pg = await PGlite.create({ dataDir: ${JSON.stringify(dataDir)} });
    await pg.query('select 1');
    process.stdout.write('ready');
    setInterval(() => {}, 1000);
  `;
  const started = performance.now();
  const child = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  try {
    let out = '';
    child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
    await until('PGlite to start', 300, async () => {
      if (child.exitCode !== null) throw new Error(`PGlite exited with ${child.exitCode}`);
      return out.includes('ready');
    });
    const startMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1000));
    const s = status(child.pid!)!;
    return { idleMb: mb(s.rss), peakMb: mb(s.hwm), treePeakMb: mb(s.hwm), startMs };
  } finally {
    await stop(child);
  }
}

export default async function memoryBench(): Promise<BenchReport[]> {
  if (!fs.existsSync('/proc/self/status')) {
    return [{ name: 'memory of crewhouse serve (embedded database)', lines: ['skipped: needs /proc (Linux)'], goal: `at most ${IDLE_GOAL_MB} MB idle`, met: false }];
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-memory-'));
  try {
    const baseline = await pgliteAlone(path.join(dir, 'alone'));
    const fresh = await serve(path.join(dir, 'data'));
    const restart = await serve(path.join(dir, 'data'));
    const line = (label: string, s: Sample) =>
      `${label} idle ${s.idleMb} MB, peak ${s.peakMb} MB` +
      (s.treePeakMb > s.peakMb ? ` (${s.treePeakMb} MB with the processes it started)` : '') +
      `, ready in ${(s.startMs / 1000).toFixed(1)} s`;
    return [
      {
        name: 'memory of crewhouse serve on the embedded database (RSS after idling, peak while starting)',
        lines: [
          line('fresh data dir: ', fresh),
          line('restart:        ', restart),
          line('PGlite alone:   ', baseline),
          `ratio idle (fresh) to PGlite alone: ${(fresh.idleMb / baseline.idleMb).toFixed(2)}`,
        ],
        goal: `at most ${IDLE_GOAL_MB} MB idle, fresh and restarted`,
        met: fresh.idleMb <= IDLE_GOAL_MB && restart.idleMb <= IDLE_GOAL_MB,
      },
    ];
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

import { fork, spawn } from 'node:child_process';
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface BenchReport {
  name: string;
  lines: string[];
  goal: string;
  met: boolean;
}

export interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  /** `timed` only: the median time to the first byte of the body (a streamed answer's first event). */
  firstByteP50?: number;
  errors: number;
  non2xx: number;
}

/**
 * Drives an HTTP endpoint on loopback for a bounded time and reports throughput and latency
 * (ms). The load generator runs in a child process, as wrk would: sharing the measured
 * server's event loop would charge the generator's own work to the server.
 */
export interface LoadOptions {
  url: string;
  method?: string;
  headers?: Record<string, string>;
  body?: string;
  /** The body read from this file instead: the options travel as an argument, and one argument holds at most 128 KiB on Linux. */
  bodyFile?: string;
  seconds?: number;
  connections?: number;
  /** autocannon (the default) for throughput; `timed` to time each request to the microsecond. */
  engine?: 'autocannon' | 'timed';
  /** `timed` only: spread the connections' starts over this many ms (see load-worker.ts). */
  spreadMs?: number;
}

export async function load(opts: LoadOptions): Promise<LoadResult> {
  const worker = fileURLToPath(new URL('./load-worker.ts', import.meta.url));
  const child = spawn(process.execPath, [worker, JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`the load generator exited with ${code}`);
  return JSON.parse(out) as LoadResult;
}

export const fmt = (r: LoadResult) =>
  `${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, p99 ${r.p99.toFixed(2)} ms${r.errors || r.non2xx ? `, ${r.errors} errors, ${r.non2xx} non-2xx` : ''}`;

/** A process of its own from `file` (relative to bench/) that sends its URL first; `set` sends it options over IPC. */
export async function serviceProcess<T>(file: string, arg: unknown): Promise<{ url: string; set(options: Partial<T>): Promise<void>; close(): Promise<void> }> {
  const child = fork(fileURLToPath(new URL(file, import.meta.url)), [JSON.stringify(arg)], { execPath: process.execPath, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      child.once('message', resolve);
      child.once('exit', (code) => reject(new Error(`${file} exited with ${code}`)));
    });
  const url = String(await next());
  return {
    url,
    async set(options) {
      child.send(options);
      await next();
    },
    async close() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.disconnect();
      await exited;
    },
  };
}

/**
 * The console on an in-memory embedded database with its first admin's token, built (not
 * listening): the console and watchers benches' start. Imported when asked, so the other benches
 * do not load the console.
 */
export async function consoleInMemory() {
  const [{ systemActor }, { newSecret }, { loadConfig }, { buildConsoleApp, createConsoleServices }, { openDatabase }, { migrateToLatest }, { Registry }, { createLogger }] = await Promise.all([
    import('../src/audit/audit.ts'),
    import('../src/auth/credentials.ts'),
    import('../src/config.ts'),
    import('../src/console/app.ts'),
    import('../src/db/database.ts'),
    import('../src/db/migrate.ts'),
    import('../src/metrics.ts'),
    import('../src/logger.ts'),
  ]);
  const config = loadConfig({ SERVICE_DATA_DIR: ':memory:', SERVICE_LOG_LEVEL: 'warn', SERVICE_WEB_DIR: '/nonexistent-web' });
  const { db, close } = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(db);
  const logger = createLogger({ level: 'warn' });
  const services = createConsoleServices({ config, db, logger });
  const token = newSecret('chk_');
  await services.users.ensureFirstAdmin(systemActor('bench'), token);
  const app = await buildConsoleApp({ config, db, logger, metrics: new Registry(), services });
  return { db, close, services, token, app };
}

/**
 * CPU time (µs, user + system) a process's threads have used, from /proc, by what they do:
 * `main` the event loop; `workers` worker threads (the embedded database runs in one); `v8`
 * V8's helpers (the optimising compiler, the collector's concurrent marking and sweeping);
 * `other` libuv's pool and the rest.
 */
export function threadCpuOf(pid: number): ThreadCpu {
  const out: ThreadCpu = { main: 0, workers: 0, v8: 0, other: 0 };
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    let stat: string;
    let name: string;
    try {
      stat = fs.readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      name = fs.readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
    } catch {
      continue; // The thread ended meanwhile.
    }
    const fields = stat.split(') ')[1].split(' ');
    const us = ((Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND) * 1e6;
    const kind = tid === String(pid) ? 'main' : name === 'WorkerThread' ? 'workers' : name === 'V8Worker' ? 'v8' : 'other';
    out[kind] += us;
  }
  return out;
}

export interface ThreadCpu {
  main: number;
  workers: number;
  v8: number;
  other: number;
}

/** What each kind of thread used between two readings, per request (µs). */
export const threadCpuPer = (before: ThreadCpu, after: ThreadCpu, requests: number): ThreadCpu => {
  const n = Math.max(1, requests);
  return { main: (after.main - before.main) / n, workers: (after.workers - before.workers) / n, v8: (after.v8 - before.v8) / n, other: (after.other - before.other) / n };
};

export const fmtThreads = (t: ThreadCpu) => `main thread ${t.main.toFixed(0)}, worker threads ${t.workers.toFixed(0)}, V8's ${t.v8.toFixed(0)}, other ${t.other.toFixed(0)}`;

/** Linux counts CPU time in /proc in clock ticks of 1/100 s. */
const TICKS_PER_SECOND = 100;

/** CPU seconds (user + system, every thread) a process has used, from /proc. */
export const cpuOf = (pid: number) => {
  const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
};

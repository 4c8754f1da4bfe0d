import { spawn } from 'node:child_process';
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
  errors: number;
  non2xx: number;
}

/**
 * Drives an HTTP endpoint on loopback for a bounded time and reports throughput and latency
 * (ms). The load generator runs in a child process, as wrk would: sharing the measured
 * server's event loop would charge the generator's own work to the server.
 */
export async function load(opts: { url: string; method?: string; headers?: Record<string, string>; body?: string; seconds?: number; connections?: number }): Promise<LoadResult> {
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

// Runs one load in its own process (so the load generator never shares an event loop with the
// server it measures) and prints the result as JSON on stdout.
//
// Two engines: autocannon, for throughput; and `timed`, a plain keep-alive client that times
// each request to the microsecond, for goals stated in added milliseconds (autocannon's
// latency histogram counts whole milliseconds, too coarse to tell 1.4 ms from 2.4 ms).
import fs from 'node:fs';
import http from 'node:http';
import autocannon from 'autocannon';
import type { LoadOptions } from './lib.ts';

const opts = JSON.parse(process.argv[2]) as LoadOptions;

async function timed(o: LoadOptions) {
  const url = new URL(o.url);
  const connections = o.connections ?? 10;
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const body = o.bodyFile !== undefined ? fs.readFileSync(o.bodyFile) : o.body === undefined ? undefined : Buffer.from(o.body);
  const headers = { ...(o.headers ?? {}), ...(body ? { 'content-length': String(body.length) } : {}) };
  const latencies: number[] = [];
  const firstBytes: number[] = [];
  let errors = 0;
  let non2xx = 0;
  const started = performance.now();
  const until = started + (o.seconds ?? 5) * 1000;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.request(url, { method: o.method ?? 'GET', agent, headers }, (res) => {
        let first = true;
        res.on('data', () => {
          if (first) firstBytes.push(performance.now() - t0);
          first = false;
        });
        res.on('end', () => {
          latencies.push(performance.now() - t0);
          if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) >= 300) non2xx++;
          resolve();
        });
        res.on('error', () => {
          errors++;
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
      req.end(body);
    });
  // Connection i starts i/connections of the way into `spreadMs`. Started in the same
  // millisecond, closed-loop clients of a fixed-delay server stay in lockstep for the whole run
  // and every request queues behind all the others at every hop; independent clients do not.
  const spread = o.spreadMs ?? 0;
  await Promise.all(
    Array.from({ length: connections }, async (_, i) => {
      if (spread > 0) await new Promise((r) => setTimeout(r, (i * spread) / connections));
      while (performance.now() < until) await one();
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  firstBytes.sort((a, b) => a - b);
  const at = (xs: number[], q: number) => (xs.length ? xs[Math.min(xs.length - 1, Math.floor(q * xs.length))] : 0);
  return { rps: latencies.length / elapsed, p50: at(latencies, 0.5), p99: at(latencies, 0.99), firstByteP50: at(firstBytes, 0.5), errors, non2xx };
}

async function cannon(o: LoadOptions) {
  const result = await autocannon({
    url: o.url,
    method: (o.method ?? 'GET') as 'GET',
    headers: o.headers,
    body: o.bodyFile !== undefined ? fs.readFileSync(o.bodyFile) : o.body,
    duration: o.seconds ?? 5,
    connections: o.connections ?? 10,
  });
  return { rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.timeouts, non2xx: result.non2xx };
}

process.stdout.write(JSON.stringify(await (opts.engine === 'timed' ? timed(opts) : cannon(opts))));

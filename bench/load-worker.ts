// Runs one autocannon load in its own process (so the load generator never shares an event
// loop with the server it measures) and prints the result as JSON on stdout.
import autocannon from 'autocannon';

const opts = JSON.parse(process.argv[2]) as { url: string; method?: string; headers?: Record<string, string>; body?: string; seconds?: number; connections?: number };
const result = await autocannon({
  url: opts.url,
  method: (opts.method ?? 'GET') as 'GET',
  headers: opts.headers,
  body: opts.body,
  duration: opts.seconds ?? 5,
  connections: opts.connections ?? 10,
});
process.stdout.write(
  JSON.stringify({ rps: result.requests.average, p50: result.latency.p50, p99: result.latency.p99, errors: result.errors + result.timeouts, non2xx: result.non2xx }),
);

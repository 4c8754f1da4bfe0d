// The model proxy against calling the fake upstream directly, in the same run: added latency at
// the median and throughput ratio, for plain and streaming completions. The fake upstream
// answers after a fixed delay (a stand-in for a model, far faster than a real one), so
// throughput is bounded the same way on both paths and the ratio shows whether the proxy
// keeps up; one extra line shows the proxy's own ceiling against an upstream with no delay.
// Measured in rounds (direct and proxied back to back, alternating order) and reported as the
// medians of the rounds, so that other work on the machine coming and going does not decide it.
import { testConfig, testDb, testModelProxy, uniq } from '../test/harness.ts';
import type { FakeOpenAIOptions } from '../test/fakes/openai-upstream.ts';
import { createModelProxyClient } from '../src/modelproxy/client.ts';
import { fmt, load, serviceProcess, type BenchReport, type LoadResult } from './lib.ts';

const UPSTREAM_DELAY_MS = 40;
const SECONDS = 4;
const ROUNDS = 5;
const CONNECTIONS = 10;

export default async function modelProxyBench(): Promise<BenchReport[]> {
  // The upstream runs in a process of its own, as a real one would (see upstream-worker.ts).
  const fake = await serviceProcess<FakeOpenAIOptions>('./upstream-worker.ts', { latencyMs: UPSTREAM_DELAY_MS, words: 20 });
  const baseUrl = `${fake.url}/v1`;
  const tdb = await testDb();
  const overrides = { SERVICE_MODELS: JSON.stringify([{ alias: 'fake', model: 'gpt-fake', base_url: baseUrl, input_usd_per_mtok: 1, output_usd_per_mtok: 2, max_output_tokens: 100 }]) };
  const proxy = await testModelProxy({ db: tdb.db, config: { ...overrides, SERVICE_LOG_LEVEL: 'warn' } });
  const client = createModelProxyClient(testConfig(overrides), { baseUrl: proxy.url });
  const { key } = await client.mintKey({ team: uniq('bench'), role: 'dev', agent: 'coder', max_budget: 1_000_000 });
  const reports: BenchReport[] = [];
  try {
    const run = (url: string, auth: boolean, stream: boolean, seconds = SECONDS) =>
      load({
        url,
        method: 'POST',
        headers: { 'content-type': 'application/json', ...(auth ? { authorization: `Bearer ${key}` } : {}) },
        body: JSON.stringify({ model: auth ? 'fake' : 'gpt-fake', messages: [{ role: 'user', content: 'Write a haiku about proxies.' }], max_tokens: 100, stream }),
        seconds,
        connections: CONNECTIONS,
        // The goal is in added milliseconds: time each request to the microsecond. Clients
        // start spread over one upstream delay, as independent agents would, not in lockstep.
        engine: 'timed',
        spreadMs: UPSTREAM_DELAY_MS,
      });
    // Warm both paths (connections, JIT, the database's plans), plain and streaming: the
    // first seconds of a fresh process run slower code and would decide a round.
    for (const stream of [false, true]) {
      await run(`${proxy.url}/v1/chat/completions`, true, stream, 5);
      await run(`${fake.url}/v1/chat/completions`, false, stream, 1);
    }

    // Other work on the machine comes and goes: measure in rounds, each pairing a direct run
    // with a proxied one back to back (alternating which goes first), and report the medians.
    for (const stream of [false, true]) {
      const rounds: Array<{ direct: LoadResult; proxied: LoadResult }> = [];
      for (let i = 0; i < ROUNDS; i++) {
        if (i % 2 === 0) {
          const direct = await run(`${fake.url}/v1/chat/completions`, false, stream);
          rounds.push({ direct, proxied: await run(`${proxy.url}/v1/chat/completions`, true, stream) });
        } else {
          const proxied = await run(`${proxy.url}/v1/chat/completions`, true, stream);
          rounds.push({ direct: await run(`${fake.url}/v1/chat/completions`, false, stream), proxied });
        }
      }
      reports.push(report(stream ? 'model proxy, streaming' : 'model proxy, plain completions', rounds));
    }

    await fake.set({ latencyMs: 0 });
    const direct = await run(`${fake.url}/v1/chat/completions`, false, false, 3);
    const proxied = await run(`${proxy.url}/v1/chat/completions`, true, false, 3);
    reports.push({
      name: 'model proxy ceiling (upstream with no delay; for information)',
      lines: [`direct:  ${fmt(direct)}`, `proxied: ${fmt(proxied)}`, `the proxy's own ceiling on this machine: ${proxied.rps.toFixed(0)} req/s`],
      goal: 'none (information)',
      met: proxied.errors === 0 && proxied.non2xx === 0,
    });
  } finally {
    await proxy.stop();
    await fake.close();
    await tdb.close();
  }
  return reports;
}

function report(name: string, rounds: Array<{ direct: LoadResult; proxied: LoadResult }>): BenchReport {
  const scored = rounds.map((r) => ({ ...r, added: r.proxied.p50 - r.direct.p50, ratio: r.proxied.rps / r.direct.rps }));
  // Medians over the rounds (every round is shown).
  const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const median = { added: mid(scored.map((r) => r.added)), ratio: mid(scored.map((r) => r.ratio)) };
  const clean = scored.every((r) => r.proxied.errors === 0 && r.proxied.non2xx === 0);
  return {
    name,
    lines: [
      `upstream answers after ${UPSTREAM_DELAY_MS} ms; ${CONNECTIONS} connections (started over ${UPSTREAM_DELAY_MS} ms), ${SECONDS} s each, ${ROUNDS} rounds`,
      ...scored.map((r, i) => `round ${i + 1}: direct ${fmt(r.direct)} | proxied ${fmt(r.proxied)} | added ${r.added.toFixed(2)} ms, ratio ${r.ratio.toFixed(3)}`),
      `median of the rounds: added at p50: ${median.added.toFixed(2)} ms; throughput ratio ${median.ratio.toFixed(3)}`,
    ],
    goal: 'at most 2 ms added at p50 and at least 0.8 of direct throughput (medians of the rounds), no errors in any round',
    met: median.added <= 2 && median.ratio >= 0.8 && clean,
  };
}

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { startFakeCollector, type FakeCollector } from '../../test/fakes/otlp-collector.ts';
import { captureLogger, testDb, type TestDb } from '../../test/harness.ts';
import { startSpanExport } from './outbox.ts';
import { spansOfEvents, type TaskContext } from './spans.ts';
import { createRunTraces } from './traces.ts';
import type { AgentEvent } from '../agent/protocol.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let n = 0;
/** A task's events that make `calls` model-call spans, under a trace of its own. */
function recorded(calls: number): { ctx: TaskContext; events: AgentEvent[] } {
  const trace = (++n).toString(16).padStart(32, '0');
  const ctx: TaskContext = { trace_id: trace, run_id: `run_${n}`, team: 't', task_id: `task_${n}`, role: 'dev', model: 'fast', conversation: `run_${n}.dev`, task_started_at: '2026-01-01T00:00:00.000Z', activation: null };
  const events: AgentEvent[] = [];
  for (let i = 0; i < calls; i++) {
    events.push({ seq: events.length + 1, at: '2026-01-01T00:00:00.100Z', type: 'model_call', iteration: i + 1 });
    events.push({ seq: events.length + 1, at: '2026-01-01T00:00:01.000Z', type: 'model_reply', content: null, tool_calls: [], usage: null, finish_reason: 'stop', started_at: '2026-01-01T00:00:00.100Z' });
  }
  return { ctx, events };
}

describe('the trace outbox', () => {
  let tdb: TestDb;
  let collector: FakeCollector;
  before(async () => {
    tdb = await testDb();
    collector = await startFakeCollector();
  });
  after(async () => {
    await collector.close();
    await tdb.close();
  });

  const traces = () => createRunTraces({ endpoint: 'http://collector.invalid' })!;
  const record = (calls: number) => {
    const { ctx, events } = recorded(calls);
    return tdb.db.transaction().execute(async (trx) => (await traces().recorded(trx, ctx, events), spansOfEvents(ctx, events)));
  };
  const waiting = async () => Number((await sql<{ n: string }>`select count(*) as n from trace_outbox`.execute(tdb.db)).rows[0].n);
  const sentIds = () => collector.spans.map((s) => s.spanId);

  it('holds the spans of recorded events, in the recording transaction, and nothing of one that rolled back', async () => {
    const spans = await record(2);
    assert.equal(await waiting(), spans.length);
    await assert.rejects(
      tdb.db.transaction().execute(async (trx) => {
        const { ctx, events } = recorded(1);
        await traces().recorded(trx, ctx, events);
        throw new Error('the recording failed');
      }),
      /the recording failed/,
    );
    assert.equal(await waiting(), spans.length);
    await sql`delete from trace_outbox`.execute(tdb.db);
  });

  it('sends every span once, a batch at a time, and empties the outbox', async () => {
    const before = collector.spans.length;
    const spans = [...(await record(70)), ...(await record(70)), ...(await record(3))];
    const exporter = startSpanExport({ db: tdb.db, endpoint: collector.url, logger: captureLogger().logger, everyMs: 3_600_000 });
    try {
      assert.equal(await exporter.drain(), spans.length);
      assert.equal(await waiting(), 0);
      const got = sentIds().slice(before);
      assert.deepEqual([...got].sort(), spans.map((s) => s.span_id).sort(), 'each span once');
      assert.equal(await exporter.drain(), 0);
    } finally {
      await exporter.stop();
    }
  });

  it('keeps the spans while the collector is down, pauses, and sends them once it is back', async () => {
    const spans = await record(2);
    const logs = captureLogger();
    // A pause (twice the period after one refusal) long enough that nothing below races the exporter's own timer.
    const exporter = startSpanExport({ db: tdb.db, endpoint: collector.url, logger: logs.logger, everyMs: 2_000 });
    const before = collector.spans.length;
    collector.down = true;
    try {
      const refusedBefore = collector.refused;
      assert.equal(await exporter.drain(), 0);
      assert.equal(collector.refused, refusedBefore + 1);
      assert.equal(await waiting(), spans.length, 'nothing is lost');
      // Under the pause's lease the rows are not tried again at once, by this exporter or another.
      const other = startSpanExport({ db: tdb.db, endpoint: collector.url, logger: captureLogger().logger, everyMs: 3_600_000 });
      assert.equal(await other.drain(), 0);
      assert.equal(collector.refused, refusedBefore + 1);
      await other.stop();
      assert.match(logs.lines.join(''), /answered 503; the spans wait in the outbox/);
      collector.down = false;
      await waitForValue(async () => (await waiting()) === 0, 20_000);
      assert.deepEqual(sentIds().slice(before).sort(), spans.map((s) => s.span_id).sort());
    } finally {
      collector.down = false;
      await exporter.stop();
    }
  });

  it('sends again what a killed exporter had leased, once its lease ran out, and never what another holds', async () => {
    const held = await record(1);
    const orphaned = await record(1);
    const ids = (spans: Array<{ span_id: string }>) => spans.map((s) => s.span_id);
    await sql`update trace_outbox set lease_owner = 'alive', lease_until = now() + interval '1 hour' where span->>'span_id' = any(${ids(held)}::text[])`.execute(tdb.db);
    await sql`update trace_outbox set lease_owner = 'killed', lease_until = now() - interval '1 second' where span->>'span_id' = any(${ids(orphaned)}::text[])`.execute(tdb.db);
    const before = collector.spans.length;
    const exporter = startSpanExport({ db: tdb.db, endpoint: collector.url, logger: captureLogger().logger, everyMs: 3_600_000 });
    try {
      assert.equal(await exporter.drain(), orphaned.length);
      assert.deepEqual(sentIds().slice(before), ids(orphaned));
      assert.equal(await waiting(), held.length, 'the live lease is left alone');
    } finally {
      await exporter.stop();
      await sql`delete from trace_outbox`.execute(tdb.db);
    }
  });

  it('drops spans the collector refuses for good, and a backlog older than a day while it refuses', async () => {
    const logs = captureLogger();
    await record(1);
    const refusing = startSpanExport({ db: tdb.db, endpoint: `${collector.url}/nothing-here`, logger: logs.logger, everyMs: 3_600_000 });
    try {
      assert.equal(await refusing.drain(), 0);
      assert.equal(await waiting(), 0);
      assert.match(logs.lines.join(''), /answered 404: these spans are not sent again/);
    } finally {
      await refusing.stop();
    }
    await record(1);
    const fresh = await record(1);
    await sql`update trace_outbox set created_at = now() - interval '25 hours' where span->>'span_id' <> ${fresh[0].span_id}`.execute(tdb.db);
    collector.down = true;
    const exporter = startSpanExport({ db: tdb.db, endpoint: collector.url, logger: logs.logger, everyMs: 3_600_000 });
    try {
      await exporter.drain();
      assert.equal(await waiting(), 1, 'only the day-old span went');
      assert.match(logs.lines.join(''), /dropped spans the OTLP collector did not take within 24 hours/);
    } finally {
      collector.down = false;
      await exporter.stop();
      await sql`delete from trace_outbox`.execute(tdb.db);
    }
  });
});

async function waitForValue(check: () => Promise<boolean>, ms = 10_000) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('timed out');
    await sleep(20);
  }
}

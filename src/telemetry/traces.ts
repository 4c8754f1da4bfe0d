/**
 * Run traces over OTLP/HTTP. The runs service hands this module what it records, inside the
 * transaction that records it; the spans those records complete go into the outbox (trace_outbox)
 * in that same transaction. So a span is queued exactly when its events are stored (once,
 * whichever worker stores them), and a collector that is down only delays the exporter
 * (outbox.ts): it never slows, fails or repeats a run.
 */
import { sql, type Transaction } from 'kysely';
import type { AgentEvent } from '../agent/protocol.ts';
import type { Database } from '../db/schema.ts';
import { activationSpan, spansOfEvents, type Reopening, type RunOfSpan, type SpanRecord, type TaskContext } from './spans.ts';

type Trx = Transaction<Database>;

/** What the runs service tells the trace module (null when no collector is configured). */
export interface RunTraces {
  /** Events of a task, recorded for the first time in `trx`. */
  recorded(trx: Trx, task: TaskContext, events: readonly AgentEvent[]): Promise<void>;
  /** The run ended (succeeded, failed, cancelled) in `trx`: its first activation (`reopening` null) or the one a follow-up reopened. */
  ended(trx: Trx, run: RunOfSpan, reopening: Reopening | null): Promise<void>;
}

/** Puts spans in the outbox, in one statement: the exporter (outbox.ts) sends them from there. */
async function queue(trx: Trx, spans: SpanRecord[]): Promise<void> {
  await sql`insert into trace_outbox (span) select value from jsonb_array_elements(${JSON.stringify(spans)}::jsonb)`.execute(trx);
}

export function createRunTraces(opts: { endpoint: string | null }): RunTraces | null {
  if (!opts.endpoint) return null;
  return {
    async recorded(trx, task, events) {
      const spans = spansOfEvents(task, events);
      if (spans.length) await queue(trx, spans);
    },
    async ended(trx, run, reopening) {
      await queue(trx, [activationSpan(run, reopening, new Date())]);
    },
  };
}

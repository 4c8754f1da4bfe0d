/**
 * Run traces over OTLP/HTTP. The runs service hands this module what it records, inside the
 * transaction that records it; the spans those records complete go into a `trace.export` job in
 * that same transaction. So a span is queued exactly when its events are stored (once, whichever
 * worker stores them), and a collector that is down only delays the job's retries: it never
 * slows, fails or repeats a run.
 */
import type { Transaction } from 'kysely';
import type { Logger } from 'pino';
import { Type } from 'typebox';
import type { AgentEvent } from '../agent/protocol.ts';
import type { Database } from '../db/schema.ts';
import { jobType, PermanentJobError, type JobHandler } from '../queue/queue.ts';
import { activationSpan, otlpRequest, spansOfEvents, type Reopening, type RunOfSpan, type SpanRecord, type TaskContext } from './spans.ts';

type Trx = Transaction<Database>;

const HEX = (n: number) => Type.String({ pattern: `^[0-9a-f]{${n}}$` });
const SPAN = Type.Object({
  trace_id: HEX(32),
  span_id: HEX(16),
  parent_span_id: Type.Union([HEX(16), Type.Null()]),
  name: Type.String({ minLength: 1, maxLength: 300 }),
  kind: Type.Union([Type.Literal('internal'), Type.Literal('client')]),
  start: Type.String({ minLength: 1 }),
  end: Type.String({ minLength: 1 }),
  status: Type.Union([Type.Literal('unset'), Type.Literal('ok'), Type.Literal('error')]),
  attributes: Type.Record(Type.String(), Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Array(Type.String())])),
});

/** Spans per job: a run's burst of events fits in one; the payload stays far below the queue's bound. */
const SPANS_PER_JOB = 100;

/** Exports finished spans to the collector; retried with the queue's backoff while it does not take them. */
export const traceExport = jobType('trace.export', Type.Object({ spans: Type.Array(SPAN, { minItems: 1, maxItems: SPANS_PER_JOB }) }), { maxAttempts: 15 });

/** What the runs service tells the trace module (null when no collector is configured). */
export interface RunTraces {
  /** Events of a task, recorded for the first time in `trx`. */
  recorded(trx: Trx, task: TaskContext, events: readonly AgentEvent[]): Promise<void>;
  /** The run ended (succeeded, failed, cancelled) in `trx`: its first activation (`reopening` null) or the one a follow-up reopened. */
  ended(trx: Trx, run: RunOfSpan, reopening: Reopening | null): Promise<void>;
}

async function queue(trx: Trx, spans: SpanRecord[]): Promise<void> {
  for (let i = 0; i < spans.length; i += SPANS_PER_JOB) {
    const chunk = spans.slice(i, i + SPANS_PER_JOB);
    // The key makes a repeated enqueue of the same spans a no-op (a span id is made once: a reopened run's end gets a span of its own).
    await traceExport.enqueue(trx, { spans: chunk }, { key: `trace:${chunk[0].trace_id}:${chunk[0].span_id}` });
  }
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

/** OTLP/HTTP answers worth trying again (the OTLP specification's retryable codes). */
const RETRYABLE = new Set([429, 502, 503, 504]);

/** The worker's handler of `trace.export`: `POST {endpoint}/v1/traces`, JSON encoding. */
export function traceJobHandlers(opts: { endpoint: string | null; logger: Logger; serviceName?: string; timeoutMs?: number }): Record<string, JobHandler> {
  return {
    [traceExport.kind]: traceExport.handler(async (p) => {
      if (!opts.endpoint) {
        // Queued while a collector was configured; this worker has none, so the spans have nowhere to go.
        opts.logger.info({ spans: p.spans.length }, 'no OTLP endpoint is configured; dropping queued spans');
        return;
      }
      const body = otlpRequest(p.spans as SpanRecord[], { 'service.name': opts.serviceName ?? 'crewhouse' });
      let res: Response;
      try {
        res = await fetch(`${opts.endpoint}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000) });
      } catch (err) {
        // The endpoint may carry credentials in its URL: name the failure, never the address.
        throw new Error(`the OTLP collector could not be reached: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}`);
      }
      const text = await res.text().catch(() => '');
      if (res.ok) {
        let rejected = 0;
        try {
          rejected = Number((JSON.parse(text) as { partialSuccess?: { rejectedSpans?: string | number } })?.partialSuccess?.rejectedSpans ?? 0);
        } catch {
          // An empty or non-JSON success body is a success.
        }
        if (rejected > 0) opts.logger.warn({ rejected, spans: p.spans.length }, 'the OTLP collector rejected some spans');
        return;
      }
      const why = `the OTLP collector answered ${res.status}`;
      if (RETRYABLE.has(res.status)) throw new Error(why);
      throw new PermanentJobError(`${why}; the spans are not sent again`);
    }),
  };
}

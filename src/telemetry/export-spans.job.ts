/** The job that sends a run's finished spans to the OTLP collector; traces.ts queues it. */
import type { Logger } from 'pino';
import { Type } from 'typebox';
import { defineJob, PermanentJobError } from '../queue/queue.ts';
import { otlpRequest, type SpanRecord } from './spans.ts';

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
export const SPANS_PER_JOB = 100;


/** OTLP/HTTP answers worth trying again (the OTLP specification's retryable codes). */
const RETRYABLE = new Set([429, 502, 503, 504]);

/**
 * Exports finished spans to the collector (`POST {endpoint}/v1/traces`, JSON encoding); retried
 * with the queue's backoff while it does not take them.
 */
export const exportSpansJob = defineJob({
  kind: 'telemetry.export-spans',
  payload: Type.Object({ spans: Type.Array(SPAN, { minItems: 1, maxItems: SPANS_PER_JOB }) }),
  maxAttempts: 15,
  async perform(opts: { endpoint: string | null; logger: Logger; serviceName?: string; timeoutMs?: number }, p) {
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
  },
});

/** Sending finished spans to the OTLP collector: the outbox's exporter (outbox.ts) and the job a previous version queued. */
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

/** Spans per job, and per request to the collector: a run's burst of events fits in one; the payload stays far below the queue's bound. */
export const SPANS_PER_JOB = 100;


/** OTLP/HTTP answers worth trying again (the OTLP specification's retryable codes). */
const RETRYABLE = new Set([429, 502, 503, 504]);

/** What the collector made of a batch of spans. */
export type SendOutcome = { ok: true } | { ok: false; retryable: boolean; reason: string };

/**
 * Sends spans to the collector (`POST {endpoint}/v1/traces`, JSON encoding): taken, refused for
 * now (unreachable, or a status the OTLP specification says to retry), or refused for good. The
 * reason never names the endpoint, whose URL may carry credentials.
 */
export async function sendSpans(endpoint: string, spans: readonly SpanRecord[], opts: { logger: Logger; serviceName?: string; timeoutMs?: number }): Promise<SendOutcome> {
  const body = otlpRequest(spans, { 'service.name': opts.serviceName ?? 'crewhouse' });
  let res: Response;
  try {
    res = await fetch(`${endpoint}/v1/traces`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(opts.timeoutMs ?? 10_000) });
  } catch (err) {
    return { ok: false, retryable: true, reason: `the OTLP collector could not be reached: ${err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)}` };
  }
  const text = await res.text().catch(() => '');
  if (res.ok) {
    let rejected = 0;
    try {
      rejected = Number((JSON.parse(text) as { partialSuccess?: { rejectedSpans?: string | number } })?.partialSuccess?.rejectedSpans ?? 0);
    } catch {
      // An empty or non-JSON success body is a success.
    }
    if (rejected > 0) opts.logger.warn({ rejected, spans: spans.length }, 'the OTLP collector rejected some spans');
    return { ok: true };
  }
  return { ok: false, retryable: RETRYABLE.has(res.status), reason: `the OTLP collector answered ${res.status}` };
}

/**
 * Exports the finished spans it carries, retried with the queue's backoff while the collector
 * does not take them. This version queues no such job (spans wait in the outbox, outbox.ts):
 * it performs those a previous version queued.
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
    const sent = await sendSpans(opts.endpoint, p.spans as SpanRecord[], opts);
    if (sent.ok) return;
    if (sent.retryable) throw new Error(sent.reason);
    throw new PermanentJobError(`${sent.reason}; the spans are not sent again`);
  },
});

/**
 * The exporter of the trace outbox: sends the spans waiting in `trace_outbox` (traces.ts puts
 * them there, in the transaction that records their events) to the OTLP collector, a batch at a
 * time, about once a second. Collectors batch spans anyway (the OpenTelemetry SDKs' default is
 * every five seconds); the outbox lets a run's recording pay one insert per batch of events,
 * where a job per batch cost five statements on every agent step's path.
 *
 * Each worker runs one. A batch is leased before it is sent (FOR UPDATE SKIP LOCKED, then an
 * owner and a deadline), so two workers never send the same rows at once, and deleted only
 * after the collector took it: a worker killed between the two leaves the rows to be sent again
 * when the lease runs out (at least once, as any OTLP exporter that retries). A collector that
 * is down is tried again with a growing pause (up to half a minute), and its backlog is bounded by age.
 */
import { sql } from 'kysely';
import type { Logger } from 'pino';
import type { Db } from '../db/database.ts';
import { leaseOwner } from '../db/lease.ts';
import { sendSpans, SPANS_PER_JOB } from './export-spans.job.ts';
import type { SpanRecord } from './spans.ts';

/** How long a batch is this exporter's while it sends it; past it another may take the rows. */
const LEASE_MS = 60_000;
/** Spans the collector has not taken in this long are dropped (said in the log). */
const MAX_AGE_HOURS = 24;
/** The longest pause between tries while the collector refuses: one request per half minute is no load, and a collector back is used soon. */
const MAX_PAUSE_MS = 30_000;

export interface SpanExporter {
  /** Sends what is waiting now, batch after batch, until the outbox is empty or the collector refuses; how many spans went. */
  drain(): Promise<number>;
  stop(): Promise<void>;
}

export function startSpanExport(opts: { db: Db; endpoint: string; logger: Logger; everyMs?: number; serviceName?: string; timeoutMs?: number; owner?: string }): SpanExporter {
  const { db, endpoint } = opts;
  const log = opts.logger.child({ component: 'trace-export' });
  const everyMs = opts.everyMs ?? 1_000;
  const owner = opts.owner ?? leaseOwner();
  let failures = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let current: Promise<number> = Promise.resolve(0);

  async function claim(): Promise<Array<{ id: string; span: SpanRecord }>> {
    const { rows } = await sql<{ id: string; span: SpanRecord }>`
      update trace_outbox o
      set lease_owner = ${owner}, lease_until = now() + ${LEASE_MS}::double precision * interval '1 millisecond'
      from (
        select id from trace_outbox
        where lease_until is null or lease_until < now()
        order by id
        limit ${SPANS_PER_JOB}
        for update skip locked
      ) due
      where o.id = due.id
      returning o.id, o.span`.execute(db);
    return rows;
  }

  const release = (ids: string[], pauseMs: number) =>
    sql`update trace_outbox set lease_until = now() + ${pauseMs}::double precision * interval '1 millisecond' where id = any(${ids}::bigint[]) and lease_owner = ${owner}`.execute(db);
  const remove = (ids: string[]) => sql`delete from trace_outbox where id = any(${ids}::bigint[]) and lease_owner = ${owner}`.execute(db);

  async function dropStale(): Promise<void> {
    const gone = await sql`delete from trace_outbox where created_at < now() - ${MAX_AGE_HOURS}::double precision * interval '1 hour'`.execute(db);
    const n = Number(gone.numAffectedRows ?? 0n);
    if (n > 0) log.warn({ spans: n }, `dropped spans the OTLP collector did not take within ${MAX_AGE_HOURS} hours`);
  }

  /**
   * Sends batches until none is left or the collector refuses one for now: how many spans went
   * (`sent`), and whether it stopped on a refusal to be tried again after a pause (`refused`).
   */
  async function drainOnce(): Promise<{ sent: number; refused: boolean }> {
    let sent = 0;
    for (;;) {
      const rows = await claim();
      if (!rows.length) return { sent, refused: false };
      const ids = rows.map((r) => String(r.id));
      const outcome = await sendSpans(endpoint, rows.map((r) => r.span), { logger: log, serviceName: opts.serviceName, timeoutMs: opts.timeoutMs });
      if (outcome.ok) {
        await remove(ids);
        sent += rows.length;
        if (failures > 0) log.info({ spans: rows.length }, 'the OTLP collector takes spans again');
        failures = 0;
      } else if (!outcome.retryable) {
        // An answer that will not change by sending the same spans again.
        await remove(ids);
        log.warn({ spans: rows.length, reason: outcome.reason }, `${outcome.reason}: these spans are not sent again`);
      } else {
        failures++;
        const pause = pauseAfter(failures);
        // The rows wait out the pause under this lease, so another worker does not hammer the collector either.
        await release(ids, pause);
        if (failures === 1) log.warn({ spans: rows.length, reason: outcome.reason, retry_in_ms: pause }, `${outcome.reason}; the spans wait in the outbox and are sent again later`);
        await dropStale();
        return { sent, refused: true };
      }
      if (rows.length < SPANS_PER_JOB) return { sent, refused: false };
    }
  }

  const pauseAfter = (n: number) => Math.min(MAX_PAUSE_MS, everyMs * 2 ** Math.min(n, 20));

  function schedule(ms: number) {
    if (stopped) return;
    timer = setTimeout(tick, ms);
    timer.unref();
  }

  function tick() {
    timer = null;
    current = drainOnce()
      .then(
        (r) => (schedule(r.refused ? pauseAfter(failures) : everyMs), r.sent),
        (err) => {
          log.error({ err }, 'exporting spans failed; trying again');
          schedule(pauseAfter(++failures));
          return 0;
        },
      );
  }

  schedule(everyMs);
  return {
    async drain() {
      await current;
      return (current = drainOnce().then((r) => r.sent));
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await current.catch(() => 0);
    },
  };
}

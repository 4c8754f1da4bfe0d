import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type DeliveryRow = NonNullable<Awaited<ReturnType<typeof getDelivery>>>;

/**
 * A delivery refused at receipt (its signature did not verify or could not be checked, or a
 * signed one was stale or malformed): one row each time, never standing for its delivery id, so
 * the sender's next attempt with the same id is still taken in.
 */
export async function recordRefused(q: Q, d: { surface: string; delivery_id: string; event: string; action: string | null; signature_valid: boolean; outcome: string; detail: string }) {
  await q.insertInto('webhook_deliveries').values(d).execute();
}

/** Deletes the refusals (rows not taken in) received before `before`; answers how many. */
export async function pruneRefused(q: Q, before: Date): Promise<number> {
  const r = await q.deleteFrom('webhook_deliveries').where('taken', '=', false).where('received_at', '<', before.toISOString()).executeTakeFirst();
  return Number(r.numDeletedRows);
}

/**
 * A verified delivery: the first time it is inserted (`first`), every later time only counted.
 * The payload is kept for the job that processes it.
 */
export async function recordVerified(q: Q, d: { surface: string; delivery_id: string; event: string; action: string | null; outcome: string; detail: string | null; payload: unknown; subject?: string | null }) {
  const row = await q
    .insertInto('webhook_deliveries')
    .values({ surface: d.surface, delivery_id: d.delivery_id, event: d.event, action: d.action, signature_valid: true, taken: true, outcome: d.outcome, detail: d.detail, payload: JSON.stringify(d.payload), subject: d.subject ?? null })
    .onConflict((oc) => oc.columns(['surface', 'delivery_id']).where(sql<boolean>`taken`).doUpdateSet({ times_received: sql`webhook_deliveries.times_received + 1` }))
    .returning(['id', 'times_received', 'outcome', 'run_id'])
    .executeTakeFirstOrThrow();
  return { id: String(row.id), first: Number(row.times_received) === 1, outcome: row.outcome, run_id: row.run_id };
}

/** The delivery id of the delivery taken in that reported `subject` on `surface`, or undefined. */
export async function deliveryOfSubject(q: Q, surface: string, subject: string): Promise<string | undefined> {
  const row = await q.selectFrom('webhook_deliveries').select('delivery_id').where('surface', '=', surface).where('subject', '=', subject).where('taken', '=', true).executeTakeFirst();
  return row?.delivery_id;
}

export function getDelivery(q: Q, id: string) {
  return q.selectFrom('webhook_deliveries').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function settleDelivery(q: Q, id: string, set: { outcome: string; detail: string | null; run_id?: string | null }) {
  await q.updateTable('webhook_deliveries').set(set).where('id', '=', id).execute();
}

export function listDeliveries(q: Q, surface: string, cursor: CursorValue[] | null, limit: number) {
  const query = q
    .selectFrom('webhook_deliveries')
    .select(['id', 'delivery_id', 'event', 'action', 'signature_valid', 'received_at', 'times_received', 'outcome', 'detail', 'run_id'])
    .where('surface', '=', surface);
  return keyset(query, ['received_at', 'id'], 'desc', cursor, limit).execute();
}

/**
 * Counts one refusal of `surface` in `minute`, in one statement shared by every process: the
 * count so far this minute, and the count of the earlier minute this one replaced (removed here,
 * so exactly one caller sees it), or null.
 */
export async function countRefusal(q: Q, surface: string, minute: number): Promise<{ count: number; previous: { minute: number; count: number } | null }> {
  const { rows } = await sql<{ count: number; prev_minute: number | null; prev_count: number | null }>`
    with gone as (delete from webhook_refusal_minutes where surface = ${surface} and minute < ${minute} returning minute, count)
    insert into webhook_refusal_minutes as m (surface, minute, count) values (${surface}, ${minute}, 1)
    on conflict (surface, minute) do update set count = m.count + 1
    returning m.count,
      (select g.minute from gone g order by g.minute desc limit 1) as prev_minute,
      (select g.count from gone g order by g.minute desc limit 1) as prev_count`.execute(q);
  const r = rows[0]!;
  return { count: r.count, previous: r.prev_minute === null || r.prev_count === null ? null : { minute: r.prev_minute, count: r.prev_count } };
}

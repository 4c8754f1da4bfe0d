import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type DeliveryRow = NonNullable<Awaited<ReturnType<typeof getDelivery>>>;
export type WorkRow = NonNullable<Awaited<ReturnType<typeof workOfRun>>>;

/** A delivery whose signature did not verify (or could not be checked): one row each time. */
export async function recordRefused(q: Q, d: { surface: string; delivery_id: string; event: string; action: string | null; signature_valid: boolean; outcome: string; detail: string }) {
  await q.insertInto('webhook_deliveries').values(d).execute();
}

/**
 * A verified delivery: the first time it is inserted (`first`), every later time only counted.
 * The payload is kept for the job that processes it.
 */
export async function recordVerified(q: Q, d: { surface: string; delivery_id: string; event: string; action: string | null; outcome: string; detail: string | null; payload: unknown }) {
  const row = await q
    .insertInto('webhook_deliveries')
    .values({ surface: d.surface, delivery_id: d.delivery_id, event: d.event, action: d.action, signature_valid: true, outcome: d.outcome, detail: d.detail, payload: JSON.stringify(d.payload) })
    .onConflict((oc) => oc.columns(['surface', 'delivery_id']).where(sql<boolean>`signature_valid`).doUpdateSet({ times_received: sql`webhook_deliveries.times_received + 1` }))
    .returning(['id', 'times_received', 'outcome', 'run_id'])
    .executeTakeFirstOrThrow();
  return { id: String(row.id), first: Number(row.times_received) === 1, outcome: row.outcome, run_id: row.run_id };
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

export function workOfRun(q: Q, runId: string) {
  return q.selectFrom('code_host_work').selectAll().where('run_id', '=', runId).executeTakeFirst();
}

/** The run an issue or pull request of a repository belongs to (the newest, should there be several teams). */
export function workOfNumber(q: Q, repo: string, number: number) {
  return q
    .selectFrom('code_host_work')
    .selectAll()
    .where(sql`lower(repository)`, '=', repo.toLowerCase())
    .where((eb) => eb.or([eb('issue_number', '=', number), eb('pull_number', '=', number)]))
    .where('run_id', 'not like', 'pending:%')
    .orderBy('created_at', 'desc')
    .executeTakeFirst();
}

/**
 * Claims an issue for a team before its run exists (two deliveries of one issue, its `opened`
 * and `labeled`, arrive together): false when it is already claimed or has a run.
 */
export async function claimIssue(q: Q, claim: string, team: string, repo: string, issue: number): Promise<{ claimed: true } | { claimed: false; run_id: string }> {
  const inserted = await q
    .insertInto('code_host_work')
    .values({ run_id: claim, team_name: team, repository: repo, issue_number: issue })
    .onConflict((oc) => oc.columns(['repository', 'issue_number', 'team_name']).where(sql<boolean>`issue_number is not null`).doNothing())
    .returning('run_id')
    .executeTakeFirst();
  if (inserted) return { claimed: true };
  const existing = await q.selectFrom('code_host_work').select('run_id').where('repository', '=', repo).where('issue_number', '=', issue).where('team_name', '=', team).executeTakeFirstOrThrow();
  return { claimed: false, run_id: existing.run_id };
}

export async function settleClaim(q: Q, claim: string, runId: string) {
  await q.updateTable('code_host_work').set({ run_id: runId }).where('run_id', '=', claim).execute();
}

export async function dropClaim(q: Q, claim: string) {
  await q.deleteFrom('code_host_work').where('run_id', '=', claim).execute();
}

/** The run's pull request (a run from the console gets its row here when it opens one). */
export async function setPull(q: Q, w: { run_id: string; team_name: string; repository: string; pull_number: number; pull_url: string }) {
  await q
    .insertInto('code_host_work')
    .values(w)
    .onConflict((oc) => oc.column('run_id').doUpdateSet({ pull_number: w.pull_number, pull_url: w.pull_url }))
    .execute();
}

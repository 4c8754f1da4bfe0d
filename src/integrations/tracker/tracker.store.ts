import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';

type Q = Kysely<Database> | Transaction<Database>;
export type TrackerSurface = 'tracker_a' | 'tracker_b';
export type TrackerWork = NonNullable<Awaited<ReturnType<typeof workOfRun>>>;

export function workOfRun(q: Q, runId: string) {
  return q.selectFrom('tracker_work').selectAll().where('run_id', '=', runId).executeTakeFirst();
}

/** The run of an issue on a surface (the newest, should several teams hold it), claims left out. */
export function workOfIssue(q: Q, surface: TrackerSurface, issueId: string) {
  return q.selectFrom('tracker_work').selectAll().where('surface', '=', surface).where('issue_id', '=', issueId).where('run_id', 'not like', 'pending:%').orderBy('created_at', 'desc').executeTakeFirst();
}

export function workOfSession(q: Q, surface: TrackerSurface, sessionId: string) {
  return q.selectFrom('tracker_work').selectAll().where('surface', '=', surface).where('session_id', '=', sessionId).where('run_id', 'not like', 'pending:%').executeTakeFirst();
}

/**
 * Claims an issue for a team before its run exists (two deliveries of one issue can arrive
 * together): the existing run (or claim) when it is taken.
 */
export async function claimIssue(q: Q, w: { claim: string; surface: TrackerSurface; team: string; issue_id: string; issue_key: string; issue_url: string | null; session_id: string | null; requested_by: string | null; requested_by_name: string | null }): Promise<{ claimed: true } | { claimed: false; run_id: string }> {
  const inserted = await q
    .insertInto('tracker_work')
    .values({ run_id: w.claim, surface: w.surface, team_name: w.team, issue_id: w.issue_id, issue_key: w.issue_key, issue_url: w.issue_url, session_id: w.session_id, requested_by: w.requested_by, requested_by_name: w.requested_by_name })
    .onConflict((oc) => oc.columns(['surface', 'issue_id', 'team_name']).doNothing())
    .returning('run_id')
    .executeTakeFirst();
  if (inserted) return { claimed: true };
  const existing = await q.selectFrom('tracker_work').select('run_id').where('surface', '=', w.surface).where('issue_id', '=', w.issue_id).where('team_name', '=', w.team).executeTakeFirstOrThrow();
  return { claimed: false, run_id: existing.run_id };
}

export async function settleClaim(q: Q, claim: string, runId: string) {
  await q.updateTable('tracker_work').set({ run_id: runId }).where('run_id', '=', claim).execute();
}

export async function dropClaim(q: Q, claim: string) {
  await q.deleteFrom('tracker_work').where('run_id', '=', claim).execute();
}

/** A new agent session on an issue that has a run (Linear opens one per mention): progress goes to the newest. */
export async function setSession(q: Q, runId: string, sessionId: string) {
  await q.updateTable('tracker_work').set({ session_id: sessionId }).where('run_id', '=', runId).execute();
}

import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type WorkRow = NonNullable<Awaited<ReturnType<typeof workOfRun>>>;

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

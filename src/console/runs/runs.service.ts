import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';

/** What a team's list entry and detail show of its runs. */
export interface RunActivity {
  running: number;
  waiting: number;
  last_run_at: string | null;
}

const NO_RUNS: RunActivity = { running: 0, waiting: 0, last_run_at: null };

/** Runs: what other modules may know of them and do to them (the run engine grows this module). */
export function createRunsService(deps: { db: Db }) {
  const { db } = deps;
  return {
    /** Each team's runs in progress and waiting, and when its last run started; one query for all. */
    async activityOf(teamIds: number[]): Promise<Map<number, RunActivity>> {
      const out = new Map<number, RunActivity>(teamIds.map((id) => [id, NO_RUNS]));
      if (teamIds.length === 0) return out;
      const rows = await db
        .selectFrom('runs')
        .select([
          'team_id',
          sql<number>`count(*) filter (where state = 'running')`.as('running'),
          sql<number>`count(*) filter (where state = 'waiting')`.as('waiting'),
          sql<string | null>`max(created_at)`.as('last_run_at'),
        ])
        .where('team_id', 'in', teamIds)
        .groupBy('team_id')
        .execute();
      for (const r of rows) out.set(r.team_id, { running: Number(r.running), waiting: Number(r.waiting), last_run_at: r.last_run_at ? new Date(r.last_run_at).toISOString() : null });
      return out;
    },

    /** Cancels a team's open runs inside the caller's transaction (the team is being archived). */
    async cancelOpenRuns(trx: Transaction<Database>, teamId: number): Promise<number> {
      const rows = await trx
        .updateTable('runs')
        .set({ state: 'cancelled', finished_at: sql`now()`, updated_at: sql`now()`, row_version: sql`nextval('row_version_seq')` })
        .where('team_id', '=', teamId)
        .where('state', 'in', ['running', 'waiting'])
        .returning('id')
        .execute();
      return rows.length;
    },
  };
}

export type RunsService = ReturnType<typeof createRunsService>;

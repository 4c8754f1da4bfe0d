import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { destroyTeamSandboxesJob } from './jobs/destroy-team-sandboxes.ts';
import { lockTeamSandboxes } from './placement.ts';

/** A team's sandboxes at a glance: none placed, some awake (starting or running), or all asleep. */
export type TeamSandboxes = 'none' | 'awake' | 'asleep';

/** Sandboxes: what other modules may know of them and do to them (the sandbox host grows this module). */
export function createSandboxesService(deps: { db: Db }) {
  const { db } = deps;
  return {
    /** The addresses of the sandbox hosts alive now (heartbeat within `deadAfterSeconds`, not stopped): each runs a gateway. */
    async liveHostAddresses(deadAfterSeconds: number): Promise<string[]> {
      const rows = await db
        .selectFrom('sandbox_hosts')
        .select('address')
        .where('stopped_at', 'is', null)
        .where('heartbeat_at', '>', sql<string>`now() - make_interval(secs => ${deadAfterSeconds})`)
        .orderBy('address')
        .execute();
      return [...new Set(rows.map((r) => r.address))];
    },

    /** Each team's sandboxes at a glance; one query for all. */
    async stateOf(teamIds: number[]): Promise<Map<number, TeamSandboxes>> {
      const out = new Map<number, TeamSandboxes>(teamIds.map((id) => [id, 'none']));
      if (teamIds.length === 0) return out;
      const rows = await db
        .selectFrom('sandboxes')
        .select(['team_id', sql<number>`count(*) filter (where state in ('starting', 'running'))`.as('awake')])
        .where('team_id', 'in', teamIds)
        .where('state', '<>', 'destroyed')
        .groupBy('team_id')
        .execute();
      for (const r of rows) out.set(r.team_id, Number(r.awake) > 0 ? 'awake' : 'asleep');
      return out;
    },

    /**
     * Marks a team's sandboxes destroyed inside the caller's transaction (the team is being
     * archived); tearing down what runs them is the sandbox host's job.
     */
    async destroyAllOf(trx: Transaction<Database>, teamId: number): Promise<number> {
      // Placements under way finish first; later ones see the team archived.
      await lockTeamSandboxes(trx, teamId, 'archive');
      await trx.deleteFrom('sandbox_waits').where('team_id', '=', teamId).execute();
      const rows = await trx.updateTable('sandboxes').set({ state: 'destroyed', updated_at: sql`now()` }).where('team_id', '=', teamId).where('state', '<>', 'destroyed').returning('id').execute();
      // Freeing what runs them (processes, links, disks) leaves the process: a job, after commit.
      if (rows.length) await destroyTeamSandboxesJob.enqueue(trx, { team_id: teamId }, { key: `sandboxes.destroy-team:${teamId}` });
      return rows.length;
    },
  };
}

export type SandboxesService = ReturnType<typeof createSandboxesService>;

/**
 * The side effect of archiving a team on its sandboxes, as a job: every sandbox of the team is
 * destroyed (archiving may already have marked them in its transaction) and its claims end.
 * Each host frees what it holds (processes, links, disks) on its next sweep, or at once when
 * the job runs on that host; sandboxes that no host holds (never made, or on a dead host) are
 * released here, and a dead host that comes back removes what it still had. Safe to run twice.
 */
import { sql } from 'kysely';
import { Type } from 'typebox';
import { defineJob } from '../../../queue/queue.ts';
import type { Db } from '../../../db/database.ts';
import type { SandboxHost } from '../host.ts';

export interface DestroyTeamSandboxesDeps {
  db: Db;
  /** Seconds without a heartbeat after which a host is dead (SERVICE_SANDBOX_HOST_DEAD_AFTER). */
  deadAfterSeconds: number;
  /** The host of this process, if any: it frees its own sandboxes at once. */
  host?: Pick<SandboxHost, 'tick'> | null;
}

/** Queued in the archive's transaction: the hosts free the team's sandboxes after it commits. */
export const destroyTeamJob = defineJob({
  kind: 'sandboxes.destroy-team',
  payload: Type.Object({ team_id: Type.Integer({ minimum: 1 }) }),
  async perform(deps: Pick<DestroyTeamSandboxes, 'destroyTeamSandboxes'>, p) {
    await deps.destroyTeamSandboxes(p.team_id);
  },
});

export type DestroyTeamSandboxes = ReturnType<typeof createDestroyTeamSandboxes>;

export function createDestroyTeamSandboxes(deps: DestroyTeamSandboxesDeps) {
  /** Destroys every sandbox of the team; answers how many it marked and how many nobody holds any more. */
  async function destroyTeamSandboxes(teamId: number): Promise<{ marked: number; released: number }> {
    const { marked, released } = await deps.db.transaction().execute(async (trx) => {
      // An archived team's runs wait for room no more.
      await trx.deleteFrom('sandbox_waits').where('team_id', '=', teamId).execute();
      const ids = (await trx.selectFrom('sandboxes').select('id').where('team_id', '=', teamId).execute()).map((r) => r.id);
      if (ids.length === 0) return { marked: 0, released: 0 };
      await trx.deleteFrom('sandbox_claims').where('sandbox_id', 'in', ids).execute();
      const m = await trx.updateTable('sandboxes').set({ state: 'destroyed', updated_at: sql`now()` }).where('team_id', '=', teamId).where('state', '<>', 'destroyed').executeTakeFirst();
      const r = await trx
        .updateTable('sandboxes as s')
        .set({ released_at: sql`now()` })
        .where('s.team_id', '=', teamId)
        .where('s.released_at', 'is', null)
        .where((eb) =>
          eb.or([
            eb('s.created', '=', false),
            eb.not(eb.exists(eb.selectFrom('sandbox_hosts as h').select('h.id').whereRef('h.id', '=', 's.host_id').where('h.stopped_at', 'is', null).where(sql<boolean>`h.heartbeat_at > now() - make_interval(secs => ${deps.deadAfterSeconds})`))),
          ]),
        )
        .executeTakeFirst();
      return { marked: Number(m.numUpdatedRows), released: Number(r.numUpdatedRows) };
    });
    await deps.host?.tick();
    return { marked, released };
  }

  return { destroyTeamSandboxes };
}

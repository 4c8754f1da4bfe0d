import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { destroyTeamJob } from './jobs/destroy-team.job.ts';
import { DEFAULT_VCPU_OVERCOMMIT, hostRooms, lockTeamSandboxes } from './placement.ts';
import type { TeamSandboxes } from '../../console/teams/teams.presenters.ts';

/** A sandbox host as a person sees it: what it offers, what its sandboxes hold, what waits for it. */
export interface HostView {
  id: string;
  address: string;
  providers: string[];
  /** `live` (heartbeating), `stopped` (stopped cleanly) or `dead` (silent past the bound). */
  status: 'live' | 'stopped' | 'dead';
  started_at: string;
  heartbeat_at: string;
  capacity: { vcpus: number; vcpus_shared: number; memory_mib: number; disk_gib: number };
  used: { vcpus: number; memory_mib: number; disk_gib: number };
  sandboxes: { awake: number; asleep: number };
  /** Claims waiting for this host in particular (their sleeping sandbox is here). */
  waiting: number;
}

/** A run waiting for room on a host, oldest first. */
export interface WaitView {
  run_id: string;
  team: string;
  environment: string;
  provider: string;
  host_id: string | null;
  vcpus: number;
  memory_mib: number;
  disk_gib: number;
  since: string;
}

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

    /** Every host that has not been forgotten, with its room, and the runs waiting for room (oldest first). */
    async hosts(settings: { deadAfterSeconds: number; vcpuOvercommit?: number }): Promise<{ hosts: HostView[]; waiting: WaitView[] }> {
      const ratio = settings.vcpuOvercommit ?? DEFAULT_VCPU_OVERCOMMIT;
      const rows = await db
        .selectFrom('sandbox_hosts')
        .select(['id', 'address', 'providers', 'vcpus', 'memory_mib', 'disk_gib', 'started_at', 'heartbeat_at', 'stopped_at'])
        .select(sql<boolean>`heartbeat_at > now() - make_interval(secs => ${settings.deadAfterSeconds})`.as('beating'))
        .orderBy('address')
        .orderBy('id')
        .execute();
      const rooms = new Map((await hostRooms(db, rows, ratio)).map((r) => [r.hostId, r]));
      const waits = await db.selectFrom('sandbox_waits').selectAll().orderBy('since').orderBy('claim_id').execute();
      const iso = (v: string | Date) => new Date(v).toISOString();
      return {
        hosts: rows.map((h) => {
          const r = rooms.get(h.id)!;
          return {
            id: h.id,
            address: h.address,
            providers: h.providers,
            status: h.stopped_at ? 'stopped' : h.beating ? 'live' : 'dead',
            started_at: iso(h.started_at),
            heartbeat_at: iso(h.heartbeat_at),
            capacity: { vcpus: h.vcpus, vcpus_shared: r.vcpus, memory_mib: h.memory_mib, disk_gib: h.disk_gib },
            used: { vcpus: r.used.vcpus, memory_mib: r.used.memoryMib, disk_gib: r.used.diskGib },
            sandboxes: { awake: r.awake, asleep: r.asleep },
            waiting: waits.filter((w) => w.host_id === h.id).length,
          };
        }),
        waiting: waits.map((w) => ({ run_id: w.run_id, team: w.team, environment: w.environment, provider: w.provider, host_id: w.host_id, vcpus: w.vcpus, memory_mib: w.memory_mib, disk_gib: w.disk_gib, since: iso(w.since) })),
      };
    },

    /** The sandboxes not destroyed (all, or those of one host), for `crewhouse sandboxes`. */
    async list(hostId?: string) {
      return db
        .selectFrom('sandboxes')
        .select(['id', 'team_id', 'role', 'replica', 'provider', 'state', 'host_id', 'environment', 'vcpus', 'memory_mib', 'disk_gib', 'last_active_at'])
        .where('state', '<>', 'destroyed')
        .$if(hostId !== undefined, (q) => q.where('host_id', '=', hostId!))
        .orderBy('team_id')
        .orderBy('role')
        .orderBy('replica')
        .execute();
    },

    /** Whether the host is alive (heartbeating within the bound, not stopped). */
    async hostAlive(hostId: string, deadAfterSeconds: number): Promise<boolean> {
      const row = await db
        .selectFrom('sandbox_hosts')
        .select('id')
        .where('id', '=', hostId)
        .where('stopped_at', 'is', null)
        .where('heartbeat_at', '>', sql<string>`now() - make_interval(secs => ${deadAfterSeconds})`)
        .executeTakeFirst();
      return row !== undefined;
    },

    /**
     * Records that a sandbox was destroyed by hand (`crewhouse sandboxes destroy`): its claims end,
     * and `freed` says whether what ran it is gone (else its host frees it on its next sweep).
     * The role's next work gets a new sandbox.
     */
    async markDestroyed(sandboxId: string, freed: boolean): Promise<boolean> {
      return db.transaction().execute(async (trx) => {
        await trx.deleteFrom('sandbox_claims').where('sandbox_id', '=', sandboxId).execute();
        const row = await trx
          .updateTable('sandboxes')
          .set({ state: 'destroyed', updated_at: sql`now()`, ...(freed ? { released_at: sql`now()` } : {}) })
          .where('id', '=', sandboxId)
          .where('state', '<>', 'destroyed')
          .returning('id')
          .executeTakeFirst();
        return row !== undefined;
      });
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
      if (rows.length) await destroyTeamJob.enqueue(trx, { team_id: teamId }, { key: `${destroyTeamJob.kind}:${teamId}` });
      return rows.length;
    },
  };
}

export type SandboxesService = ReturnType<typeof createSandboxesService>;

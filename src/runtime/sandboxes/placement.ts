/**
 * Placement: which sandbox a piece of a team role's work runs in, and on which host. One
 * transaction decides it, holding an advisory lock on the role (so a role's replicas and claims
 * are counted by one placer at a time), a shared one on the team (so archiving the team, which
 * takes it exclusively, waits for placements under way and they see the archive after it) and
 * the candidate hosts' rows (so capacity is counted by one placer at a time across teams), so
 * any number of workers sharing PostgreSQL place without races. What the team, its template and
 * its environment say is asked of their modules' services, on the placement's transaction.
 */
import crypto from 'node:crypto';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { subnetLinks } from './network.ts';
import type { ProviderName, SandboxNetwork } from './provider.ts';

export type PlacementErrorCode = 'unknown_role' | 'hosted' | 'no_host' | 'capacity' | 'full';

/** Why work cannot be placed, in words that name the team, role or environment. */
export class PlacementError extends Error {
  readonly code: PlacementErrorCode;
  constructor(code: PlacementErrorCode, message: string) {
    super(message);
    this.code = code;
    this.name = 'PlacementError';
  }
}

type Q = Kysely<Database> | Transaction<Database>;
type Size = { vcpus: number | null; memory_mib: number | null; disk_gib: number | null };

/** What placement needs of the teams, templates and environments modules: their services answer (src/services.ts wires them). */
export interface TeamDirectory {
  /** A live team's role, read on `q`; null when the team is archived or has no such role. */
  rolePlacement(
    teamId: number,
    role: string,
    q: Q,
  ): Promise<{ team: string; role: string; vm: string; provider: string | null; replicasMax: number; concurrentRuns: number; templateName: string; templateVersion: number | null } | null>;
  /** The size a template version copied for a role, read on `q`. */
  roleSize(template: string, version: number, role: string, q: Q): Promise<Size | null>;
  /** An environment's size, read on `q`. */
  snapshot(environment: string, q: Q): Promise<Size | null>;
  /** The environment of a live team's lead role. */
  leadEnvironment(teamName: string): Promise<{ provider: string | null; vm: string } | null>;
  /** Teams' idle and deep-sleep times by id. */
  sleepTimes(teamIds: number[]): Promise<Map<number, { idleAfterSeconds: number; deepSleepAfterSeconds: number }>>;
}

/** Advisory-lock class of a team's sandboxes (the two-key form): placements share it, archiving takes it alone. */
const TEAM_LOCK = 0x53420001;

/** Holds the team's sandboxes against an archive (shared) or against every placement (exclusive) until the transaction ends. */
export async function lockTeamSandboxes(trx: Transaction<Database>, teamId: number, mode: 'place' | 'archive'): Promise<void> {
  const fn = mode === 'place' ? sql.raw('pg_advisory_xact_lock_shared') : sql.raw('pg_advisory_xact_lock');
  await sql`select ${fn}(${TEAM_LOCK}::int, ${teamId}::int)`.execute(trx);
}

/** One placer of a role at a time: the one-key form, team id in the high half (above any hashtext key others use), the role's hash in the low. */
async function lockRole(trx: Transaction<Database>, teamId: number, role: string): Promise<void> {
  await sql`select pg_advisory_xact_lock((${teamId}::bigint << 32) | (hashtext(${role})::bigint & 4294967295))`.execute(trx);
}

export interface PlacementSettings {
  /** Seconds without a heartbeat after which a host is dead. */
  deadAfterSeconds: number;
  subnet: { base: number; prefix: number };
}

export interface Placement {
  sandboxId: string;
  /** The host that runs it and where that host is reached. */
  hostId: string;
  hostAddress: string;
  /** Which provider runs it (local also for a microvm environment on a host allowed to fall back). */
  provider: ProviderName;
  network: SandboxNetwork;
  replica: number;
  /** False until the host has made it (new, or re-placed after its host died). */
  created: boolean;
  /** True when it moved here from a dead host: its disk did not come along. */
  replaced: boolean;
}

/** Size of a sandbox when its environment names none. */
export const DEFAULT_SIZE = { vcpus: 1, memoryMib: 1024, diskGib: 10 };

const alive = (deadAfter: number) => sql<boolean>`(h.stopped_at is null and h.heartbeat_at > now() - make_interval(secs => ${deadAfter}))`;

/** Places one claim (a run's hold, by the caller's id) on a sandbox of the role; the same claim always answers the same sandbox. */
export async function placeSandbox(db: Db, settings: PlacementSettings, teams: TeamDirectory, req: { teamId: number; role: string; claimId: string }): Promise<Placement> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute((trx) => placeIn(trx, settings, teams, req));
    } catch (err) {
      // Two placers picked the same free link, or an archive of the team crossed this placement
      // (a deadlock PostgreSQL broke): the loser tries again and sees the outcome.
      if (['23505', '40P01', '40001'].includes((err as { code?: string }).code ?? '') && attempt < 8) continue;
      throw err;
    }
  }
}

async function placeIn(trx: Transaction<Database>, settings: PlacementSettings, teams: TeamDirectory, req: { teamId: number; role: string; claimId: string }): Promise<Placement> {
  await lockTeamSandboxes(trx, req.teamId, 'place');
  await lockRole(trx, req.teamId, req.role);
  // Read after the locks: an archive that committed while this waited is seen.
  const role = await teams.rolePlacement(req.teamId, req.role, trx);
  if (!role) throw new PlacementError('unknown_role', `team ${req.teamId} has no role "${req.role}" to place work for`);
  const envProvider = role.provider ?? 'microvm';
  if (envProvider === 'hosted') {
    throw new PlacementError('hosted', `role "${role.role}" of team "${role.team}" uses environment "${role.vm}", whose provider is hosted: this deployment runs no hosted computers; point the role at a microvm or local environment`);
  }
  if (envProvider !== 'microvm' && envProvider !== 'local') throw new PlacementError('hosted', `environment "${role.vm}" has provider "${envProvider}", which no sandbox host runs`);

  const sandboxes = await trx
    .selectFrom('sandboxes as s')
    .leftJoin('sandbox_hosts as h', 'h.id', 's.host_id')
    .select(['s.id', 's.replica', 's.created', 's.host_id', alive(settings.deadAfterSeconds).as('alive')])
    .select(sql<number>`(select count(*) from sandbox_claims c where c.sandbox_id = s.id and c.id <> ${req.claimId})`.as('claims'))
    .where('s.team_id', '=', req.teamId)
    .where('s.role', '=', req.role)
    .where('s.state', '<>', 'destroyed')
    .orderBy('s.replica')
    .execute();

  const existing = await trx.selectFrom('sandbox_claims').select('sandbox_id').where('id', '=', req.claimId).executeTakeFirst();
  const claimed = existing ? sandboxes.find((s) => s.id === existing.sandbox_id) : undefined;
  if (existing && !claimed) await trx.deleteFrom('sandbox_claims').where('id', '=', req.claimId).execute();

  // The claim's own sandbox first (work resuming), then one with room on a live host, then one
  // stranded on a dead host (moved here), then a new replica while the role may have more.
  const withRoom = (s: (typeof sandboxes)[number]) => Number(s.claims) < role.concurrentRuns;
  const target = claimed ?? sandboxes.find((s) => s.alive && withRoom(s)) ?? sandboxes.find((s) => !s.alive && withRoom(s));
  if (!target && sandboxes.length >= role.replicasMax) {
    throw new PlacementError('full', `role "${role.role}" of team "${role.team}" is at its limit: ${role.replicasMax} replica(s) with ${role.concurrentRuns} concurrent run(s) each`);
  }

  let placed: { id: string; replica: number; created: boolean; replaced: boolean };
  if (target?.alive) {
    placed = { id: target.id, replica: target.replica, created: target.created, replaced: false };
  } else {
    const size = await sizeOf(trx, teams, role);
    const host = await pickHost(trx, settings, envProvider, size, target?.id ?? null, role.vm);
    const id = target?.id ?? `sb_${crypto.randomBytes(12).toString('hex')}`;
    const network = await freeLink(trx, settings, id);
    const values = {
      host_id: host.id,
      host_address: network.hostAddress,
      sandbox_address: network.sandboxAddress,
      host_interface: network.hostInterface,
      provider: envProvider === 'microvm' && host.microvm_via_local ? 'local' : envProvider,
      environment: role.vm,
      vcpus: size.vcpus,
      memory_mib: size.memoryMib,
      disk_gib: size.diskGib,
      state: 'starting' as const,
      created: false,
      failure: null,
      released_at: null,
      updated_at: sql<string>`now()`,
    };
    if (target) {
      await trx.updateTable('sandboxes').set(values).where('id', '=', target.id).execute();
      placed = { id, replica: target.replica, created: false, replaced: true };
    } else {
      const used = new Set(sandboxes.map((s) => s.replica));
      let replica = 0;
      while (used.has(replica)) replica++;
      await trx.insertInto('sandboxes').values({ id, team_id: req.teamId, role: req.role, replica, ...values }).execute();
      placed = { id, replica, created: false, replaced: false };
    }
  }

  if (!claimed) await trx.insertInto('sandbox_claims').values({ id: req.claimId, sandbox_id: placed.id }).execute();
  await trx.updateTable('sandboxes').set({ last_active_at: sql`now()` }).where('id', '=', placed.id).execute();
  const row = await trx
    .selectFrom('sandboxes as s')
    .innerJoin('sandbox_hosts as h', 'h.id', 's.host_id')
    .select(['s.provider', 's.host_address', 's.sandbox_address', 's.host_interface', 'h.id as host_id', 'h.address'])
    .where('s.id', '=', placed.id)
    .executeTakeFirstOrThrow();
  return {
    sandboxId: placed.id,
    hostId: row.host_id,
    hostAddress: row.address,
    provider: row.provider as ProviderName,
    network: { hostAddress: row.host_address!, sandboxAddress: row.sandbox_address!, hostInterface: row.host_interface! },
    replica: placed.replica,
    created: placed.created,
    replaced: placed.replaced,
  };
}

/** The size the team's template version copied from the role's environment, else the environment's, else the default. */
async function sizeOf(trx: Transaction<Database>, teams: TeamDirectory, role: { role: string; vm: string; templateName: string; templateVersion: number | null }) {
  let size: Size | null = null;
  if (role.templateVersion !== null) size = await teams.roleSize(role.templateName, role.templateVersion, role.role, trx);
  if (!size || size.vcpus === null) size = (await teams.snapshot(role.vm, trx)) ?? size;
  return { vcpus: size?.vcpus ?? DEFAULT_SIZE.vcpus, memoryMib: size?.memory_mib ?? DEFAULT_SIZE.memoryMib, diskGib: size?.disk_gib ?? DEFAULT_SIZE.diskGib };
}

/** A live host that runs the provider and has room, its row locked; the one with the most free memory. */
async function pickHost(trx: Transaction<Database>, settings: PlacementSettings, provider: 'microvm' | 'local', size: { vcpus: number; memoryMib: number; diskGib: number }, moving: string | null, environment: string) {
  const hosts = await trx
    .selectFrom('sandbox_hosts as h')
    .select(['h.id', 'h.address', 'h.vcpus', 'h.memory_mib', 'h.disk_gib', 'h.microvm_via_local'])
    .where(alive(settings.deadAfterSeconds))
    .where(sql<boolean>`${provider} = any(h.providers)`)
    .orderBy('h.id')
    .forUpdate()
    .execute();
  if (hosts.length === 0) throw new PlacementError('no_host', `no live sandbox host runs ${provider} environments (environment "${environment}")`);
  const used = await trx
    .selectFrom('sandboxes')
    .select(['host_id', sql<number>`sum(vcpus)`.as('vcpus'), sql<number>`sum(memory_mib)`.as('memory_mib'), sql<number>`sum(disk_gib)`.as('disk_gib')])
    .where('host_id', 'in', hosts.map((h) => h.id))
    .where('state', '<>', 'destroyed')
    .$if(moving !== null, (q) => q.where('id', '<>', moving!))
    .groupBy('host_id')
    .execute();
  const usedBy = new Map(used.map((u) => [u.host_id, u]));
  const free = hosts
    .map((h) => {
      const u = usedBy.get(h.id);
      return { host: h, vcpus: h.vcpus - Number(u?.vcpus ?? 0), memory: h.memory_mib - Number(u?.memory_mib ?? 0), disk: h.disk_gib - Number(u?.disk_gib ?? 0) };
    })
    .filter((f) => f.vcpus >= size.vcpus && f.memory >= size.memoryMib && f.disk >= size.diskGib)
    .sort((a, b) => b.memory - a.memory);
  if (free.length === 0) {
    throw new PlacementError('capacity', `no live sandbox host has room for environment "${environment}" (${size.vcpus} vCPU, ${size.memoryMib} MiB, ${size.diskGib} GiB)`);
  }
  return free[0].host;
}

/** The lowest /30 of the subnet no sandbox that is not destroyed holds. */
async function freeLink(trx: Transaction<Database>, settings: PlacementSettings, sandboxId: string): Promise<SandboxNetwork> {
  const links = subnetLinks(settings.subnet);
  const rows = await trx.selectFrom('sandboxes').select('sandbox_address').where('state', '<>', 'destroyed').where('sandbox_address', 'is not', null).execute();
  const taken = new Set(rows.map((r) => links.indexOf(r.sandbox_address!)).filter((i) => i !== null));
  for (let i = 0; i < links.count; i++) if (!taken.has(i)) return links.link(i, sandboxId);
  throw new PlacementError('capacity', `every /30 of the sandbox subnet is in use (${links.count}); widen SERVICE_SANDBOX_SUBNET`);
}

/** The ids of the hosts alive now (heartbeating, not stopped): a job targeted at any other host is anyone's. */
export async function liveHostIds(db: Db, deadAfterSeconds: number): Promise<string[]> {
  const rows = await db.selectFrom('sandbox_hosts as h').select('h.id').where(alive(deadAfterSeconds)).execute();
  return rows.map((r) => r.id);
}

/** Ends a claim (its run finished or moved); the sandbox may then sleep when idle. */
export async function releaseClaim(db: Db, claimId: string): Promise<void> {
  const gone = await db.deleteFrom('sandbox_claims').where('id', '=', claimId).returning('sandbox_id').executeTakeFirst();
  if (gone) await db.updateTable('sandboxes').set({ last_active_at: sql`now()` }).where('id', '=', gone.sandbox_id).execute();
}

/**
 * Whether a live host can take a team's work: the tasks route answers 503 ("no gateway
 * answers") when not. A hosted lead is taken (its work then fails naming the environment).
 */
export async function canTakeWork(db: Db, settings: Pick<PlacementSettings, 'deadAfterSeconds'>, teams: Pick<TeamDirectory, 'leadEnvironment'>, teamName: string): Promise<{ ok: boolean; reason: string | null }> {
  const lead = await teams.leadEnvironment(teamName);
  const provider = lead?.provider === 'local' ? 'local' : 'microvm';
  const hosts = await db
    .selectFrom('sandbox_hosts as h')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(alive(settings.deadAfterSeconds))
    .$if(lead?.provider !== 'hosted', (q) => q.where(sql<boolean>`${provider} = any(h.providers)`))
    .$if(lead?.provider === 'hosted', (q) => q.where(sql<boolean>`cardinality(h.providers) > 0`))
    .executeTakeFirstOrThrow();
  if (Number(hosts.n) > 0) return { ok: true, reason: null };
  return { ok: false, reason: lead ? `no live sandbox host runs ${provider} environments (environment "${lead.vm}" of the lead role)` : 'no live sandbox host' };
}

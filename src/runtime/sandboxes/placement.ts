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

/**
 * `full`: the role's replicas are busy with the team's other runs; `wait`: no host has room now
 * for the sandbox to make or wake (the claim waits in line for it); `capacity`: it can never fit.
 */
export type PlacementErrorCode = 'unknown_role' | 'hosted' | 'no_host' | 'capacity' | 'full' | 'wait';

/** What a waiting claim needs: recorded in `sandbox_waits` so the hosts serve the oldest first. */
interface WaitNeed {
  team: string;
  provider: string;
  hostId: string | null;
  environment: string;
  size: { vcpus: number; memoryMib: number; diskGib: number };
}

/** Why work cannot be placed, in words that name the team, role or environment. */
export class PlacementError extends Error {
  readonly code: PlacementErrorCode;
  /** For `wait`: what the claim waits for. */
  readonly need: WaitNeed | null;
  constructor(code: PlacementErrorCode, message: string, need: WaitNeed | null = null) {
    super(message);
    this.code = code;
    this.need = need;
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
  /** Awake sandboxes' vCPUs a host takes per vCPU it offers (SERVICE_SANDBOX_VCPU_OVERCOMMIT; default DEFAULT_VCPU_OVERCOMMIT). */
  vcpuOvercommit?: number;
}

/** vCPUs are shared: a host takes awake sandboxes asking up to this many times the vCPUs it offers. */
export const DEFAULT_VCPU_OVERCOMMIT = 4;

/**
 * The states that hold a host's vCPUs and memory. Asleep, a microVM's memory is on disk and a
 * local sandbox in deep sleep runs no process; a local sandbox's light sleep (a frozen cgroup)
 * still holds its memory, so room is made by putting idle local sandboxes into deep sleep.
 */
export const AWAKE_STATES = ['starting', 'running'] as const;

/** What a host offers and what its sandboxes hold: vCPUs and memory by the awake ones, disk by all. */
export interface HostRoom {
  hostId: string;
  /** vCPUs it takes (what it offers times the overcommit ratio), memory and disk it offers. */
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  used: { vcpus: number; memoryMib: number; diskGib: number };
  awake: number;
  asleep: number;
}

const fitsIn = (room: HostRoom, size: { vcpus: number; memoryMib: number; diskGib: number }) =>
  room.vcpus - room.used.vcpus >= size.vcpus && room.memoryMib - room.used.memoryMib >= size.memoryMib && room.diskGib - room.used.diskGib >= size.diskGib;

/** Whether the size fits in the room left on the host. */
export { fitsIn as fitsOnHost };

/** What each of the hosts offers and holds, leaving out one sandbox (the one being re-placed or woken). */
export async function hostRooms(q: Q, hosts: Array<{ id: string; vcpus: number; memory_mib: number; disk_gib: number }>, overcommit: number, leaveOut: string | null = null): Promise<HostRoom[]> {
  if (hosts.length === 0) return [];
  const awake = sql.join(AWAKE_STATES.map((s) => sql.lit(s)));
  const used = await q
    .selectFrom('sandboxes')
    .select([
      'host_id',
      sql<number>`coalesce(sum(vcpus) filter (where state in (${awake})), 0)`.as('vcpus'),
      // A local sandbox's light sleep freezes its processes where they are: its memory stays held.
      sql<number>`coalesce(sum(memory_mib) filter (where state in (${awake}) or (state = 'sleeping' and provider = 'local')), 0)`.as('memory_mib'),
      sql<number>`coalesce(sum(disk_gib), 0)`.as('disk_gib'),
      sql<number>`count(*) filter (where state in (${awake}))`.as('awake'),
      sql<number>`count(*) filter (where state not in (${awake}))`.as('asleep'),
    ])
    .where('host_id', 'in', hosts.map((h) => h.id))
    .where('state', '<>', 'destroyed')
    .$if(leaveOut !== null, (qb) => qb.where('id', '<>', leaveOut!))
    .groupBy('host_id')
    .execute();
  const usedBy = new Map(used.map((u) => [u.host_id, u]));
  return hosts.map((h) => {
    const u = usedBy.get(h.id);
    return {
      hostId: h.id,
      vcpus: Math.floor(h.vcpus * overcommit),
      memoryMib: h.memory_mib,
      diskGib: h.disk_gib,
      used: { vcpus: Number(u?.vcpus ?? 0), memoryMib: Number(u?.memory_mib ?? 0), diskGib: Number(u?.disk_gib ?? 0) },
      awake: Number(u?.awake ?? 0),
      asleep: Number(u?.asleep ?? 0),
    };
  });
}

/** How many claims of the provider's runs waited for room before this one (which may not wait yet). */
async function waitingBefore(q: Q, provider: string, claimId: string): Promise<number> {
  const mine = await q.selectFrom('sandbox_waits').select('since').where('claim_id', '=', claimId).executeTakeFirst();
  const row = await q
    .selectFrom('sandbox_waits')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('provider', '=', provider)
    .where('claim_id', '<>', claimId)
    .$if(mine !== undefined, (qb) => qb.where('since', '<', mine!.since))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

const sizeText = (size: { vcpus: number; memoryMib: number; diskGib: number }) => `${size.vcpus} vCPU, ${size.memoryMib} MiB, ${size.diskGib} GiB`;

/** What keeps the best of the hosts from taking the size now, in words. */
function shortOf(rooms: HostRoom[], size: { vcpus: number; memoryMib: number; diskGib: number }): string {
  const best = [...rooms].sort((a, b) => b.memoryMib - b.used.memoryMib - (a.memoryMib - a.used.memoryMib))[0];
  const short: string[] = [];
  if (best.memoryMib - best.used.memoryMib < size.memoryMib) short.push(`sandboxes hold ${best.used.memoryMib} of its ${best.memoryMib} MiB of memory`);
  if (best.vcpus - best.used.vcpus < size.vcpus) short.push(`awake sandboxes hold ${best.used.vcpus} of the ${best.vcpus} vCPUs it shares out`);
  if (best.diskGib - best.used.diskGib < size.diskGib) short.push(`its sandboxes hold ${best.used.diskGib} of its ${best.diskGib} GiB of disk`);
  return short.length ? `on the host with the most room, ${short.join(', and ')}` : 'every host with room is promised to runs that waited longer';
}

/** The waiting notice's words. */
function waitMessage(environment: string, size: { vcpus: number; memoryMib: number; diskGib: number }, why: string, before: number) {
  const line = before > 0 ? `; ${before} run(s) waited before this one` : '';
  return `no sandbox host has room now for environment "${environment}" (${sizeText(size)}): ${why}${line}. This run waits its turn and goes on when an idle sandbox goes to sleep or another run ends`;
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
export async function placeSandbox(db: Db, settings: PlacementSettings, teams: TeamDirectory, req: PlaceRequest): Promise<Placement> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await db.transaction().execute((trx) => placeIn(trx, settings, teams, req));
    } catch (err) {
      if (err instanceof PlacementError && err.code === 'wait' && err.need) {
        // The claim takes its place in line once; trying again keeps its place.
        const n = err.need;
        await db
          .insertInto('sandbox_waits')
          .values({ claim_id: req.claimId, run_id: req.runId ?? req.claimId, team_id: req.teamId, team: n.team, provider: n.provider, host_id: n.hostId, environment: n.environment, vcpus: n.size.vcpus, memory_mib: n.size.memoryMib, disk_gib: n.size.diskGib })
          .onConflict((oc) => oc.column('claim_id').doUpdateSet({ host_id: n.hostId, provider: n.provider }))
          .execute();
        throw err;
      }
      // Two placers picked the same free link, or an archive of the team crossed this placement
      // (a deadlock PostgreSQL broke): the loser tries again and sees the outcome.
      if (['23505', '40P01', '40001'].includes((err as { code?: string }).code ?? '') && attempt < 8) continue;
      throw err;
    }
  }
}

/** A claim to place: `runId` is the run queued again when room comes (default: the claim's id). */
export interface PlaceRequest {
  teamId: number;
  role: string;
  claimId: string;
  runId?: string;
}

async function placeIn(trx: Transaction<Database>, settings: PlacementSettings, teams: TeamDirectory, req: PlaceRequest): Promise<Placement> {
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
    .select(['s.id', 's.replica', 's.created', 's.host_id', 's.state', 's.vcpus', 's.memory_mib', 's.disk_gib', alive(settings.deadAfterSeconds).as('alive')])
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
  if (target?.alive && target.created && !(AWAKE_STATES as readonly string[]).includes(target.state)) {
    // Waking a sleeping sandbox takes back its vCPUs and memory on its host: there must be room.
    const host = await trx.selectFrom('sandbox_hosts').select(['id', 'vcpus', 'memory_mib', 'disk_gib']).where('id', '=', target.host_id!).forUpdate().executeTakeFirstOrThrow();
    const [room] = await hostRooms(trx, [host], settings.vcpuOvercommit ?? DEFAULT_VCPU_OVERCOMMIT, target.id);
    const size = { vcpus: target.vcpus, memoryMib: target.memory_mib, diskGib: target.disk_gib };
    const before = await waitingBefore(trx, envProvider, req.claimId);
    if (!fitsIn(room, size) || before > 0) {
      throw new PlacementError('wait', waitMessage(role.vm, size, fitsIn(room, size) ? 'its host is promised to runs that waited longer' : shortOf([room], size).replace('on the host with the most room', 'on the host of its sleeping sandbox'), before), {
        team: role.team,
        provider: envProvider,
        hostId: host.id,
        environment: role.vm,
        size,
      });
    }
    placed = { id: target.id, replica: target.replica, created: target.created, replaced: false };
  } else if (target?.alive) {
    placed = { id: target.id, replica: target.replica, created: target.created, replaced: false };
  } else {
    const size = await sizeOf(trx, teams, role);
    const host = await pickHost(trx, settings, envProvider, size, target?.id ?? null, role.vm, req.claimId, role.team);
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
  await trx.deleteFrom('sandbox_waits').where('claim_id', '=', req.claimId).execute();
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

/**
 * A live host that runs the provider and has room now, its row locked; the one with the most free
 * memory. None can ever take the size: `capacity`; none has room now, or runs that waited longer
 * come first: `wait`.
 */
async function pickHost(trx: Transaction<Database>, settings: PlacementSettings, provider: 'microvm' | 'local', size: { vcpus: number; memoryMib: number; diskGib: number }, moving: string | null, environment: string, claimId: string, team: string) {
  const hosts = await trx
    .selectFrom('sandbox_hosts as h')
    .select(['h.id', 'h.address', 'h.vcpus', 'h.memory_mib', 'h.disk_gib', 'h.microvm_via_local'])
    .where(alive(settings.deadAfterSeconds))
    .where(sql<boolean>`${provider} = any(h.providers)`)
    .orderBy('h.id')
    .forUpdate()
    .execute();
  if (hosts.length === 0) throw new PlacementError('no_host', `no live sandbox host runs ${provider} environments (environment "${environment}")`);
  const rooms = await hostRooms(trx, hosts, settings.vcpuOvercommit ?? DEFAULT_VCPU_OVERCOMMIT, moving);
  const empty = (r: HostRoom) => ({ ...r, used: { vcpus: 0, memoryMib: 0, diskGib: 0 } });
  if (!rooms.some((r) => fitsIn(empty(r), size))) {
    const big = [...rooms].sort((a, b) => b.memoryMib - a.memoryMib)[0];
    throw new PlacementError(
      'capacity',
      `environment "${environment}" (${sizeText(size)}) is larger than any live sandbox host running ${provider} environments can ever hold (the largest offers ${big.vcpus} vCPU, ${big.memoryMib} MiB, ${big.diskGib} GiB): make the environment smaller, or give a host more with SERVICE_SANDBOX_VCPUS, SERVICE_SANDBOX_MEMORY_MIB or SERVICE_SANDBOX_DISK_GIB`,
    );
  }
  const free = rooms.filter((r) => fitsIn(r, size)).sort((a, b) => b.memoryMib - b.used.memoryMib - (a.memoryMib - a.used.memoryMib));
  const before = await waitingBefore(trx, provider, claimId);
  if (free.length === 0 || before > 0) {
    throw new PlacementError('wait', waitMessage(environment, size, free.length === 0 ? shortOf(rooms, size) : 'the room there is is promised to runs that waited longer', before), { team, provider, hostId: null, environment, size });
  }
  return hosts.find((h) => h.id === free[0].hostId)!;
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
  await db.deleteFrom('sandbox_waits').where('claim_id', '=', claimId).execute();
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
  // A live host that tried the provider and could not run it says why: that is what to fix.
  const tried = await db
    .selectFrom('sandbox_hosts as h')
    .select(['h.address', 'h.provider_problems'])
    .where(alive(settings.deadAfterSeconds))
    .orderBy('h.address')
    .execute();
  const why = tried.flatMap((h) => (h.provider_problems?.[provider] ? [`on host ${h.address}, ${h.provider_problems[provider]}`] : []));
  const base = lead ? `no live sandbox host runs ${provider} environments (environment "${lead.vm}" of the lead role)` : 'no live sandbox host';
  return { ok: false, reason: why.length ? `${base}: ${why.join('; ')}` : base };
}

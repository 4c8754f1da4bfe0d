/**
 * A sandbox host: the part of a worker process that runs sandboxes on its machine. It
 * registers itself (address, the providers it can run, capacity) and heartbeats; finds its
 * sandboxes again after a restart (adopting what still runs, cleaning up what it no longer
 * owns, marking what vanished for re-creation); makes, wakes, sleeps and destroys the
 * sandboxes placed on it; puts idle ones to sleep and deep sleep; and frees what archiving
 * marked destroyed. The run engine places work with `place`, then execs on the owning host.
 */
import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { sql } from 'kysely';
import type { Config } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import type { Histogram, Registry } from '../../metrics.ts';
import { logIgnored, type Logger } from '../../logger.ts';
import { ttlCache } from '../../ttl-cache.ts';
import { createKeyedQueue } from './keyed-queue.ts';
import { canTakeWork, fitsOnHost, hostRooms, placeSandbox, liveHostIds, releaseClaim, type Placement, type PlaceRequest, type PlacementSettings, type TeamDirectory } from './placement.ts';
import { createLocalProvider } from './providers/local.ts';
import {
  SANDBOX_CA_PATH,
  SandboxError,
  type ExecHandle,
  type ExecRequest,
  type ProviderName,
  type SandboxProvider,
  type SandboxState,
  type SandboxStatus,
} from './provider.ts';

/** A ComponentContext is enough: the worker component calls `startSandboxHost(ctx)`. */
export interface SandboxHostOptions {
  config: Config;
  db: Db;
  logger: Logger;
  /** What placement and the idle sweep need of the teams, templates and environments modules (`services.sandboxDirectory`). */
  teams: TeamDirectory;
  metrics?: Registry;
  /** The deployment CA (PEM) sandboxes trust; from the gateway. */
  caPem?: string | null;
  /** The local provider (default: one under SERVICE_SANDBOX_DIR). */
  local?: SandboxProvider | null;
  /** The microvm provider, when this build has one. */
  microvm?: SandboxProvider | null;
  /** Whether KVM can actually run a guest here (the microvm provider's probe). */
  microvmUsable?: boolean;
  /** Heartbeat and sweep period in ms (default: a third of SERVICE_SANDBOX_HOST_DEAD_AFTER). */
  tickMs?: number;
  /** Queues the runs again that waited for room on a host (the engine's `engine.advance-run`): room was made. */
  wake?: (runIds: string[]) => Promise<void>;
}

export interface SandboxHost {
  readonly id: string;
  /** Environment providers this host serves. */
  readonly providers: string[];
  place(req: PlaceRequest): Promise<Placement>;
  release(claimId: string): Promise<void>;
  /** The ids of the sandbox hosts alive now (this one's included while it heartbeats). */
  liveHosts(): Promise<string[]>;
  /** Makes the sandbox (first use, or after it was re-placed) or wakes it; it must be placed on this host. */
  ensureRunning(sandboxId: string): Promise<SandboxStatus>;
  /** Runs a command, waking the sandbox first when it sleeps. */
  exec(sandboxId: string, req: ExecRequest): Promise<ExecHandle>;
  copyIn(sandboxId: string, files: Array<{ path: string; content: Buffer | string; mode?: number }>): Promise<void>;
  /** The sandbox's count of processes its memory limit killed, or null when its provider does not count them. */
  oomKills(sandboxId: string): Promise<number | null>;
  sleep(sandboxId: string, depth: 'sleep' | 'deep'): Promise<SandboxStatus>;
  destroy(sandboxId: string): Promise<void>;
  /** Whether a live host can take the team's work (the tasks route's 503). */
  canTakeWork(teamName: string): Promise<{ ok: boolean; reason: string | null }>;
  /** One heartbeat and sweep now (idle sleep, deep sleep, freeing destroyed sandboxes). */
  tick(): Promise<void>;
  stop(): Promise<void>;
}

/** The environment every exec in a sandbox gets: the gateway as its proxy, the deployment CA as its trust store. */
export function sandboxEnv(hostAddress: string, gatewayPort: number): Record<string, string> {
  const proxy = `http://${hostAddress}:${gatewayPort}`;
  return {
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: 'localhost,127.0.0.1',
    no_proxy: 'localhost,127.0.0.1',
    SSL_CERT_FILE: SANDBOX_CA_PATH,
    NODE_EXTRA_CA_CERTS: SANDBOX_CA_PATH,
    GIT_SSL_CAINFO: SANDBOX_CA_PATH,
    REQUESTS_CA_BUNDLE: SANDBOX_CA_PATH,
  };
}

/** This host's id: kept beside its sandboxes so a restart finds them again. */
async function hostId(dir: string | null): Promise<string> {
  const fresh = () => `host_${crypto.randomBytes(8).toString('hex')}`;
  if (!dir) return fresh();
  const file = path.join(dir, 'host-id');
  const known = await fs.readFile(file, 'utf8').catch(() => null);
  if (known && /^host_[0-9a-f]{16}$/.test(known.trim())) return known.trim();
  const id = fresh();
  await fs.mkdir(dir, { recursive: true });
  await fs.writeFile(file, id);
  return id;
}

async function measuredCapacity(config: Config) {
  const c = config.sandboxCapacity;
  let diskGib = c.diskGib;
  if (!diskGib) {
    const s = await fs.statfs(config.sandboxDir ?? os.tmpdir()).catch(() => null);
    diskGib = s ? Math.floor((s.bavail * s.bsize) / 2 ** 30) : 0;
  }
  return { vcpus: c.vcpus || os.cpus().length, memoryMib: c.memoryMib || Math.floor(os.totalmem() / 2 ** 20), diskGib };
}

/** Sandboxes by provider and state on this host, read when scraped. */
class SandboxGauge {
  counts = new Map<string, number>();
  render(): string {
    const lines = ['# HELP crewhouse_sandboxes Sandboxes on this host by provider and state', '# TYPE crewhouse_sandboxes gauge'];
    for (const [k, v] of this.counts) {
      const [provider, state] = k.split('/');
      lines.push(`crewhouse_sandboxes{provider="${provider}",state="${state}"} ${v}`);
    }
    return lines.join('\n');
  }
}

/** How long the list of live hosts is reused. */
const LIVE_HOSTS_TTL_MS = 1_000;

export async function startSandboxHost(opts: SandboxHostOptions): Promise<SandboxHost> {
  const { db, config, logger } = opts;
  const log = logger.child({ component: 'sandbox-host' });
  const live = ttlCache<string[]>(LIVE_HOSTS_TTL_MS);
  const settings: PlacementSettings = { deadAfterSeconds: config.sandboxHostDeadAfter, subnet: config.sandboxSubnet, vcpuOvercommit: config.sandboxVcpuOvercommit };
  const id = await hostId(config.sandboxDir);

  const gauge = new SandboxGauge();
  opts.metrics?.metrics.push(gauge);
  const wakeSeconds: Histogram | undefined = opts.metrics?.histogram('crewhouse_sandbox_wake_seconds', 'Time to wake a sandbox, by provider and what it woke from', [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]);
  const coldBootSeconds: Histogram | undefined = opts.metrics?.histogram('crewhouse_sandbox_cold_boot_seconds', 'Time to make or cold-boot a sandbox, by provider', [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]);

  // Probe what this machine can run; a missing tool is logged with the package to install.
  const providers = new Map<ProviderName, SandboxProvider>();
  // Why a provider cannot run here, in words: logged once and registered, so a refused task says it.
  const problems: Record<string, string> = {};
  const local = opts.local === undefined ? (config.sandboxDir ? createLocalProvider({ root: config.sandboxDir, gatewayPort: config.gatewayPort, poolSize: config.sandboxPool, logger: log }) : null) : opts.local;
  if (local) {
    try {
      await local.check();
      providers.set('local', local);
    } catch (err) {
      problems.local = (err as Error).message;
      log.error({ provider: 'local', cause: problems.local }, `the local sandbox provider cannot run on this host, so local environments get no sandboxes here: ${problems.local}`);
    }
  }
  let microvmViaLocal = false;
  const serves = new Set<string>(providers.has('local') ? ['local'] : []);
  if (opts.microvm && opts.microvmUsable) {
    try {
      await opts.microvm.check();
      providers.set('microvm', opts.microvm);
      serves.add('microvm');
    } catch (err) {
      problems.microvm = (err as Error).message;
      log.error({ provider: 'microvm', cause: problems.microvm }, 'the microvm sandbox provider cannot run on this host');
    }
  }
  if (!serves.has('microvm') && config.sandboxMicrovmFallback === 'local' && providers.has('local')) {
    microvmViaLocal = true;
    serves.add('microvm');
    log.warn('microvm environments on this host are served by the local provider (SERVICE_SANDBOX_MICROVM_FALLBACK=local): namespaces, not virtual machines');
  } else if (!serves.has('microvm')) {
    log.warn('this host serves no microvm environments: KVM or the microvm provider is unusable and SERVICE_SANDBOX_MICROVM_FALLBACK is not local');
  }

  const capacity = await measuredCapacity(config);
  const register = () =>
    db
      .insertInto('sandbox_hosts')
      .values({ id, address: config.sandboxHostAddress, providers: [...serves], provider_problems: JSON.stringify(problems), microvm_via_local: microvmViaLocal, vcpus: capacity.vcpus, memory_mib: capacity.memoryMib, disk_gib: capacity.diskGib, heartbeat_at: sql`now()`, started_at: sql`now()` })
      .onConflict((oc) =>
        oc.column('id').doUpdateSet({
          address: config.sandboxHostAddress,
          providers: [...serves],
          provider_problems: JSON.stringify(problems),
          microvm_via_local: microvmViaLocal,
          vcpus: capacity.vcpus,
          memory_mib: capacity.memoryMib,
          disk_gib: capacity.diskGib,
          heartbeat_at: sql`now()`,
          started_at: sql`now()`,
          stopped_at: null,
        }),
      )
      .execute();

  const providerOf = (name: string) => {
    const p = providers.get(name as ProviderName);
    if (!p) throw new SandboxError('unavailable', `this host cannot run ${name} sandboxes`);
    return p;
  };

  /** Finds this host's sandboxes again after a start: adopt, clean up or mark for re-creation. */
  async function recover() {
    const seen = new Set<string>();
    for (const [name, p] of providers) {
      for (const sid of await p.list()) {
        seen.add(sid);
        const row = await db.selectFrom('sandboxes').select(['host_id', 'state', 'provider']).where('id', '=', sid).executeTakeFirst();
        if (!row || row.state === 'destroyed' || row.host_id !== id || row.provider !== name) {
          await p.destroy(sid).catch((err) => log.error({ sandbox: sid, cause: (err as Error).message }, 'could not remove a sandbox this host no longer owns'));
          if (row?.host_id === id) await db.updateTable('sandboxes').set({ released_at: sql`now()` }).where('id', '=', sid).execute();
          log.info({ sandbox: sid }, 'removed a sandbox this host no longer owns');
          continue;
        }
        const status = await p.status(sid).catch((err) => (logIgnored(log, 'could not read a sandbox\'s status; treating it as half-made', { sandbox: sid })(err), null));
        if (!status || status.state === 'starting') {
          // Killed halfway through making it: remove what there is and make it again on next use.
          await p.destroy(sid).catch((err) => log.error({ sandbox: sid, cause: (err as Error).message }, 'could not remove a half-made sandbox'));
          await db.updateTable('sandboxes').set({ state: 'starting', created: false, updated_at: sql`now()` }).where('id', '=', sid).execute();
          log.warn({ sandbox: sid }, 'removed a half-made sandbox; it will be made again when its work resumes');
          continue;
        }
        await db.updateTable('sandboxes').set({ state: status.state, created: true, updated_at: sql`now()` }).where('id', '=', sid).execute();
        log.info({ sandbox: sid, state: status.state }, 'adopted a sandbox after restart');
      }
    }
    const mine = await db.selectFrom('sandboxes').select(['id', 'state', 'created', 'released_at']).where('host_id', '=', id).execute();
    for (const r of mine) {
      if (seen.has(r.id)) continue;
      if (r.state === 'destroyed') {
        if (r.released_at === null) await db.updateTable('sandboxes').set({ released_at: sql`now()` }).where('id', '=', r.id).execute();
      } else if (r.created) {
        // Its resources are gone (a wiped disk, a provider no longer here): made again on next use.
        await db.updateTable('sandboxes').set({ state: 'starting', created: false, updated_at: sql`now()` }).where('id', '=', r.id).execute();
        log.warn({ sandbox: r.id }, 'a sandbox of this host has no resources left; it will be made again when its work resumes');
      }
    }
  }

  const inFlight = new Map<string, number>();
  const busy = (sid: string, by: number) => {
    const n = (inFlight.get(sid) ?? 0) + by;
    if (n > 0) inFlight.set(sid, n);
    else inFlight.delete(sid);
  };

  async function ownRow(sandboxId: string) {
    const row = await db
      .selectFrom('sandboxes')
      .selectAll()
      .where('id', '=', sandboxId)
      .executeTakeFirst();
    if (row?.state === 'destroyed' && !row.created && row.failure) throw new SandboxError('failed', `sandbox ${sandboxId} could not be made (${row.failure}); the role's next work is placed on a new one`);
    if (!row || row.state === 'destroyed') throw new SandboxError('not_found', `no sandbox ${sandboxId}`);
    if (row.host_id !== id) throw new SandboxError('wrong_state', `sandbox ${sandboxId} is placed on host ${row.host_id ?? '(none)'}, not on this one`);
    return row;
  }
  const setState = (sandboxId: string, state: SandboxState, extra: { created?: boolean; failure?: string | null } = {}) =>
    db.updateTable('sandboxes').set({ state, ...extra, updated_at: sql`now()`, last_active_at: sql`now()` }).where('id', '=', sandboxId).where('state', '<>', 'destroyed').execute();

  // Per sandbox: a make-or-wake, an exec's start, the sweep's sleep and a destroy never interleave,
  // so the sweep cannot freeze a sandbox between an exec's wake and its start.
  const serial = createKeyedQueue();
  async function open(sandboxId: string): Promise<SandboxStatus> {
    const row = await ownRow(sandboxId);
    const p = providerOf(row.provider);
    const started = performance.now();
    let making = false;
    try {
      let status: SandboxStatus | null = null;
      if (row.created) status = await p.status(sandboxId).catch((err) => (err instanceof SandboxError && err.code === 'not_found' ? null : Promise.reject(err)));
      if (!status) {
        making = true;
        const hostAddress = row.host_address!;
        const network = { hostAddress, sandboxAddress: row.sandbox_address!, hostInterface: row.host_interface! };
        const made = await p.create({ id: sandboxId, vcpus: row.vcpus, memoryMib: row.memory_mib, diskGib: row.disk_gib, image: null, env: sandboxEnv(hostAddress, config.gatewayPort), network, caPem: opts.caPem ?? null });
        coldBootSeconds?.observe({ provider: p.name }, (performance.now() - started) / 1000);
        await setState(sandboxId, 'running', { created: true, failure: null });
        return { ...made, coldBooted: true };
      }
      if (status.state === 'running') {
        await setState(sandboxId, 'running');
        return status;
      }
      const from = status.state;
      const woke = await p.wake(sandboxId);
      const seconds = (performance.now() - started) / 1000;
      if (woke.coldBooted) coldBootSeconds?.observe({ provider: p.name }, seconds);
      wakeSeconds?.observe({ provider: p.name, from }, seconds);
      await setState(sandboxId, 'running');
      return woke;
    } catch (err) {
      const cause = (err as Error).message;
      // The work that needed the sandbox gets the error; the host goes on with the others.
      log.error({ sandbox: sandboxId, provider: p.name, cause }, 'a sandbox could not be made or woken');
      if (making) await unmade(sandboxId, p, cause);
      else await db.updateTable('sandboxes').set({ failure: cause.slice(0, 2000), updated_at: sql`now()` }).where('id', '=', sandboxId).execute();
      throw err instanceof SandboxError ? err : new SandboxError('failed', cause, { cause: err });
    }
  }

  /**
   * A create that failed made nothing (the providers remove what they began; asked again here
   * in case), so the sandbox gives up its place at once: its share of this host's capacity and
   * its link, which would otherwise stay held until the team is archived. The row is destroyed
   * with the failure kept; the role's next work is placed on a new sandbox (on whichever host
   * has room then), and the work that needed this one gets the error.
   */
  async function unmade(sandboxId: string, p: SandboxProvider, cause: string) {
    const freed = await p.destroy(sandboxId).then(
      () => true,
      (err) => (log.error({ sandbox: sandboxId, cause: (err as Error).message }, 'could not remove what a failed create left; the next heartbeat tries again'), false),
    );
    await db
      .updateTable('sandboxes')
      .set({ state: 'destroyed', created: false, failure: cause.slice(0, 2000), released_at: freed ? sql`now()` : null, updated_at: sql`now()` })
      .where('id', '=', sandboxId)
      .where('state', '<>', 'destroyed')
      .execute();
  }

  const ensureRunning = (sandboxId: string) => serial(sandboxId, () => open(sandboxId));

  async function destroyHere(sandboxId: string, providerName: string) {
    const p = providers.get(providerName as ProviderName);
    if (p) await p.destroy(sandboxId);
    await db.updateTable('sandboxes').set({ state: 'destroyed', released_at: sql`now()`, updated_at: sql`now()` }).where('id', '=', sandboxId).execute();
  }

  /** Puts a sandbox that is still idle (no claim, no exec under way) to sleep; true when it slept. */
  function sleepIdle(sandboxId: string, provider: string, depth: 'sleep' | 'deep', why: string): Promise<boolean> {
    return serial(sandboxId, async () => {
      // Work that arrived since the query keeps it awake.
      if (inFlight.has(sandboxId)) return false;
      const fresh = await db.selectFrom('sandboxes').select('state').where('id', '=', sandboxId).executeTakeFirst();
      if (!fresh || fresh.state === 'destroyed' || (await db.selectFrom('sandbox_claims').select('id').where('sandbox_id', '=', sandboxId).executeTakeFirst())) return false;
      const status = await providerOf(provider).sleep(sandboxId, depth);
      await db.updateTable('sandboxes').set({ state: status.state, updated_at: sql`now()` }).where('id', '=', sandboxId).where('state', '<>', 'destroyed').execute();
      log.info({ sandbox: sandboxId, state: status.state }, why);
      return true;
    }).catch((err) => (log.error({ sandbox: sandboxId, cause: (err as Error).message }, 'an idle sandbox could not sleep'), false));
  }

  /**
   * Runs wait for room (placement recorded them, oldest first): while the oldest one this host
   * could serve does not fit, idle sandboxes here go to sleep early, least recently used first
   * (a local one into deep sleep, as only that frees its memory); once it fits, the waiting runs
   * are queued again and the oldest takes the room (placement serves them in line).
   */
  async function makeRoom() {
    if (serves.size === 0) return;
    const waits = await db
      .selectFrom('sandbox_waits')
      .select(['run_id', 'vcpus', 'memory_mib', 'disk_gib'])
      .where('provider', 'in', [...serves])
      .where((eb) => eb.or([eb('host_id', 'is', null), eb('host_id', '=', id)]))
      .orderBy('since')
      .orderBy('claim_id')
      .execute();
    if (waits.length === 0) return;
    const [room] = await hostRooms(db, [{ id, vcpus: capacity.vcpus, memory_mib: capacity.memoryMib, disk_gib: capacity.diskGib }], settings.vcpuOvercommit!);
    const need = { vcpus: waits[0].vcpus, memoryMib: waits[0].memory_mib, diskGib: waits[0].disk_gib };
    let slept = 0;
    // Sleep frees vCPUs and memory, never disk.
    if (!fitsOnHost(room, need) && room.diskGib - room.used.diskGib >= need.diskGib) {
      const idle = await db
        .selectFrom('sandboxes as s')
        .select(['s.id', 's.provider', 's.state', 's.vcpus', 's.memory_mib'])
        .where('s.host_id', '=', id)
        .where('s.created', '=', true)
        .where((eb) => eb.or([eb('s.state', '=', 'running'), eb.and([eb('s.state', '=', 'sleeping'), eb('s.provider', '=', 'local')])]))
        .where(sql<boolean>`not exists (select 1 from sandbox_claims c where c.sandbox_id = s.id)`)
        .orderBy('s.last_active_at')
        .execute();
      for (const s of idle) {
        if (fitsOnHost(room, need)) break;
        const depth = s.provider === 'local' ? 'deep' : 'sleep';
        if (!(await sleepIdle(s.id, s.provider, depth, 'an idle sandbox went to sleep early: a run waits for room on this host'))) continue;
        slept++;
        if (s.state === 'running') room.used.vcpus -= s.vcpus;
        room.used.memoryMib -= s.memory_mib;
      }
    }
    if (slept > 0 || fitsOnHost(room, need)) await opts.wake?.([...new Set(waits.map((w) => w.run_id))]);
  }

  let ticking: Promise<void> | null = null;
  let again: Promise<void> | null = null;
  async function sweep() {
    await db.updateTable('sandbox_hosts').set({ heartbeat_at: sql`now()`, stopped_at: null }).where('id', '=', id).execute();
    // Sandboxes moved to another host while this one looked dead (a long stall) are not ours any more.
    for (const [name, p] of providers) {
      const held = await p.list();
      if (held.length === 0) continue;
      const owned = new Set((await db.selectFrom('sandboxes').select('id').where('id', 'in', held).where('host_id', '=', id).where('provider', '=', name).execute()).map((r) => r.id));
      for (const sid of held.filter((h) => !owned.has(h) && !inFlight.has(h))) {
        await serial(sid, () => p.destroy(sid))
          .then(() => log.info({ sandbox: sid }, 'removed a sandbox this host no longer owns'))
          .catch((err) => log.error({ sandbox: sid, cause: (err as Error).message }, 'could not remove a sandbox this host no longer owns'));
      }
    }
    // Archived teams' sandboxes (marked in the archive's transaction) are freed by their host.
    const doomed = await db.selectFrom('sandboxes').select(['id', 'provider']).where('host_id', '=', id).where('state', '=', 'destroyed').where('released_at', 'is', null).execute();
    for (const d of doomed) {
      await serial(d.id, () => destroyHere(d.id, d.provider)).catch((err) => log.error({ sandbox: d.id, cause: (err as Error).message }, 'could not free a destroyed sandbox'));
    }
    // Idle sandboxes: no claim, nothing running through exec, quiet for the team's sleep times.
    const quiet = await db
      .selectFrom('sandboxes as s')
      .select(['s.id', 's.team_id', 's.provider', 's.state', sql<number>`extract(epoch from now() - s.last_active_at)`.as('quiet_seconds')])
      .where('s.host_id', '=', id)
      .where('s.created', '=', true)
      .where('s.state', 'in', ['running', 'sleeping'])
      .where(sql<boolean>`not exists (select 1 from sandbox_claims c where c.sandbox_id = s.id)`)
      .execute();
    const times = await opts.teams.sleepTimes([...new Set(quiet.map((s) => s.team_id))]);
    const idle = quiet.flatMap((s) => {
      const t = times.get(s.team_id);
      const q = Number(s.quiet_seconds);
      return t && q >= t.idleAfterSeconds ? [{ ...s, deep: q >= t.deepSleepAfterSeconds }] : [];
    });
    for (const s of idle) {
      const depth = s.deep ? 'deep' : 'sleep';
      if (depth === 'sleep' && s.state === 'sleeping') continue;
      await sleepIdle(s.id, s.provider, depth, 'an idle sandbox went to sleep');
    }
    await makeRoom();
    const counts = await db.selectFrom('sandboxes').select(['provider', 'state', sql<number>`count(*)`.as('n')]).where('host_id', '=', id).where('state', '<>', 'destroyed').groupBy(['provider', 'state']).execute();
    gauge.counts = new Map(counts.map((c) => [`${c.provider}/${c.state}`, Number(c.n)]));
  }
  // A tick asked for while one runs (a run just ended) runs once more after it: what it asks to see may have come too late for the one under way.
  let stopped = false;
  const tick = (): Promise<void> => {
    if (stopped) return Promise.resolve();
    if (ticking) {
      again ??= ticking.then(() => {
        again = null;
        return tick();
      });
      return again;
    }
    ticking = sweep()
      .catch((err) => log.error({ err }, 'sandbox host heartbeat failed'))
      .finally(() => (ticking = null));
    return ticking;
  };

  await register();
  await recover();
  await tick();
  const timer = setInterval(() => void tick(), opts.tickMs ?? Math.max(1000, (config.sandboxHostDeadAfter * 1000) / 3));
  timer.unref();
  log.info({ host: id, providers: [...serves], capacity }, 'sandbox host registered');

  return {
    id,
    providers: [...serves],
    place: (req) => placeSandbox(db, settings, opts.teams, req),
    async release(claimId) {
      await releaseClaim(db, claimId);
      // Its sandbox is idle now: a run waiting for room may have it at once.
      void tick();
    },
    // Asked at every claim of the job runner: a second's staleness is nothing against the heartbeats' seconds.
    liveHosts: () => live('', () => liveHostIds(db, config.sandboxHostDeadAfter)),
    ensureRunning,
    async exec(sandboxId, req) {
      busy(sandboxId, 1);
      try {
        const handle = await serial(sandboxId, async () => {
          await open(sandboxId);
          return providerOf((await ownRow(sandboxId)).provider).exec(sandboxId, req);
        });
        void handle.exit
          .catch(() => {})
          .finally(() => {
            busy(sandboxId, -1);
            void db.updateTable('sandboxes').set({ last_active_at: sql`now()` }).where('id', '=', sandboxId).execute().catch(logIgnored(log, 'could not record a sandbox\'s last activity', { sandbox: sandboxId }));
          });
        return handle;
      } catch (err) {
        busy(sandboxId, -1);
        throw err;
      }
    },
    async oomKills(sandboxId) {
      const p = providerOf((await ownRow(sandboxId)).provider);
      return p.oomKills ? p.oomKills(sandboxId) : null;
    },
    async copyIn(sandboxId, files) {
      busy(sandboxId, 1);
      try {
        await ensureRunning(sandboxId);
        // copyIn runs its writes through exec; the sweep leaves a busy sandbox awake.
        await providerOf((await ownRow(sandboxId)).provider).copyIn(sandboxId, files);
      } finally {
        busy(sandboxId, -1);
      }
    },
    sleep: (sandboxId, depth) =>
      serial(sandboxId, async () => {
        const row = await ownRow(sandboxId);
        const status = await providerOf(row.provider).sleep(sandboxId, depth);
        await db.updateTable('sandboxes').set({ state: status.state, updated_at: sql`now()` }).where('id', '=', sandboxId).where('state', '<>', 'destroyed').execute();
        return status;
      }),
    async destroy(sandboxId) {
      const row = await db.selectFrom('sandboxes').select(['host_id', 'provider']).where('id', '=', sandboxId).executeTakeFirst();
      if (!row) return;
      if (row.host_id !== id) throw new SandboxError('wrong_state', `sandbox ${sandboxId} is placed on host ${row.host_id ?? '(none)'}, not on this one`);
      await db.deleteFrom('sandbox_claims').where('sandbox_id', '=', sandboxId).execute();
      await serial(sandboxId, () => destroyHere(sandboxId, row.provider));
    },
    canTakeWork: (teamName) => canTakeWork(db, settings, opts.teams, teamName),
    tick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      await ticking;
      await again;
      // What providers made ahead of demand goes (the network pool); sandboxes keep running.
      for (const p of providers.values()) await p.close?.().catch((err: unknown) => log.warn({ err, provider: p.name }, 'a provider did not release what it made ahead of demand'));
      // Sandboxes keep running; the next start adopts them. Others see this host gone at once.
      await db.updateTable('sandbox_hosts').set({ stopped_at: sql`now()` }).where('id', '=', id).execute();
      const kept = await db.selectFrom('sandboxes').select((eb) => eb.fn.countAll<number>().as('n')).where('host_id', '=', id).where('state', '<>', 'destroyed').where('created', '=', true).executeTakeFirstOrThrow();
      if (Number(kept.n) > 0) {
        log.info({ sandboxes: Number(kept.n) }, `${kept.n} sandbox(es) keep running (with their workspaces and mounts); they are adopted at the next start. To remove them, stop the service and run crewhouse sandboxes destroy --all`);
      }
    },
  };
}

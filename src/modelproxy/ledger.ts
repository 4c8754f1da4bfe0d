import { sql } from 'kysely';
import type { Db } from '../db/database.ts';
import { addDuration, parseDuration, utcDay, type Duration } from './durations.ts';
import { type Admission, type Reservation, type ReserveInput, type Settlement } from './modelproxy.store.ts';

/**
 * The embedded database's admission ledger.
 *
 * PGlite belongs to one process (its lock file sees to that), so one ledger per database
 * handle sees every request made against it. It keeps the counters of the keys and teams in
 * use in memory, admits and reserves from there by exactly the rules mp_reserve applies in SQL,
 * and settles by the rules of mp_settle; what changed is written behind the answers, a few
 * times a second, in one statement and one commit (mp_write_ledger). A request then costs no
 * database work on its path, where on PGlite every statement would run on the event loop.
 *
 * On PostgreSQL, where several proxies may share the database, admission stays in the
 * database (createDatabaseAdmission) and limits hold across processes.
 *
 * The ledger is the only writer of the counters (spend, reservations, the minute's requests and
 * tokens); admin writes change limits and tell the ledger (limitsChanged), which rereads them.
 * Reservations live in memory only: when the process ends they end with it, so a new ledger
 * starts by clearing whatever reservations an earlier process left in the database.
 */

/**
 * Money in the ledger is counted in whole nano-dollars: sums of integers stay exact (sums of
 * dollar fractions in floating point leave residues, and a reservation released to 2e-16
 * instead of 0 would compare wrong at a budget's edge). Safe up to 9 million dollars a counter.
 */
const nano = (usd: number) => Math.round(usd * 1e9);
const usd = (n: number) => n / 1e9;

interface KeyEntry {
  keyId: string;
  team: string;
  role: string;
  agent: string;
  // Limits, reread when an admin changes them.
  models: string[];
  maxBudget: number | null;
  duration: Duration | null;
  rpmLimit: number | null;
  tpmLimit: number | null;
  revoked: boolean;
  // Counters, owned by the ledger.
  windowStart: number;
  windowSpend: number;
  spendTotal: number;
  reserved: number;
  rlMinute: number;
  rlRequests: number;
  rlTokens: number;
  lastUsedAt: number | null;
}

interface TeamEntry {
  team: string;
  /** Whether the team has a budget row; without one, nothing is checked or counted per team. */
  exists: boolean;
  budget: number | null;
  day: string;
  daySpend: number;
  reserved: number;
}

interface Open {
  keyId: string;
  team: string;
  amount: number;
  tokens: number;
  rlMinute: number;
}

interface LogLine {
  seq: number;
  at: string;
  team: string | null;
  role: string | null;
  key_id: string | null;
  model: string | null;
  stream: boolean;
  tokens_in: number;
  tokens_out: number;
  cost_usd: number;
  status: number;
  latency_ms: number;
  upstream_request_id: string | null;
  request_id: string | null;
  error: string | null;
}

interface Rollup {
  team: string;
  day: string;
  role: string;
  key_id: string;
  /** Nano-dollars until written. */
  spend_usd: number;
  tokens_in: number;
  tokens_out: number;
  requests: number;
}

export interface Ledger extends Admission {
  /** Resolves once stale reservations of an earlier process are cleared. */
  ready: Promise<void>;
}

/** Log lines and rollups kept for a retry when writing fails; beyond this they are dropped (and counted in the error). */
const MAX_PENDING = 100_000;
const RETRY_AFTER_FAILURE_MS = 1000;
const MAX_LOG_LINES_PER_WRITE = 5000;
/**
 * What changed is written this long after the first change since the last write. A write
 * costs about as much for one request as for fifty (PGlite runs it on the event loop, ~2 ms
 * on a small machine), so gathering longer keeps that off the requests; nothing reads these
 * rows to admit a request, and a clean shutdown writes what is left.
 */
const WRITE_EVERY_MS = 200;

const minuteOf = (ms: number) => Math.floor(ms / 60_000) * 60_000;
const secondsUntil = (at: number, now: number) => Math.max(1, Math.ceil((at - now) / 1000));
const nextUtcMidnight = (now: number) => Date.parse(`${utcDay(1, now)}T00:00:00.000Z`);
const iso = (ms: number) => new Date(ms).toISOString();

const ledgers = new WeakMap<Db, Ledger>();

/** The ledger of an embedded database handle: one per handle, shared by every proxy on it. */
export function embeddedLedger(db: Db, onError: (err: unknown, lost: number) => void): Ledger {
  let ledger = ledgers.get(db);
  if (!ledger) {
    ledger = createLedger(db, onError);
    ledgers.set(db, ledger);
  }
  return ledger;
}

function createLedger(db: Db, onError: (err: unknown, lost: number) => void): Ledger {
  const byHash = new Map<string, KeyEntry>();
  const byId = new Map<string, KeyEntry>();
  const teams = new Map<string, TeamEntry>();
  const loading = new Map<string, Promise<KeyEntry | null>>();
  const open = new Map<number, Open>();
  let nextReservation = 1;

  const dirtyKeys = new Set<KeyEntry>();
  const dirtyTeams = new Set<TeamEntry>();
  let log: LogLine[] = [];
  let rollups = new Map<string, Rollup>();
  let seq = 0;
  let timer: NodeJS.Timeout | null = null;
  let writing: Promise<void> | null = null;
  let failedAt = 0;

  // Reservations an earlier process held died with it.
  const ready = db.transaction().execute(async (trx) => {
    await trx.deleteFrom('mp_reservations').execute();
    await trx.updateTable('mp_keys').set({ reserved: 0 }).where('reserved', '<>', 0).execute();
    await trx.updateTable('mp_teams').set({ reserved: 0 }).where('reserved', '<>', 0).execute();
  });

  const limitColumns = ['key_id', 'models', 'max_budget', 'budget_duration', 'rpm_limit', 'tpm_limit', 'revoked_at'] as const;
  type LimitRow = { models: string[]; max_budget: number | null; budget_duration: string | null; rpm_limit: number | null; tpm_limit: number | null; revoked_at: string | null };
  const applyLimits = (e: KeyEntry, row: LimitRow) => {
    e.models = row.models;
    e.maxBudget = row.max_budget === null ? null : nano(Number(row.max_budget));
    e.duration = row.budget_duration ? parseDuration(row.budget_duration) : null;
    e.rpmLimit = row.rpm_limit;
    e.tpmLimit = row.tpm_limit;
    e.revoked = row.revoked_at !== null;
  };

  async function loadTeam(team: string): Promise<TeamEntry> {
    const row = await db
      .selectFrom('mp_teams')
      .select(['budget_usd_per_day', sql<string>`day::text`.as('day'), 'day_spend'])
      .where('team', '=', team)
      .executeTakeFirst();
    const cached = teams.get(team);
    if (cached) {
      // Counters are the ledger's; only the budget (and whether the row exists) comes from the database.
      cached.budget = row && row.budget_usd_per_day !== null ? nano(Number(row.budget_usd_per_day)) : null;
      if (row && !cached.exists) Object.assign(cached, { exists: true, day: row.day, daySpend: nano(Number(row.day_spend)) });
      return cached;
    }
    const entry: TeamEntry = {
      team,
      exists: !!row,
      budget: row && row.budget_usd_per_day !== null ? nano(Number(row.budget_usd_per_day)) : null,
      day: row?.day ?? utcDay(),
      daySpend: nano(Number(row?.day_spend ?? 0)),
      reserved: 0,
    };
    teams.set(team, entry);
    return entry;
  }

  async function loadKey(keyHash: string): Promise<KeyEntry | null> {
    await ready;
    const row = await db
      .selectFrom('mp_keys')
      .select([...limitColumns, 'team', 'role', 'agent', 'window_started_at', 'window_spend', 'spend_total', 'rl_minute', 'rl_requests', 'rl_tokens', 'last_used_at'])
      .where('key_hash', '=', keyHash)
      .executeTakeFirst();
    if (!row) return null;
    if (!teams.has(row.team)) await loadTeam(row.team);
    const existing = byHash.get(keyHash);
    if (existing) return existing;
    const entry = {
      keyId: row.key_id,
      team: row.team,
      role: row.role,
      agent: row.agent,
      windowStart: Date.parse(row.window_started_at),
      windowSpend: nano(Number(row.window_spend)),
      spendTotal: nano(Number(row.spend_total)),
      reserved: 0,
      rlMinute: Date.parse(row.rl_minute),
      rlRequests: row.rl_requests,
      rlTokens: Number(row.rl_tokens),
      lastUsedAt: row.last_used_at ? Date.parse(row.last_used_at) : null,
    } as KeyEntry;
    applyLimits(entry, row);
    byHash.set(keyHash, entry);
    byId.set(entry.keyId, entry);
    return entry;
  }

  function keyFor(keyHash: string): KeyEntry | Promise<KeyEntry | null> {
    const cached = byHash.get(keyHash);
    if (cached) return cached;
    let pending = loading.get(keyHash);
    if (!pending) {
      // Unknown keys are not remembered: a key minted a moment later must work at once.
      pending = loadKey(keyHash).finally(() => loading.delete(keyHash));
      loading.set(keyHash, pending);
    }
    return pending;
  }

  function markDirty(key: KeyEntry, team: TeamEntry | undefined) {
    dirtyKeys.add(key);
    if (team?.exists) dirtyTeams.add(team);
    schedule();
  }

  /** mp_reserve, in memory: authenticate, check limits in the same order, reserve the worst case. */
  function admit(k: KeyEntry | null, r: ReserveInput): Reservation {
    const amount = nano(r.amount);
    const refuse = (outcome: Reservation['outcome'], retryAfter: number | null = null): Reservation =>
      k
        ? { outcome, keyId: k.keyId, team: k.team, role: k.role, agent: k.agent, reservation: null, retryAfter }
        : { outcome, keyId: null, team: null, role: null, agent: null, reservation: null, retryAfter };
    if (!k || k.revoked) return refuse('invalid_key');
    if (k.models.length > 0 && !k.models.includes(r.model)) return refuse('model_not_allowed');
    const now = Date.now();
    let windowStart = k.windowStart;
    let windowSpend = k.windowSpend;
    if (k.duration && now >= addDuration(windowStart, k.duration)) {
      windowStart = now;
      windowSpend = 0;
    }
    const minute = minuteOf(now);
    const sameMinute = k.rlMinute === minute;
    const requests = sameMinute ? k.rlRequests : 0;
    const tokens = sameMinute ? k.rlTokens : 0;
    if (k.rpmLimit !== null && requests >= k.rpmLimit) return refuse('rpm', secondsUntil(minute + 60_000, now));
    if (k.tpmLimit !== null && tokens >= k.tpmLimit) return refuse('tpm', secondsUntil(minute + 60_000, now));
    if (k.maxBudget !== null && windowSpend + k.reserved >= k.maxBudget) {
      return refuse('key_budget', k.duration ? secondsUntil(addDuration(windowStart, k.duration), now) : null);
    }
    const t = teams.get(k.team);
    if (t?.exists) {
      const today = utcDay(0, now);
      const daySpend = t.day === today ? t.daySpend : 0;
      if (t.budget !== null && daySpend + t.reserved >= t.budget) return refuse('team_budget', secondsUntil(nextUtcMidnight(now), now));
      t.day = today;
      t.daySpend = daySpend;
      t.reserved += amount;
    }
    Object.assign(k, { windowStart, windowSpend, reserved: k.reserved + amount, rlMinute: minute, rlRequests: requests + 1, rlTokens: tokens + r.tokens, lastUsedAt: now });
    const id = nextReservation++;
    open.set(id, { keyId: k.keyId, team: k.team, amount, tokens: r.tokens, rlMinute: minute });
    markDirty(k, t);
    return { outcome: 'ok', keyId: k.keyId, team: k.team, role: k.role, agent: k.agent, reservation: id, retryAfter: null };
  }

  /** mp_settle, in memory: release the reservation, charge the real cost and tokens; log and roll up behind. */
  function settle(s: Settlement) {
    const now = Date.now();
    const minute = minuteOf(now);
    const today = utcDay(0, now);
    const held = s.reservation !== null ? open.get(s.reservation) : undefined;
    if (held) open.delete(s.reservation!);
    const amount = held?.amount ?? 0;
    const cost = nano(s.cost);
    const used = s.tokensIn + s.tokensOut;
    const k = s.keyId ? byId.get(s.keyId) : undefined;
    if (k && (held || cost > 0 || used > 0)) {
      k.reserved = Math.max(k.reserved - amount, 0);
      if (k.duration && now >= addDuration(k.windowStart, k.duration)) {
        k.windowSpend = cost;
        k.windowStart = now;
      } else {
        k.windowSpend += cost;
      }
      k.spendTotal += cost;
      if (k.rlMinute === minute) {
        k.rlTokens += held?.rlMinute === minute ? Math.max(used - held.tokens, 0) : used;
      } else {
        k.rlTokens = used;
        k.rlRequests = 0;
      }
      k.rlMinute = minute;
      const t = s.team ? teams.get(s.team) : undefined;
      if (t?.exists) {
        t.reserved = Math.max(t.reserved - amount, 0);
        t.daySpend = t.day === today ? t.daySpend + cost : cost;
        t.day = today;
      }
      markDirty(k, t);
    }
    log.push({
      seq: seq++,
      at: iso(now),
      team: s.team,
      role: s.role,
      key_id: s.keyId,
      model: s.model,
      stream: s.stream,
      tokens_in: s.tokensIn,
      tokens_out: s.tokensOut,
      cost_usd: s.cost,
      status: s.status,
      latency_ms: s.latencyMs,
      upstream_request_id: s.upstreamRequestId,
      request_id: s.requestId,
      error: s.error,
    });
    if (s.count && s.keyId && s.team && s.role) {
      const id = `${s.team}\u0000${today}\u0000${s.role}\u0000${s.keyId}`;
      const r = rollups.get(id) ?? { team: s.team, day: today, role: s.role, key_id: s.keyId, spend_usd: 0, tokens_in: 0, tokens_out: 0, requests: 0 };
      r.spend_usd += cost;
      r.tokens_in += s.tokensIn;
      r.tokens_out += s.tokensOut;
      r.requests += 1;
      rollups.set(id, r);
    }
    schedule();
  }

  const pending = () => dirtyKeys.size > 0 || dirtyTeams.size > 0 || log.length > 0 || rollups.size > 0;

  function schedule() {
    if (timer || writing || !pending()) return;
    const wait = failedAt && Date.now() - failedAt < RETRY_AFTER_FAILURE_MS ? RETRY_AFTER_FAILURE_MS : WRITE_EVERY_MS;
    timer = setTimeout(kick, wait);
  }

  function kick() {
    timer = null;
    writing = write().finally(() => {
      writing = null;
      schedule();
    });
  }

  /** Writes what changed since the last write: counters as they stand now, log lines and rollups gathered. */
  async function write(): Promise<void> {
    const keys = [...dirtyKeys];
    const teamRows = [...dirtyTeams];
    dirtyKeys.clear();
    dirtyTeams.clear();
    const lines = log.length > MAX_LOG_LINES_PER_WRITE ? log.splice(0, MAX_LOG_LINES_PER_WRITE) : log;
    if (lines === log) log = [];
    const sums = [...rollups.values()];
    rollups = new Map();
    const payload = {
      keys: keys.map((k) => ({
        key_id: k.keyId,
        window_started_at: iso(k.windowStart),
        window_spend: usd(k.windowSpend),
        spend_total: usd(k.spendTotal),
        reserved: usd(k.reserved),
        rl_minute: iso(k.rlMinute),
        rl_requests: k.rlRequests,
        rl_tokens: k.rlTokens,
        last_used_at: k.lastUsedAt === null ? null : iso(k.lastUsedAt),
      })),
      teams: teamRows.map((t) => ({ team: t.team, day: t.day, day_spend: usd(t.daySpend), reserved: usd(t.reserved) })),
      log: lines,
      rollup: sums.map((r) => ({ ...r, spend_usd: usd(r.spend_usd) })),
    };
    try {
      await sql`select mp_write_ledger(${JSON.stringify(payload)}::jsonb)`.execute(db);
      failedAt = 0;
    } catch (err) {
      failedAt = Date.now();
      // Counters are written as they stand, so marking them again is enough; lines and sums go back in front.
      for (const k of keys) dirtyKeys.add(k);
      for (const t of teamRows) dirtyTeams.add(t);
      const keep = Math.max(0, MAX_PENDING - log.length);
      log = [...lines.slice(0, keep), ...log];
      for (const r of sums) {
        const id = `${r.team}\u0000${r.day}\u0000${r.role}\u0000${r.key_id}`;
        const later = rollups.get(id);
        rollups.set(id, later ? { ...r, spend_usd: r.spend_usd + later.spend_usd, tokens_in: r.tokens_in + later.tokens_in, tokens_out: r.tokens_out + later.tokens_out, requests: r.requests + later.requests } : r);
      }
      onError(err, lines.length - Math.min(lines.length, keep));
    }
  }

  return {
    ready,
    reserve(r: ReserveInput): Promise<Reservation> {
      const k = keyFor(r.keyHash);
      return k instanceof Promise ? k.then((entry) => admit(entry, r)) : Promise.resolve(admit(k, r));
    },
    settle,
    async limitsChanged(target: { keyId?: string; team?: string }) {
      await Promise.all(loading.values());
      if (target.team !== undefined) {
        if (teams.has(target.team)) await loadTeam(target.team);
      }
      const entries = [...byId.values()].filter((e) => e.keyId === target.keyId || (target.team !== undefined && e.team === target.team));
      if (entries.length === 0) return;
      const rows = await db
        .selectFrom('mp_keys')
        .select(limitColumns)
        .where(
          'key_id',
          'in',
          entries.map((e) => e.keyId),
        )
        .execute();
      for (const row of rows) applyLimits(byId.get(row.key_id)!, row);
    },
    /** Writes everything that changed now, and waits until it is written (on shutdown). */
    async drain() {
      // A database that keeps failing gets three tries; what is still unwritten then is lost with the process.
      for (let attempt = 0; attempt < 3; attempt++) {
        if (writing) await writing;
        if (timer) clearTimeout(timer);
        if (!pending()) return;
        failedAt = 0;
        kick();
        await writing;
      }
    },
  };
}

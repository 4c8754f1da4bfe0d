import { sql, type Selectable } from 'kysely';
import type { Db } from '../../db/database.ts';
import { fromDatabase } from '../../errors/errors.ts';
import { parseDuration, utcDay } from '../durations.ts';
import type { MpSpendDailyTable } from '../modelproxy.tables.ts';
import type { Admission, Reservation, ReserveInput, Settlement } from './admission.ts';
import * as rules from './rules.ts';

/**
 * The embedded database's admission ledger.
 *
 * PGlite belongs to one process (its lock file sees to that), so one ledger per database
 * handle sees every request made against it. It keeps the counters of the keys and teams in
 * use in memory, admits and reserves from there by exactly the rules mp_reserve applies in SQL,
 * and settles by the rules of mp_settle; what changed is written behind the answers, a few
 * times a second, in one statement and one commit (mp_write_ledger). A request then costs no
 * database work on its path: no round trip to the database's thread and no wait behind the
 * run recordings queued there.
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

/** A key in use: its limits (reread when an admin changes them) and its counters (the ledger's). */
interface KeyEntry extends rules.KeyLimits, rules.KeyCounters {
  keyId: string;
  team: string;
  role: string;
  agent: string;
  /** An admin changed the limits and rereading them failed: reread before the next admission. */
  stale: boolean;
  refreshing: Promise<void> | null;
  lastUsedAt: number | null;
}

interface TeamEntry extends rules.TeamCounters {
  team: string;
  stale: boolean;
}

interface Open {
  keyId: string;
  team: string;
  amount: number;
  tokens: number;
  rlMinute: number;
  /** A reservation never settled (its request failed in a way nothing caught) is released then. */
  expiresAt: number;
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

/** A row of mp_spend_daily to add to; spend_usd in nano-dollars until written. */
type Rollup = Selectable<MpSpendDailyTable>;

export interface Ledger extends Admission {
  /** Resolves once stale reservations of an earlier process are cleared. */
  ready: Promise<void>;
}

/** Bad data or a broken constraint: retrying the same rows cannot help (a timeout or a lost connection can). */
const isDataError = (err: unknown) => {
  const code = fromDatabase(err)?.code;
  return code === 'invalid_value' || code === 'conflict' || code === 'rule_broken' || code === 'too_large';
};

/** Log lines and rollups kept for a retry when writing fails; beyond this they are dropped (and counted in the error). */
const MAX_PENDING = 100_000;
const RETRY_AFTER_FAILURE_MS = 1000;
/** Waits between a shutdown's tries to write what is left. */
const DRAIN_BACKOFF_MS = [0, 200, 1000];
const MAX_LOG_LINES_PER_WRITE = 5000;
/**
 * What changed is written this long after the first change since the last write. A write
 * costs about as much for one request as for fifty (~2 ms of the embedded database's work on a
 * small machine, on a core the requests share), so gathering longer keeps that off them; nothing reads these
 * rows to admit a request, and a clean shutdown writes what is left.
 */
const WRITE_EVERY_MS = 200;

const iso = (ms: number) => new Date(ms).toISOString();

const ledgers = new WeakMap<Db, Ledger & { users: number }>();

/**
 * The ledger of an embedded database handle: one per handle, shared by every proxy on it.
 * Each caller closes it once (`close`); the last close writes what is left and stops it.
 */
export function embeddedLedger(db: Db, onError: (err: unknown, lost: number) => void): Ledger {
  let ledger = ledgers.get(db);
  if (!ledger) {
    ledger = createLedger(db, onError, () => ledgers.delete(db));
    ledgers.set(db, ledger);
  }
  ledger.users++;
  return ledger;
}

function createLedger(db: Db, onError: (err: unknown, lost: number) => void, forget: () => void): Ledger & { users: number } {
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
  let lostLines = 0;
  let stopped = false;

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
    const budget = row && row.budget_usd_per_day !== null ? nano(Number(row.budget_usd_per_day)) : null;
    const cached = teams.get(team);
    if (cached) {
      // Counters are the ledger's; only the budget (and whether the row exists) comes from the database.
      cached.budget = budget;
      cached.stale = false;
      if (row && !cached.exists) Object.assign(cached, { exists: true, day: row.day, daySpend: nano(Number(row.day_spend)) });
      return cached;
    }
    const entry: TeamEntry = {
      team,
      exists: !!row,
      budget,
      stale: false,
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
      stale: false,
      refreshing: null,
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

  /** Rereads a key's limits and its team's budget; counters stay the ledger's. */
  async function reread(entries: KeyEntry[]): Promise<void> {
    const teamNames = [...new Set(entries.map((e) => e.team))];
    for (const team of teamNames) if (teams.get(team)?.stale) await loadTeam(team);
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
    for (const row of rows) {
      const e = byId.get(row.key_id)!;
      applyLimits(e, row);
      e.stale = false;
    }
  }

  function keyFor(keyHash: string): KeyEntry | Promise<KeyEntry | null> {
    const cached = byHash.get(keyHash);
    if (cached && (cached.stale || teams.get(cached.team)?.stale)) {
      cached.refreshing ??= reread([cached]).finally(() => (cached.refreshing = null));
      return cached.refreshing.then(() => cached);
    }
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

  /** mp_reserve, in memory: the rules decide (rules.ts); the ledger keeps what they give. */
  function admit(k: KeyEntry | null, r: ReserveInput): Reservation {
    const amount = nano(r.amount);
    const now = Date.now();
    const t = k ? teams.get(k.team) : undefined;
    const decided = rules.admit(k, t, { model: r.model, amount, tokens: r.tokens }, now);
    const who = k ? { keyId: k.keyId, team: k.team, role: k.role, agent: k.agent } : { keyId: null, team: null, role: null, agent: null };
    if (decided.outcome !== 'ok') return { outcome: decided.outcome, ...who, reservation: null, retryAfter: decided.retryAfter };
    Object.assign(k!, decided.key, { lastUsedAt: now });
    if (t && decided.team) Object.assign(t, decided.team);
    const id = nextReservation++;
    open.set(id, { keyId: k!.keyId, team: k!.team, amount, tokens: r.tokens, rlMinute: decided.key.rlMinute, expiresAt: now + r.ttlSeconds * 1000 });
    markDirty(k!, t);
    return { outcome: 'ok', ...who, reservation: id, retryAfter: null };
  }

  /** mp_settle, in memory: release the reservation, charge the real cost and tokens (rules.ts); log and roll up behind. */
  function settle(s: Settlement) {
    const now = Date.now();
    const today = utcDay(0, now);
    const held = s.reservation !== null ? open.get(s.reservation) : undefined;
    if (held) open.delete(s.reservation!);
    const cost = nano(s.cost);
    const used = s.tokensIn + s.tokensOut;
    const k = s.keyId ? byId.get(s.keyId) : undefined;
    if (k && (held || cost > 0 || used > 0)) {
      Object.assign(k, rules.settleKey(k, held, cost, used, now));
      const t = s.team ? teams.get(s.team) : undefined;
      if (t?.exists) Object.assign(t, rules.settleTeam(t, held, cost, now));
      markDirty(k, t);
    }
    if (log.length >= MAX_PENDING) {
      // The database has not taken a line for a long while: keep the newest.
      log.splice(0, log.length - MAX_PENDING + 1);
      lostLines++;
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
      addToRollup({ team: s.team, day: today, role: s.role, key_id: s.keyId, spend_usd: cost, tokens_in: s.tokensIn, tokens_out: s.tokensOut, requests: 1 });
    }
    schedule();
  }

  /** Adds to the rollup row of the same team, day, role and key (or starts it). */
  function addToRollup(add: Rollup) {
    const id = `${add.team}\u0000${add.day}\u0000${add.role}\u0000${add.key_id}`;
    const r = rollups.get(id);
    if (!r) return void rollups.set(id, { ...add });
    r.spend_usd += add.spend_usd;
    r.tokens_in += add.tokens_in;
    r.tokens_out += add.tokens_out;
    r.requests += add.requests;
  }

  const pending = () => dirtyKeys.size > 0 || dirtyTeams.size > 0 || log.length > 0 || rollups.size > 0;

  function schedule() {
    if (stopped || timer || writing || !pending()) return;
    const wait = failedAt && Date.now() - failedAt < RETRY_AFTER_FAILURE_MS ? RETRY_AFTER_FAILURE_MS : WRITE_EVERY_MS;
    // The servers keep the process alive, not this timer; their close writes what is left.
    timer = setTimeout(kick, wait).unref();
  }

  function kick() {
    timer = null;
    writing = write().finally(() => {
      writing = null;
      schedule();
    });
  }

  /** Writes what changed since the last write: counters as they stand now, log lines and rollups gathered. */
  const writePayload = (p: { keys: unknown[]; teams: unknown[]; log: LogLine[]; rollup: unknown[] }) =>
    sql`select mp_write_ledger(${JSON.stringify(p.keys)}::json, ${JSON.stringify(p.teams)}::json, ${JSON.stringify(p.log)}::json, ${JSON.stringify(p.rollup)}::json)`.execute(db);

  /**
   * Lines the database refuses as data (a line no cleaning foresaw) are found by halving and
   * set aside, so one bad line never holds up the others; answers how many were set aside.
   */
  async function writeLines(lines: LogLine[]): Promise<number> {
    try {
      await writePayload({ keys: [], teams: [], log: lines, rollup: [] });
      return 0;
    } catch (err) {
      if (!isDataError(err)) throw err;
      if (lines.length === 1) return 1;
      const half = Math.ceil(lines.length / 2);
      return (await writeLines(lines.slice(0, half))) + (await writeLines(lines.slice(half)));
    }
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
    const counters = {
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
      rollup: sums.map((r) => ({ ...r, spend_usd: usd(r.spend_usd) })),
    };
    if (lostLines > 0) {
      onError(new Error('the request log fell behind the database; the oldest lines were dropped'), lostLines);
      lostLines = 0;
    }
    try {
      try {
        await writePayload({ ...counters, log: lines });
      } catch (err) {
        if (!isDataError(err) || lines.length === 0) throw err;
        // A line the database will not take: counters and sums first, then the lines that fit.
        await writePayload({ ...counters, log: [] });
        const refused = await writeLines(lines);
        if (refused > 0) onError(err, refused);
      }
      failedAt = 0;
    } catch (err) {
      failedAt = Date.now();
      // Counters are written as they stand, so marking them again is enough; lines and sums go back in front.
      for (const k of keys) dirtyKeys.add(k);
      for (const t of teamRows) dirtyTeams.add(t);
      const keep = Math.max(0, MAX_PENDING - log.length);
      log = [...lines.slice(0, keep), ...log];
      for (const r of sums) addToRollup(r);
      onError(err, lines.length - Math.min(lines.length, keep));
    }
  }

  /** Writes everything that changed now, and waits until it is written; a failing database gets a few tries. */
  async function drain() {
    for (const wait of DRAIN_BACKOFF_MS) {
      if (writing) await writing;
      if (timer) {
        clearTimeout(timer);
        timer = null;
      }
      if (!pending()) return;
      if (wait) await new Promise((r) => setTimeout(r, wait));
      if (writing) await writing;
      failedAt = 0;
      kick();
      await writing;
    }
  }

  const ledger = {
    ready,
    users: 0,
    async authenticate(keyHash: string): Promise<boolean> {
      const k = await keyFor(keyHash);
      return k !== null && !k.revoked;
    },
    reserve(r: ReserveInput): Promise<Reservation> {
      const k = keyFor(r.keyHash);
      return k instanceof Promise ? k.then((entry) => admit(entry, r)) : Promise.resolve(admit(k, r));
    },
    settle,
    /**
     * After an admin's commit: the limits of the keys (and the team budget) it touched are
     * reread before the admin's answer goes out. Should the reread fail, they stay marked and
     * are reread before their next admission; this never throws (the change is committed).
     */
    async limitsChanged(target: { keyId?: string; team?: string }) {
      const affected = () => [...byId.values()].filter((e) => e.keyId === target.keyId || (target.team !== undefined && e.team === target.team));
      const mark = () => {
        for (const e of affected()) e.stale = true;
        const t = target.team !== undefined ? teams.get(target.team) : undefined;
        if (t) t.stale = true;
      };
      mark();
      // Keys being loaded now may have read the rows before the commit.
      await Promise.allSettled(loading.values());
      mark();
      // Marked stale, they are reread before their next admission; said, so a failing database is seen.
      await reread(affected()).catch((err) => onError(err, 0));
    },
    /** Releases reservations whose request never settled them (the sweeper calls this). */
    async releaseExpired() {
      const now = Date.now();
      let released = 0;
      for (const [id, o] of open) {
        if (o.expiresAt > now) continue;
        open.delete(id);
        const k = byId.get(o.keyId);
        const t = teams.get(o.team);
        if (k) k.reserved = Math.max(k.reserved - o.amount, 0);
        if (t?.exists) t.reserved = Math.max(t.reserved - o.amount, 0);
        if (k) markDirty(k, t);
        released++;
      }
      return released;
    },
    drain,
    /** One user is done with the ledger: what is left is written; the last one stops it. */
    async close() {
      await drain();
      if (--ledger.users > 0) return;
      stopped = true;
      if (timer) clearTimeout(timer);
      timer = null;
      forget();
    },
  };
  return ledger;
}

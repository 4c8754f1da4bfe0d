import { sql, type Transaction } from 'kysely';
import type { Db } from '../db/database.ts';
import type { Database } from '../db/schema.ts';

type Q = Db | Transaction<Database>;

export type ReserveOutcome = 'ok' | 'invalid_key' | 'model_not_allowed' | 'rpm' | 'tpm' | 'key_budget' | 'team_budget';

export interface Reservation {
  outcome: ReserveOutcome;
  keyId: string | null;
  team: string | null;
  role: string | null;
  agent: string | null;
  reservation: number | null;
  retryAfter: number | null;
}

/**
 * Authenticates a key and, when every limit admits the request, reserves its worst-case
 * cost against the key and the team, in one round trip (mp_reserve).
 */
export async function reserve(db: Db, r: { keyHash: string; model: string; amount: number; tokens: number; ttlSeconds: number }): Promise<Reservation> {
  const { rows } = await sql<{ o_outcome: ReserveOutcome; o_key_id: string | null; o_team: string | null; o_role: string | null; o_agent: string | null; o_reservation: number | null; o_retry_after: number | null }>`
    select m.* from mp_reserve(${r.keyHash}, ${r.model}, ${r.amount}::numeric, ${r.tokens}::integer, ${r.ttlSeconds}::integer) m`.execute(db);
  const o = rows[0];
  return { outcome: o.o_outcome, keyId: o.o_key_id, team: o.o_team, role: o.o_role, agent: o.o_agent, reservation: o.o_reservation, retryAfter: o.o_retry_after };
}

export type ReserveInput = Parameters<typeof reserve>[1];

/** Settlements (and, on the embedded database, the ledger's counters) gather this long and are written together, behind the answers. */
export const WRITE_BEHIND_MS = 10;

/**
 * How the proxy admits and settles requests: reserve before forwarding (answers at once),
 * settle when the answer went out (queued; written behind), drain on shutdown, and
 * `limitsChanged` after an admin changed a key's or a team's limits.
 */
export interface Admission {
  /** Whether a key exists and is not revoked; for refused requests only (a reservation authenticates too). */
  authenticate(keyHash: string): Promise<boolean>;
  reserve(r: ReserveInput): Promise<Reservation>;
  settle(s: Settlement): void;
  drain(): Promise<void>;
  /** Drains; the caller is done with it. */
  close(): Promise<void>;
  limitsChanged(target: { keyId?: string; team?: string }): Promise<void>;
  /** Releases reservations that outlived their time (their request never settled them); answers how many. */
  releaseExpired(): Promise<number>;
}

/**
 * Admission in the database, for PostgreSQL shared by several proxies: every reservation is a
 * write on the request's path (group-committed under load), settlements are written behind,
 * and limits hold across processes because they live in the rows.
 */
export function createDatabaseAdmission(db: Db, onError: (err: unknown, count: number) => void): Admission {
  const reserver = createReserver(db);
  const settler = createSettler(db, onError, { delayMs: WRITE_BEHIND_MS, yieldTo: reserver.idle });
  return {
    authenticate: async (keyHash) => {
      const row = await db.selectFrom('mp_keys').select('revoked_at').where('key_hash', '=', keyHash).executeTakeFirst();
      return row !== undefined && row.revoked_at === null;
    },
    reserve: reserver,
    settle: (s) => settler.push(s),
    drain: () => settler.drain(),
    close: () => settler.drain(),
    // Limits are read in mp_reserve on every request; nothing is kept to refresh.
    limitsChanged: async () => {},
    // Reservations of any process sharing the database, this one's included.
    releaseExpired: () => releaseExpired(db),
  };
}

/** Reserves for many requests in one statement and one commit (mp_reserve_batch); answers in input order. */
export async function reserveBatch(db: Db, items: ReserveInput[]): Promise<Reservation[]> {
  const payload = items.map((r, idx) => ({ idx, key_hash: r.keyHash, model: r.model, amount: r.amount, tokens: r.tokens, ttl: r.ttlSeconds }));
  const { rows } = await sql<{ o_idx: number; o_outcome: ReserveOutcome; o_key_id: string | null; o_team: string | null; o_role: string | null; o_agent: string | null; o_reservation: number | null; o_retry_after: number | null }>`
    select m.* from mp_reserve_batch(${JSON.stringify(payload)}::jsonb) m`.execute(db);
  const out: Reservation[] = new Array(items.length);
  for (const o of rows) out[o.o_idx] = { outcome: o.o_outcome, keyId: o.o_key_id, team: o.o_team, role: o.o_role, agent: o.o_agent, reservation: o.o_reservation, retryAfter: o.o_retry_after };
  return out;
}

/**
 * Group commit for reservations: a request arriving while a reservation is being written
 * waits for it and then goes with every other request that arrived meanwhile, in one
 * statement. When idle, a request goes at once, alone. `idle()` resolves once no
 * reservation is queued or being written (the settler yields to reservations with it).
 */
export function createReserver(db: Db) {
  let queue: Array<{ input: ReserveInput; resolve: (r: Reservation) => void; reject: (e: unknown) => void }> = [];
  let running = false;
  let waiters: Array<() => void> = [];
  const run = async () => {
    running = true;
    while (queue.length) {
      const batch = queue;
      queue = [];
      try {
        const results = batch.length === 1 ? [await reserve(db, batch[0].input)] : await reserveBatch(db, batch.map((b) => b.input));
        batch.forEach((b, i) => b.resolve(results[i]));
      } catch (err) {
        for (const b of batch) b.reject(err);
      }
    }
    running = false;
    const w = waiters;
    waiters = [];
    for (const wake of w) wake();
  };
  const reserver = (input: ReserveInput) =>
    new Promise<Reservation>((resolve, reject) => {
      queue.push({ input, resolve, reject });
      if (!running) void run();
    });
  reserver.idle = (): Promise<void> | null => (running ? new Promise<void>((resolve) => waiters.push(resolve)) : null);
  return reserver;
}

export interface Settlement {
  reservation: number | null;
  keyId: string | null;
  team: string | null;
  role: string | null;
  model: string | null;
  stream: boolean;
  cost: number;
  tokensIn: number;
  tokensOut: number;
  status: number;
  latencyMs: number;
  upstreamRequestId: string | null;
  requestId: string | null;
  error: string | null;
  /** Counts toward the day's requests (it reached the upstream). */
  count: boolean;
}

/** Releases the reservation, charges the real cost, writes the request log line and the day's rollup (mp_settle). */
export async function settle(db: Db, s: Settlement): Promise<void> {
  await sql`select mp_settle(${s.reservation}::bigint, ${s.keyId}::text, ${s.team}::text, ${s.role}::text, ${s.model}::text, ${s.stream}::boolean,
    ${s.cost}::numeric, ${s.tokensIn}::integer, ${s.tokensOut}::integer, ${s.status}::integer, ${s.latencyMs}::integer,
    ${s.upstreamRequestId}::text, ${s.requestId}::text, ${s.error}::text, ${s.count}::boolean)`.execute(db);
}

/**
 * Settles many requests in one statement and one commit (mp_settle_batch). The settler below
 * feeds it: while one batch is being written, the next ones gather.
 */
export async function settleBatch(db: Db, items: Settlement[]): Promise<void> {
  const rows = items.map((s) => ({
    reservation: s.reservation,
    key_id: s.keyId,
    team: s.team,
    role: s.role,
    model: s.model,
    stream: s.stream,
    cost: s.cost,
    tokens_in: s.tokensIn,
    tokens_out: s.tokensOut,
    status: s.status,
    latency_ms: s.latencyMs,
    upstream_request_id: s.upstreamRequestId,
    request_id: s.requestId,
    error: s.error,
    count: s.count,
  }));
  await sql`select mp_settle_batch(${JSON.stringify(rows)}::jsonb)`.execute(db);
}

/**
 * The write-behind queue of settlements: a settlement is queued when the answer went out and
 * written with the others that gathered within `delayMs`, one batch (one statement, one
 * commit) at a time, at most `maxBatch` each. A batch waits while reservations are being
 * written (`yieldTo`), at most `delayMs` more, so settling never delays an admission for long.
 * A reservation stays counted until its settlement lands, so enforcement never relies on the
 * queue. `drain` writes everything queued (on shutdown).
 */
export function createSettler(
  db: Db,
  onError: (err: unknown, count: number) => void,
  opts: { delayMs?: number; maxBatch?: number; yieldTo?: () => Promise<void> | null } = {},
) {
  const delayMs = opts.delayMs ?? 0;
  const maxBatch = opts.maxBatch ?? 500;
  let queue: Settlement[] = [];
  let flushing: Promise<void> | null = null;
  let timer: NodeJS.Timeout | null = null;
  let draining = false;
  const yieldToReservations = async () => {
    const busy = opts.yieldTo?.();
    if (!busy || draining) return;
    let timeout: NodeJS.Timeout | undefined;
    await Promise.race([busy, new Promise<void>((resolve) => (timeout = setTimeout(resolve, delayMs)))]);
    clearTimeout(timeout);
  };
  const schedule = () => {
    if (!flushing && !timer && queue.length) timer = setTimeout(kick, draining || queue.length >= maxBatch ? 0 : delayMs);
  };
  /** Writes one batch: what gathered since the last one (up to maxBatch). */
  const flush = async () => {
    await yieldToReservations();
    const batch = queue.length > maxBatch ? queue.splice(0, maxBatch) : queue;
    if (batch === queue) queue = [];
    try {
      await (batch.length === 1 ? settle(db, batch[0]) : settleBatch(db, batch));
    } catch (err) {
      onError(err, batch.length);
    }
  };
  const kick = () => {
    timer = null;
    flushing = flush().finally(() => {
      flushing = null;
      schedule();
    });
  };
  return {
    push(s: Settlement) {
      queue.push(s);
      schedule();
    },
    /** Writes everything queued now, and waits until it is written. */
    async drain() {
      draining = true;
      try {
        while (timer || flushing) {
          if (timer) {
            clearTimeout(timer);
            kick();
          }
          await flushing;
        }
      } finally {
        draining = false;
      }
    },
  };
}

/** Releases reservations whose process never settled them (crashed); one per statement so locks stay ordered. */
export async function releaseExpired(db: Db, limit = 100): Promise<number> {
  const expired = await db.selectFrom('mp_reservations').select('id').where('expires_at', '<', sql<string>`now()`).orderBy('expires_at').limit(limit).execute();
  let released = 0;
  for (const { id } of expired) {
    const { rows } = await sql<{ released: boolean }>`select mp_release(${id}::bigint) as released`.execute(db);
    if (rows[0]?.released) released++;
  }
  return released;
}

const keyColumns = [
  'key_id',
  'key_prefix',
  'team',
  'role',
  'agent',
  'models',
  'max_budget',
  'budget_duration',
  'window_started_at',
  'window_spend',
  'spend_total',
  'reserved',
  'rpm_limit',
  'tpm_limit',
  'last_used_at',
  'revoked_at',
  'created_at',
  'updated_at',
  'row_version',
] as const;

export type KeyRow = Awaited<ReturnType<typeof getKey>> & {};

export async function insertKey(
  q: Q,
  k: { key_id: string; key_hash: string; key_prefix: string; team: string; role: string; agent: string; models: string[]; max_budget: number | null; budget_duration: string | null; budget_interval: string | null; rpm_limit: number | null; tpm_limit: number | null },
) {
  return q
    .insertInto('mp_keys')
    .values({ ...k, window_started_at: sql<string>`now()` as unknown as string })
    .returning(keyColumns)
    .executeTakeFirstOrThrow();
}

export async function getKey(q: Q, keyId: string) {
  return q.selectFrom('mp_keys').select(keyColumns).where('key_id', '=', keyId).executeTakeFirst();
}

export async function listKeys(q: Q, opts: { team?: string; afterKeyId?: string; limit: number; includeRevoked: boolean }) {
  let query = q.selectFrom('mp_keys').select(keyColumns).orderBy('key_id').limit(opts.limit + 1);
  if (opts.team) query = query.where('team', '=', opts.team);
  if (opts.afterKeyId) query = query.where('key_id', '>', opts.afterKeyId);
  if (!opts.includeRevoked) query = query.where('revoked_at', 'is', null);
  return query.execute();
}

export async function updateKeyLimits(
  q: Q,
  keyId: string,
  set: Partial<{ models: string[]; max_budget: number | null; budget_duration: string | null; budget_interval: string | null; rpm_limit: number | null; tpm_limit: number | null }>,
) {
  return q
    .updateTable('mp_keys')
    .set({ ...set, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any)
    .where('key_id', '=', keyId)
    .returning(keyColumns)
    .executeTakeFirst();
}

export async function revokeKey(q: Q, keyId: string) {
  return q
    .updateTable('mp_keys')
    .set({ revoked_at: sql<string>`coalesce(revoked_at, now())` as unknown as string, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any)
    .where('key_id', '=', keyId)
    .returning(keyColumns)
    .executeTakeFirst();
}

export async function revokeTeamKeys(q: Q, team: string): Promise<string[]> {
  const rows = await q
    .updateTable('mp_keys')
    .set({ revoked_at: sql<string>`now()` as unknown as string, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any)
    .where('team', '=', team)
    .where('revoked_at', 'is', null)
    .returning('key_id')
    .execute();
  return rows.map((r) => r.key_id);
}

/** Makes sure the team has a budget row (no budget until one is set). */
export async function ensureTeam(q: Q, team: string) {
  await q.insertInto('mp_teams').values({ team, budget_usd_per_day: null }).onConflict((oc) => oc.column('team').doNothing()).execute();
}

export async function setTeamBudget(q: Q, team: string, usdPerDay: number | null) {
  return q
    .insertInto('mp_teams')
    .values({ team, budget_usd_per_day: usdPerDay })
    .onConflict((oc) =>
      oc.column('team').doUpdateSet({ budget_usd_per_day: usdPerDay, updated_at: sql<string>`now()` as unknown as string, row_version: sql`nextval('row_version_seq')` } as any),
    )
    .returning(['team', 'budget_usd_per_day'])
    .executeTakeFirstOrThrow();
}

/** A team's budget and what it spent (settled) and holds reserved in the current UTC day. */
export async function teamState(q: Q, team: string) {
  return q
    .selectFrom('mp_teams')
    .select([
      'team',
      'budget_usd_per_day',
      sql<number>`case when day = (now() at time zone 'utc')::date then day_spend else 0 end`.as('spent_today'),
      'reserved',
    ])
    .where('team', '=', team)
    .executeTakeFirst();
}

export async function teamStates(q: Q) {
  return q
    .selectFrom('mp_teams')
    .select(['team', 'budget_usd_per_day', sql<number>`case when day = (now() at time zone 'utc')::date then day_spend else 0 end`.as('spent_today'), 'reserved'])
    .orderBy('team')
    .execute();
}

export interface DayRow {
  team: string;
  date: string;
  spend_usd: number;
  tokens: number;
  requests: number;
}

/** Per team and UTC day from the rollup (index on team, day or day, team; never the request log). */
export async function spendByTeamDay(q: Q, opts: { from: string; team?: string }): Promise<DayRow[]> {
  let query = q
    .selectFrom('mp_spend_daily')
    .select([
      'team',
      sql<string>`day::text`.as('date'),
      sql<number>`sum(spend_usd)`.as('spend_usd'),
      sql<number>`sum(tokens_in + tokens_out)`.as('tokens'),
      sql<number>`sum(requests)`.as('requests'),
    ])
    .where('day', '>=', opts.from)
    .groupBy(['team', 'day'])
    .orderBy('team')
    .orderBy('day');
  if (opts.team) query = query.where('team', '=', opts.team);
  return query.execute();
}

/** Rollup rows filtered by team, role, key and a day range, with the key's agent. */
export async function spendRows(q: Q, opts: { from: string; to: string; team?: string; role?: string; keyId?: string; limit: number }) {
  let query = q
    .selectFrom('mp_spend_daily as d')
    .leftJoin('mp_keys as k', 'k.key_id', 'd.key_id')
    .select([
      sql<string>`d.day::text`.as('date'),
      'd.team',
      'd.role',
      'd.key_id',
      'k.agent',
      'd.spend_usd',
      'd.tokens_in',
      'd.tokens_out',
      'd.requests',
    ])
    .where('d.day', '>=', opts.from)
    .where('d.day', '<=', opts.to)
    .orderBy('d.day')
    .orderBy('d.team')
    .orderBy('d.role')
    .orderBy('d.key_id')
    .limit(opts.limit);
  if (opts.team) query = query.where('d.team', '=', opts.team);
  if (opts.role) query = query.where('d.role', '=', opts.role);
  if (opts.keyId) query = query.where('d.key_id', '=', opts.keyId);
  return query.execute();
}

/** The request log, newest first, by team (index on team, id). */
export async function requestLog(q: Q, opts: { team: string; beforeId?: number; limit: number }) {
  let query = q
    .selectFrom('mp_request_log')
    .select(['id', 'at', 'team', 'role', 'key_id', 'model', 'stream', 'tokens_in', 'tokens_out', 'cost_usd', 'status', 'latency_ms', 'upstream_request_id', 'request_id', 'error'])
    .where('team', '=', opts.team)
    .orderBy('id', 'desc')
    .limit(opts.limit + 1);
  if (opts.beforeId) query = query.where('id', '<', opts.beforeId);
  return query.execute();
}

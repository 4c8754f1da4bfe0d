import { sql } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Admission, Reservation, ReserveInput, ReserveOutcome, Settlement } from './admission.ts';

/**
 * Authenticates a key and, when every limit admits the request, reserves its worst-case
 * cost against the key and the team, in one round trip (mp_reserve).
 */
export async function reserve(db: Db, r: ReserveInput): Promise<Reservation> {
  const { rows } = await sql<{ o_outcome: ReserveOutcome; o_key_id: string | null; o_team: string | null; o_role: string | null; o_agent: string | null; o_reservation: number | null; o_retry_after: number | null }>`
    select m.* from mp_reserve(${r.keyHash}, ${r.model}, ${r.amount}::numeric, ${r.tokens}::integer, ${r.ttlSeconds}::integer) m`.execute(db);
  const o = rows[0];
  return { outcome: o.o_outcome, keyId: o.o_key_id, team: o.o_team, role: o.o_role, agent: o.o_agent, reservation: o.o_reservation, retryAfter: o.o_retry_after };
}

/** Settlements (and, on the embedded database, the ledger's counters) gather this long and are written together, behind the answers. */
export const WRITE_BEHIND_MS = 10;

/**
 * Admission in the database, for PostgreSQL shared by several proxies: every reservation is a
 * write on the request's path (group-committed under load), settlements are written behind,
 * and limits hold across processes because they live in the rows.
 *
 * A settlement still queued behind its answer when a request of the same key or team arrives
 * goes first, in the reservation's own statement, so that the reservation sees what the call
 * really cost, not its estimate (an upstream may report far more usage than was reserved). One
 * still being written is waited for. Other processes' settlements are not seen until they land.
 */
export function createDatabaseAdmission(db: Db, onError: (err: unknown, count: number) => void): Admission {
  const owners = createKeyOwners();
  const reserver = createReserver(db, {
    settleFirst: async (inputs) => {
      const concerns = (s: Settlement) => inputs.some((i) => owners.concerns(i.keyHash, s));
      await settler.written(concerns);
      return settler.take(concerns);
    },
    settledFirstFailed: (items) => settler.putBack(items),
    answered: (inputs, results) => inputs.forEach((i, n) => owners.learn(i.keyHash, results[n])),
  });
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

/**
 * Whose a key hash is (its key and team), as this process's reservations answered: which queued
 * settlements a request must wait for. A key not seen yet may be of any team, so every
 * settlement concerns it; a key's team never changes.
 */
function createKeyOwners(max = 4096) {
  const owners = new Map<string, { keyId: string; team: string | null }>();
  return {
    learn(keyHash: string, r: Reservation) {
      if (r.keyId === null || owners.has(keyHash)) return;
      if (owners.size >= max) owners.clear();
      owners.set(keyHash, { keyId: r.keyId, team: r.team });
    },
    concerns(keyHash: string, s: Settlement): boolean {
      const o = owners.get(keyHash);
      return o === undefined || s.keyId === o.keyId || (s.team !== null && s.team === o.team);
    },
  };
}

type ReserveRow = { o_idx: number; o_outcome: ReserveOutcome; o_key_id: string | null; o_team: string | null; o_role: string | null; o_agent: string | null; o_reservation: number | null; o_retry_after: number | null };

/**
 * Reserves for many requests in one statement and one commit (mp_reserve_batch); answers in
 * input order. With `settleFirst`, those settlements are written first in the same transaction
 * (mp_settle_reserve_batch).
 */
export async function reserveBatch(db: Db, items: ReserveInput[], settleFirst: Settlement[] = []): Promise<Reservation[]> {
  const payload = JSON.stringify(items.map((r, idx) => ({ idx, key_hash: r.keyHash, model: r.model, amount: r.amount, tokens: r.tokens, ttl: r.ttlSeconds })));
  const { rows } = settleFirst.length
    ? await sql<ReserveRow>`select m.* from mp_settle_reserve_batch(${settlementsJson(settleFirst)}::jsonb, ${payload}::jsonb) m`.execute(db)
    : await sql<ReserveRow>`select m.* from mp_reserve_batch(${payload}::jsonb) m`.execute(db);
  const out: Reservation[] = new Array(items.length);
  for (const o of rows) out[o.o_idx] = { outcome: o.o_outcome, keyId: o.o_key_id, team: o.o_team, role: o.o_role, agent: o.o_agent, reservation: o.o_reservation, retryAfter: o.o_retry_after };
  return out;
}

/**
 * Group commit for reservations: a request arriving while a reservation is being written
 * waits for it and then goes with every other request that arrived meanwhile, in one
 * statement. When idle, a request goes at once, alone. `idle()` resolves once no
 * reservation is queued or being written (the settler yields to reservations with it).
 *
 * `settleFirst` names the settlements to write in the same statement, before the batch's
 * reservations; when that statement fails they are handed back (`settledFirstFailed`).
 * `answered` hears every batch's answers.
 */
export function createReserver(
  db: Db,
  hooks: {
    settleFirst?: (inputs: ReserveInput[]) => Promise<Settlement[]>;
    settledFirstFailed?: (items: Settlement[]) => void;
    answered?: (inputs: ReserveInput[], results: Reservation[]) => void;
  } = {},
) {
  let queue: Array<{ input: ReserveInput; resolve: (r: Reservation) => void; reject: (e: unknown) => void }> = [];
  let running = false;
  let waiters: Array<() => void> = [];
  const run = async () => {
    running = true;
    while (queue.length) {
      const batch = queue;
      queue = [];
      const inputs = batch.map((b) => b.input);
      const first = hooks.settleFirst ? await hooks.settleFirst(inputs) : [];
      try {
        const results = batch.length === 1 && !first.length ? [await reserve(db, inputs[0])] : await reserveBatch(db, inputs, first);
        hooks.answered?.(inputs, results);
        batch.forEach((b, i) => b.resolve(results[i]));
      } catch (err) {
        if (first.length) hooks.settledFirstFailed?.(first);
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
  await sql`select mp_settle_batch(${settlementsJson(items)}::jsonb)`.execute(db);
}

/** Settlements as mp_settle_batch takes them. */
function settlementsJson(items: Settlement[]): string {
  return JSON.stringify(
    items.map((s) => ({
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
    })),
  );
}

/**
 * The write-behind queue of settlements: a settlement is queued when the answer went out and
 * written with the others that gathered within `delayMs`, one batch (one statement, one
 * commit) at a time, at most `maxBatch` each. A batch waits while reservations are being
 * written (`yieldTo`), at most `delayMs` more, so settling never delays an admission for long.
 * A reservation stays counted until its settlement lands, and a reservation of the same key or
 * team takes its settlements out of the queue and writes them first (`take`; `written` for the
 * batch being written), so a request is never decided on an earlier call's estimate alone.
 * `drain` writes everything queued (on shutdown).
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
  /** The batch being written, and when it is. */
  let writing: { batch: Settlement[]; done: Promise<void> } | null = null;
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
    // A reservation may have taken them all along meanwhile (take).
    if (!batch.length) return;
    const done = (batch.length === 1 ? settle(db, batch[0]) : settleBatch(db, batch)).catch((err: unknown) => onError(err, batch.length));
    writing = { batch, done };
    await done;
    writing = null;
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
    /** Takes the queued settlements `which` picks out of the queue: the caller writes them. */
    take(which: (s: Settlement) => boolean): Settlement[] {
      if (!queue.length) return [];
      const taken: Settlement[] = [];
      const kept: Settlement[] = [];
      for (const s of queue) (which(s) ? taken : kept).push(s);
      queue = kept;
      if (!queue.length && timer) {
        clearTimeout(timer);
        timer = null;
      }
      return taken;
    },
    /** Settlements taken that their taker could not write: queued again, first. */
    putBack(items: Settlement[]) {
      queue = items.concat(queue);
      schedule();
    },
    /** Resolves once the batch being written, if it holds a settlement `which` picks, has landed (or failed). */
    written(which: (s: Settlement) => boolean): Promise<void> | undefined {
      return writing?.batch.some(which) ? writing.done : undefined;
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


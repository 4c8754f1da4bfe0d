import { sql, type Transaction } from 'kysely';
import type { Logger } from 'pino';
import { listen, type Db, type Unlisten } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import type { Database } from '../../db/schema.ts';

/** An event as written: who receives it (null: everyone in the organization) and what it says. */
export interface ChatEventRecord {
  realmId: number;
  users: number[] | null;
  /** Per-user message flags (message events only). */
  flags?: Record<number, string[]>;
  payload: Record<string, unknown>;
}

/** An event as read back by a process, for its queues. */
export interface ChatEventRow {
  id: number;
  realm_id: number;
  users: number[] | null;
  flags: Record<string, string[]> | null;
  payload: Record<string, unknown>;
}

/** The NOTIFY channel, one per schema, so deployments sharing a server do not wake each other. */
const channelSql = sql<string>`left('crewhouse_chat_events:' || current_schema(), 63)`;

/**
 * Writes events in the transaction of the change they tell of, so an event exists exactly when
 * its change was committed. A transaction-scoped lock orders the writers, so ids become visible
 * in increasing order and a reader that has seen id N never meets a smaller one later.
 */
export async function writeEvents(trx: Transaction<Database>, events: ChatEventRecord[]): Promise<void> {
  if (!events.length) return;
  await lockKey(trx, 'chat_events');
  await trx
    .insertInto('chat_events')
    .values(events.map((e) => ({ realm_id: e.realmId, users: e.users === null ? null : JSON.stringify(e.users), flags: e.flags ? JSON.stringify(e.flags) : null, payload: JSON.stringify(e.payload) })) as any)
    .execute();
  await sql`select pg_notify(${channelSql}, '')`.execute(trx);
}

const BATCH = 500;

/**
 * Reads the event log after every NOTIFY (or a local nudge after this process's own commits)
 * and hands each new event to `deliver`, in id order. Every chat process runs one, so every
 * queue of every process sees every event. Old rows are pruned once no queue can still need them.
 */
export class ChatEventReader {
  private readonly db: Db;
  private readonly deliver: (row: ChatEventRow) => void;
  private readonly log: Logger | null;
  private readonly keepMs: number;
  private cursor = 0;
  private reading = false;
  private again = false;
  private unlisten: Unlisten | null = null;
  private timer: NodeJS.Timeout | null = null;
  private started: Promise<void> | null = null;
  private stopped = false;

  constructor(opts: { db: Db; deliver: (row: ChatEventRow) => void; log?: Logger; keepMs: number }) {
    this.db = opts.db;
    this.deliver = opts.deliver;
    this.log = opts.log ?? null;
    this.keepMs = opts.keepMs;
  }

  /** Starts at the log's end (queues made from now on need nothing older), then listens. */
  start(): Promise<void> {
    this.started ??= (async () => {
      const row = await this.db.selectFrom('chat_events').select((eb) => eb.fn.max('id').as('max')).executeTakeFirst();
      this.cursor = Number(row?.max ?? 0);
      const { rows } = await sql<{ channel: string }>`select ${channelSql} as channel`.execute(this.db);
      try {
        this.unlisten = await listen(this.db, rows[0].channel, () => this.poke());
      } catch (err) {
        this.log?.warn({ cause: (err as Error).message }, 'chat events: could not LISTEN; reading the event log every second instead');
      }
      // A slow safety net: a missed notification delays delivery by at most this much.
      this.timer = setInterval(() => {
        this.poke();
        void this.prune();
      }, 1000);
      this.timer.unref();
    })();
    return this.started;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    // A start still under way finishes first: its LISTEN (a connection of its own on PostgreSQL) is then released here, not left open.
    await this.started?.catch(() => {});
    if (this.timer) clearInterval(this.timer);
    await this.unlisten?.().catch(() => {});
  }

  /** Reads what is new; calls made while a read runs are folded into one more read. */
  poke(): void {
    if (this.stopped || !this.started) return;
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    void this.readAll().finally(() => {
      this.reading = false;
      if (this.again) {
        this.again = false;
        this.poke();
      }
    });
  }

  private async readAll() {
    try {
      for (;;) {
        const rows = await this.db.selectFrom('chat_events').select(['id', 'realm_id', 'users', 'flags', 'payload']).where('id', '>', this.cursor).orderBy('id').limit(BATCH).execute();
        for (const row of rows) {
          this.cursor = Number(row.id);
          try {
            this.deliver({ ...row, id: Number(row.id) } as ChatEventRow);
          } catch (err) {
            this.log?.error({ err }, 'chat events: delivering an event failed');
          }
        }
        if (rows.length < BATCH || this.stopped) return;
      }
    } catch (err) {
      if (!this.stopped) this.log?.warn({ cause: (err as Error).message }, 'chat events: reading the event log failed; trying again in a second');
    }
  }

  private lastPrune = 0;
  private async prune() {
    const now = Date.now();
    if (now - this.lastPrune < 60_000 || this.stopped) return;
    this.lastPrune = now;
    await this.db
      .deleteFrom('chat_events')
      .where('created_at', '<', new Date(now - this.keepMs).toISOString())
      .execute()
      .catch(() => {});
  }
}

import crypto from 'node:crypto';
import type { ChatEventRow } from './events.bus.ts';

export interface QueueOptions {
  userId: number;
  realmId: number;
  /** Event types this queue wants; null: all of them. */
  eventTypes: Set<string> | null;
  /** Keeps a message event only when it matches (the register narrow); null: every message. */
  messageFilter: ((message: Record<string, unknown>) => boolean) | null;
  applyMarkdown: boolean;
  clientGravatar: boolean;
}

export interface QueuedEvent {
  id: number;
  [key: string]: unknown;
}

interface Waiter {
  resolve: (events: QueuedEvent[]) => void;
  timer: NodeJS.Timeout;
}

export interface Queue extends QueueOptions {
  id: string;
  events: QueuedEvent[];
  /** The id the next event gets; the first is 0, as Zulip's. */
  nextId: number;
  lastAccess: number;
  waiter: Waiter | null;
}

export interface QueueLimits {
  /** A queue nobody polled for this long is removed (Zulip: 10 minutes). */
  idleMs: number;
  /** A long poll with nothing to say answers a heartbeat after this long (Zulip: about 45 s). */
  heartbeatMs: number;
  /** Events a queue may hold unread; past it the queue is dropped and its client re-registers. */
  maxEvents: number;
  /** Queues one user may hold in this process; the least recently used goes first. */
  maxPerUser: number;
  /** Queues this process holds at most; the least recently used goes first. */
  maxQueues: number;
}

export const DEFAULT_QUEUE_LIMITS: QueueLimits = { idleMs: 10 * 60_000, heartbeatMs: 45_000, maxEvents: 10_000, maxPerUser: 30, maxQueues: 20_000 };

/**
 * The event queues of this process, in memory, as Zulip's Tornado keeps them: a queue lives
 * as long as the process and its client's polling, holds at most `maxEvents`, and is gone
 * after `idleMs` without a poll. Events reach queues through `deliver` (from the event log).
 */
export class EventQueues {
  private readonly queues = new Map<string, Queue>();
  private readonly byUser = new Map<number, Set<Queue>>();
  private readonly limits: QueueLimits;
  private readonly sweeper: NodeJS.Timeout;
  private readonly prefix = crypto.randomBytes(4).toString('hex');
  private counter = 0;

  constructor(limits: Partial<QueueLimits> = {}) {
    this.limits = { ...DEFAULT_QUEUE_LIMITS, ...limits };
    this.sweeper = setInterval(() => this.sweep(), Math.min(60_000, Math.max(50, this.limits.idleMs / 4)));
    this.sweeper.unref();
  }

  get size(): number {
    return this.queues.size;
  }

  create(opts: QueueOptions): Queue {
    const q: Queue = { ...opts, id: `${this.prefix}:${++this.counter}:${crypto.randomBytes(6).toString('hex')}`, events: [], nextId: 0, lastAccess: Date.now(), waiter: null };
    const mine = this.byUser.get(opts.userId) ?? new Set<Queue>();
    this.byUser.set(opts.userId, mine);
    if (mine.size >= this.limits.maxPerUser) this.remove(oldest(mine)!);
    if (this.queues.size >= this.limits.maxQueues) this.remove(oldest(this.queues.values())!);
    mine.add(q);
    this.queues.set(q.id, q);
    return q;
  }

  /** The caller's queue, or undefined when there is none (expired, dropped, or someone else's). */
  get(id: string, userId: number): Queue | undefined {
    const q = this.queues.get(id);
    return q && q.userId === userId ? q : undefined;
  }

  remove(q: Queue): void {
    if (!this.queues.delete(q.id)) return;
    this.byUser.get(q.userId)?.delete(q);
    if (!this.byUser.get(q.userId)?.size) this.byUser.delete(q.userId);
    if (q.waiter) {
      clearTimeout(q.waiter.timer);
      q.waiter.resolve([]);
      q.waiter = null;
    }
  }

  /**
   * Events after `lastEventId` (those up to it are acknowledged and dropped). With nothing to
   * give and `block`, waits for an event, or answers a heartbeat after heartbeatMs; `signal`
   * ends the wait when the client goes away. A newer poll of the same queue ends an older one.
   */
  poll(q: Queue, lastEventId: number, block: boolean, signal?: AbortSignal): Promise<QueuedEvent[]> {
    q.lastAccess = Date.now();
    if (lastEventId >= 0) {
      let i = 0;
      while (i < q.events.length && q.events[i].id <= lastEventId) i++;
      if (i) q.events.splice(0, i);
    }
    if (q.waiter) {
      clearTimeout(q.waiter.timer);
      q.waiter.resolve([]);
      q.waiter = null;
    }
    if (q.events.length || !block) return Promise.resolve([...q.events]);
    return new Promise((resolve) => {
      const done = (events: QueuedEvent[]) => {
        signal?.removeEventListener('abort', onAbort);
        q.lastAccess = Date.now();
        resolve(events);
      };
      const onAbort = () => {
        if (q.waiter?.resolve !== done) return;
        clearTimeout(q.waiter.timer);
        q.waiter = null;
        done([]);
      };
      const timer = setTimeout(() => {
        if (q.waiter?.resolve !== done) return;
        q.waiter = null;
        this.push(q, { type: 'heartbeat' });
        done([...q.events]);
      }, this.limits.heartbeatMs);
      q.waiter = { resolve: done, timer };
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  /** Hands an event from the log to every queue of a recipient that wants it. */
  deliver(row: ChatEventRow, shape: (q: Queue, row: ChatEventRow) => Record<string, unknown> | null): void {
    const targets: Iterable<Queue> = row.users === null ? this.realmQueues(row.realm_id) : row.users.flatMap((u) => [...(this.byUser.get(u) ?? [])]);
    for (const q of targets) {
      if (q.realmId !== row.realm_id) continue;
      const type = String(row.payload.type);
      if (q.eventTypes && !q.eventTypes.has(type)) continue;
      const event = shape(q, row);
      if (event) this.push(q, event);
    }
  }

  private *realmQueues(realmId: number): Iterable<Queue> {
    for (const q of this.queues.values()) if (q.realmId === realmId) yield q;
  }

  private push(q: Queue, event: Record<string, unknown>) {
    if (q.events.length >= this.limits.maxEvents) {
      // Unread for too long: the client gets BAD_EVENT_QUEUE_ID next and registers again.
      this.remove(q);
      return;
    }
    q.events.push({ ...event, id: q.nextId++ });
    if (q.waiter) {
      const w = q.waiter;
      q.waiter = null;
      clearTimeout(w.timer);
      // Let the other events of the same batch from the log join this answer.
      setImmediate(() => w.resolve([...q.events]));
    }
  }

  private sweep() {
    const cutoff = Date.now() - this.limits.idleMs;
    for (const q of this.queues.values()) if (!q.waiter && q.lastAccess < cutoff) this.remove(q);
  }

  close(): void {
    clearInterval(this.sweeper);
    for (const q of [...this.queues.values()]) this.remove(q);
  }
}

function oldest(qs: Iterable<Queue>): Queue | undefined {
  let best: Queue | undefined;
  for (const q of qs) if (!best || q.lastAccess < best.lastAccess) best = q;
  return best;
}

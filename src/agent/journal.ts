import fs from 'node:fs';
import path from 'node:path';
import type { AgentEvent, AgentEventBody } from './protocol.ts';

/** An append to a journal sealed because its turn's worker went away. */
export class JournalSealed extends Error {
  constructor(file: string) {
    super(`the journal ${file} is sealed: its turn's worker went away, so nothing more is recorded`);
    this.name = 'JournalSealed';
  }
}

/**
 * The append-only journal of one conversation: a JSON line per event, written and synced to
 * disk before it is told to anyone, so a runtime killed at any point resumes from exactly what
 * was recorded. A torn last line (a write cut short by the kill) is dropped on open.
 *
 * Group commit: `write` puts an event in the file without syncing it; the next `append` (or
 * `sync`) syncs it together with its own event, with one fdatasync, and only then are they told,
 * in order and at once. The loop writes what merely follows from an answer or a tool (the
 * model's reply, a tool's result) and appends what starts an effect (a tool, a model call), so
 * nothing outside the runtime ever sees or acts on an event before it is on disk. An event only
 * written is in the file for a runtime killed before the sync (the kernel holds the write), and
 * lost only with the machine: then its turn resumes as it would have from before it.
 *
 * A model call is synced behind its request (`syncBehind`): the request goes out while the
 * fdatasync runs, and the answer is acted on only once the call is on disk. A model call is no
 * effect the journal guards: one whose answer was not recorded is made again on resume in any
 * case, so sending it before its event is durable changes nothing a kill can show.
 */
export class Journal {
  readonly file: string;
  private fd: number;
  private readonly events: AgentEvent[] = [];
  private readonly listeners = new Set<(events: readonly AgentEvent[]) => void>();
  private sealed = false;
  /** Written but not yet synced nor told. */
  private unsynced: AgentEvent[] = [];
  /** A background sync under way (syncBehind): its events, told when it ends unless a sync told them first. */
  private behind: { events: AgentEvent[]; told: boolean } | null = null;

  private constructor(file: string, fd: number, events: AgentEvent[]) {
    this.file = file;
    this.fd = fd;
    this.events = events;
  }

  static open(file: string): Journal {
    fs.mkdirSync(path.dirname(file), { recursive: true });
    let text = '';
    try {
      text = fs.readFileSync(file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    const events: AgentEvent[] = [];
    let good = 0;
    for (const line of text.split('\n')) {
      if (!line) break;
      let e: AgentEvent;
      try {
        e = JSON.parse(line) as AgentEvent;
      } catch {
        break;
      }
      if (e.seq !== events.length + 1) break;
      events.push(e);
      good += Buffer.byteLength(line, 'utf8') + 1;
    }
    const fd = fs.openSync(file, 'a+');
    if (good !== Buffer.byteLength(text, 'utf8')) fs.ftruncateSync(fd, good);
    return new Journal(file, fd, events);
  }

  get lastSeq(): number {
    return this.events.length;
  }

  all(): readonly AgentEvent[] {
    return this.events;
  }

  after(seq: number): AgentEvent[] {
    return this.events.slice(Math.max(0, seq));
  }

  /** Records an event durably, with any written before it, and then tells the listeners; returns it with its seq. */
  append(body: AgentEventBody): AgentEvent {
    const event = this.write(body);
    this.sync();
    return event;
  }

  /** Writes an event to the file without syncing it: the next append or sync makes it durable and tells it. */
  write(body: AgentEventBody): AgentEvent {
    if (this.sealed) throw new JournalSealed(this.file);
    const event = { seq: this.events.length + 1, at: new Date().toISOString(), ...body } as AgentEvent;
    fs.writeSync(this.fd, `${JSON.stringify(event)}\n`);
    this.events.push(event);
    this.unsynced.push(event);
    return event;
  }

  /** Syncs what was written (one fdatasync for all of it) and tells the listeners, in order. */
  sync(): void {
    const behind = this.behind && !this.behind.told ? this.behind : null;
    if (!this.unsynced.length && !behind) return;
    if (this.sealed) throw new JournalSealed(this.file);
    fs.fdatasyncSync(this.fd);
    // What a background sync has not told yet comes first: this fdatasync covered it too.
    if (behind) behind.told = true;
    const events = behind ? [...behind.events, ...this.unsynced] : this.unsynced;
    this.unsynced = [];
    for (const l of this.listeners) l(events);
  }

  /**
   * Syncs what was written in the background (fdatasync on libuv's pool) and tells it when that
   * ends; settles then, rejecting if the sync failed or the journal was sealed meanwhile. A
   * `sync` or `append` before then syncs and tells these events first, in order.
   */
  syncBehind(): Promise<void> {
    if (this.sealed) return Promise.reject(new JournalSealed(this.file));
    if (this.behind && !this.behind.told) {
      // One background sync at a time: the next is a plain one, which covers both.
      this.sync();
      return Promise.resolve();
    }
    if (!this.unsynced.length) return Promise.resolve();
    const batch = { events: this.unsynced, told: false };
    this.unsynced = [];
    this.behind = batch;
    return new Promise((resolve, reject) => {
      fs.fdatasync(this.fd, (err) => {
        if (this.behind === batch) this.behind = null;
        if (batch.told) return resolve();
        batch.told = true;
        if (err) return reject(err);
        if (this.sealed) return reject(new JournalSealed(this.file));
        for (const l of this.listeners) l(batch.events);
        resolve();
      });
    });
  }

  /** Tells `listener` every batch of events once it is on disk (each sync's events at once, in order). */
  onDurable(listener: (events: readonly AgentEvent[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** From now on nothing is appended (each append throws JournalSealed): the worker that drove this turn is gone. */
  seal(): void {
    this.sealed = true;
  }

  /** Closes the file; what was only written is synced and told first, unless the journal is sealed. */
  close(): void {
    try {
      if (!this.sealed) this.sync();
    } finally {
      fs.closeSync(this.fd);
    }
  }
}

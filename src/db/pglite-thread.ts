import { Worker } from 'node:worker_threads';
import { messages } from '@electric-sql/pglite';
import type { Engine, EngineReply, NotificationListener, QueryOptions } from './pglite-engine.ts';

/** What the embedded database's thread opens (pglite-worker.ts). */
export interface ThreadOptions {
  /** The engine's files; null keeps them in memory. */
  dataDir: string | null;
  /** A dump to start from (a tarball from `dump`). */
  loadDataDir: Blob | null;
  /** `-c name=value` settings, after PGlite's defaults. */
  startParams: string[];
  /** How many prepared statements the session keeps. */
  statementCache?: number;
}

export type ThreadRequest = { op: 'query'; id: number; text: string; params: readonly unknown[]; begin?: boolean } | { op: 'dump'; id: number } | { op: 'close'; id: number };

/** An error as it crosses the threads: a database error with each of its fields, or anything else by its message. */
export interface WireError {
  database: boolean;
  message: string;
  length?: number;
  fields: Record<string, unknown>;
}

export type ThreadMessage =
  | { kind: 'ready' }
  | { kind: 'failed'; error: WireError }
  | { kind: 'notify'; channel: string; payload: string }
  | { kind: 'answer'; id: number; rows?: Record<string, unknown>[]; affected?: number; command?: string; image?: Blob }
  | { kind: 'error'; id: number; error: WireError };

type Answer = Extract<ThreadMessage, { kind: 'answer' }>;

/**
 * The embedded database in a thread of its own. PGlite runs every statement synchronously in
 * WebAssembly on the thread that calls it: on the service's event loop, a run's recording (a
 * few milliseconds of statements per batch of agent events) held up every request passing the
 * gateway and the model proxy in the same process. Here the engine works on another core while
 * the event loop goes on; each statement costs a message each way (tens of microseconds).
 *
 * A statement's parameters and rows cross by structured clone: strings, numbers, booleans,
 * null, bigint, Dates, byte arrays, plain arrays and objects cross as they are (a Buffer
 * arrives as a Uint8Array, which the engine writes the same way). Database errors come back as
 * pg-protocol's DatabaseError with every field, as PGlite's own `query` throws them. If the
 * thread ends (it crashed, or was closed), every waiting and later statement fails with the
 * SQLSTATE of a crashed server (57P02), which the service answers as "unavailable".
 *
 * The thread keeps the process alive only while a statement is waiting for it, as PGlite in
 * the main thread did: a command that forgets to close the database still exits.
 */
export class PGliteThread implements Engine {
  readonly #worker: Worker;
  readonly #waiting = new Map<number, { resolve: (answer: Answer) => void; reject: (err: Error) => void }>();
  readonly #listeners = new Set<NotificationListener>();
  #nextId = 0;
  /** Set once the thread has ended: why, as the error each statement gets. */
  #stopped: Error | null = null;
  #closing: Promise<void> | null = null;
  readonly #ready: Promise<void>;

  private constructor(options: ThreadOptions) {
    this.#worker = new Worker(new URL('./pglite-worker.ts', import.meta.url), { workerData: options });
    let ready!: () => void;
    let failed!: (err: Error) => void;
    this.#ready = new Promise<void>((resolve, reject) => {
      ready = resolve;
      failed = reject;
    });
    this.#worker.on('message', (message: ThreadMessage) => {
      switch (message.kind) {
        case 'ready':
          this.#worker.unref();
          ready();
          return;
        case 'failed':
          failed(fromWire(message.error));
          return;
        case 'notify':
          for (const listener of this.#listeners) listener(message.channel, message.payload);
          return;
        case 'answer':
          this.#settle(message.id)?.resolve(message);
          return;
        case 'error':
          this.#settle(message.id)?.reject(fromWire(message.error));
          return;
      }
    });
    this.#worker.on('error', (err) => {
      failed(err);
      this.#stop(`it failed: ${err.message}`);
    });
    this.#worker.on('exit', (code) => {
      failed(new Error(`the embedded database's thread exited (code ${code}) before it was ready`));
      this.#stop(this.#closing ? 'it was closed' : `its thread exited (code ${code})`);
    });
  }

  /** Starts the thread and opens the engine in it; rejects with the engine's own error if it cannot open. */
  static async start(options: ThreadOptions): Promise<PGliteThread> {
    const thread = new PGliteThread(options);
    try {
      await thread.#ready;
    } catch (err) {
      await thread.#worker.terminate();
      throw err;
    }
    return thread;
  }

  get closed(): boolean {
    return this.#stopped !== null || this.#closing !== null;
  }

  async query(text: string, params: readonly unknown[], options?: QueryOptions): Promise<EngineReply> {
    const answer = await this.#ask((id) => ({ op: 'query', id, text, params, ...(options?.begin ? { begin: true } : {}) }));
    return { rows: answer.rows ?? [], affected: answer.affected ?? 0, command: answer.command ?? '' };
  }

  /** The data directory as a tarball, for `loadDataDir` of another embedded database. */
  async dump(): Promise<Blob> {
    const answer = await this.#ask((id) => ({ op: 'dump', id }));
    return answer.image!;
  }

  onNotification(listener: NotificationListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Closes the engine (after the statements already sent) and waits for its thread to end. */
  close(): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    this.#closing ??= (async () => {
      // Kept alive until the thread has ended: the engine writes its last pages as it closes.
      this.#worker.ref();
      const exited = new Promise<void>((resolve) => this.#worker.once('exit', () => resolve()));
      await this.#ask((id) => ({ op: 'close', id }), true).catch(() => {});
      await exited;
    })();
    return this.#closing;
  }

  #ask(request: (id: number) => ThreadRequest, closing = false): Promise<Answer> {
    if (this.#stopped) return Promise.reject(this.#stopped);
    if (this.#closing && !closing) return Promise.reject(stoppedError('it was closed'));
    const id = ++this.#nextId;
    return new Promise<Answer>((resolve, reject) => {
      try {
        this.#worker.postMessage(request(id));
      } catch (err) {
        // A parameter that cannot cross to the thread (a function, a symbol): a caller's bug.
        reject(new TypeError(`a statement's parameter cannot be sent to the embedded database: ${(err as Error).message}`));
        return;
      }
      if (this.#waiting.size === 0) this.#worker.ref();
      this.#waiting.set(id, { resolve, reject });
    });
  }

  #settle(id: number) {
    const waiting = this.#waiting.get(id);
    this.#waiting.delete(id);
    if (this.#waiting.size === 0 && !this.#closing) this.#worker.unref();
    return waiting;
  }

  #stop(why: string) {
    if (this.#stopped) return;
    this.#stopped = stoppedError(why);
    for (const [id, waiting] of this.#waiting) {
      this.#settle(id);
      waiting.reject(this.#stopped);
    }
  }
}

/** The error of a statement the stopped engine cannot run: a crashed server's SQLSTATE, so it is answered as the database being unavailable. */
function stoppedError(why: string): Error {
  const err = new messages.DatabaseError(`the embedded database is not running (${why}); restart the service to open it again`, 0, 'error');
  err.code = '57P02';
  return err;
}

function fromWire(wire: WireError): Error {
  if (!wire.database) return new Error(wire.message);
  const err = new messages.DatabaseError(wire.message, wire.length ?? 0, 'error');
  Object.assign(err, wire.fields);
  return err;
}

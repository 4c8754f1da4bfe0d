import {
  AbortedTransactionError,
  CompiledQuery,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type Kysely,
  type QueryResult,
} from 'kysely';
import type { Engine } from './pglite-engine.ts';

/**
 * Kysely over the embedded database's engine (in its own thread in the service: PGliteThread;
 * or in this one: PGliteEngine). The engine has one session, so the driver hands it out to one
 * user at a time: a transaction holds it until commit or rollback, and other queries queue
 * behind it instead of interleaving into the open transaction. A transaction's `begin` goes
 * with its first statement (one message to the engine's thread and one back, not two each; a
 * transaction with no statement sends nothing at all).
 */
export class PGliteDialect implements Dialect {
  readonly #engine: Engine;
  constructor(engine: Engine) {
    this.#engine = engine;
  }
  createAdapter() {
    return new PostgresAdapter();
  }
  createDriver(): Driver {
    return new PGliteDriver(this.#engine);
  }
  createIntrospector(db: Kysely<any>) {
    return new PostgresIntrospector(db);
  }
  createQueryCompiler() {
    return new PostgresQueryCompiler();
  }
}

class PGliteDriver implements Driver {
  readonly #engine: Engine;
  readonly #connection: EngineConnection;
  #queue: Array<() => void> = [];
  #busy = false;

  constructor(engine: Engine) {
    this.#engine = engine;
    this.#connection = new EngineConnection(engine);
  }
  async init() {}
  async acquireConnection(): Promise<DatabaseConnection> {
    if (this.#busy) await new Promise<void>((resolve) => this.#queue.push(resolve));
    this.#busy = true;
    return this.#connection;
  }
  async beginTransaction(conn: DatabaseConnection) {
    (conn as EngineConnection).beginNext();
  }
  /**
   * PostgreSQL answers a COMMIT of a transaction an error aborted with ROLLBACK, not an error:
   * as Kysely's PostgresDriver does, that is thrown (AbortedTransactionError), so a commit that
   * rolled back never looks like success.
   */
  async commitTransaction(conn: DatabaseConnection) {
    const ended = await (conn as EngineConnection).end('commit');
    if (ended?.rows[0]?.command === 'ROLLBACK') throw new AbortedTransactionError();
  }
  async rollbackTransaction(conn: DatabaseConnection) {
    await (conn as EngineConnection).end('rollback');
  }
  async releaseConnection() {
    const next = this.#queue.shift();
    if (next) next();
    else this.#busy = false;
  }
  async destroy() {
    if (!this.#engine.closed) await this.#engine.close();
  }
}

class EngineConnection implements DatabaseConnection {
  readonly #engine: Engine;
  /** A transaction was begun and no statement has gone since: the next one opens it. */
  #beginPending = false;
  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** The transaction opens with the next statement. */
  beginNext() {
    this.#beginPending = true;
  }

  /** Commits or rolls back, answering how it ended; nothing to do (null) for a transaction that never sent a statement. */
  async end(command: 'commit' | 'rollback'): Promise<QueryResult<{ command?: string }> | null> {
    if (this.#beginPending) {
      this.#beginPending = false;
      return null;
    }
    return this.executeQuery<{ command?: string }>(CompiledQuery.raw(command));
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const params = query.parameters as readonly unknown[];
    const begin = this.#beginPending;
    this.#beginPending = false;
    try {
      const reply = await this.#engine.query(query.sql, params, begin ? { begin } : undefined);
      // As Kysely's PostgresDriver answers them: a transaction's end says how it ended.
      if (reply.command === 'COMMIT' || reply.command === 'ROLLBACK') return { rows: [{ command: reply.command }] as R[] };
      return { rows: reply.rows as R[], numAffectedRows: BigInt(reply.affected) };
    } catch (err) {
      // As PostgreSQL's driver does: the error names the statement that failed.
      throw Object.assign(err as Error, { query: query.sql, params });
    }
  }

  // eslint-disable-next-line require-yield
  async *streamQuery<R>(): AsyncIterableIterator<QueryResult<R>> {
    throw new Error('streaming queries are not supported on the embedded database');
  }
}

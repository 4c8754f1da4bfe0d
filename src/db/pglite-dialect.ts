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
 * behind it instead of interleaving into the open transaction.
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
    await conn.executeQuery(CompiledQuery.raw('begin'));
  }
  /**
   * PostgreSQL answers a COMMIT of a transaction an error aborted with ROLLBACK, not an error:
   * as Kysely's PostgresDriver does, that is thrown (AbortedTransactionError), so a commit that
   * rolled back never looks like success.
   */
  async commitTransaction(conn: DatabaseConnection) {
    const { rows } = await conn.executeQuery<{ command: string }>(CompiledQuery.raw('commit'));
    if (rows[0]?.command === 'ROLLBACK') throw new AbortedTransactionError();
  }
  async rollbackTransaction(conn: DatabaseConnection) {
    await conn.executeQuery(CompiledQuery.raw('rollback'));
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
  constructor(engine: Engine) {
    this.#engine = engine;
  }

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    const params = query.parameters as readonly unknown[];
    try {
      const reply = await this.#engine.query(query.sql, params);
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

import { messages, protocol, type PGlite } from '@electric-sql/pglite';

/**
 * What one statement answered: its rows (decoded with the engine's parsers), the rows it changed,
 * and the first word of its command tag ('INSERT', 'COMMIT'; 'ROLLBACK' when a COMMIT found its
 * transaction failed and rolled it back instead).
 */
export interface EngineReply {
  rows: Record<string, unknown>[];
  affected: number;
  command: string;
}

/** How a statement is run: `begin` opens a transaction just before it (in the same message to the engine's thread). */
export interface QueryOptions {
  begin?: boolean;
}

/** Hears NOTIFYs the engine sends back on its one session (channel, payload). */
export type NotificationListener = (channel: string, payload: string) => void;

/**
 * The embedded database's one session, as statements in and rows out: what the Kysely driver
 * needs (pglite-dialect.ts), whether the engine runs in this thread (PGliteEngine) or in a
 * thread of its own (PGliteThread, which is how the service runs it). A failed statement
 * rejects with pg-protocol's DatabaseError, as PGlite's own `query` does.
 */
export interface Engine {
  query(text: string, params: readonly unknown[], options?: QueryOptions): Promise<EngineReply>;
  onNotification(listener: NotificationListener): () => void;
  readonly closed: boolean;
  close(): Promise<void>;
}

/** How many prepared statements the connection keeps, least recently used dropped first. */
const STATEMENT_CACHE = 200;

// Statements whose plans are worth keeping: the service's reads and writes.
const CACHEABLE = /^\s*(select|insert|update|delete|with|begin|commit|rollback|savepoint|release)\b/i;
/** The type of bytea. */
const BYTEA = 17;
// Statements after which kept plans may describe tables that changed shape.
const SCHEMA_CHANGE = /^\s*(create|alter|drop|truncate|comment|do|import|refresh|grant|revoke)\b/i;

/** Commands whose tag ends in the number of rows they changed. */
const COUNTED = new Set(['INSERT', 'UPDATE', 'DELETE', 'MERGE', 'COPY']);

type Parse = (text: string, typeId?: number) => unknown;

interface Statement {
  /** '' is the unnamed statement, replaced by the next one that is not kept. */
  name: string;
  paramTypes: number[];
  columns: string[];
  columnParsers: Array<Parse | null>;
  columnTypes: number[];
}

interface Reply {
  rows: Record<string, unknown>[];
  affected: number;
  command: string;
  error: messages.DatabaseError | null;
  paramTypes: number[];
  columns: { name: string; type: number }[] | null;
}

/**
 * The engine's one session, speaking the extended query protocol to PGlite directly.
 *
 * PGlite's own `query` re-parses and re-plans every statement and makes six calls into
 * the engine per query (parse, describe, bind, describe, execute, sync), then decodes the
 * rows through a copy per field: a page of fifty rows cost about 1 ms where the engine's
 * work is under 0.1 ms. Here a statement is parsed and described once and kept as a
 * prepared statement (by its SQL text; Kysely's SQL is parameterised, so texts repeat);
 * each execution is then one call (bind, execute, sync), and rows are decoded straight
 * from the engine's reply with PGlite's own type parsers and serializers, so values look
 * exactly as they did through `query`. A statement that may change the schema drops the
 * kept ones, so no plan outlives the shape of its tables.
 */
export class PGliteEngine implements Engine {
  readonly #pg: PGlite;
  readonly #limit: number;
  /** By SQL text; Map order is use order (a hit moves to the end). */
  readonly #statements = new Map<string, Statement>();
  #nextName = 0;
  /** The transaction status of the last reply: I idle, T in a transaction, E in a failed one. */
  #status = 'I';

  readonly #listeners = new Set<NotificationListener>();
  #closed = false;

  constructor(pg: PGlite, opts: { statementCache?: number } = {}) {
    this.#pg = pg;
    this.#limit = opts.statementCache ?? STATEMENT_CACHE;
  }

  get closed(): boolean {
    return this.#closed || this.#pg.closed;
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (!this.#pg.closed) await this.#pg.close();
  }

  /** The data directory as a tarball (uncompressed), for `loadDataDir` of another PGlite. */
  async dump(): Promise<Blob> {
    return (await this.#pg.dumpDataDir('none')) as Blob;
  }

  /** Listens for NOTIFYs (after a LISTEN on the channel): PGlite's own `onNotification` never hears them, as this reads the engine's answers itself. */
  onNotification(listener: NotificationListener): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Runs one statement (one command; parameters as $1, $2, ...), after opening a transaction when asked to. */
  async query(text: string, params: readonly unknown[], options?: QueryOptions): Promise<EngineReply> {
    if (options?.begin) await this.query('begin', []);
    let statement = this.#statements.get(text);
    if (statement) {
      this.#statements.delete(text);
      this.#statements.set(text, statement);
    } else {
      statement = await this.#prepare(text, CACHEABLE.test(text) && this.#limit > 0);
    }
    let reply = await this.#run(statement, params);
    // A kept plan whose tables changed shape under it (DDL that did not come through here):
    // prepare afresh and run once more, unless a transaction was aborted by the error.
    if (reply.error?.code === '0A000' && statement.name !== '' && /cached plan/.test(reply.error.message)) {
      await this.#forget([text]);
      if (this.#status === 'I') {
        statement = await this.#prepare(text, true);
        reply = await this.#run(statement, params);
      }
    }
    if (reply.error) throw reply.error;
    if (SCHEMA_CHANGE.test(text) && this.#statements.size > 0) await this.#forget([...this.#statements.keys()]);
    return { rows: reply.rows, affected: reply.affected, command: reply.command };
  }

  /** Parses and describes a statement: kept under a name, or as the unnamed statement. */
  async #prepare(text: string, keep: boolean): Promise<Statement> {
    const name = keep ? `kysely_${++this.#nextName}` : '';
    const reply = await this.#exchange([protocol.serialize.parse({ name, text }), protocol.serialize.describe({ type: 'S', name }), protocol.serialize.sync()], null);
    if (reply.error) throw reply.error;
    const columns = reply.columns ?? [];
    const parsers = this.#pg.parsers;
    const statement: Statement = {
      name,
      paramTypes: reply.paramTypes,
      columns: columns.map((c) => c.name),
      columnTypes: columns.map((c) => c.type),
      columnParsers: columns.map((c) => (parsers[c.type] as Parse | undefined) ?? null),
    };
    if (keep) {
      this.#statements.set(text, statement);
      if (this.#statements.size > this.#limit) await this.#forget([this.#statements.keys().next().value as string]);
    }
    return statement;
  }

  async #run(statement: Statement, params: readonly unknown[]): Promise<Reply> {
    const serializers = this.#pg.serializers;
    const values = params.map((param, i) => {
      if (param === null || param === undefined) return null;
      // A bytea goes as its bytes (the binary format): its text form is twice the size, as a string.
      if (statement.paramTypes[i] === BYTEA && param instanceof Uint8Array) return param;
      const serialize = serializers[statement.paramTypes[i]];
      return serialize ? serialize(param) : String(param);
    });
    return this.#exchange(
      [protocol.serialize.bind({ statement: statement.name, values }), protocol.serialize.execute({}), protocol.serialize.sync()],
      statement,
    );
  }

  /** Closes kept statements (their plans go with them). */
  async #forget(texts: string[]): Promise<void> {
    const closes: Uint8Array[] = [];
    for (const text of texts) {
      const statement = this.#statements.get(text);
      if (!statement) continue;
      this.#statements.delete(text);
      closes.push(protocol.serialize.close({ type: 'S', name: statement.name }));
    }
    if (closes.length) await this.#exchange([...closes, protocol.serialize.sync()], null);
  }

  /** Sends protocol messages in one call into the engine and decodes what comes back. */
  async #exchange(parts: Uint8Array[], statement: Statement | null): Promise<Reply> {
    const chunks: Buffer[] = [];
    await this.#pg.execProtocolRawStream(concat(parts), { onRawData: (bytes) => chunks.push(Buffer.from(bytes)) });
    const buf = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    const reply: Reply = { rows: [], affected: 0, command: '', error: null, paramTypes: [], columns: null };
    const names = statement?.columns ?? [];
    const parsers = statement?.columnParsers ?? [];
    const types = statement?.columnTypes ?? [];
    const notifications: Array<[string, string]> = [];
    let at = 0;
    while (at + 5 <= buf.length) {
      const code = buf[at];
      const end = at + 1 + buf.readInt32BE(at + 1);
      let p = at + 5;
      switch (code) {
        case 0x44: {
          // DataRow
          const count = buf.readInt16BE(p);
          p += 2;
          const row: Record<string, unknown> = {};
          for (let i = 0; i < count; i++) {
            const len = buf.readInt32BE(p);
            p += 4;
            if (len < 0) {
              row[names[i]] = null;
              continue;
            }
            const value = buf.toString('utf8', p, p + len);
            p += len;
            const parse = parsers[i];
            row[names[i]] = parse ? parse(value, types[i]) : value;
          }
          reply.rows.push(row);
          break;
        }
        case 0x54: {
          // RowDescription
          const count = buf.readInt16BE(p);
          p += 2;
          const columns: { name: string; type: number }[] = [];
          for (let i = 0; i < count; i++) {
            const zero = buf.indexOf(0, p);
            const name = buf.toString('utf8', p, zero);
            p = zero + 1;
            columns.push({ name, type: buf.readInt32BE(p + 6) });
            p += 18;
          }
          reply.columns = columns;
          break;
        }
        case 0x74: {
          // ParameterDescription
          const count = buf.readInt16BE(p);
          for (let i = 0; i < count; i++) reply.paramTypes.push(buf.readInt32BE(p + 2 + i * 4));
          break;
        }
        case 0x43: {
          // CommandComplete: "INSERT 0 5", "UPDATE 3", "SELECT 2", "CREATE TABLE"
          const tag = buf.toString('utf8', p, end - 1);
          const words = tag.split(' ');
          if (COUNTED.has(words[0])) reply.affected += Number(words[words.length - 1]);
          reply.command = words[0];
          break;
        }
        case 0x45:
          // ErrorResponse: the first one counts; the engine skips the rest until Sync
          reply.error ??= databaseError(buf, p, end, end - at - 1);
          break;
        case 0x5a:
          // ReadyForQuery
          this.#status = String.fromCharCode(buf[p]);
          break;
        case 0x41: {
          // NotificationResponse: process id, channel, payload (delivered at the commit that sent it)
          const channelEnd = buf.indexOf(0, p + 4);
          const channel = buf.toString('utf8', p + 4, channelEnd);
          const payload = buf.toString('utf8', channelEnd + 1, buf.indexOf(0, channelEnd + 1));
          notifications.push([channel, payload]);
          break;
        }
        default:
          // ParseComplete, BindComplete, CloseComplete, NoData, notices, parameter status
          break;
      }
      at = end;
    }
    // Told after the answer is read, so a listener that queries does not run inside this exchange.
    if (notifications.length) queueMicrotask(() => notifications.forEach(([channel, payload]) => this.#listeners.forEach((l) => l(channel, payload))));
    return reply;
  }
}

function concat(parts: Uint8Array[]): Uint8Array {
  let length = 0;
  for (const part of parts) length += part.length;
  const out = new Uint8Array(length);
  let at = 0;
  for (const part of parts) {
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const ERROR_FIELDS: Record<string, keyof messages.DatabaseError> = {
  S: 'severity',
  C: 'code',
  D: 'detail',
  H: 'hint',
  P: 'position',
  p: 'internalPosition',
  q: 'internalQuery',
  W: 'where',
  s: 'schema',
  t: 'table',
  c: 'column',
  d: 'dataType',
  n: 'constraint',
  F: 'file',
  L: 'line',
  R: 'routine',
};

/** The same error PGlite's `query` throws: pg-protocol's DatabaseError with every field. */
function databaseError(buf: Buffer, start: number, end: number, length: number): messages.DatabaseError {
  const fields: Record<string, string> = {};
  let p = start;
  while (p < end && buf[p] !== 0) {
    const type = String.fromCharCode(buf[p]);
    const zero = buf.indexOf(0, p + 1);
    fields[type] = buf.toString('utf8', p + 1, zero);
    p = zero + 1;
  }
  const error = new messages.DatabaseError(fields.M ?? 'database error', length, 'error');
  for (const [key, field] of Object.entries(ERROR_FIELDS)) {
    if (fields[key] !== undefined) (error as unknown as Record<string, string>)[field] = fields[key];
  }
  return error;
}

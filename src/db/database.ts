import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { Kysely, PostgresDialect, sql, type PostgresPool, type PostgresPoolClient } from 'kysely';
import { parsers } from './parsers.ts';
import { PGliteDialect } from './pglite-dialect.ts';
import { PGliteThread } from './pglite-thread.ts';
import type { Database } from './schema.ts';
import { createWriteWatch, type WriteWatch } from './write-watch.ts';

export type Db = Kysely<Database>;

export interface OpenDatabase {
  db: Db;
  kind: 'pglite' | 'postgres';
  close(): Promise<void>;
  /** The embedded database's files as a tarball, for `pgliteData` of another one (not on PostgreSQL). */
  dump?: () => Promise<Blob>;
}

export class DatabaseLockedError extends Error {}

const embedded = new WeakSet<Db>();
/**
 * Whether a handle is the embedded database. PGlite belongs to one process (the lock file
 * below sees to it), so code may keep state in memory that on PostgreSQL must live in the
 * database, where other processes share it.
 */
export const isEmbedded = (db: Db): boolean => embedded.has(db);

const writeWatches = new WeakMap<Db, WriteWatch>();
/**
 * Calls `onWrite` around every write to one of `tables` (before it runs and after), for a
 * cache of their rows in this process: see `createWriteWatch`. Only the embedded database can
 * promise that (its one process is the only writer); on PostgreSQL this answers false and
 * watches nothing, and the caller must not cache.
 */
export function watchWrites(db: Db, tables: string[], onWrite: () => void): boolean {
  const watch = writeWatches.get(db);
  if (!watch) return false;
  watch.watch(tables, onWrite);
  return true;
}

/** Stops listening. */
export type Unlisten = () => Promise<void>;
type Listen = (channel: string, onNotify: () => void) => Promise<Unlisten>;
const listeners = new WeakMap<Db, Listen>();

/**
 * LISTEN on a channel of this database: `onNotify` is called for each notification that
 * reaches it (NOTIFY inside a transaction arrives at commit, and never after a rollback), and
 * once more after a lost connection comes back, since notifications may have been missed.
 * On PostgreSQL this holds a connection of its own; on the embedded database it rides on the
 * one connection.
 */
export function listen(db: Db, channel: string, onNotify: () => void): Promise<Unlisten> {
  const fn = listeners.get(db);
  if (!fn) throw new Error('this database handle was not opened by openDatabase');
  return fn(channel, onNotify);
}

/** Opens PostgreSQL when a URL is given, else PGlite under dataDir (or in memory for ':memory:'). */
export async function openDatabase(opts: {
  databaseUrl: string | null;
  dataDir: string;
  searchPath?: string;
  poolSize?: number;
  pgliteData?: Blob | File;
}): Promise<OpenDatabase> {
  if (opts.databaseUrl) return openPostgres(opts.databaseUrl, opts.searchPath, opts.poolSize ?? 10);
  return openPGlite(opts.dataDir, opts.pgliteData);
}

function openPostgres(url: string, searchPath: string | undefined, poolSize: number): OpenDatabase {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    ...(searchPath ? { options: `-c search_path=${searchPath}` } : {}),
    types: {
      getTypeParser: ((oid: number, format?: string) =>
        parsers[oid] ?? pg.types.getTypeParser(oid, format as 'text')) as typeof pg.types.getTypeParser,
    },
  });
  // An idle client's error (the server restarted) must not crash the process.
  pool.on('error', () => {});
  const lost = watchLoss(pool);
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: guardedPool(pool, lost) }) });
  listeners.set(db, (channel, onNotify) => listenOnPostgres(url, channel, onNotify));
  lostCounts.set(db, () => lost.count);
  return { db, kind: 'postgres', close: () => db.destroy() };
}

const lostCounts = new WeakMap<Db, () => number>();
/**
 * How many of its connections this PostgreSQL handle has found lost (the server ended them:
 * a restart, pg_terminate_backend, the network); 0 on the embedded database.
 */
export const connectionsLost = (db: Db): number => lostCounts.get(db)?.() ?? 0;

/**
 * The SQLSTATE PostgreSQL has for a failure the driver reports without one: 08006
 * (connection_failure) for a connection that ended under a statement ("Connection terminated
 * unexpectedly", a reset socket), 08001 (unable to establish) for one that could not be made.
 * The shared classification answers class 08 as the database being unavailable.
 */
export class ConnectionFailure extends Error {
  readonly code: '08006' | '08001';
  constructor(code: '08006' | '08001', cause: unknown) {
    super(code === '08001' ? 'could not connect to the database' : 'the connection to the database was lost', { cause });
    this.name = 'ConnectionFailure';
    this.code = code;
  }
}

/** Socket errors a connection fails with when its server or the network is gone. */
const SOCKET_ERRORS = new Set(['ECONNRESET', 'EPIPE', 'ECONNREFUSED', 'ECONNABORTED', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND', 'EAI_AGAIN']);

const hasSqlState = (err: unknown) => /^[0-9A-Z]{5}$/.test(String((err as { code?: unknown } | null)?.code ?? ''));

type Lost = { has(c: pg.PoolClient): boolean; count: number };

/** Marks each of the pool's clients lost when its connection fails or ends; the set and a count of them. */
function watchLoss(pool: pg.Pool): Lost {
  const clients = new WeakSet<pg.ClientBase>();
  const state = { has: (c: pg.PoolClient) => clients.has(c), count: 0 };
  pool.on('connect', (client) => {
    const lose = () => {
      if (clients.has(client)) return;
      clients.add(client);
      state.count++;
    };
    // Heard here, a checked-out client's 'error' (the server ended it mid-statement) does not
    // end the process as an event heard by no one would.
    client.on('error', lose);
    client.on('end', lose);
  });
  return state;
}

type Query = (text: string, values?: unknown[]) => Promise<pg.QueryResult>;

/**
 * The pool as Kysely sees it, guarding each checkout of a client:
 * - a client whose statement failed with its connection (it was lost, or the server ended the
 *   session: a FATAL error, class 08) goes back to the pool with that error, so the pool drops
 *   it instead of handing it out again for the next statement to fail on;
 * - such a failure without a SQLSTATE is thrown as a ConnectionFailure (class 08), which every
 *   component answers as the database being unavailable (503), not as a fault of ours;
 * - a client found lost before the checkout's first statement was sent is swapped for a fresh
 *   one, so that statement runs once, on a live connection. Nothing is retried after a
 *   statement was sent (it may have run: a retry could repeat its effects), nor once the
 *   checkout has sent one (a transaction or a session's state would be lost in the swap).
 */
function guardedPool(pool: pg.Pool, lost: Lost): PostgresPool {
  const endsSession = (client: pg.PoolClient, err: unknown) => {
    if (lost.has(client)) return true;
    const e = err as { code?: unknown; severity?: unknown };
    if (!hasSqlState(err)) return SOCKET_ERRORS.has(String(e?.code));
    return e.severity === 'FATAL' || e.severity === 'PANIC' || String(e.code).startsWith('08');
  };
  const acquire = () =>
    pool.connect().catch((err: unknown) => {
      throw hasSqlState(err) ? err : new ConnectionFailure('08001', err);
    });
  return {
    // Read by Kysely to cancel a statement on a connection of its own.
    get options() {
      return pool.options;
    },
    Client: pg.Client,
    end: () => pool.end(),
    async connect(): Promise<PostgresPoolClient> {
      // Null only between giving a lost client back and receiving its replacement.
      let client: pg.PoolClient | null = await acquire();
      let sent = false;
      let failure: unknown = null;
      const run: Query = async (text, values) => {
        if (client && !sent && lost.has(client)) {
          client.release(new Error('the connection was lost before the checkout used it'));
          client = null;
        }
        client ??= await acquire();
        sent = true;
        const used = client;
        try {
          return await used.query(text, values);
        } catch (err) {
          if (!endsSession(used, err)) throw err;
          failure ??= err;
          throw hasSqlState(err) ? err : new ConnectionFailure('08006', err);
        }
      };
      return {
        get processID() {
          return (client as unknown as { processID?: number } | null)?.processID;
        },
        // A cursor (a streamed query) goes to the client as it is.
        query: ((...args: unknown[]) =>
          typeof args[0] === 'string' ? run(args[0], args[1] as unknown[] | undefined) : (client!.query as (...a: unknown[]) => unknown)(...args)) as PostgresPoolClient['query'],
        release(discard?: boolean) {
          client?.release(failure ? (failure as Error) : discard === true);
          client = null;
        },
      };
    },
  };
}

/** A client of its own that LISTENs, and connects again (with a growing pause) when it is lost. */
async function listenOnPostgres(url: string, channel: string, onNotify: () => void): Promise<Unlisten> {
  let closed = false;
  let client: pg.Client | null = null;
  let retry: NodeJS.Timeout | null = null;
  let pauseMs = 500;
  const again = () => {
    if (closed || retry) return;
    retry = setTimeout(() => {
      retry = null;
      connect().then(onNotify, again);
    }, pauseMs);
    pauseMs = Math.min(pauseMs * 2, 30_000);
  };
  const connect = async (): Promise<void> => {
    if (closed) return;
    const c = new pg.Client({ connectionString: url });
    const lost = () => {
      if (client !== c) return;
      client = null;
      c.end().catch(() => {});
      again();
    };
    c.on('notification', (n) => {
      if (n.channel === channel) onNotify();
    });
    c.on('error', lost);
    c.on('end', lost);
    client = c;
    try {
      await c.connect();
      await c.query(`listen ${escapeIdentifier(channel)}`);
    } catch (err) {
      if (client === c) client = null;
      c.end().catch(() => {});
      throw err;
    }
    pauseMs = 500;
  };
  await connect();
  return async () => {
    closed = true;
    if (retry) clearTimeout(retry);
    const c = client;
    client = null;
    await c?.end().catch(() => {});
  };
}

const escapeIdentifier = (name: string) => `"${name.replace(/"/g, '""')}"`;
/**
 * PostgreSQL settings of the embedded database, sized for a small machine. PGlite's engine
 * lives in one WebAssembly heap that never shrinks, and PostgreSQL touches all of its shared
 * buffers at start: the 160 MB initdb chooses were 160 MB of resident memory before the first
 * query. The files sit in the operating system's page cache anyway, so a miss in these buffers
 * is a read from memory, not from disk. Maintenance memory bounds what an index build in a
 * migration adds to the heap for good. Durability settings are left as PGlite has them.
 */
const EMBEDDED_SETTINGS = ['shared_buffers=16MB', 'temp_buffers=2MB', 'wal_buffers=1MB', 'maintenance_work_mem=16MB'];

async function openPGlite(dataDir: string, loadDataDir?: Blob | File): Promise<OpenDatabase> {
  const memory = dataDir === ':memory:';
  let release = () => {};
  if (!memory) {
    fs.mkdirSync(dataDir, { recursive: true });
    release = lockDataDir(dataDir);
  }
  try {
    const pgDir = path.join(dataDir, 'pg');
    if (!memory && !loadDataDir && isEmptyDir(pgDir)) await initdbApart(pgDir);
    const engine = await PGliteThread.start({
      dataDir: memory ? null : pgDir,
      loadDataDir: loadDataDir ?? null,
      startParams: EMBEDDED_SETTINGS.flatMap((s) => ['-c', s]),
    });
    const watch = createWriteWatch();
    const dialect = new PGliteDialect(engine);
    const db = new Kysely<Database>({ dialect, plugins: [watch.plugin] });
    embedded.add(db);
    writeWatches.set(db, watch);
    listeners.set(db, async (channel, onNotify) => {
      const off = engine.onNotification((ch) => {
        if (ch === channel) onNotify();
      });
      // Through Kysely, so the LISTEN waits for the one connection instead of landing inside
      // a transaction another caller has open on it.
      await sql`listen ${sql.id(channel)}`.execute(db);
      return async () => {
        off();
        if (!engine.closed) await sql`unlisten ${sql.id(channel)}`.execute(db).catch(() => {});
      };
    });
    return {
      db,
      kind: 'pglite',
      dump: () => engine.dump(),
      close: async () => {
        await db.destroy();
        release();
      },
    };
  } catch (err) {
    release();
    throw err;
  }
}

const isEmptyDir = (dir: string) => !fs.existsSync(dir) || fs.readdirSync(dir).length === 0;

const here = path.dirname(fileURLToPath(import.meta.url));
// The V8 flags the service runs with (bin/crewhouse.js): the child's peak is bounded as the service's is.
const NODE_FLAGS = JSON.parse(fs.readFileSync(path.join(here, '..', '..', 'bin', 'node-flags.json'), 'utf8')) as string[];

/**
 * Creates a new embedded database's files in pgDir from a short-lived process (see
 * pglite-initdb.ts): what initdb allocates goes back to the system when it exits, instead of
 * staying in this process's C heap. The files are made beside pgDir and renamed into place, so
 * an interrupted first start leaves no half-made database behind. The caller holds the data
 * directory's lock, so what an earlier, interrupted start left beside pgDir is no one's.
 */
async function initdbApart(pgDir: string): Promise<void> {
  const parent = path.dirname(pgDir);
  const prefix = `${path.basename(pgDir)}.initdb-`;
  for (const left of fs.readdirSync(parent).filter((f) => f.startsWith(prefix))) fs.rmSync(path.join(parent, left), { recursive: true, force: true });
  // Named after this process: the child of an interrupted start, until it notices (its stdin
  // closes with its parent), writes only into its own directory.
  const building = path.join(parent, `${prefix}${process.pid}`);
  const child = spawn(
    process.execPath,
    [...NODE_FLAGS, path.join(here, 'pglite-initdb.ts'), building, ...EMBEDDED_SETTINGS.flatMap((s) => ['-c', s])],
    { stdio: ['pipe', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-4000)));
  const [code, signal] = (await new Promise((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (...r) => resolve(r));
  })) as [number | null, NodeJS.Signals | null];
  child.stdin!.destroy();
  if (code !== 0 || !fs.existsSync(path.join(building, 'PG_VERSION'))) {
    fs.rmSync(building, { recursive: true, force: true });
    throw new Error(`creating the embedded database in ${pgDir} failed (${signal ?? `exit code ${code}`}): ${stderr.trim()}`);
  }
  if (fs.existsSync(pgDir)) fs.rmdirSync(pgDir); // empty, as checked; rmdir refuses anything else
  fs.renameSync(building, pgDir);
}

/**
 * PGlite belongs to one process. A second process opening the same directory would
 * corrupt it, so the first holds a lock file naming its pid; a lock whose process is
 * gone is taken over.
 */
export function lockDataDir(dataDir: string): () => void {
  const lockPath = path.join(dataDir, 'crewhouse.lock');
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = fs.openSync(lockPath, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        try {
          if (fs.readFileSync(lockPath, 'utf8') === String(process.pid)) fs.unlinkSync(lockPath);
        } catch {
          // already gone
        }
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(fs.readFileSync(lockPath, 'utf8').trim());
      if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && isAlive(pid)) {
        throw new DatabaseLockedError(
          `the embedded database in ${dataDir} is in use by process ${pid}; ` +
            'stop it first, or set SERVICE_DATABASE_URL to share a PostgreSQL database between processes',
        );
      }
      fs.rmSync(lockPath, { force: true });
    }
  }
  throw new DatabaseLockedError(`could not lock ${lockPath}`);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** True when the database answers. */
export async function ping(db: Db): Promise<boolean> {
  try {
    await sql`select 1`.execute(db);
    return true;
  } catch {
    return false;
  }
}

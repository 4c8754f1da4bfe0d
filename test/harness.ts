import crypto from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import fsSync from 'node:fs';
import { Writable } from 'node:stream';
import type { InjectOptions } from 'fastify';
import { sql } from 'kysely';
import { systemActor } from '../src/audit/audit.ts';
import { hashToken, newSecret } from '../src/auth/credentials.ts';
import { loadConfig, type Config } from '../src/config.ts';
import { buildConsoleApp, createConsoleServices, type ConsoleServices } from '../src/console/app.ts';
import type { Role } from '../src/auth/roles.ts';
import { openDatabase, type Db } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import type { App } from '../src/http/kernel.ts';
import { Registry } from '../src/metrics.ts';
import { createLogger, type Logger } from '../src/logger.ts';
import { createJobRunner } from '../src/queue/runner.ts';
import { jobHandlers } from '../src/jobs.ts';
import { cachedReveal, startModelProxy, type RunningModelProxy } from '../src/modelproxy/server.ts';
import { createSecretsService } from '../src/secrets/secrets.service.ts';
import { createServices, loadShared, startWorkerParts, type WorkerParts } from '../src/services.ts';

/** The PostgreSQL server tests run on when set; otherwise the embedded database. */
export const TEST_DATABASE_URL = process.env.SERVICE_TEST_DATABASE_URL || null;
export const dbKind = TEST_DATABASE_URL ? 'postgres' : 'pglite';

let template: Blob | null = null;

export interface TestDb {
  db: Db;
  close(): Promise<void>;
  /** The schema a PostgreSQL test database lives in (null on the embedded one). */
  schema: string | null;
  /** Where another process reaches it (null on the embedded one, which lives in this process). */
  url: string | null;
}

/** Names this version of the migrations (and of PGlite): a changed migration file names another. */
async function migrationsVersion(): Promise<string> {
  const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'src', 'db', 'migrations');
  const hash = crypto.createHash('sha256');
  const pgliteVersion = JSON.parse(await fs.readFile(path.join(path.dirname(fileURLToPath(import.meta.resolve('@electric-sql/pglite'))), '..', 'package.json'), 'utf8').catch(() => '{}')).version ?? '?';
  hash.update(`pglite ${pgliteVersion}\n`);
  for (const f of (await fs.readdir(dir)).sort()) hash.update(`${f}\n`).update(await fs.readFile(path.join(dir, f)));
  return hash.digest('hex').slice(0, 16);
}

/**
 * The embedded database with every migration applied, as a data-directory image. Making it
 * costs seconds (PGlite's first start, then the migrations), so it is made once per version of
 * the migrations and kept in the system's temporary directory for every later test process.
 */
async function migratedImage(): Promise<Blob> {
  const file = path.join(os.tmpdir(), `crewhouse-test-db-${await migrationsVersion()}.tar`);
  const cached = await fs.readFile(file).catch(() => null);
  if (cached) return new Blob([cached]);
  const opened = await openDatabase({ databaseUrl: null, dataDir: ':memory:' });
  await migrateToLatest(opened.db);
  const image = await opened.dump!();
  await opened.close();
  // Written beside, then renamed: a process reading it never sees half an image.
  const part = `${file}.${process.pid}.part`;
  await fs.writeFile(part, Buffer.from(await image.arrayBuffer()));
  await fs.rename(part, file);
  return image;
}

/** The schema every test database on PostgreSQL keeps its tables in. */
const PG_TEST_SCHEMA = 'crewhouse_test';
/** Test databases are named `crewhouse_t_<base-36 creation time>_<random>`; one older than this was left by a killed test process. */
const PG_LEFT_AFTER_MS = 6 * 3600_000;

/** The test PostgreSQL's address for another database of the same cluster. */
function pgDatabaseUrl(name: string): string {
  const url = new URL(TEST_DATABASE_URL!);
  url.pathname = `/${name}`;
  return url.toString();
}

/** Runs `work` on one connection of the test PostgreSQL's own database (CREATE/DROP DATABASE run outside a transaction). */
async function pgAdmin<T>(work: (db: Db) => Promise<T>): Promise<T> {
  const admin = await openDatabase({ databaseUrl: TEST_DATABASE_URL!, dataDir: '', poolSize: 1 });
  try {
    return await work(admin.db);
  } finally {
    await admin.close();
  }
}

let pgTemplate: Promise<string> | null = null;
/**
 * On the test PostgreSQL, a database with every migration applied, made once per version of the
 * migrations and kept in the cluster: each test's database is a copy of it (CREATE DATABASE
 * ... TEMPLATE, about 0.1 s), where running the migrations into a new schema took about 1 s,
 * and 6 to 12 s with the machine loaded. One process makes it while the others wait (an advisory
 * lock); it is built under another name and renamed when whole, so a process killed while
 * building leaves nothing another would take for a template.
 */
function migratedTemplateDatabase(): Promise<string> {
  pgTemplate ??= (async () => {
    const version = await migrationsVersion();
    const name = `crewhouse_tmpl_${version}`;
    await pgAdmin(async (db) => {
      await db.connection().execute(async (c) => {
        await sql`select pg_advisory_lock(hashtext(${name}))`.execute(c);
        try {
          const found = await sql`select 1 from pg_database where datname = ${name}`.execute(c);
          if (found.rows.length > 0) return;
          const part = `${name}_part`;
          await sql`drop database if exists ${sql.id(part)} with (force)`.execute(c);
          await sql`create database ${sql.id(part)}`.execute(c);
          const built = await openDatabase({ databaseUrl: pgDatabaseUrl(part), dataDir: '', searchPath: PG_TEST_SCHEMA, poolSize: 1 });
          try {
            await sql`create schema ${sql.id(PG_TEST_SCHEMA)}`.execute(built.db);
            await migrateToLatest(built.db, PG_TEST_SCHEMA);
          } finally {
            await built.close();
          }
          await sql`alter database ${sql.id(part)} rename to ${sql.id(name)}`.execute(c);
          await sql`comment on database ${sql.id(name)} is ${sql.lit(String(Date.now()))}`.execute(c);
          // While here (once per version of the migrations): databases a killed test process
          // left, and templates of other versions not made in the last day.
          const left = await sql<{ datname: string; note: string | null }>`select datname, shobj_description(oid, 'pg_database') as note from pg_database where datname like 'crewhouse\_t%'`.execute(c);
          for (const { datname, note } of left.rows) {
            const made = datname.startsWith('crewhouse_tmpl_') ? Number(note) : parseInt(datname.split('_')[2] ?? '', 36);
            const age = Date.now() - made;
            const stale = datname.startsWith('crewhouse_tmpl_') ? datname !== name && !(age < 86_400_000) : age > PG_LEFT_AFTER_MS;
            if (stale) await sql`drop database if exists ${sql.id(datname)} with (force)`.execute(c).catch(() => {});
          }
        } finally {
          await sql`select pg_advisory_unlock(hashtext(${name}))`.execute(c);
        }
      });
    });
    return name;
  })();
  pgTemplate.catch(() => (pgTemplate = null));
  return pgTemplate;
}

/**
 * A fresh, migrated database: an in-memory PGlite restored from the migrated image (see
 * migratedImage), or on the test PostgreSQL a new database copied from the migrated template
 * (see migratedTemplateDatabase), dropped on close.
 */
export async function testDb(): Promise<TestDb> {
  if (TEST_DATABASE_URL) {
    const template = await migratedTemplateDatabase();
    const name = `crewhouse_t_${Date.now().toString(36)}_${crypto.randomBytes(5).toString('hex')}`;
    // Not waiting for the copy's log to reach the disk: a test database is never wanted after a crash.
    await pgAdmin((db) =>
      db.connection().execute(async (c) => {
        await sql`set synchronous_commit = off`.execute(c);
        await sql`create database ${sql.id(name)} template ${sql.id(template)} strategy wal_log`.execute(c);
      }),
    );
    const url = pgDatabaseUrl(name);
    const opened = await openDatabase({ databaseUrl: url, dataDir: '', searchPath: PG_TEST_SCHEMA, poolSize: 5 });
    return {
      db: opened.db,
      schema: PG_TEST_SCHEMA,
      url,
      close: async () => {
        await opened.close();
        await pgAdmin((db) => sql`drop database if exists ${sql.id(name)} with (force)`.execute(db)).catch(() => {});
      },
    };
  }
  template ??= await migratedImage();
  const opened = await openDatabase({ databaseUrl: null, dataDir: ':memory:', pgliteData: template });
  return { db: opened.db, close: opened.close, schema: null, url: null };
}

/**
 * Waits, when needed, so that what follows (a few seconds at most) runs inside one clock
 * minute, where rate-limit windows are, and not across a UTC midnight, where daily budgets
 * and per-day series turn over.
 */
export async function awayFromClockEdges(): Promise<void> {
  const now = new Date();
  const intoMinute = now.getUTCSeconds();
  const toMidnight = 86_400_000 - (now.getTime() % 86_400_000);
  if (toMidnight < 20_000) await new Promise((r) => setTimeout(r, toMidnight + 1000));
  else if (intoMinute > 45) await new Promise((r) => setTimeout(r, (61 - intoMinute) * 1000));
}

/**
 * The one way a test waits for something to happen: polls `probe` until it answers something
 * truthy, and returns that (bounded: fails naming `what` after `timeoutMs`). Polls often at
 * first, then less, so a slow probe (a request, a query) does not load the machine.
 */
export async function waitFor<T>(what: string, probe: () => T | Promise<T>, timeoutMs = 30_000): Promise<Exclude<T, false | null | undefined | 0 | ''>> {
  const deadline = Date.now() + timeoutMs;
  for (let every = 10; ; every = Math.min(every * 2, 200)) {
    const v = await probe();
    if (v) return v as Exclude<T, false | null | undefined | 0 | ''>;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    if (process.env.E2E_DEBUG) process.stderr.write(`waiting for ${what}\n`);
    await new Promise((r) => setTimeout(r, every));
  }
}

/** Captures every log line, so tests can assert what was (and was not) logged. */
export function captureLogger(level = 'info'): { logger: Logger; lines: string[] } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk, _enc, cb) {
      lines.push(String(chunk));
      cb();
    },
  });
  return { logger: createLogger({ level, destination }), lines };
}

export function testConfig(overrides: Record<string, string> = {}): Config {
  return loadConfig({
    SERVICE_DATA_DIR: ':memory:',
    SERVICE_PUBLIC_BASE_URL: 'http://crewhouse.test',
    SERVICE_LOG_LEVEL: 'info',
    SERVICE_WEB_DIR: '/nonexistent-web',
    SERVICE_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'),
    ...overrides,
  });
}

export interface Response<T = any> {
  status: number;
  headers: Record<string, string | string[] | number | undefined>;
  body: T;
  text: string;
}

export interface TestApp {
  app: App;
  db: Db;
  /** Where another process reaches the database, and the schema it is in (null on the embedded one). */
  dbPlace: { url: string; schema: string } | null;
  config: Config;
  services: ConsoleServices;
  logs: string[];
  /** The real model proxy on an ephemeral port, when asked for with `modelProxy: true`. */
  modelProxy: RunningModelProxy | null;
  adminToken: string;
  /** Sends a request as the given token (or none). JSON bodies are sent as JSON. */
  request<T = any>(opts: { method: string; url: string; token?: string | null; body?: unknown; headers?: Record<string, string>; raw?: Buffer | string }): Promise<Response<T>>;
  /**
   * Performs, with the worker's real job runner and handlers, every job that is due (the
   * side effects the console queued after commit), and returns when none is due or running.
   */
  drainJobs(): Promise<void>;
  /** A user of a role with a fresh API token. */
  user(role: Role, name?: string): Promise<{ id: number; name: string; token: string }>;
  close(): Promise<void>;
}

let seq = 0;
/** A unique name for a test resource. */
export const uniq = (prefix = 'x') => `${prefix}-${process.pid.toString(36)}-${(++seq).toString(36)}-${crypto.randomBytes(2).toString('hex')}`;

/** A console app on a fresh database, with an admin token. */
export async function testApp(opts: { config?: Record<string, string>; modelProxy?: boolean; /** The code-host app's clock (the fake code host's, to pass a token's hour). */ codeHostClock?: () => number; /** The clock the cap on unsigned webhook refusals counts minutes on. */ webhooksClock?: () => number; /** Another app whose database (and admin) this one shares, as a second service process would; closing this one leaves the database open. */ shareWith?: TestApp } = {}): Promise<TestApp> {
  const { db, close: closeDb, url: dbUrl, schema: dbSchema } = opts.shareWith
    ? { db: opts.shareWith.db, close: async () => {}, url: opts.shareWith.dbPlace?.url ?? null, schema: opts.shareWith.dbPlace?.schema ?? null }
    : await testDb();
  const { logger, lines } = captureLogger();
  const modelProxy = opts.modelProxy ? await testModelProxy({ db, logger, config: opts.config }) : null;
  const config = testConfig({ ...(modelProxy ? { SERVICE_MODEL_PROXY_URL: modelProxy.url } : {}), ...opts.config });
  const metrics = new Registry();
  const services = createConsoleServices({ config, db, logger, codeHostClock: opts.codeHostClock, webhooksClock: opts.webhooksClock });
  const adminToken = opts.shareWith?.adminToken ?? newSecret('chk_');
  if (!opts.shareWith) await services.users.ensureFirstAdmin(systemActor('test'), adminToken);
  const app = await buildConsoleApp({ config, db, logger, metrics, services });
  await app.ready();
  // The worker's pieces (its sandbox host, the run engine) and a runner of every kind of job, made at the first drain.
  let worker: Promise<{ parts: WorkerParts; jobs: ReturnType<typeof createJobRunner> }> | null = null;
  const startWorker = async () => {
    const parts = await startWorkerParts({ config, db, logger, metrics, services, ...loadShared(config) });
    return { parts, jobs: createJobRunner({ db, logger, handlers: jobHandlers(parts) }) };
  };

  const request: TestApp['request'] = async ({ method, url, token, body, headers = {}, raw }) => {
    const h: Record<string, string> = { ...headers };
    if (token) h.authorization = `Bearer ${token}`;
    const inject: InjectOptions = { method: method as InjectOptions['method'], url, headers: h };
    if (raw !== undefined) inject.payload = raw;
    else if (body !== undefined) {
      h['content-type'] ??= 'application/json';
      inject.payload = JSON.stringify(body);
    }
    const res = await app.inject(inject);
    let parsed: unknown = undefined;
    const type = String(res.headers['content-type'] ?? '');
    if (type.includes('json')) {
      try {
        parsed = res.json();
      } catch {
        parsed = undefined;
      }
    }
    return { status: res.statusCode, headers: res.headers, body: parsed as any, text: res.body };
  };

  return {
    app,
    db,
    dbPlace: dbUrl && dbSchema ? { url: dbUrl, schema: dbSchema } : null,
    config,
    services,
    logs: lines,
    modelProxy,
    adminToken,
    request,
    drainJobs: async () => (await (worker ??= startWorker())).jobs.drain(),
    async user(role, name) {
      const row = await db.insertInto('users').values({ name: name ?? uniq(role), email: null, role, password_hash: null }).returningAll().executeTakeFirstOrThrow();
      const token = newSecret('chk_');
      await db.insertInto('api_tokens').values({ user_id: row.id, name: 'test', kind: 'api', prefix: token.slice(0, 8), token_hash: hashToken(token), expires_at: null }).execute();
      return { id: row.id, name: row.name, token };
    },
    async close() {
      const started = await worker;
      await started?.jobs.stop();
      await started?.parts.host.stop();
      await app.close();
      await modelProxy?.stop();
      await closeDb();
    },
  };
}

/**
 * The real model proxy alone, on an ephemeral 127.0.0.1 port, on the given database; its
 * admin credential is derived from the test config's secret key, as the console's client does.
 */
export async function testModelProxy(opts: { db: Db; logger?: Logger; config?: Record<string, string>; credential?: (name: string) => Promise<string | null> }): Promise<RunningModelProxy> {
  const config = testConfig(opts.config);
  // No sweeper: a test that leaves a reservation to expire must not race a timer that releases it.
  const { cipher, models } = loadShared(config);
  const credential = opts.credential ?? cachedReveal(createSecretsService({ db: opts.db, cipher }));
  return startModelProxy({ config, db: opts.db, logger: opts.logger ?? captureLogger().logger, port: 0, host: '127.0.0.1', catalog: models, credential, sweepEveryMs: 0 });
}

/** What `crewhouse serve` hands every component besides config, db, logger and metrics: the shared cipher, model catalogue and services. */
export function sharedServices(config: Config, db: Db) {
  const shared = loadShared(config);
  return { ...shared, services: createServices({ config, db, logger: captureLogger().logger, ...shared }) };
}

/** Where a service started as its own process (`crewhouse serve`, the CLI) keeps its data. */
export interface ServicePlace {
  env: Record<string, string>;
  dataDir: string;
  drop(): Promise<void>;
}

/**
 * A fresh place for a service process: a temp data dir, and on the test PostgreSQL a new schema
 * (dropped with it); `env` holds the SERVICE_* settings that point the process there.
 */
export async function servicePlace(prefix: string, publicBaseUrl = 'http://crewhouse.test'): Promise<ServicePlace> {
  const dataDir = fsSync.mkdtempSync(path.join(os.tmpdir(), `crewhouse-${prefix}-`));
  const env: Record<string, string> = {
    SERVICE_DATA_DIR: dataDir,
    SERVICE_PORT: '0',
    SERVICE_HOST: '127.0.0.1',
    SERVICE_PUBLIC_BASE_URL: publicBaseUrl,
    SERVICE_WEB_DIR: path.join(dataDir, 'no-web'),
    SERVICE_SECRET_KEY: crypto.randomBytes(32).toString('base64'),
    SERVICE_LOG_LEVEL: 'info',
  };
  let schema: string | null = null;
  if (TEST_DATABASE_URL) {
    schema = `${prefix}_${crypto.randomBytes(5).toString('hex')}`;
    const admin = await openDatabase({ databaseUrl: TEST_DATABASE_URL, dataDir: '', poolSize: 1 });
    await sql`create schema ${sql.id(schema)}`.execute(admin.db);
    await admin.close();
    const url = new URL(TEST_DATABASE_URL);
    url.searchParams.set('options', `-c search_path=${schema}`);
    env.SERVICE_DATABASE_URL = url.toString();
  }
  return {
    env,
    dataDir,
    async drop() {
      fsSync.rmSync(dataDir, { recursive: true, force: true });
      if (schema && TEST_DATABASE_URL) {
        const admin = await openDatabase({ databaseUrl: TEST_DATABASE_URL, dataDir: '', poolSize: 1 });
        await sql`drop schema ${sql.id(schema)} cascade`.execute(admin.db).catch(() => {});
        await admin.close();
      }
    },
  };
}

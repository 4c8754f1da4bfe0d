import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import crypto from 'node:crypto';
import { startTcpRelay } from '../../test/fakes/tcp-relay.ts';
import { captureLogger, dbKind, TEST_DATABASE_URL, testDb, type TestDb } from '../../test/harness.ts';
import { openDatabase } from '../db/database.ts';
import { useChatConventions } from '../chat/http/server.ts';
import { createServer, type App } from '../http/kernel.ts';
import { Registry } from '../metrics.ts';
import { useProblems } from '../http/problem-handler.ts';
import { useProxyErrors } from '../modelproxy/errors.ts';
import { domainErrors, fromDatabase } from './errors.ts';

/**
 * Every component answers a database error the same way, each in its own wire format: the
 * errors are real ones, raised by the database (PGlite or PostgreSQL) through its driver.
 */
const CASES = [
  { what: 'a unique violation', state: 'unique_violation', status: 409 },
  { what: 'a foreign key violation', state: 'foreign_key_violation', status: 409 },
  { what: 'a serialization failure', state: 'serialization_failure', status: 409 },
  { what: 'a deadlock', state: 'deadlock_detected', status: 409 },
  { what: 'a statement timeout', state: 'query_canceled', status: 503 },
  { what: 'a check violation', state: 'check_violation', status: 422 },
  { what: 'a value out of range', state: 'numeric_value_out_of_range', status: 400 },
  { what: 'a NUL character', state: 'untranslatable_character', status: 400 },
  { what: 'a value too large', state: 'program_limit_exceeded', status: 400 },
  { what: 'a connection exception', state: 'connection_exception', status: 503 },
  { what: 'an administrator shutting the database down', state: 'admin_shutdown', status: 503 },
  { what: 'too many connections', state: 'too_many_connections', status: 503 },
] as const;

/** Raises the named SQLSTATE in the database, as a statement would. */
const raise = (db: TestDb['db'], state: string) => sql.raw(`do $$ begin raise exception 'raised in a test' using errcode = '${state}'; end $$`).execute(db);

describe('one classification of database errors', () => {
  let tdb: TestDb;
  const apps: App[] = [];
  before(async () => {
    tdb = await testDb();
  });
  after(async () => {
    for (const app of apps) await app.close();
    await tdb.close();
  });

  /** A server of the component, with its own error handler, whose route raises the SQLSTATE it is given. */
  async function serverWith(component: string, install: (app: App) => void, routes?: (app: App) => void) {
    const { logger, lines } = captureLogger();
    const app = createServer({ logger, metrics: new Registry(), component });
    install(app);
    routes?.(app);
    app.get('/raise/:state', async (req) => {
      await raise(tdb.db, (req.params as { state: string }).state);
      return {};
    });
    app.get('/statement-timeout', async () => {
      // A real statement timeout where the database has one (PGlite does not run timers).
      await tdb.db.transaction().execute(async (trx) => {
        await sql`set local statement_timeout = 1`.execute(trx);
        await sql`select pg_sleep(1)`.execute(trx);
      });
      return {};
    });
    await app.ready();
    apps.push(app);
    return { app, lines };
  }

  test('the mapping is one function, and a code outside it is not classified (a 500)', async () => {
    for (const c of CASES) {
      const err = await raise(tdb.db, c.state).then(
        () => null,
        (e: unknown) => e,
      );
      assert.ok(err, c.what);
      assert.equal(fromDatabase(err)?.status, c.status, c.what);
    }
    const syntax = await sql`selec 1`.execute(tdb.db).catch((e: unknown) => e);
    assert.equal(fromDatabase(syntax), null);
    assert.equal(fromDatabase(new Error('plain')), null);
    assert.equal(fromDatabase({ code: 'ECONNRESET' }), null);
  });

  test('the console answers problem+json with the mapped status, never a 500', async () => {
    const { app, lines } = await serverWith('console', useProblems);
    for (const c of CASES) {
      const res = await app.inject({ method: 'GET', url: `/raise/${c.state}` });
      assert.equal(res.statusCode, c.status, c.what);
      assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
      const body = res.json();
      assert.equal(body.status, c.status);
      assert.ok(!res.body.includes('raised in a test'), 'the database message is not shown');
    }
    const timeout = await app.inject({ method: 'GET', url: '/raise/query_canceled' });
    assert.equal(timeout.headers['retry-after'], '5');
    // The caller is told to retry; the log keeps the cause.
    assert.ok(lines.some((l) => l.includes('raised in a test') && l.includes('answered 503')));
  });

  test('the chat server answers Zulip\'s envelope with the mapped status, never a 500', async () => {
    const { app } = await serverWith('chat', useChatConventions);
    for (const c of CASES) {
      const res = await app.inject({ method: 'GET', url: `/raise/${c.state}` });
      assert.equal(res.statusCode, c.status, c.what);
      const body = res.json();
      assert.equal(body.result, 'error');
      assert.equal(typeof body.msg, 'string');
      assert.equal(typeof body.code, 'string');
      assert.ok(!res.body.includes('raised in a test'));
    }
  });

  test('the model proxy answers OpenAI\'s error object with the mapped status, never a 500', async () => {
    const { app } = await serverWith('modelproxy', useProxyErrors);
    for (const c of CASES) {
      const res = await app.inject({ method: 'GET', url: `/raise/${c.state}` });
      assert.equal(res.statusCode, c.status, c.what);
      const body = res.json();
      assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message', 'param', 'type']);
      assert.ok(!res.body.includes('raised in a test'));
    }
  });

  test('a real statement timeout answers 503 in each component', { skip: dbKind === 'pglite' && 'PGlite runs no statement timeout; run with SERVICE_TEST_DATABASE_URL' }, async () => {
    for (const [component, install] of [
      ['console', useProblems],
      ['chat', useChatConventions],
      ['modelproxy', useProxyErrors],
    ] as const) {
      const { app } = await serverWith(component, install);
      const res = await app.inject({ method: 'GET', url: '/statement-timeout' });
      assert.equal(res.statusCode, 503, component);
    }
  });

  test('a connection cut under a statement (the driver gives no SQLSTATE) answers 503 with Retry-After in each component', { skip: dbKind === 'pglite' && 'the embedded database has no connection to lose; run with SERVICE_TEST_DATABASE_URL' }, async () => {
    const target = new URL(TEST_DATABASE_URL!);
    const relay = await startTcpRelay({ host: target.hostname, port: Number(target.port || 5432) });
    const names: string[] = [];
    try {
      for (const [component, install] of [
        ['console', useProblems],
        ['chat', useChatConventions],
        ['modelproxy', useProxyErrors],
      ] as const) {
        // A pool of its own per component, named apart: the server goes on sleeping on a cut
        // connection's backend, which must not be taken for the next component's.
        const name = `crewhouse-cut-${crypto.randomBytes(4).toString('hex')}`;
        names.push(name);
        const through = new URL(TEST_DATABASE_URL!);
        through.hostname = '127.0.0.1';
        through.port = String(relay.port);
        through.searchParams.set('application_name', name);
        const cutDb = await openDatabase({ databaseUrl: through.toString(), dataDir: '', poolSize: 1 });
        try {
          const { app, lines } = await serverWith(component, install, (a) =>
            a.get('/sleep', async () => {
              await sql`select pg_sleep(60)`.execute(cutDb.db);
              return {};
            }),
          );
          const answer = app.inject({ method: 'GET', url: '/sleep' });
          // Cut once the statement runs on the server.
          while ((await sql`select 1 from pg_stat_activity where application_name = ${name} and state = 'active'`.execute(tdb.db)).rows.length === 0) {
            await new Promise((r) => setImmediate(r));
          }
          relay.cut();
          const res = await answer;
          assert.equal(res.statusCode, 503, component);
          assert.equal(res.headers['retry-after'], '5', component);
          assert.ok(lines.some((l) => l.includes('answered 503')), `${component} logs the cause`);
        } finally {
          await cutDb.close();
        }
      }
    } finally {
      await relay.close();
      // The backends left sleeping on the cut connections: this test's own, by their names.
      for (const name of names) await sql`select pg_terminate_backend(pid) from pg_stat_activity where application_name = ${name}`.execute(tdb.db);
    }
  });

  test('an unclassified error stays a 500 without internals, and is logged with its cause', async () => {
    const { app, lines } = await serverWith('chat', useChatConventions);
    const res = await app.inject({ method: 'GET', url: '/raise/P0001' });
    assert.equal(res.statusCode, 500);
    assert.ok(!res.body.includes('raised in a test'));
    assert.ok(lines.some((l) => l.includes('raised in a test')), 'the cause is in the log');
    // A service's own domain error renders the same way as a database's.
    assert.equal(domainErrors.conflict().status, 409);
  });
});


import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { TEST_DATABASE_URL, testDb, type TestDb } from '../../test/harness.ts';
import { fromDatabase } from '../errors/errors.ts';
import { connectionsLost, openDatabase, type OpenDatabase } from './database.ts';

/**
 * Connections the PostgreSQL server ends (pg_terminate_backend, a restart): the statement that
 * was on one is answered as the database being unavailable, the pool never hands the dead
 * connection out again, and a statement that had not been sent yet runs once on a fresh one.
 * Only the backends of this test's own pool (named by its application name) are terminated.
 */
describe('connections the server ends', { skip: !TEST_DATABASE_URL && 'needs PostgreSQL: run with SERVICE_TEST_DATABASE_URL' }, () => {
  let tdb: TestDb;
  before(async () => {
    tdb = await testDb();
    await sql`create table lost_t (v int)`.execute(tdb.db);
  });
  after(async () => {
    await tdb?.close();
  });

  /** A pool of one connection on the test's schema, under an application name of its own. */
  async function ownPool(): Promise<OpenDatabase & { name: string }> {
    const name = `crewhouse-loss-${crypto.randomBytes(4).toString('hex')}`;
    const url = new URL(tdb.url!);
    url.searchParams.set('application_name', name);
    const opened = await openDatabase({ databaseUrl: url.toString(), dataDir: '', searchPath: tdb.schema!, poolSize: 1 });
    return { ...opened, name };
  }

  /** Waits until the backend of the pool named `name` is doing what `state` says, and returns its pid. */
  async function backendOf(name: string, state: 'active' | 'idle'): Promise<number> {
    for (;;) {
      const { rows } = await sql<{ pid: number }>`select pid from pg_stat_activity where application_name = ${name} and state = ${state}`.execute(tdb.db);
      if (rows.length === 1) return rows[0].pid;
      await new Promise((r) => setImmediate(r));
    }
  }

  const terminate = (pid: number) => sql`select pg_terminate_backend(${pid})`.execute(tdb.db);
  const pidOf = async (db: OpenDatabase['db']) => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db)).rows[0].pid;

  test('a statement whose connection is terminated under it is unavailable (503), and the next statement runs on a fresh connection', async () => {
    const own = await ownPool();
    try {
      const first = await pidOf(own.db);
      const sleeping = sql`select pg_sleep(60)`.execute(own.db).then(
        () => null,
        (e: unknown) => e,
      );
      await terminate(await backendOf(own.name, 'active'));
      const err = await sleeping;
      assert.equal(fromDatabase(err)?.status, 503);
      assert.equal(fromDatabase(err)?.retryAfter, 5);
      // The terminated connection went back to the pool with its error and was dropped: the
      // next statement is not handed a connection that is already gone.
      const next = await pidOf(own.db);
      assert.notEqual(next, first);
    } finally {
      await own.close();
    }
  });

  test('a connection lost before its checkout sent anything: the first statement runs once, on a fresh connection', async () => {
    const own = await ownPool();
    try {
      const first = await pidOf(own.db);
      const inserted = await own.db.connection().execute(async (conn) => {
        await terminate(first);
        // The pool's client hears its connection end; nothing has been sent on this checkout yet.
        while (connectionsLost(own.db) < 1) await new Promise((r) => setImmediate(r));
        return sql<{ pid: number }>`insert into lost_t (v) values (1) returning pg_backend_pid() as pid`.execute(conn);
      });
      assert.notEqual(inserted.rows[0].pid, first);
      assert.deepEqual((await sql<{ n: number }>`select count(*)::int as n from lost_t where v = 1`.execute(tdb.db)).rows, [{ n: 1 }]);
    } finally {
      await own.close();
    }
  });

  test('a statement after the checkout has sent one is not retried (its transaction is gone): it is unavailable, and nothing is written', async () => {
    const own = await ownPool();
    try {
      const first = await pidOf(own.db);
      const err = await own.db
        .transaction()
        .execute(async (trx) => {
          await sql`insert into lost_t (v) values (2)`.execute(trx);
          await terminate(first);
          while (connectionsLost(own.db) < 1) await new Promise((r) => setImmediate(r));
          await sql`insert into lost_t (v) values (3)`.execute(trx);
        })
        .then(
          () => null,
          (e: unknown) => e,
        );
      assert.equal(fromDatabase(err)?.status, 503);
      assert.deepEqual((await sql<{ n: number }>`select count(*)::int as n from lost_t where v in (2, 3)`.execute(tdb.db)).rows, [{ n: 0 }]);
      assert.notEqual(await pidOf(own.db), first);
    } finally {
      await own.close();
    }
  });

  test('a database that refuses connections is unavailable (503), not a fault of ours', async () => {
    const url = new URL(TEST_DATABASE_URL!);
    url.port = '1'; // nothing listens there
    const refused = await openDatabase({ databaseUrl: url.toString(), dataDir: '', poolSize: 1 });
    try {
      const err = await sql`select 1`.execute(refused.db).then(
        () => null,
        (e: unknown) => e,
      );
      assert.equal(fromDatabase(err)?.status, 503);
    } finally {
      await refused.close();
    }
  });
});

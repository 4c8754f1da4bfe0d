import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { isAbortedTransactionError, sql } from 'kysely';
import { testDb, type TestDb } from '../../test/harness.ts';

/**
 * A transaction in which a statement failed is rolled back by its COMMIT: PostgreSQL answers
 * that COMMIT with ROLLBACK rather than an error. Kysely's PostgresDriver throws there; the
 * embedded database's driver must too, so that on neither database such a commit looks like success.
 */
let tdb: TestDb;
before(async () => {
  tdb = await testDb();
  await sql`create table commit_probe (v text primary key)`.execute(tdb.db);
});
after(() => tdb.close());

test('a commit of a transaction a failed statement aborted throws, and nothing of it is kept', async () => {
  const err = await tdb.db
    .transaction()
    .execute(async (trx) => {
      await sql`insert into commit_probe values ('first')`.execute(trx);
      // A caller that swallows a failed statement and carries on: the transaction is aborted.
      await sql`insert into commit_probe values ('first')`.execute(trx).catch(() => {});
    })
    .then(
      () => null,
      (e: unknown) => e,
    );
  assert.ok(isAbortedTransactionError(err), `the commit throws Kysely's AbortedTransactionError (got ${String(err)})`);
  const kept = await sql<{ v: string }>`select v from commit_probe`.execute(tdb.db);
  assert.deepEqual(kept.rows, []);
});

test('a commit that commits is answered as success', async () => {
  await tdb.db.transaction().execute((trx) => sql`insert into commit_probe values ('kept')`.execute(trx));
  assert.deepEqual((await sql<{ v: string }>`select v from commit_probe`.execute(tdb.db)).rows, [{ v: 'kept' }]);
});

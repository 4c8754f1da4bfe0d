import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, sql } from 'kysely';
import { toIso } from './database.ts';
import { PGliteDialect } from './pglite-dialect.ts';

// The driver speaks the protocol to PGlite itself; what it answers must be what PGlite's own
// query() answers for the same statement: the same values, errors and row counts.
describe('the embedded database driver', () => {
  let pg: PGlite;
  let db: Kysely<any>;
  before(async () => {
    pg = await PGlite.create({ parsers: { 20: (v: string) => Number(v) } });
    // A cache of two statements, so that eviction happens in these tests.
    db = new Kysely<any>({ dialect: new PGliteDialect(pg, { statementCache: 2 }) });
    await sql`create table t (
      id serial primary key, name text not null unique, n int8, price numeric, ok boolean, doc jsonb, tags text[],
      at timestamptz, raw bytea, nums int4[]
    )`.execute(db);
  });
  after(() => db.destroy());

  const row = {
    name: 'first ünïcødé 🙂',
    n: 9007199254740991,
    price: '12.50',
    ok: true,
    doc: JSON.stringify({ a: [1, 'two', null], b: { c: true } }),
    tags: ['x', 'y "quoted"', 'with,comma'],
    at: new Date('2026-01-02T03:04:05.678Z'),
    raw: new Uint8Array([0, 1, 254, 255]),
    nums: [1, 2, 3],
  };

  test('reads and writes every type as PGlite does', async () => {
    await db.insertInto('t').values(row).execute();
    await db.insertInto('t').values({ name: 'nulls' }).execute();
    for (const name of [row.name, 'nulls']) {
      const ours = await db.selectFrom('t').selectAll().where('name', '=', name).executeTakeFirstOrThrow();
      const theirs = (await pg.query<Record<string, unknown>>('select * from t where name = $1', [name])).rows[0];
      assert.deepEqual(ours, theirs);
    }
    const back = await db.selectFrom('t').selectAll().where('name', '=', row.name).executeTakeFirstOrThrow();
    assert.equal(back.n, 9007199254740991);
    assert.deepEqual(back.doc, { a: [1, 'two', null], b: { c: true } });
    assert.deepEqual(back.tags, row.tags);
    assert.deepEqual([...back.raw], [0, 1, 254, 255]);
    assert.equal(back.at.toISOString(), '2026-01-02T03:04:05.678Z');
  });

  test('the same statement answers for new parameters each time, also after eviction', async () => {
    for (let round = 0; round < 3; round++) {
      for (const name of [row.name, 'nulls', 'absent']) {
        const got = await db.selectFrom('t').select('name').where('name', '=', name).execute();
        assert.deepEqual(got, name === 'absent' ? [] : [{ name }]);
        // Other statements in between push the first out of a cache of two.
        await db.selectFrom('t').select('id').where('id', '>', round).execute();
        await sql`select ${round}::int as r`.execute(db);
      }
    }
  });

  test('counts changed rows', async () => {
    const inserted = await db.insertInto('t').values([{ name: 'c1' }, { name: 'c2' }, { name: 'c3' }]).executeTakeFirst();
    assert.equal(inserted.numInsertedOrUpdatedRows, 3n);
    const updated = await db.updateTable('t').set({ ok: false }).where('name', 'in', ['c1', 'c2']).executeTakeFirst();
    assert.equal(updated.numUpdatedRows, 2n);
    const deleted = await db.deleteFrom('t').where('name', 'like', 'c%').executeTakeFirst();
    assert.equal(deleted.numDeletedRows, 3n);
  });

  test('errors carry the fields PGlite gives them, and the connection goes on', async () => {
    const err = await db
      .insertInto('t')
      .values({ name: 'nulls' })
      .execute()
      .then(() => null, (e: unknown) => e as Record<string, unknown>);
    assert.ok(err);
    assert.equal(err.code, '23505');
    assert.equal(err.constraint, 't_name_key');
    assert.equal(err.table, 't');
    assert.match(String(err.message), /duplicate key/);
    await assert.rejects(sql`select * from no_such_table`.execute(db), (e: any) => e.code === '42P01');
    await assert.rejects(sql`select ${'not a number'}::int`.execute(db), (e: any) => e.code === '22P02');
    assert.deepEqual((await sql`select 1 as one`.execute(db)).rows, [{ one: 1 }]);
  });

  test('a transaction sees its own writes and a failed one is undone', async () => {
    await assert.rejects(
      db.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ name: 'in-tx' }).execute();
        assert.equal((await trx.selectFrom('t').select('name').where('name', '=', 'in-tx').execute()).length, 1);
        await trx.insertInto('t').values({ name: 'in-tx' }).execute();
      }),
      (e: any) => e.code === '23505',
    );
    assert.equal((await db.selectFrom('t').select('name').where('name', '=', 'in-tx').execute()).length, 0);
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ name: 'kept' }).execute();
    });
    assert.equal((await db.selectFrom('t').select('name').where('name', '=', 'kept').execute()).length, 1);
  });

  test('between the statements of a transaction, waiting I/O runs; a query it starts waits for the transaction to end', async () => {
    let seen: string[] | null = null;
    let ranDuring = false;
    let inside = false;
    await db.transaction().execute(async (trx) => {
      inside = true;
      await trx.insertInto('t').values({ name: 'uncommitted' }).execute();
      // What the event loop has waiting (a timer here; a socket's data in the service) runs before the next statement.
      setImmediate(() => {
        ranDuring = inside;
        // Another user of the database: it must not run inside this transaction (the engine has one session).
        void db.selectFrom('t').select('name').where('name', 'in', ['uncommitted', 'rolled back']).execute().then((rows) => (seen = rows.map((r) => r.name)));
      });
      await trx.selectFrom('t').select('id').execute();
      await trx.deleteFrom('t').where('name', '=', 'uncommitted').execute();
      await trx.insertInto('t').values({ name: 'rolled back' }).execute();
      await trx.deleteFrom('t').where('name', '=', 'rolled back').execute();
      inside = false;
    });
    assert.equal(ranDuring, true, 'the waiting callback ran while the transaction was open');
    for (let i = 0; i < 100 && seen === null; i++) await new Promise((r) => setImmediate(r));
    assert.deepEqual(seen, [], 'the other query ran after the transaction, not inside it');
  });

  test('a table that changes shape is read with its new shape', async () => {
    const read = () => db.selectFrom('t').selectAll().where('name', '=', 'kept').executeTakeFirstOrThrow();
    assert.equal('extra' in (await read()), false);
    await sql`alter table t add column extra text default 'added'`.execute(db);
    assert.equal((await read()).extra, 'added');
    await sql`alter table t drop column extra`.execute(db);
    assert.equal('extra' in (await read()), false);
    // Also when the change does not come through the driver: the kept plan is replaced.
    await pg.exec(`alter table t add column other int default 7`);
    assert.equal((await read()).other, 7);
  });

  test('a statement with several commands is refused, as through query()', async () => {
    await assert.rejects(sql`select 1; select 2`.execute(db), (e: any) => e.code === '42601');
  });
});

describe('times as text', () => {
  // The text rewrite of a UTC time must give what a Date round trip gives, for every fraction length.
  test('a UTC time reads as Date would read it', () => {
    const viaDate = (v: string) => new Date(v.includes('T') || /[+-]\d\d(:?\d\d)?$/.test(v) ? v : `${v}Z`).toISOString();
    let seed = 7;
    const next = (n: number) => (seed = (seed * 1103515245 + 12345) % 2147483648) % n;
    for (let i = 0; i < 2000; i++) {
      const at = new Date(Date.UTC(1000 + next(9000), next(12), 1 + next(28), next(24), next(60), next(60)));
      const digits = next(7);
      const fraction = digits === 0 ? '' : '.' + String(next(10 ** digits)).padStart(digits, '0');
      const text = `${at.toISOString().slice(0, 10)} ${at.toISOString().slice(11, 19)}${fraction}`;
      for (const v of [text, `${text}+00`]) assert.equal(toIso(v), viaDate(v), v);
    }
    // Other zones, and what the rewrite does not take, still go through Date.
    assert.equal(toIso('2026-11-22 18:30:07.123456+05:30'), '2026-11-22T13:00:07.123Z');
    assert.equal(toIso('2026-11-22T18:30:07Z'), '2026-11-22T18:30:07.000Z');
  });
});

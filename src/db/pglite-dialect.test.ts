import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, sql } from 'kysely';
import { parsers, toIso } from './parsers.ts';
import { PGliteDialect } from './pglite-dialect.ts';
import { PGliteEngine, type Engine } from './pglite-engine.ts';
import { PGliteThread } from './pglite-thread.ts';

// The driver speaks the protocol to PGlite itself; what it answers must be what PGlite's own
// query() answers for the same statement: the same values, errors and row counts. The same
// tests run with the engine in this thread (where PGlite's query() can answer beside it) and
// in a thread of its own, as the service runs it.
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
const TABLE = sql`create table t (
  id serial primary key, name text not null unique, n int8, price numeric, ok boolean, doc jsonb, tags text[],
  at timestamptz, raw bytea, nums int4[]
)`;

describe('the embedded database driver, in this thread', () => {
  let pg: PGlite;
  let db: Kysely<any>;
  before(async () => {
    pg = await PGlite.create({ parsers });
    // A cache of two statements, so that eviction happens in these tests.
    db = new Kysely<any>({ dialect: new PGliteDialect(new PGliteEngine(pg, { statementCache: 2 })) });
    await TABLE.execute(db);
  });
  after(() => db.destroy());

  test('reads and writes every type as PGlite does', async () => {
    await db.insertInto('t').values(row).execute();
    await db.insertInto('t').values({ name: 'nulls' }).execute();
    for (const name of [row.name, 'nulls']) {
      const ours = await db.selectFrom('t').selectAll().where('name', '=', name).executeTakeFirstOrThrow();
      const theirs = (await pg.query<Record<string, unknown>>('select * from t where name = $1', [name])).rows[0];
      assert.deepEqual(ours, theirs);
    }
  });

  test('a table that changes shape outside the driver is read with its new shape', async () => {
    const read = () => db.selectFrom('t').selectAll().where('name', '=', 'nulls').executeTakeFirstOrThrow();
    assert.equal('other' in (await read()), false);
    // The kept plan is replaced.
    await pg.exec(`alter table t add column other int default 7`);
    assert.equal((await read()).other, 7);
  });
});

describe('the embedded database driver, in a thread of its own', () => {
  let engine: PGliteThread;
  let db: Kysely<any>;
  before(async () => {
    engine = await PGliteThread.start({ dataDir: null, loadDataDir: null, startParams: [], statementCache: 2 });
    db = new Kysely<any>({ dialect: new PGliteDialect(engine) });
    await TABLE.execute(db);
  });
  after(() => db.destroy());

  test('reads and writes every type, as they cross the threads', async () => {
    await db.insertInto('t').values({ ...row, raw: Buffer.from(row.raw) }).execute();
    await db.insertInto('t').values({ name: 'nulls' }).execute();
    const back = await db.selectFrom('t').selectAll().where('name', '=', row.name).executeTakeFirstOrThrow();
    assert.equal(back.n, 9007199254740991);
    assert.equal(back.price, 12.5);
    assert.equal(back.ok, true);
    assert.deepEqual(back.doc, { a: [1, 'two', null], b: { c: true } });
    assert.deepEqual(back.tags, row.tags);
    assert.deepEqual([...back.raw], [0, 1, 254, 255]);
    assert.equal(back.at, '2026-01-02T03:04:05.678Z');
    assert.deepEqual(back.nums, [1, 2, 3]);
    const nulls = await db.selectFrom('t').selectAll().where('name', '=', 'nulls').executeTakeFirstOrThrow();
    assert.deepEqual({ ...nulls, id: 0 }, { id: 0, name: 'nulls', n: null, price: null, ok: null, doc: null, tags: null, at: null, raw: null, nums: null });
  });

  test('bytes go as they are (bytea in binary): every byte value, a view into a larger buffer, none at all', async () => {
    const all = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
    const view = Buffer.concat([Buffer.from('before'), all, Buffer.from('after')]).subarray(6, 6 + 256);
    for (const [name, bytes] of [['bytes-all', all], ['bytes-view', view], ['bytes-none', Buffer.alloc(0)], ['bytes-text', Buffer.from('\\x41')]] as const) {
      await db.insertInto('t').values({ name, raw: bytes }).execute();
      const back = await sql<{ raw: Uint8Array; hex: string }>`select raw, encode(raw, 'hex') as hex from t where name = ${name} and raw = ${bytes}`.execute(db);
      assert.equal(back.rows.length, 1, name);
      assert.deepEqual([Buffer.from(back.rows[0].raw).toString('hex'), back.rows[0].hex], [bytes.toString('hex'), bytes.toString('hex')], name);
    }
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

  test("a transaction's begin goes with its first statement: one message per statement, none for a transaction with no statement", async () => {
    // The same engine, counting what the driver sends it.
    const sent: string[] = [];
    const counting: Engine = {
      query: (text, params, options) => {
        sent.push(`${options?.begin ? 'begin + ' : ''}${text}`);
        return engine.query(text, params, options);
      },
      onNotification: (listener) => engine.onNotification(listener),
      get closed() {
        return engine.closed;
      },
      close: () => Promise.resolve(),
    };
    const counted = new Kysely<any>({ dialect: new PGliteDialect(counting) });
    await counted.transaction().execute(async (trx) => {
      await trx.insertInto('t').values({ name: 'one message' }).execute();
      await trx.selectFrom('t').select('name').where('name', '=', 'one message').execute();
    });
    assert.deepEqual(sent, ['begin + insert into "t" ("name") values ($1)', 'select "name" from "t" where "name" = $1', 'commit']);
    sent.length = 0;
    await counted.transaction().execute(async () => {});
    assert.deepEqual(sent, []);
    // A first statement that fails leaves the transaction rolled back, and the next statements outside one.
    await assert.rejects(
      counted.transaction().execute(async (trx) => {
        await trx.insertInto('t').values({ name: 'one message' }).execute();
      }),
      (e: any) => e.code === '23505',
    );
    assert.deepEqual(sent, ['begin + insert into "t" ("name") values ($1)', 'rollback']);
    await counted.insertInto('t').values({ name: 'outside' }).execute();
    await sql`rollback`.execute(counted);
    assert.equal((await db.selectFrom('t').select('name').where('name', 'in', ['one message', 'outside']).execute()).length, 2);
  });

  test('between the statements of a transaction, waiting I/O runs; a query it starts waits for the transaction to end', async () => {
    let other: Promise<string[]> | null = null;
    let ranDuring = false;
    let inside = false;
    await db.transaction().execute(async (trx) => {
      inside = true;
      await trx.insertInto('t').values({ name: 'uncommitted' }).execute();
      // What the event loop has waiting (a timer here; a socket's data in the service) runs before the next statement.
      setImmediate(() => {
        ranDuring = inside;
        // Another user of the database: it must not run inside this transaction (the engine has one session).
        other = db.selectFrom('t').select('name').where('name', 'in', ['uncommitted', 'rolled back']).execute().then((rows) => rows.map((r) => r.name));
      });
      await trx.selectFrom('t').select('id').execute();
      await trx.deleteFrom('t').where('name', '=', 'uncommitted').execute();
      await trx.insertInto('t').values({ name: 'rolled back' }).execute();
      await trx.deleteFrom('t').where('name', '=', 'rolled back').execute();
      inside = false;
    });
    assert.equal(ranDuring, true, 'the waiting callback ran while the transaction was open');
    assert.deepEqual(await other, [], 'the other query ran after the transaction, not inside it');
  });

  test('a table that changes shape is read with its new shape', async () => {
    const read = () => db.selectFrom('t').selectAll().where('name', '=', 'kept').executeTakeFirstOrThrow();
    assert.equal('extra' in (await read()), false);
    await sql`alter table t add column extra text default 'added'`.execute(db);
    assert.equal((await read()).extra, 'added');
    await sql`alter table t drop column extra`.execute(db);
    assert.equal('extra' in (await read()), false);
  });

  test('a statement with several commands is refused, as through query()', async () => {
    await assert.rejects(sql`select 1; select 2`.execute(db), (e: any) => e.code === '42601');
  });
});

describe('the embedded database in its thread', () => {
  test('a NOTIFY sent in a transaction reaches a listener after the commit, and never after a rollback', async () => {
    const engine = await PGliteThread.start({ dataDir: null, loadDataDir: null, startParams: [] });
    try {
      const heard: string[] = [];
      engine.onNotification((channel, payload) => heard.push(`${channel}:${payload}`));
      await engine.query('listen ch', []);
      await engine.query('begin', []);
      await engine.query(`select pg_notify('ch', 'kept')`, []);
      assert.deepEqual(heard, []);
      await engine.query('commit', []);
      await engine.query('begin', []);
      await engine.query(`select pg_notify('ch', 'undone')`, []);
      await engine.query('rollback', []);
      await engine.query('select 1', []);
      assert.deepEqual(heard, ['ch:kept']);
    } finally {
      await engine.close();
    }
  });

  test('a dump opens as another database with the same rows', async () => {
    const first = await PGliteThread.start({ dataDir: null, loadDataDir: null, startParams: [] });
    await first.query('create table kept (v text)', []);
    await first.query('insert into kept values ($1)', ['here']);
    const image = await first.dump();
    await first.close();
    const second = await PGliteThread.start({ dataDir: null, loadDataDir: image, startParams: [] });
    try {
      assert.deepEqual((await second.query('select v from kept', [])).rows, [{ v: 'here' }]);
    } finally {
      await second.close();
    }
  });

  test('once closed, a statement fails as the database being unavailable, with what to do', async () => {
    const engine = await PGliteThread.start({ dataDir: null, loadDataDir: null, startParams: [] });
    const pending = engine.query('select 1 as one', []);
    const closing = engine.close();
    // Sent before the close: answered.
    assert.deepEqual((await pending).rows, [{ one: 1 }]);
    await closing;
    assert.equal(engine.closed, true);
    await assert.rejects(engine.query('select 1', []), (e: any) => e.code === '57P02' && /not running.*restart the service/.test(e.message));
    await engine.close();
  });

  test('an engine that cannot open fails its start, and its thread is gone', async () => {
    await assert.rejects(PGliteThread.start({ dataDir: null, loadDataDir: null, startParams: ['-c', 'no_such_setting_here=1'] }), Error);
  });

  test('a process that never closes its database still exits once nothing waits on it', async () => {
    const { spawnSync } = await import('node:child_process');
    const fs = await import('node:fs');
    const os = await import('node:os');
    const path = await import('node:path');
    const script = `
      import { PGliteThread } from ${JSON.stringify(new URL('./pglite-thread.ts', import.meta.url).href)};
      const engine = await PGliteThread.start({ dataDir: null, loadDataDir: null, startParams: [] });
      const { rows } = await engine.query('select 41 + 1 as n', []);
      console.log(JSON.stringify(rows));
    `;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-thread-'));
    fs.writeFileSync(path.join(dir, 'forgets.mjs'), script);
    const child = spawnSync(process.execPath, [path.join(dir, 'forgets.mjs')], { encoding: 'utf8', timeout: 280_000 }); // a fresh database's start (initdb) on a loaded machine can take minutes
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(child.status, 0, child.stderr);
    assert.equal(child.stdout.trim(), '[{"n":42}]');
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

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { watchWrites } from './database.ts';
import { dbKind, testDb, type TestDb } from '../../test/harness.ts';

describe(`writes to watched tables are seen (${dbKind})`, () => {
  let t: TestDb;
  before(async () => {
    t = await testDb();
  });
  after(() => t.close());

  test('on the embedded database every kind of write to a watched table calls the watcher before and after it; reads and other tables do not', { skip: dbKind !== 'pglite' && 'PostgreSQL has other writers: nothing is watched there' }, async () => {
    let calls = 0;
    assert.equal(watchWrites(t.db, ['users'], () => calls++), true);
    const seen = async (what: string, run: () => Promise<unknown>, expected: number) => {
      const before = calls;
      await run();
      assert.equal(calls - before, expected, what);
    };
    await seen('insert', () => t.db.insertInto('users').values({ name: 'watched', email: null, role: 'viewer', password_hash: null }).execute(), 2);
    await seen('update', () => t.db.updateTable('users').set({ role: 'operator' }).where('name', '=', 'watched').execute(), 2);
    await seen('raw update', () => sql`update users set role = 'admin' where name = 'watched'`.execute(t.db), 2);
    await seen('update in a transaction', () => t.db.transaction().execute((trx) => trx.updateTable('users').set({ role: 'viewer' }).where('name', '=', 'watched').execute()), 2);
    await seen('select', () => t.db.selectFrom('users').selectAll().execute(), 0);
    await seen('a write to another table', () => t.db.updateTable('agents').set({ description: 'x' }).where('name', '=', 'nobody').execute(), 0);
    await seen('delete', () => t.db.deleteFrom('users').where('name', '=', 'watched').execute(), 2);
    await assert.rejects(t.db.insertInto('users').values({ name: 'bad', email: null, role: 'nobody' as 'viewer', password_hash: null }).execute());
    assert.ok(calls >= 11, 'a failed write was announced before it ran');
  });

  test('on PostgreSQL nothing is watched, so nothing may be cached', { skip: dbKind === 'pglite' && 'the embedded database is watched' }, () => {
    assert.equal(watchWrites(t.db, ['users'], () => {}), false);
  });
});

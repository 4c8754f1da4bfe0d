import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { openDatabase } from './database.ts';

test('a new embedded database is made apart and renamed into place; what an interrupted first start left is cleared, and the data is there on reopening', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-db-'));
  try {
    // What a first start killed while its initdb process ran leaves behind.
    const left = path.join(dataDir, 'pg.initdb-999999999');
    fs.mkdirSync(path.join(left, 'base'), { recursive: true });
    fs.writeFileSync(path.join(left, 'base', 'half'), 'x');

    const first = await openDatabase({ databaseUrl: null, dataDir });
    await sql`create table kept (v text)`.execute(first.db);
    await sql`insert into kept values ('here')`.execute(first.db);
    await first.close();
    assert.deepEqual(fs.readdirSync(dataDir).filter((f) => f.startsWith('pg')), ['pg']);
    assert.ok(fs.existsSync(path.join(dataDir, 'pg', 'PG_VERSION')));

    const again = await openDatabase({ databaseUrl: null, dataDir });
    try {
      assert.deepEqual((await sql<{ v: string }>`select v from kept`.execute(again.db)).rows, [{ v: 'here' }]);
    } finally {
      await again.close();
    }
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
});

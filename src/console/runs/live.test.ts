import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { dbKind, testDb, type TestDb } from '../../../test/harness.ts';
import { liveOnSurface, liveOnSurfaceQuery } from './runs.store.ts';

// The chat catch-up's read of a surface's live runs (open, or ended lately, of the surface or of
// the teams homed on it): what it answers, and that an index serves it (migration 0760).
describe(`runs live on a surface (${dbKind})`, () => {
  let tdb: TestDb;
  before(async () => {
    tdb = await testDb();
    // Runs alone, without their teams: foreign keys are not checked while these are written.
    await tdb.db.transaction().execute(async (trx) => {
      await sql`set local session_replication_role = replica`.execute(trx);
      const run = (id: string, surface: string, team: string, state: string, endedAgo: string | null) =>
        sql`insert into runs (id, team_id, team_name, surface, state, text, created_by, updated_at, finished_at)
            values (${id}, 1, ${team}, ${surface}, ${state}, 'x', 'u', now() - ${endedAgo ?? '0 seconds'}::interval,
                    ${endedAgo === null ? null : sql`now() - ${endedAgo}::interval`})`.execute(trx);
      await run('b_running', 'chat_b', 'other', 'running', null);
      await run('b_waiting', 'chat_b', 'other', 'waiting', null);
      await run('b_ended_hour', 'chat_b', 'other', 'succeeded', '1 hour');
      await run('b_ended_days', 'chat_b', 'other', 'failed', '3 days');
      await run('a_running', 'chat_a', 'other', 'running', null);
      await run('home_tracker_open', 'tracker_a', 'home', 'running', null);
      await run('home_console_old', 'console', 'home', 'cancelled', '3 days');
    });
  });
  after(() => tdb.close());

  test('open runs and runs ended within the window, of the surface and of the homed teams, most recently changed first', async () => {
    assert.deepEqual((await liveOnSurface(tdb.db, 'chat_b', 86_400, 10)).sort(), ['b_ended_hour', 'b_running', 'b_waiting']);
    assert.deepEqual((await liveOnSurface(tdb.db, 'chat_b', 86_400, 10, ['home'])).sort(), ['b_ended_hour', 'b_running', 'b_waiting', 'home_tracker_open']);
    assert.deepEqual(await liveOnSurface(tdb.db, 'chat_b', 60, 10), ['b_waiting', 'b_running'].sort().reverse(), 'the open ones, same updated_at, by id descending');
    assert.equal((await liveOnSurface(tdb.db, 'chat_b', 86_400, 2)).length, 2);
  });

  test('the query can be answered from the indexes on surface and team (no whole-table read needed)', async () => {
    // With sequential scans priced out, the plan shows whether an index can answer the
    // conditions at all; before migration 0760 the only way was to read every run.
    const plan = await tdb.db.transaction().execute(async (trx) => {
      await sql`set local enable_seqscan = off`.execute(trx);
      const rows = await liveOnSurfaceQuery(trx, 'chat_b', 86_400, 200, ['home']).explain();
      return rows.map((r) => String(Object.values(r)[0])).join('\n');
    });
    assert.match(plan, /runs_surface_live/, plan);
    assert.match(plan, /runs_team_name_live/, plan);
    assert.doesNotMatch(plan, /Seq Scan/, plan);
  });
});

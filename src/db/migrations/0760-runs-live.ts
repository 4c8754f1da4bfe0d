import { sql, type Kysely } from 'kysely';

// The chat catch-up reads the runs of a surface (and of the teams homed on it) still open or
// ended lately (runs.store.ts liveOnSurface): without an index it read the whole runs table.
// An open run has no finished_at (finishing sets it, reopening clears it), so "open or ended
// after T" is coalesce(finished_at, 'infinity') > T, a range on these indexes.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`create index runs_surface_live on runs (surface, (coalesce(finished_at, 'infinity'::timestamptz)))`.execute(db);
  await sql`create index runs_team_name_live on runs (team_name, (coalesce(finished_at, 'infinity'::timestamptz)))`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`drop index runs_team_name_live`.execute(db);
  await sql`drop index runs_surface_live`.execute(db);
}

import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import { countEach } from '../../db/count-each.ts';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type TeamRow = Selectable<Database['teams']>;

/** The team that holds a name now (not archived). */
export function getLiveTeam(db: Q, name: string) {
  return db.selectFrom('teams as t').selectAll('t').where('t.name', '=', name).where('t.status', '<>', 'archived').executeTakeFirst();
}

/** For reads: the live team of a name, else the last archived one. */
export function getTeamForRead(db: Q, name: string) {
  return db
    .selectFrom('teams as t')
    .selectAll('t')
    .where('t.name', '=', name)
    .orderBy(sql`t.status = 'archived'`)
    .orderBy('t.id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export function getTeamById(db: Q, id: number) {
  return db.selectFrom('teams').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Teams by name then id: the archived ones only (`archived`), else the live ones. */
export function listTeams(db: Q, filter: { archived: boolean; q?: string }, cursor: CursorValue[] | null, limit: number) {
  let q = db.selectFrom('teams as t').selectAll('t').where('t.status', filter.archived ? '=' : '<>', 'archived');
  if (filter.q) q = q.where('t.name', 'like', `%${filter.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  return keyset(q, ['t.name', 't.id'], 'asc', cursor, limit).execute();
}

/** The active teams whose home is a chat surface, by name. */
export function activeTeamsHomedOn(db: Q, surface: 'chat_a' | 'chat_b') {
  return db.selectFrom('teams').select(['id', 'name', 'home_room_id']).where('status', '=', 'active').where('home_surface', '=', surface).orderBy('name').execute();
}

export function rolesOf(db: Q, teamIds: number[]) {
  if (teamIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('team_roles').selectAll().where('team_id', 'in', teamIds).orderBy('team_id').orderBy('role').execute();
}

/** A team's members (user ids and their role in the team), oldest first. */
export function membersOf(db: Q, teamId: number) {
  return db.selectFrom('team_members').select(['user_id', 'role']).where('team_id', '=', teamId).orderBy('created_at').orderBy('user_id').execute();
}

export function linksOf(db: Q, teamIds: number[]) {
  if (teamIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('team_links').selectAll().where('team_id', 'in', teamIds).orderBy('team_id').orderBy('surface').orderBy('external_id').execute();
}

/** Per template: its active teams. */
export function countActiveByTemplate(db: Q, templates: string[]): Promise<Map<string, number>> {
  return countEach(db, templates, (name) =>
    db.selectFrom('teams').select((eb) => eb.fn.countAll<number>().as('n')).where('template_name', '=', name).where('status', '<>', 'archived'),
  );
}

/** Per agent: the live teams whose roles run it. */
export function countTeamsUsingAgent(db: Q, agents: string[]): Promise<Map<string, number>> {
  return countEach(db, agents, (name) =>
    db
      .selectFrom('team_roles as r')
      .innerJoin('teams as t', 't.id', 'r.team_id')
      .select(sql<number>`count(distinct t.id)`.as('n'))
      .where('r.agent', '=', name)
      .where('t.status', '<>', 'archived'),
  );
}

/** Per destination: the live team roles whose egress override names it. */
export function countOverridesNaming(db: Q, destinations: string[]): Promise<Map<string, number>> {
  return countEach(db, destinations, (name) =>
    db
      .selectFrom('team_roles as r')
      .innerJoin('teams as t', 't.id', 'r.team_id')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('t.status', '<>', 'archived')
      .where(sql<boolean>`r.egress_override -> 'destinations' ? ${name}`),
  );
}

export function listSkills(db: Q, teamId: number, cursor: CursorValue[] | null, limit: number) {
  const q = db.selectFrom('team_skills').select(['name', 'version', 'status', 'source', 'updated_at']).where('team_id', '=', teamId);
  return keyset(q, ['name'], 'asc', cursor, limit).execute();
}

/** Locks the live team of a name against archiving while a document is written; false when there is none. */
export async function lockLiveTeamShared(db: Q, name: string): Promise<boolean> {
  const row = await db.selectFrom('teams').select('id').where('name', '=', name).where('status', '<>', 'archived').forShare().executeTakeFirst();
  return row !== undefined;
}

export function activeBudgets(db: Q) {
  return db.selectFrom('teams').select(['id', 'name', 'budget_usd_per_day']).where('status', '=', 'active').orderBy('name').execute();
}

/** Checkpoint ids the roles of live teams were copied with. */
export function checkpointUses(db: Q) {
  return db
    .selectFrom('team_roles as r')
    .innerJoin('teams as t', 't.id', 'r.team_id')
    .select(['r.checkpoint_id', 't.name', 'r.role'])
    .where('t.status', '<>', 'archived')
    .where('r.checkpoint_id', 'is not', null)
    .execute();
}

/** A live team's role as sandbox placement needs it, or none when the team is archived or has no such role. */
export function rolePlacement(db: Q, teamId: number, role: string) {
  return db
    .selectFrom('team_roles as r')
    .innerJoin('teams as t', 't.id', 'r.team_id')
    .select(['r.role', 'r.vm', 'r.provider', 'r.replicas_max', 'r.concurrent_runs', 't.name as team', 't.template_name', 't.template_version'])
    .where('r.team_id', '=', teamId)
    .where('r.role', '=', role)
    .where('t.status', '<>', 'archived')
    .executeTakeFirst();
}

/** The lead role's environment of a live team. */
export function leadEnvironment(db: Q, name: string) {
  return db
    .selectFrom('teams as t')
    .innerJoin('team_roles as r', (j) => j.onRef('r.team_id', '=', 't.id').onRef('r.role', '=', 't.lead'))
    .select(['r.provider', 'r.vm'])
    .where('t.name', '=', name)
    .where('t.status', '<>', 'archived')
    .executeTakeFirst();
}

/** Teams' sleep times by id (archived ones too: their sandboxes may still be winding down). */
export function sleepTimes(db: Q, ids: number[]) {
  if (ids.length === 0) return Promise.resolve([]);
  return db.selectFrom('teams').select(['id', 'idle_after_seconds', 'deep_sleep_after_seconds']).where('id', 'in', ids).execute();
}

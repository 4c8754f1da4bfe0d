import { sql, type Insertable, type Kysely, type Selectable, type Transaction, type Updateable } from 'kysely';
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

/** A new team's row (status provisioning until its keys are minted); its id. */
export function insertTeam(trx: Q, values: Insertable<Database['teams']>) {
  return trx.insertInto('teams').values(values).returning(['id']).executeTakeFirstOrThrow();
}

/** A provisioned team becomes active (a new row version). */
export async function markActive(trx: Q, teamId: number) {
  await trx.updateTable('teams').set({ status: 'active', updated_at: sql`now()`, row_version: sql`nextval('row_version_seq')` }).where('id', '=', teamId).execute();
}

/** Removes a team that could not be provisioned (its rows cascade). */
export async function deleteTeam(trx: Q, teamId: number) {
  await trx.deleteFrom('teams').where('id', '=', teamId).execute();
}

export async function insertRoles(trx: Q, roles: Array<Insertable<Database['team_roles']>>) {
  if (roles.length) await trx.insertInto('team_roles').values(roles).execute();
}

export async function updateRole(trx: Q, teamId: number, role: string, set: Updateable<Database['team_roles']> | Record<string, unknown>) {
  await trx.updateTable('team_roles').set(set).where('team_id', '=', teamId).where('role', '=', role).execute();
}

export async function deleteRole(trx: Q, teamId: number, role: string) {
  await trx.deleteFrom('team_roles').where('team_id', '=', teamId).where('role', '=', role).execute();
}

export async function addMember(trx: Q, teamId: number, userId: number, role: 'owner') {
  await trx.insertInto('team_members').values({ team_id: teamId, user_id: userId, role }).execute();
}

/** What archiving removes of the team's own rows (roles, links, members), in the archive's transaction. */
export async function removeTeamRows(trx: Q, teamId: number) {
  await trx.deleteFrom('team_roles').where('team_id', '=', teamId).execute();
  await trx.deleteFrom('team_links').where('team_id', '=', teamId).execute();
  await trx.deleteFrom('team_members').where('team_id', '=', teamId).execute();
}

/** A team skill's status and version, locked for the rest of the transaction. */
export function skillForUpdate(trx: Q, teamId: number, name: string) {
  return trx.selectFrom('team_skills').select(['status', 'version']).where('team_id', '=', teamId).where('name', '=', name).forUpdate().executeTakeFirst();
}

export async function updateSkill(trx: Q, teamId: number, name: string, set: { version: number; body: string; source: string }) {
  await trx.updateTable('team_skills').set({ ...set, updated_at: sql`now()` }).where('team_id', '=', teamId).where('name', '=', name).execute();
}

export async function insertSkill(trx: Q, values: Insertable<Database['team_skills']>) {
  await trx.insertInto('team_skills').values(values).execute();
}

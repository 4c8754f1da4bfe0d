import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../http/pagination.ts';
import type { TeamState } from './teams.schemas.ts';

type Q = Kysely<Database> | Transaction<Database>;

/**
 * The derived team state, in SQL so that lists filter and paginate on it: archived; running
 * while a work item is in progress; waiting while one waits for a person; sleeping when every
 * placed sandbox is asleep; idle otherwise.
 */
const stateSql = sql<TeamState>`case
  when t.status = 'archived' then 'archived'
  when exists (select 1 from runs r where r.team_id = t.id and r.state = 'running') then 'running'
  when exists (select 1 from runs r where r.team_id = t.id and r.state = 'waiting') then 'waiting'
  when exists (select 1 from sandboxes s where s.team_id = t.id and s.state <> 'destroyed')
   and not exists (select 1 from sandboxes s where s.team_id = t.id and s.state in ('starting', 'running')) then 'sleeping'
  else 'idle' end`;

function withDerived(db: Q) {
  return db
    .selectFrom('teams as t')
    .selectAll('t')
    .select([
      stateSql.as('state'),
      sql<number>`(select count(*) from runs r where r.team_id = t.id and r.state in ('running', 'waiting'))`.as('active_runs'),
      sql<string | null>`(select max(r.created_at) from runs r where r.team_id = t.id)`.as('last_run_at'),
    ]);
}

export type TeamRow = NonNullable<Awaited<ReturnType<typeof getLiveTeam>>>;

/** The team that holds a name now (not archived). */
export function getLiveTeam(db: Q, name: string) {
  return withDerived(db).where('t.name', '=', name).where('t.status', '<>', 'archived').executeTakeFirst();
}

/** For reads: the live team of a name, else the last archived one. */
export function getTeamForRead(db: Q, name: string) {
  return withDerived(db)
    .where('t.name', '=', name)
    .orderBy(sql`t.status = 'archived'`)
    .orderBy('t.id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

export function getTeamById(db: Q, id: number) {
  return withDerived(db).where('t.id', '=', id).executeTakeFirst();
}

/** Teams by name then id; archived ones only when asked for by state. */
export function listTeams(db: Q, filter: { state?: TeamState; q?: string }, cursor: CursorValue[] | null, limit: number) {
  let inner = withDerived(db);
  if (filter.state !== 'archived') inner = inner.where('t.status', '<>', 'archived');
  if (filter.q) inner = inner.where('t.name', 'like', `%${filter.q.replace(/[\\%_]/g, (c) => `\\${c}`)}%`);
  let q = db.selectFrom(inner.as('x')).selectAll();
  if (filter.state) q = q.where('x.state', '=', filter.state);
  return keyset(q, ['x.name', 'x.id'], 'asc', cursor, limit).execute();
}

export function rolesOf(db: Q, teamIds: number[]) {
  if (teamIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('team_roles').selectAll().where('team_id', 'in', teamIds).orderBy('team_id').orderBy('role').execute();
}

export function membersOf(db: Q, teamId: number) {
  return db
    .selectFrom('team_members as m')
    .innerJoin('users as u', 'u.id', 'm.user_id')
    .select(['m.user_id', 'u.name', 'u.email', 'm.role'])
    .where('m.team_id', '=', teamId)
    .orderBy('m.created_at')
    .orderBy('m.user_id')
    .execute();
}

export function linksOf(db: Q, teamIds: number[]) {
  if (teamIds.length === 0) return Promise.resolve([]);
  return db.selectFrom('team_links').selectAll().where('team_id', 'in', teamIds).orderBy('team_id').orderBy('surface').orderBy('external_id').execute();
}

/** Active teams created from a template. */
export async function countActiveByTemplate(db: Q, template: string): Promise<number> {
  const r = await db.selectFrom('teams').select((eb) => eb.fn.countAll<number>().as('n')).where('template_name', '=', template).where('status', '<>', 'archived').executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Live teams whose roles run an agent. */
export async function countTeamsUsingAgent(db: Q, agent: string): Promise<number> {
  const r = await db
    .selectFrom('team_roles as r')
    .innerJoin('teams as t', 't.id', 'r.team_id')
    .select(sql<number>`count(distinct t.id)`.as('n'))
    .where('r.agent', '=', agent)
    .where('t.status', '<>', 'archived')
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/** Live team roles whose egress override names a destination. */
export async function countOverridesNaming(db: Q, destination: string): Promise<number> {
  const r = await db
    .selectFrom('team_roles as r')
    .innerJoin('teams as t', 't.id', 'r.team_id')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('t.status', '<>', 'archived')
    .where(sql<boolean>`r.egress_override -> 'destinations' ? ${destination}`)
    .executeTakeFirstOrThrow();
  return Number(r.n);
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

import type { Kysely, Transaction } from 'kysely';
import { countEach } from '../../db/count-each.ts';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { McpAuth, McpStatus } from './mcp-servers.tables.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type McpServerRow = NonNullable<Awaited<ReturnType<typeof getServer>>>;

/** The columns a person or a proposal writes. */
export interface ServerColumns {
  url: string;
  destination: string;
  auth: McpAuth;
  auth_header: string | null;
  secret: string | null;
  roles: string[];
}

export function getServer(db: Q, teamKey: string, name: string) {
  return db.selectFrom('mcp_servers').selectAll().where('team_key', '=', teamKey).where('name', '=', name).executeTakeFirst();
}

/** Platform servers first (team_key ''), then each team's by team and name: the primary key's order. */
export function listServers(db: Q, cursor: CursorValue[] | null, limit: number) {
  return keyset(db.selectFrom('mcp_servers').selectAll(), ['team_key', 'name'], 'asc', cursor, limit).execute();
}

/** The curated servers of a team and the named platform servers, in one read. */
export function serversFor(db: Q, team: string, platformNames: string[]) {
  return db
    .selectFrom('mcp_servers')
    .selectAll()
    .where((eb) => eb.or([eb.and([eb('team_key', '=', team), eb('status', '=', 'curated')]), ...(platformNames.length ? [eb.and([eb('team_key', '=', ''), eb('name', 'in', platformNames)])] : [])]))
    .execute();
}

/** A team's own servers, every status, by name. */
export function serversOfTeam(db: Q, team: string) {
  return db.selectFrom('mcp_servers').select(['name', 'status']).where('team_key', '=', team).orderBy('name').execute();
}

/** Inserts a server; undefined when the (team, name) is taken. */
export function insertServer(db: Q, row: ServerColumns & { team_key: string; name: string; status: McpStatus; proposed_by: string | null; actor: string }) {
  const { actor, roles, ...rest } = row;
  return db
    .insertInto('mcp_servers')
    .values({ ...rest, roles: JSON.stringify(roles), created_by: actor, updated_by: actor })
    .onConflict((oc) => oc.columns(['team_key', 'name']).doNothing())
    .returningAll()
    .executeTakeFirst();
}

export async function existingPlatformNames(db: Q, names: string[]): Promise<Set<string>> {
  if (names.length === 0) return new Set();
  const rows = await db.selectFrom('mcp_servers').select('name').where('team_key', '=', '').where('name', 'in', names).execute();
  return new Set(rows.map((r) => r.name));
}

/** Per value: the MCP servers whose secret (or destination) column holds it. */
export function countWhere(db: Q, column: 'secret' | 'destination', values: string[]): Promise<Map<string, number>> {
  return countEach(db, values, (value) => db.selectFrom('mcp_servers').select((eb) => eb.fn.countAll<number>().as('n')).where(column, '=', value));
}

export function deleteTeamServers(db: Transaction<Database>, team: string) {
  return db.deleteFrom('mcp_servers').where('team_key', '=', team).returning('name').execute();
}

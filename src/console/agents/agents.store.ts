import { sql, type Kysely, type Transaction } from 'kysely';
import { countEach } from '../../db/count-each.ts';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { AgentsTables, Egress } from './agents.tables.ts';

type Q = Kysely<Database> | Transaction<Database>;
type VersionInsert = Omit<AgentsTables['agent_versions'], 'created_at' | 'tools' | 'skills' | 'mcp_servers' | 'egress' | 'context'> & {
  tools: string[];
  skills: string[];
  mcp_servers: string[];
  egress: Egress;
  context: Array<Record<string, unknown>>;
};

export function getAgent(db: Q, name: string) {
  return db.selectFrom('agents').selectAll().where('name', '=', name).executeTakeFirst();
}

/** The agent's ETag (row_version), its row locked for the rest of the transaction; null when there is none. */
export async function lockAgent(db: Q, name: string): Promise<number | null> {
  const row = await db.selectFrom('agents').select('row_version').where('name', '=', name).forUpdate().executeTakeFirst();
  return row ? Number(row.row_version) : null;
}

/** Locks an agent's row against deletion for the rest of the transaction; false when there is none. */
export async function lockAgentShared(db: Q, name: string): Promise<boolean> {
  const row = await db.selectFrom('agents').select('name').where('name', '=', name).forShare().executeTakeFirst();
  return row !== undefined;
}

export function listAgents(db: Q, cursor: CursorValue[] | null, limit: number) {
  return keyset(db.selectFrom('agents').selectAll(), ['name'], 'asc', cursor, limit).execute();
}

export function insertAgent(db: Q, row: { name: string; display_name: string | null; kind: string | null; description: string; current_version: number; created_by: string }) {
  return db.insertInto('agents').values(row).returningAll().executeTakeFirstOrThrow();
}

export function getVersion(db: Q, name: string, version: number) {
  return db.selectFrom('agent_versions').selectAll().where('agent_name', '=', name).where('version', '=', version).executeTakeFirst();
}

/** The current versions of many agents at once. */
export function currentVersions(db: Q, names: string[]) {
  if (names.length === 0) return Promise.resolve([]);
  return db
    .selectFrom('agent_versions as v')
    .innerJoin('agents as a', (j) => j.onRef('a.name', '=', 'v.agent_name').onRef('a.current_version', '=', 'v.version'))
    .selectAll('v')
    .where('v.agent_name', 'in', names)
    .execute();
}

export function listVersions(db: Q, name: string, cursor: CursorValue[] | null, limit: number) {
  const q = db.selectFrom('agent_versions').select(['agent_name', 'version', 'note', 'created_by', 'created_at']).where('agent_name', '=', name);
  return keyset(q, ['version'], 'desc', cursor, limit).execute();
}

export function insertVersion(db: Q, row: VersionInsert) {
  return db
    .insertInto('agent_versions')
    .values({
      ...row,
      tools: JSON.stringify(row.tools),
      skills: JSON.stringify(row.skills),
      mcp_servers: JSON.stringify(row.mcp_servers),
      egress: JSON.stringify(row.egress),
      context: JSON.stringify(row.context),
    })
    .returningAll()
    .executeTakeFirstOrThrow();
}

export async function existingAgents(db: Q, names: string[]): Promise<Set<string>> {
  const rows = await db.selectFrom('agents').select('name').where('name', 'in', names).execute();
  return new Set(rows.map((r) => r.name));
}

/** Per name: how many agents' current versions name it as their environment, among their MCP servers or among their egress destinations. */
export function countCurrentUsing(db: Q, kind: 'environment' | 'mcp_server' | 'destination', names: string[]): Promise<Map<string, number>> {
  return countEach(db, names, (name) => {
    const q = db
      .selectFrom('agent_versions as v')
      .innerJoin('agents as a', (j) => j.onRef('a.name', '=', 'v.agent_name').onRef('a.current_version', '=', 'v.version'))
      .select((eb) => eb.fn.countAll<number>().as('n'));
    if (kind === 'environment') return q.where('v.environment', '=', name);
    if (kind === 'mcp_server') return q.where(sql<boolean>`v.mcp_servers @> jsonb_build_array(${name}::text)`);
    return q.where(sql<boolean>`v.egress -> 'destinations' @> jsonb_build_array(${name}::text)`);
  });
}

export function getAvatar(db: Q, name: string) {
  return db.selectFrom('agent_avatars').selectAll().where('agent_name', '=', name).executeTakeFirst();
}

/** Avatar versions (the avatar_url cache-buster) of many agents. */
export function avatarVersions(db: Q, names: string[]) {
  if (names.length === 0) return Promise.resolve([]);
  return db.selectFrom('agent_avatars').select(['agent_name', 'row_version']).where('agent_name', 'in', names).execute();
}

export function insertAvatar(db: Q, row: { agent_name: string; media_type: string; bytes: Uint8Array; size_bytes: number }) {
  return db.insertInto('agent_avatars').values(row).returning(['agent_name', 'row_version']).executeTakeFirstOrThrow();
}

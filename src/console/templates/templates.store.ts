import { sql, type Kysely, type Transaction } from 'kysely';
import { countEach } from '../../db/count-each.ts';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { TemplateContent } from './templates.schemas.ts';

type Q = Kysely<Database> | Transaction<Database>;

export function getTemplate(db: Q, name: string) {
  return db.selectFrom('team_templates').selectAll().where('name', '=', name).executeTakeFirst();
}

/** Templates with their current version's content, by name. */
export function listTemplates(db: Q, cursor: CursorValue[] | null, limit: number) {
  const q = db
    .selectFrom('team_templates as t')
    .innerJoin('team_template_versions as v', (j) => j.onRef('v.template_name', '=', 't.name').onRef('v.version', '=', 't.current_version'))
    .select(['t.name', 't.description', 't.current_version', 't.updated_at', 't.row_version', 'v.content']);
  return keyset(q, ['t.name'], 'asc', cursor, limit).execute();
}

export function getVersion(db: Q, name: string, version: number) {
  return db.selectFrom('team_template_versions').selectAll().where('template_name', '=', name).where('version', '=', version).executeTakeFirst();
}

export function listVersions(db: Q, name: string, cursor: CursorValue[] | null, limit: number) {
  const q = db.selectFrom('team_template_versions').select(['version', 'note', 'created_by', 'created_at']).where('template_name', '=', name);
  return keyset(q, ['version'], 'desc', cursor, limit).execute();
}

export async function insertVersion(
  db: Transaction<Database>,
  row: { template_name: string; version: number; note: string; created_by: string; content: TemplateContent; content_sha256: string },
) {
  const inserted = await db
    .insertInto('team_template_versions')
    .values({ ...row, content: JSON.stringify(row.content) })
    .returningAll()
    .executeTakeFirstOrThrow();
  const roles = Object.entries(row.content.roles).map(([role, r]) => ({
    template_name: row.template_name,
    version: row.version,
    role,
    agent: r.agent,
    environment: r.vm,
    mcp_servers: r.mcp_servers,
    skills: r.skills,
  }));
  if (roles.length) await db.insertInto('team_template_version_roles').values(roles).execute();
  return inserted;
}

export async function nextVersion(db: Transaction<Database>, name: string): Promise<number> {
  const r = await db
    .selectFrom('team_template_versions')
    .select((eb) => eb.fn.max('version').as('v'))
    .where('template_name', '=', name)
    .executeTakeFirst();
  return Number(r?.v ?? 0) + 1;
}

/** Per name: the templates whose current version names it as an agent, environment, MCP server or skill. */
export function countCurrentUses(db: Q, column: 'agent' | 'environment' | 'mcp_servers' | 'skills', names: string[]): Promise<Map<string, number>> {
  return countEach(db, names, (name) => {
    const q = db
      .selectFrom('team_template_version_roles as r')
      .innerJoin('team_templates as t', (j) => j.onRef('t.name', '=', 'r.template_name').onRef('t.current_version', '=', 'r.version'))
      .select(sql<number>`count(distinct r.template_name)`.as('n'));
    return column === 'agent' || column === 'environment' ? q.where(`r.${column}`, '=', name) : q.where(sql<boolean>`${name} = any(${sql.ref(`r.${column}`)})`);
  });
}

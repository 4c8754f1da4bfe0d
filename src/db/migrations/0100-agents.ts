import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('agents')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('display_name', 'text')
    .addColumn('kind', 'text')
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    // Every new version becomes current, so the current version is also the highest one.
    .addColumn('current_version', 'integer', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();

  await db.schema
    .createTable('agent_versions')
    .addColumn('agent_name', 'text', (c) => c.notNull().references('agents.name').onDelete('cascade'))
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('note', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('system_prompt', 'text', (c) => c.notNull())
    .addColumn('tools', 'jsonb', (c) => c.notNull())
    .addColumn('confirmation_policy', 'text', (c) => c.notNull().check(sql`confirmation_policy in ('never_confirm','confirm_risky')`))
    .addColumn('produces_branch', 'boolean', (c) => c.notNull())
    .addColumn('works_on_branch', 'boolean')
    .addColumn('skills', 'jsonb', (c) => c.notNull())
    .addColumn('mcp_servers', 'jsonb', (c) => c.notNull())
    .addColumn('egress', 'jsonb', (c) => c.notNull())
    .addColumn('context', 'jsonb', (c) => c.notNull())
    .addColumn('model', 'text')
    .addColumn('environment', 'text')
    .addPrimaryKeyConstraint('agent_versions_pkey', ['agent_name', 'version'])
    .execute();
  await db.schema.createIndex('agent_versions_environment').on('agent_versions').column('environment').where(sql.ref('environment'), 'is not', null).execute();

  await db.schema
    .createTable('agent_avatars')
    .addColumn('agent_name', 'text', (c) => c.primaryKey().references('agents.name').onDelete('cascade'))
    .addColumn('media_type', 'text', (c) => c.notNull())
    .addColumn('bytes', 'bytea', (c) => c.notNull())
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['agent_avatars', 'agent_versions', 'agents']) await db.schema.dropTable(t).execute();
}

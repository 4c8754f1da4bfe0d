import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('team_templates')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('current_version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();

  await db.schema
    .createTable('team_template_versions')
    .addColumn('template_name', 'text', (c) => c.notNull().references('team_templates.name').onDelete('cascade'))
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('note', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('content', 'jsonb', (c) => c.notNull())
    .addColumn('content_sha256', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('team_template_versions_pk', ['template_name', 'version'])
    .execute();

  // What each version's roles name, so "who uses agent X / environment Y" is an index lookup.
  await db.schema
    .createTable('team_template_version_roles')
    .addColumn('template_name', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('agent', 'text', (c) => c.notNull())
    .addColumn('environment', 'text', (c) => c.notNull())
    .addColumn('mcp_servers', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('skills', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addPrimaryKeyConstraint('team_template_version_roles_pk', ['template_name', 'version', 'role'])
    .addForeignKeyConstraint('team_template_version_roles_fk', ['template_name', 'version'], 'team_template_versions', ['template_name', 'version'], (c) => c.onDelete('cascade'))
    .execute();
  await db.schema.createIndex('team_template_version_roles_agent').on('team_template_version_roles').column('agent').execute();
  await db.schema.createIndex('team_template_version_roles_env').on('team_template_version_roles').column('environment').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('team_template_version_roles').execute();
  await db.schema.dropTable('team_template_versions').execute();
  await db.schema.dropTable('team_templates').execute();
}

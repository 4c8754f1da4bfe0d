import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('mcp_servers')
    // '' for a platform server, else the team's name: sorts platform servers first and keeps
    // the key free of nulls, so (team_key, name) is both the identity and the list order.
    .addColumn('team_key', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('destination', 'text', (c) => c.notNull())
    .addColumn('auth', 'text', (c) => c.notNull().check(sql`auth in ('none','bearer','header')`))
    .addColumn('auth_header', 'text')
    .addColumn('secret', 'text')
    .addColumn('roles', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('curated','proposed')`))
    .addColumn('proposed_by', 'text')
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('updated_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .addPrimaryKeyConstraint('mcp_servers_pk', ['team_key', 'name'])
    .execute();
  await db.schema.createIndex('mcp_servers_secret').on('mcp_servers').column('secret').execute();
  await db.schema.createIndex('mcp_servers_destination').on('mcp_servers').column('destination').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('mcp_servers').execute();
}

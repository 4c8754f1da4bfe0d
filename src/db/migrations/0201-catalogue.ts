import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // Stored destinations; the built-ins (llm, mcp, otel) are defined in code and never stored.
  await db.schema
    .createTable('destinations')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('host', 'text')
    .addColumn('methods', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('paths', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('header_allowlist', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('inject_secret', 'text')
    .addColumn('git_push_ref_globs', 'jsonb', (c) => c.notNull().defaultTo(sql`'[]'::jsonb`))
    .addColumn('what', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('github_scope', 'text', (c) => c.check(sql`github_scope in ('api','git','repo_metadata','mcp')`))
    .addColumn('dev_only', 'boolean', (c) => c.notNull().defaultTo(false))
    .addColumn('policy_name', 'text')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();
  await db.schema.createIndex('destinations_inject_secret').on('destinations').column('inject_secret').execute();

  await db.schema
    .createTable('environments')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('provider', 'text', (c) => c.notNull().check(sql`provider in ('microvm','hosted')`))
    .addColumn('profile', 'text')
    .addColumn('vcpus', 'integer')
    .addColumn('memory_mib', 'integer')
    .addColumn('disk_gib', 'integer')
    .addColumn('checkpoint_id', 'text')
    .addColumn('idle_after_seconds', 'integer', (c) => c.notNull())
    .addColumn('deep_sleep_after_seconds', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .addCheckConstraint('environments_checkpoint', sql`(provider = 'hosted') = (checkpoint_id is not null)`)
    .execute();
  await db.schema.createIndex('environments_checkpoint_id').on('environments').column('checkpoint_id').execute();

  // Platform skills. api_edited: written through the API since the last repository import
  // (an import leaves it alone unless forced). Tombstones: skills deleted through the API.
  await db.schema
    .createTable('platform_skills')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('description', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('resources', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('revision', 'integer', (c) => c.notNull())
    .addColumn('api_edited', 'boolean', (c) => c.notNull().defaultTo(true))
    .addColumn('source', 'text', (c) => c.notNull().defaultTo('api').check(sql`source in ('api','import')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();
  await db.schema
    .createTable('platform_skill_tombstones')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('revision', 'integer', (c) => c.notNull())
    .addColumn('deleted_by', 'text', (c) => c.notNull())
    .addColumn('deleted_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['platform_skill_tombstones', 'platform_skills', 'environments', 'destinations']) await db.schema.dropTable(t).execute();
}

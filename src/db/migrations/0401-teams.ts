import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('teams')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('provisioning','active','archived')`))
    .addColumn('template_name', 'text', (c) => c.notNull())
    .addColumn('template_version', 'integer')
    .addColumn('template_hash', 'text', (c) => c.notNull())
    .addColumn('lead', 'text', (c) => c.notNull())
    .addColumn('home_surface', 'text', (c) => c.notNull().check(sql`home_surface in ('chat_a','chat_b','console','none')`))
    .addColumn('home_room_id', 'text')
    .addColumn('home_room_label', 'text')
    .addColumn('repo_url', 'text')
    .addColumn('budget_usd_per_day', 'numeric', (c) => c.notNull())
    .addColumn('idle_after_seconds', 'integer', (c) => c.notNull())
    .addColumn('deep_sleep_after_seconds', 'integer', (c) => c.notNull())
    .addColumn('isolation', 'text', (c) => c.notNull())
    .addColumn('rework_rounds', 'integer', (c) => c.notNull())
    .addColumn('memory', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('manual_fields', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('archived_at', 'timestamptz')
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();
  // A name belongs to one team that is not archived; archiving frees it.
  await sql`create unique index teams_live_name on teams (name) where status <> 'archived'`.execute(db);
  await db.schema.createIndex('teams_name_id').on('teams').columns(['name', 'id']).execute();
  await db.schema.createIndex('teams_template').on('teams').columns(['template_name', 'status']).execute();

  await db.schema
    .createTable('team_roles')
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('agent', 'text', (c) => c.notNull())
    .addColumn('model', 'text', (c) => c.notNull())
    .addColumn('vm', 'text', (c) => c.notNull())
    .addColumn('profile', 'text', (c) => c.notNull())
    .addColumn('provider', 'text')
    .addColumn('checkpoint_id', 'text')
    .addColumn('replicas_max', 'integer', (c) => c.notNull())
    .addColumn('concurrent_runs', 'integer', (c) => c.notNull())
    .addColumn('max_iterations', 'integer')
    .addColumn('confirmation_policy', 'text')
    .addColumn('memory', 'jsonb', (c) => c.notNull().defaultTo(sql`'{}'::jsonb`))
    .addColumn('max_budget', 'numeric')
    .addColumn('budget_duration', 'text')
    .addColumn('rpm_limit', 'integer')
    .addColumn('tpm_limit', 'integer')
    .addColumn('pipeline_next_role', 'text')
    .addColumn('skills', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('mcp_servers', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('manual_fields', sql`text[]`, (c) => c.notNull().defaultTo(sql`'{}'`))
    .addColumn('egress_override', 'jsonb')
    .addColumn('proxy_key_id', 'text')
    .addColumn('proxy_key', 'jsonb')
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .addPrimaryKeyConstraint('team_roles_pk', ['team_id', 'role'])
    .execute();
  await db.schema.createIndex('team_roles_agent').on('team_roles').column('agent').execute();

  await db.schema
    .createTable('team_members')
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('user_id', 'integer', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('team_members_pk', ['team_id', 'user_id'])
    .execute();

  await db.schema
    .createTable('team_links')
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('surface', 'text', (c) => c.notNull())
    .addColumn('external_id', 'text', (c) => c.notNull())
    .addColumn('label', 'text', (c) => c.notNull())
    .addColumn('verification', 'text', (c) => c.notNull().check(sql`verification in ('verified','unverified','not_applicable')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('team_links_pk', ['team_id', 'surface', 'external_id'])
    .execute();
  // Work arriving on a surface finds its team through this index.
  await db.schema.createIndex('team_links_surface').on('team_links').columns(['surface', 'external_id']).execute();

  await db.schema
    .createTable('team_skills')
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull().check(sql`status in ('curated','proposed')`))
    .addColumn('source', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addPrimaryKeyConstraint('team_skills_pk', ['team_id', 'name'])
    .execute();

  // Runs and sandboxes as far as teams need them: the derived team state reads them and
  // archiving ends them. The run engine owns and extends these tables.
  await db.schema
    .createTable('runs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id'))
    .addColumn('team_name', 'text', (c) => c.notNull())
    .addColumn('surface', 'text', (c) => c.notNull().defaultTo('console'))
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('running','waiting','succeeded','failed','cancelled')`))
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('failure_reason', 'text')
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('finished_at', 'timestamptz')
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .execute();
  await db.schema.createIndex('runs_team_state').on('runs').columns(['team_id', 'state']).execute();
  await db.schema.createIndex('runs_created').on('runs').columns(['created_at', 'id']).execute();

  await db.schema
    .createTable('sandboxes')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('team_id', 'integer', (c) => c.notNull().references('teams.id'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('replica', 'integer', (c) => c.notNull())
    .addColumn('provider', 'text', (c) => c.notNull())
    .addColumn('state', 'text', (c) => c.notNull().check(sql`state in ('starting','running','sleeping','deep_sleep','destroyed')`))
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .execute();
  await db.schema.createIndex('sandboxes_team').on('sandboxes').columns(['team_id', 'state']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ['sandboxes', 'runs', 'team_skills', 'team_links', 'team_members', 'team_roles', 'teams']) await db.schema.dropTable(t).execute();
}

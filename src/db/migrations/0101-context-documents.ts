import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // One table for every owner kind (agents and teams): the owner is a name, not a foreign
  // key, and the owning module removes an owner's documents in its own delete transaction.
  await db.schema
    .createTable('context_documents')
    .addColumn('scope', 'text', (c) => c.notNull().check(sql`scope in ('agent','team')`))
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('media_type', 'text', (c) => c.notNull())
    .addColumn('description', 'text', (c) => c.notNull().defaultTo(''))
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('size_bytes', 'integer', (c) => c.notNull())
    .addColumn('sha256', 'text', (c) => c.notNull())
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .addPrimaryKeyConstraint('context_documents_pkey', ['scope', 'owner', 'name'])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('context_documents').execute();
}

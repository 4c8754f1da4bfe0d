import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<any>): Promise<void> {
  // A secret reference: the name, who wrote it and when, and the value sealed with
  // AES-256-GCM under the key `key_id` names. A reference without a value is "unset".
  await db.schema
    .createTable('secrets')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value_sealed', 'text')
    .addColumn('key_id', 'text')
    .addColumn('created_by', 'text', (c) => c.notNull())
    .addColumn('updated_by', 'text', (c) => c.notNull())
    .addColumn('value_set_at', 'timestamptz')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull().defaultTo(sql`now()`))
    .addColumn('row_version', 'bigint', (c) => c.notNull().defaultTo(sql`nextval('row_version_seq')`))
    .addCheckConstraint('secrets_sealed_has_key', sql`(value_sealed is null) = (key_id is null)`)
    .execute();
  await db.schema.createIndex('secrets_key_id').on('secrets').column('key_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('secrets').execute();
}

import fs from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { sql, type Kysely } from 'kysely';
import { Migrator, type Migration, type MigrationProvider, type MigrationResultSet } from 'kysely/migration';

const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');

/**
 * Migrations live in src/db/migrations, one file each, ordered by name. Each area of the
 * service numbers its own range (0001 kernel, 0100 agents, 0200 catalogue, 0300 model proxy,
 * 0400 teams, 0500 chat, 0600 runtime), so files written side by side never collide.
 */
class FolderProvider implements MigrationProvider {
  async getMigrations(): Promise<Record<string, Migration>> {
    const files = (await fs.readdir(migrationsDir)).filter((f) => /^\d{4}-[a-z0-9-]+\.ts$/.test(f)).sort();
    const out: Record<string, Migration> = {};
    for (const file of files) {
      out[file.replace(/\.ts$/, '')] = (await import(pathToFileURL(path.join(migrationsDir, file)).href)) as Migration;
    }
    return out;
  }
}

export class MigrationError extends Error {}

/** Brings the schema up to date; throws naming the migration that failed. */
export async function migrateToLatest(db: Kysely<any>, schema?: string): Promise<MigrationResultSet> {
  // Naming the schema keeps Kysely's bookkeeping tables in it; otherwise its existence check
  // sees another schema's tables of the same name (several deployments on one server).
  const target = schema ?? (await sql<{ s: string }>`select current_schema() as s`.execute(db)).rows[0].s;
  const migrator = new Migrator({ db, provider: new FolderProvider(), allowUnorderedMigrations: true, migrationTableSchema: target });
  const result = await migrator.migrateToLatest();
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error');
    const cause = result.error instanceof Error ? result.error.message : String(result.error);
    throw new MigrationError(`migration ${failed?.migrationName ?? '?'} failed: ${cause}`);
  }
  return result;
}

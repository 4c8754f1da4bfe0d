import { sql, type Kysely } from 'kysely';

// Job kinds follow one scheme, `<module>.<verb>-<object>` (src/jobs.ts). Jobs stored under the
// former names (queued, retried, or listed later) take the new ones, and so do the idempotency
// keys that were made of the former kind.
export const RENAMED_KINDS: ReadonlyArray<readonly [from: string, to: string]> = [
  ['run.advance', 'engine.advance-run'],
  ['run.proposal', 'engine.store-proposal'],
  ['trace.export', 'telemetry.export-spans'],
  ['webhook.process', 'webhooks.process-delivery'],
  ['code_host.progress', 'code_host.post-progress'],
  ['code_host.deliver', 'code_host.deliver-run'],
  ['chat_a.role_bots', 'chat_a.sync-role-bots'],
];

async function rename(db: Kysely<any>, pairs: ReadonlyArray<readonly [string, string]>): Promise<void> {
  for (const [from, to] of pairs) {
    await sql`
      update jobs
      set kind = ${to},
          key = case when starts_with(key, ${`${from}:`}) then ${`${to}:`} || substr(key, ${from.length + 2}) else key end
      where kind = ${from}`.execute(db);
  }
}

export async function up(db: Kysely<any>): Promise<void> {
  await rename(db, RENAMED_KINDS);
}

export async function down(db: Kysely<any>): Promise<void> {
  await rename(
    db,
    RENAMED_KINDS.map(([from, to]) => [to, from] as const),
  );
}

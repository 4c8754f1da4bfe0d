import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { IntegrationKind } from './kinds.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type IntegrationRow = Awaited<ReturnType<typeof allIntegrations>>[number];

export const allIntegrations = (q: Q) => q.selectFrom('integrations').selectAll().orderBy('kind').execute();

export const getIntegration = (q: Q, kind: IntegrationKind) => q.selectFrom('integrations').selectAll().where('kind', '=', kind).executeTakeFirst();

/** The newest settings generation of any integration (0 before the first PUT). */
export async function currentGeneration(q: Q): Promise<number> {
  const row = await q.selectFrom('integrations').select(sql<number>`coalesce(max(generation), 0)`.as('g')).executeTakeFirstOrThrow();
  return Number(row.g);
}

/** Records that a host loaded a generation; a slower report of an older one does not go back. */
export async function recordLoad(q: Q, hostAddress: string, generation: number): Promise<void> {
  await q
    .insertInto('integration_loads')
    .values({ host_address: hostAddress, generation, loaded_at: sql`now()` })
    .onConflict((oc) =>
      oc.column('host_address').doUpdateSet({ generation: sql`greatest(integration_loads.generation, excluded.generation)`, loaded_at: sql`now()` }),
    )
    .execute();
}

/** The generation each of these hosts loaded last (absent: never). */
export async function loadsOf(q: Q, hostAddresses: string[]): Promise<Map<string, number>> {
  if (hostAddresses.length === 0) return new Map();
  const rows = await q.selectFrom('integration_loads').select(['host_address', 'generation']).where('host_address', 'in', hostAddresses).execute();
  return new Map(rows.map((r) => [r.host_address, Number(r.generation)]));
}

/** The channel a PUT notifies, so each gateway reloads at once (per schema: test databases share a server). */
export const settingsChannelSql = sql<string>`left('crewhouse_integrations:' || current_schema(), 63)`;

export async function notifySettingsChanged(q: Q): Promise<void> {
  await sql`select pg_notify(${settingsChannelSql}, '')`.execute(q);
}

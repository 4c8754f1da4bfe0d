import { sql, type Expression, type Kysely, type Transaction } from 'kysely';
import type { Database } from './schema.ts';

type Q = Kysely<Database> | Transaction<Database>;

/**
 * One count per name, for many names in one query: `count(name)` builds the scalar count for a
 * single name, given the name as an expression (it is correlated with each name in turn). The
 * names travel as one JSON parameter, so the statement's text is the same whatever their number
 * (the embedded database's driver keeps it prepared). Every distinct name gets an entry.
 */
export async function countEach(db: Q, names: string[], count: (name: Expression<string>) => Expression<unknown>): Promise<Map<string, number>> {
  const distinct = [...new Set(names)];
  if (distinct.length === 0) return new Map();
  const name = sql<string>`each_name.name`;
  const { rows } = await sql<{ name: string; n: number | string }>`select each_name.name, (${count(name)}) as n from jsonb_array_elements_text(${JSON.stringify(distinct)}::jsonb) as each_name(name)`.execute(db);
  return new Map(rows.map((r) => [r.name, Number(r.n)]));
}

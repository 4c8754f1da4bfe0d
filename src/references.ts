import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from './db/schema.ts';
import type { Problem } from './errors/problems.ts';
import type { HookCaller, RefKind, RefQuery } from './hooks.ts';

export type { RefKind, RefQuery };

/**
 * How one resource module asks about names another module owns, without importing its
 * internals: over the `unknown:<kind>` and `uses:<kind>` hooks, which the composition root
 * wires. A kind nobody answers has no members: every name of it is unknown, and nothing uses
 * anything.
 *
 * Each takes the query runner to ask on (`q`): undefined means the owner's own database; inside
 * a transaction it must be the transaction (the embedded database has a single connection).
 * `guard` closes the race between a delete's "in use" check and a write naming the thing: both
 * take an advisory lock on the name in their transaction, then check again on it.
 */
export function createReferences(hooks: HookCaller) {
  const references = {
    /** The names of `kind` that do not exist: those no answerer knows. */
    async unknown(kind: RefKind, names: string[], q?: RefQuery): Promise<string[]> {
      const distinct = [...new Set(names)];
      if (distinct.length === 0) return [];
      const answers = await hooks.ask(`unknown:${kind}`, distinct, q);
      return distinct.filter((n) => answers.every((unknown) => unknown.includes(n)));
    },
    /** How often each name of `kind` is used, over every module that names such things: one query per such module, whatever the number of names (a page of a list costs what one row does). */
    async usesMany(kind: RefKind, names: string[], q?: RefQuery): Promise<Map<string, number>> {
      const distinct = [...new Set(names)];
      const total = new Map(distinct.map((n) => [n, 0]));
      if (distinct.length === 0) return total;
      for (const counts of await hooks.ask(`uses:${kind}`, distinct, q)) {
        for (const n of distinct) total.set(n, total.get(n)! + (counts.get(n) ?? 0));
      }
      return total;
    },
    /** How often a name of `kind` is used, over every module that names such things. */
    async uses(kind: RefKind, name: string, q?: RefQuery): Promise<number> {
      return (await references.usesMany(kind, [name], q)).get(name)!;
    },
    /**
     * Locks names of `kind` until the transaction ends: 'use' (shared) by a write that names
     * them, 'delete' (exclusive) by the delete of one. After it, the writer re-checks
     * `unknown(kind, names, trx)` and the deleter `uses(kind, name, trx)`: whichever comes
     * second sees what the first committed. Names are locked in sorted order.
     */
    async guard(trx: Transaction<Database>, kind: RefKind, names: string[], mode: 'use' | 'delete'): Promise<void> {
      const fn = mode === 'use' ? sql.raw('pg_advisory_xact_lock_shared') : sql.raw('pg_advisory_xact_lock');
      for (const name of [...new Set(names)].sort()) await sql`select ${fn}(hashtext(${`ref:${kind}:${name}`}))`.execute(trx);
    },

    /**
     * Deletes a thing of `kind` only while nothing uses it; `inUse(count)` (a 409) otherwise.
     * Asked once before the transaction (a refusal costs none), then again under the name's
     * exclusive lock inside the transaction that runs `remove`, so a write naming the thing
     * either committed first and is counted, or waits and then finds it gone.
     */
    async deleteUnlessUsed<T>(db: Kysely<Database>, kind: RefKind, name: string, inUse: (uses: number) => Problem, remove: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
      const inside = async (trx: Transaction<Database>) => {
        await references.guard(trx, kind, [name], 'delete');
        const usesNow = await references.uses(kind, name, trx);
        if (usesNow > 0) throw inUse(usesNow);
        return remove(trx);
      };
      // Handed a transaction (one step of a larger write): everything is asked on it.
      if (db.isTransaction) return inside(db as Transaction<Database>);
      const uses = await references.uses(kind, name);
      if (uses > 0) throw inUse(uses);
      return db.transaction().execute(inside);
    },
  };
  return references;
}

export type References = ReturnType<typeof createReferences>;

import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';

/**
 * How one resource module asks about names another module owns, without importing its
 * internals. Owners register, in the composition root, a function that answers which of some
 * names do not exist (`exists`) and counters of how often a name is used (`usage`). A kind
 * nobody registered has no members: every name of it is unknown, and nothing uses anything.
 *
 * Both take the query runner to ask on (`q`): undefined means the owner's own database; inside
 * a transaction it must be the transaction (the embedded database has a single connection).
 * `guard` closes the race between a delete's "in use" check and a write naming the thing: both
 * take an advisory lock on the name in their transaction, then check again on it.
 */
export type RefKind = 'agent' | 'destination' | 'environment' | 'skill' | 'mcp_server' | 'secret' | 'tool' | 'model' | 'template';

/** The query runner a provider or counter asks on; undefined is the owner's own database. */
export type RefQuery = Kysely<Database> | Transaction<Database> | undefined;

export function createReferences() {
  const unknownFns = new Map<RefKind, (names: string[], q: RefQuery) => Promise<string[]>>();
  const counters = new Map<RefKind, Array<(name: string, q: RefQuery) => Promise<number>>>();
  return {
    /** The owner of a kind answers which names are unknown. */
    provide(kind: RefKind, unknown: (names: string[], q: RefQuery) => Promise<string[]>) {
      unknownFns.set(kind, unknown);
    },
    /** A module that names things of `kind` says how often it uses one. */
    countUsesOf(kind: RefKind, count: (name: string, q: RefQuery) => Promise<number>) {
      const list = counters.get(kind) ?? [];
      list.push(count);
      counters.set(kind, list);
    },
    async unknown(kind: RefKind, names: string[], q?: RefQuery): Promise<string[]> {
      const distinct = [...new Set(names)];
      if (distinct.length === 0) return [];
      const fn = unknownFns.get(kind);
      return fn ? fn(distinct, q) : distinct;
    },
    async uses(kind: RefKind, name: string, q?: RefQuery): Promise<number> {
      let total = 0;
      for (const count of counters.get(kind) ?? []) total += await count(name, q);
      return total;
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
  };
}

export type References = ReturnType<typeof createReferences>;

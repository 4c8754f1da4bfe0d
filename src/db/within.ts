import type { Transaction } from 'kysely';
import type { Db } from './database.ts';
import type { Database } from './schema.ts';

/**
 * Runs `fn` inside the caller's transaction when one is given (a write that is one step of a
 * larger one, such as a repository import), else in a transaction of its own.
 */
export function within<T>(db: Db, trx: Transaction<Database> | undefined, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  return trx ? fn(trx) : db.transaction().execute(fn);
}

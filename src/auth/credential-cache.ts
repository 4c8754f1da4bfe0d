import { watchWrites, type Db } from '../db/database.ts';

/** What a credential look-up answers: a row that may expire. */
type Row = { expires_at: string | null };

/** More live credentials than this and the cache starts again (it holds only credentials in use). */
const MAX_ENTRIES = 10_000;

function createCache(db: Db) {
  const entries = new Map<string, { row: Row; until: number }>();
  let generation = 0;
  // Any write to the tables a credential's row is read from (a token revoked or touched, a
  // user disabled, renamed, given another role or deleted, a session ended) empties it.
  const watched = watchWrites(db, ['api_tokens', 'sessions', 'users'], () => {
    generation++;
    entries.clear();
  });
  if (!watched) return null;

  return async function lookup<R extends Row>(key: string, load: () => Promise<R | undefined>): Promise<R | undefined> {
    const hit = entries.get(key);
    if (hit && Date.now() < hit.until) return hit.row as R;
    const seen = generation;
    const row = await load();
    // Kept only if no write began or ended while it was read, so it is never older than a write.
    if (row && seen === generation) {
      if (entries.size >= MAX_ENTRIES) entries.clear();
      entries.set(key, { row, until: row.expires_at === null ? Infinity : Date.parse(row.expires_at) });
    } else entries.delete(key);
    return row;
  };
}

const caches = new WeakMap<Db, ReturnType<typeof createCache>>();
function cacheOf(db: Db) {
  if (!caches.has(db)) caches.set(db, createCache(db));
  return caches.get(db)!;
}

/**
 * The credential look-ups every authenticated request makes (a live API token or session by
 * its hash, with its user), answered from memory on the embedded database: its one process
 * is the only writer, and every write to the tokens, sessions and users tables empties the
 * cache (`watchWrites`), so a revoked token, a disabled user or a changed role counts from the
 * very next request. An entry also ends when its credential expires. On PostgreSQL, where
 * other processes write, every look-up reads the database.
 */
export function lookupCredential<R extends Row>(db: Db, key: string, load: () => Promise<R | undefined>): Promise<R | undefined> {
  const cache = cacheOf(db);
  return cache ? cache(key, load) : load();
}

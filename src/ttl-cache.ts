/**
 * A short-lived cache of loads by key: what a load promised is answered for `ttlMs` after it
 * began, to every caller, so callers at once share one load in flight. A load that fails is
 * forgotten as soon as it fails (the next caller loads again), never answered from memory.
 * Past `max` keys it starts again empty: it holds what is in use now.
 *
 * With `refreshWithinMs`, a key in use is loaded again ahead of time: a caller that finds its
 * entry within that long of expiring is answered from it at once and starts one load in the
 * background, which replaces the entry when it succeeds (dated from when it began). So a key
 * used often is never loaded on a caller's way, and nothing is answered later than `ttlMs`
 * after its load began, as without it. A background load that fails leaves the entry to
 * expire; one that ends after `forget` dropped the entry (or a newer load replaced it) is not kept.
 */
export interface TtlCache<T> {
  (key: string, load: () => Promise<T>): Promise<T>;
  /** Drops every entry whose key starts with `prefix`: it is loaded again at its next use. */
  forget(prefix: string): void;
}

export function ttlCache<T>(ttlMs: number, opts: { max?: number; now?: () => number; refreshWithinMs?: number } = {}): TtlCache<T> {
  const max = opts.max ?? 10_000;
  const now = opts.now ?? Date.now;
  const refreshAt = ttlMs - Math.min(opts.refreshWithinMs ?? 0, ttlMs);
  type Entry = { at: number; value: Promise<T>; refreshing: boolean };
  const entries = new Map<string, Entry>();
  const start = (load: () => Promise<T>): Promise<T> => {
    try {
      return load();
    } catch (err) {
      return Promise.reject(err);
    }
  };
  /** Loads `key` again behind `hit`, which callers are still answered from meanwhile. */
  const refresh = (key: string, hit: Entry, load: () => Promise<T>) => {
    hit.refreshing = true;
    const at = now();
    start(load).then(
      (v) => {
        if (entries.get(key) === hit) entries.set(key, { at, value: Promise.resolve(v), refreshing: false });
      },
      () => {
        hit.refreshing = false;
      },
    );
  };
  const get = (key: string, load: () => Promise<T>): Promise<T> => {
    const hit = entries.get(key);
    if (hit) {
      const age = now() - hit.at;
      if (age < ttlMs) {
        if (age >= refreshAt && !hit.refreshing) refresh(key, hit, load);
        return hit.value;
      }
    }
    let value: Promise<T>;
    try {
      value = load();
    } catch (err) {
      return Promise.reject(err);
    }
    if (entries.size >= max && !entries.has(key)) entries.clear();
    const entry: Entry = { at: now(), value, refreshing: false };
    entries.set(key, entry);
    // Only this load's entry: a newer one under the key (this one expired while it ran) stays.
    value.catch(() => {
      if (entries.get(key) === entry) entries.delete(key);
    });
    return value;
  };
  get.forget = (prefix: string) => {
    for (const key of entries.keys()) if (key.startsWith(prefix)) entries.delete(key);
  };
  return get;
}

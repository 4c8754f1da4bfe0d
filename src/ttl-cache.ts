/**
 * A short-lived cache of loads by key: what a load promised is answered for `ttlMs` after it
 * began, to every caller, so callers at once share one load in flight. A load that fails is
 * forgotten as soon as it fails (the next caller loads again), never answered from memory.
 * Past `max` keys it starts again empty: it holds what is in use now.
 */
export interface TtlCache<T> {
  (key: string, load: () => Promise<T>): Promise<T>;
  /** Drops every entry whose key starts with `prefix`: it is loaded again at its next use. */
  forget(prefix: string): void;
}

export function ttlCache<T>(ttlMs: number, opts: { max?: number; now?: () => number } = {}): TtlCache<T> {
  const max = opts.max ?? 10_000;
  const now = opts.now ?? Date.now;
  const entries = new Map<string, { at: number; value: Promise<T> }>();
  const get = (key: string, load: () => Promise<T>): Promise<T> => {
    const hit = entries.get(key);
    if (hit && now() - hit.at < ttlMs) return hit.value;
    let value: Promise<T>;
    try {
      value = load();
    } catch (err) {
      return Promise.reject(err);
    }
    if (entries.size >= max && !entries.has(key)) entries.clear();
    entries.set(key, { at: now(), value });
    // Only this load's entry: a newer one under the key (this one expired while it ran) stays.
    value.catch(() => {
      if (entries.get(key)?.value === value) entries.delete(key);
    });
    return value;
  };
  get.forget = (prefix: string) => {
    for (const key of entries.keys()) if (key.startsWith(prefix)) entries.delete(key);
  };
  return get;
}

/**
 * A function's answers kept by key, for a few keys in use at a time: past `max` keys it starts
 * again empty. For work cheap in a loop but not as one call among a request's other work (a
 * hash, cold: tens of µs), done again and again for the same few keys.
 */
export function boundedMemo<T>(max: number, fn: (key: string) => T): (key: string) => T {
  const kept = new Map<string, T>();
  return (key) => {
    const had = kept.get(key);
    if (had !== undefined || kept.has(key)) return had as T;
    if (kept.size >= max) kept.clear();
    const value = fn(key);
    kept.set(key, value);
    return value;
  };
}

import { useCallback, useEffect, useRef, useState } from 'react';
import { ApiError, call } from './api.ts';

/** The fields whose values differ between two readings of a resource, as paths (`settings.rework_rounds`). */
export function changedFields(before: unknown, after: unknown, prefix = '', depth = 0): string[] {
  const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObject(before) || !isObject(after)) return [];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  const out: string[] = [];
  for (const k of keys) {
    if (k === 'updated_at' || JSON.stringify(before[k]) === JSON.stringify(after[k])) continue;
    const inner = depth < 2 && isObject(before[k]) && isObject(after[k]) ? changedFields(before[k], after[k], `${prefix}${k}.`, depth + 1) : [];
    out.push(...(inner.length > 0 ? inner : [`${prefix}${k}`]));
  }
  return out;
}

/** A stale write: someone changed the resource between our read and our write. */
export class Conflict extends Error {
  readonly changed: string[];
  constructor(changed: string[]) {
    super(
      changed.length > 0
        ? `Someone changed this while you had it open (${changed.join(', ')}). The page now shows the current version; check it and save again.`
        : 'Someone changed this while you had it open. The page now shows the current version; check it and save again.',
    );
    this.changed = changed;
  }
}

export interface Doc<T> {
  data: T | null;
  etag: string | null;
  error: unknown;
  loading: boolean;
  reload: () => Promise<T | null>;
  /**
   * A write of this resource (or one guarded by its ETag) with `If-Match` from the last read.
   * On 412 it re-reads and throws a Conflict naming what changed. `replace` takes the answer as
   * the new state of the resource (its ETag too).
   */
  write: <R = unknown>(method: string, path?: string, body?: unknown, opts?: { replace?: boolean; raw?: Blob }) => Promise<R>;
}

/** One resource read with its ETag, so that writes can send `If-Match`. */
export function useDoc<T>(path: string): Doc<T> {
  const [state, setState] = useState<{ data: T | null; etag: string | null }>({ data: null, etag: null });
  const [error, setError] = useState<unknown>(null);
  const [loading, setLoading] = useState(true);
  const latest = useRef(state);
  latest.current = state;

  const reload = useCallback(async () => {
    setLoading(true);
    try {
      const { body, etag } = await call<T>('GET', path);
      setState({ data: body, etag });
      setError(null);
      return body;
    } catch (err) {
      setError(err);
      return null;
    } finally {
      setLoading(false);
    }
  }, [path]);

  useEffect(() => {
    void reload();
  }, [reload]);

  const write = useCallback(
    async <R>(method: string, target?: string, body?: unknown, opts: { replace?: boolean; raw?: Blob } = {}): Promise<R> => {
      const before = latest.current.data;
      try {
        const answer = await call<R>(method, target ?? path, { body, raw: opts.raw, headers: latest.current.etag ? { 'if-match': latest.current.etag } : {} });
        if (opts.replace) setState({ data: answer.body as unknown as T, etag: answer.etag });
        return answer.body;
      } catch (err) {
        if (err instanceof ApiError && err.status === 412) {
          const now = await reload();
          throw new Conflict(changedFields(before, now));
        }
        throw err;
      }
    },
    [path, reload],
  );

  return { data: state.data, etag: state.etag, error, loading, reload, write };
}

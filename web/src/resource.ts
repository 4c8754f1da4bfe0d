import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
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

type Reading<T> = { data: T | null; etag: string | null };

/**
 * The one If-Match write: a write of the resource at `path` (or one guarded by its ETag) with the
 * ETag of `last()`. On 412 it reads the resource again and throws a Conflict naming what changed.
 */
function writer<T>(path: string, last: () => Reading<T>, reread: () => Promise<T | null>, keep: (r: Reading<T>) => void): Doc<T>['write'] {
  return async <R>(method: string, target?: string, body?: unknown, opts: { replace?: boolean; raw?: Blob } = {}): Promise<R> => {
    const before = last();
    try {
      const answer = await call<R>(method, target ?? path, { body, raw: opts.raw, headers: before.etag ? { 'if-match': before.etag } : {} });
      if (opts.replace) keep({ data: answer.body as unknown as T, etag: answer.etag });
      return answer.body;
    } catch (err) {
      if (err instanceof ApiError && err.status === 412) throw new Conflict(changedFields(before.data, await reread()));
      throw err;
    }
  };
}

/**
 * A resource read now, outside a page's `useDoc` (a row of a list, which is read without its
 * ETag), with the same `write`. `missing`: a 404 reads as nothing yet, written without If-Match.
 * `anyType`: the resource is not JSON (an image); only its ETag is kept.
 */
export async function openDoc<T>(path: string, opts: { missing?: boolean; anyType?: boolean } = {}): Promise<Reading<T> & { write: Doc<T>['write'] }> {
  const read = async (): Promise<Reading<T>> => {
    try {
      const { body, etag } = await call<T>('GET', path, { anyType: opts.anyType });
      return { data: body, etag };
    } catch (err) {
      if (opts.missing && err instanceof ApiError && err.status === 404) return { data: null, etag: null };
      throw err;
    }
  };
  let state = await read();
  const write = writer<T>(
    path,
    () => state,
    async () => {
      state = await read();
      return state.data;
    },
    (r) => {
      state = r;
    },
  );
  return { ...state, write };
}

/** One resource read with its ETag, so that writes can send `If-Match`. */
export function useDoc<T>(path: string): Doc<T> {
  const [state, setState] = useState<Reading<T>>({ data: null, etag: null });
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

  const write = useMemo(() => writer<T>(path, () => latest.current, reload, setState), [path, reload]);

  return { data: state.data, etag: state.etag, error, loading, reload, write };
}

import { useEffect, useRef, useState } from 'react';
import { API, ApiError, get } from './api.ts';

export type StreamStatus = 'connecting' | 'live' | 'reconnecting' | 'closed';

export interface Seqd {
  seq: number;
}

/**
 * Follows a server-sent event stream of numbered items (`id:` = seq). EventSource carries the
 * session cookie (same origin) and resumes by itself with `Last-Event-ID` after a dropped
 * connection; items are kept in seq order without repeats. When the server refuses the stream
 * (EventSource then gives up), the same route read as JSON names the problem.
 */
export function useSeqStream<T extends Seqd>(path: string | null, events: readonly string[], onItem?: (item: T) => void) {
  const [items, setItems] = useState<T[]>([]);
  const [status, setStatus] = useState<StreamStatus>('connecting');
  const [error, setError] = useState<unknown>(null);
  const listener = useRef(onItem);
  listener.current = onItem;

  useEffect(() => {
    setItems([]);
    setError(null);
    if (!path) return;
    setStatus('connecting');
    const source = new EventSource(API + path, { withCredentials: true });
    const seen = new Set<number>();
    const take = (e: MessageEvent<string>) => {
      let item: T;
      try {
        item = JSON.parse(e.data) as T;
      } catch {
        return;
      }
      if (seen.has(item.seq)) return;
      seen.add(item.seq);
      setItems((prev) => {
        const next = [...prev, item];
        if (prev.length > 0 && prev[prev.length - 1].seq > item.seq) next.sort((a, b) => a.seq - b.seq);
        return next;
      });
      listener.current?.(item);
    };
    for (const name of events) source.addEventListener(name, take as EventListener);
    source.onmessage = take;
    source.onopen = () => {
      setStatus('live');
      setError(null);
    };
    source.onerror = () => {
      if (source.readyState === EventSource.CLOSED) {
        setStatus('closed');
        // EventSource does not expose the answer: read the route once to say why.
        get<unknown>(path).then(
          () => setError(new ApiError(0, 'the live stream of this run was refused; reload the page to try again')),
          (err: unknown) => setError(err),
        );
      } else setStatus('reconnecting');
    };
    return () => source.close();
  }, [path, events]);

  return { items, status, error };
}

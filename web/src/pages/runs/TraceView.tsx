import { useEffect, useState } from 'react';
import { get } from '../../api.ts';
import { ProblemNote } from '../../ui.tsx';
import type { Trace, TraceSpan } from './types.ts';

interface Bar {
  span: TraceSpan;
  depth: number;
  offset: number;
}

/** Spans ordered as a tree (children under their parent, each level by start time), with depth and start offset. */
export function layOut(spans: TraceSpan[]): { bars: Bar[]; total: number } {
  if (spans.length === 0) return { bars: [], total: 0 };
  const start = (s: TraceSpan) => Date.parse(s.start_time);
  const t0 = Math.min(...spans.map(start));
  const end = Math.max(...spans.map((s) => start(s) + s.duration_ms));
  const ids = new Set(spans.map((s) => s.span_id));
  const children = new Map<string | null, TraceSpan[]>();
  for (const s of spans) {
    const parent = s.parent_span_id && ids.has(s.parent_span_id) ? s.parent_span_id : null;
    children.set(parent, [...(children.get(parent) ?? []), s]);
  }
  const bars: Bar[] = [];
  const walk = (parent: string | null, depth: number) => {
    for (const s of (children.get(parent) ?? []).sort((a, b) => start(a) - start(b))) {
      bars.push({ span: s, depth, offset: start(s) - t0 });
      walk(s.span_id, depth + 1);
    }
  };
  walk(null, 0);
  return { bars, total: Math.max(1, end - t0) };
}

const ms = (n: number) => (n >= 1000 ? `${(n / 1000).toFixed(n >= 10_000 ? 0 : 1)} s` : `${Math.round(n)} ms`);

/** The run's spans as a timeline: one row per span, indented under its parent, its bar placed in the run's time. */
export function TraceView({ id, jaegerUrl, refreshKey }: { id: string; jaegerUrl: string | null; refreshKey: string }) {
  const [trace, setTrace] = useState<Trace | null>(null);
  const [error, setError] = useState<unknown>(null);

  useEffect(() => {
    let current = true;
    get<Trace>(`/runs/${encodeURIComponent(id)}/trace`).then(
      (t) => {
        if (!current) return;
        setTrace(t);
        setError(null);
      },
      (err: unknown) => current && setError(err),
    );
    return () => {
      current = false;
    };
  }, [id, refreshKey]);

  if (error !== null) return <ProblemNote error={error} />;
  if (trace === null) return <p className="muted">Loading…</p>;
  if (trace.spans.length === 0)
    return <p className="muted">No spans for this run: the trace store (SERVICE_JAEGER_URL) is not configured, does not answer, or has not received this trace yet.</p>;
  const { bars, total } = layOut(trace.spans);
  return (
    <>
      {jaegerUrl && (
        <p>
          <a href={jaegerUrl} rel="noreferrer" target="_blank">
            Open in Jaeger
          </a>
        </p>
      )}
      <ol className="trace" aria-label="trace">
        {bars.map(({ span, depth, offset }) => (
          <li key={span.span_id} className="trace-row" title={`${span.name}: starts at +${ms(offset)}, takes ${ms(span.duration_ms)}`}>
            <span className="trace-name" style={{ paddingLeft: `${depth * 0.9}rem` }}>
              {span.name}
            </span>
            <span className="trace-lane">
              <span className="trace-bar" style={{ left: `${(offset / total) * 100}%`, width: `${Math.max(0.4, (span.duration_ms / total) * 100)}%` }} />
            </span>
            <span className="trace-ms">{ms(span.duration_ms)}</span>
          </li>
        ))}
      </ol>
    </>
  );
}

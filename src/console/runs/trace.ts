/**
 * Reads a run's spans from a Jaeger query service (`SERVICE_JAEGER_URL`): `GET /api/traces/{id}`.
 * Anything but a trace (no store, no answer, no such trace, a body that is not Jaeger's) is an
 * empty list, as the contract says.
 */
export interface TraceSpan {
  trace_id: string;
  span_id: string;
  parent_span_id: string | null;
  name: string;
  start_time: string;
  duration_ms: number;
  attributes: Record<string, unknown>;
}

export interface TraceReader {
  spans(traceId: string): Promise<TraceSpan[]>;
}

export function createTraceReader(opts: { jaegerUrl: string | null; timeoutMs?: number; onError?: (err: unknown) => void }): TraceReader {
  return {
    async spans(traceId) {
      if (!opts.jaegerUrl || !/^[0-9a-f]{16,32}$/.test(traceId)) return [];
      try {
        const res = await fetch(`${opts.jaegerUrl.replace(/\/+$/, '')}/api/traces/${traceId}`, { signal: AbortSignal.timeout(opts.timeoutMs ?? 3000) });
        if (!res.ok) return [];
        const body = (await res.json()) as { data?: Array<{ spans?: any[] }> };
        const spans = body.data?.[0]?.spans;
        if (!Array.isArray(spans)) return [];
        return spans
          .filter((s) => typeof s?.spanID === 'string' && typeof s?.operationName === 'string' && Number.isFinite(s?.startTime))
          .map((s) => ({
            trace_id: String(s.traceID ?? traceId),
            span_id: s.spanID,
            parent_span_id: (Array.isArray(s.references) ? s.references.find((r: any) => r?.refType === 'CHILD_OF')?.spanID : null) ?? null,
            name: s.operationName,
            start_time: new Date(Number(s.startTime) / 1000).toISOString(),
            duration_ms: Number(s.duration ?? 0) / 1000,
            attributes: Object.fromEntries((Array.isArray(s.tags) ? s.tags : []).filter((t: any) => typeof t?.key === 'string').map((t: any) => [t.key, t.value])),
          }))
          .sort((a, b) => (a.start_time < b.start_time ? -1 : 1));
      } catch (err) {
        opts.onError?.(err);
        return [];
      }
    },
  };
}

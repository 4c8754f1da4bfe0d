import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as a test describes it; times in milliseconds from the trace's start. */
export interface FakeSpan {
  id: string;
  parent?: string;
  name: string;
  startMs: number;
  durationMs: number;
  tags?: Record<string, string | number | boolean>;
}

/**
 * Jaeger's query service as far as the console reads it: `GET /api/traces/{traceID}` answers
 * `{data: [{traceID, spans, processes}], errors}` with span times in microseconds since the epoch
 * and parents as `CHILD_OF` references, and 404 with Jaeger's error body for an unknown trace.
 */
export async function startJaegerQuery(): Promise<{ url: string; put(traceId: string, spans: FakeSpan[], startedAt?: Date): void; close(): Promise<void> }> {
  const traces = new Map<string, unknown>();
  const server = http.createServer((req, res) => {
    const m = /^\/api\/traces\/([0-9a-f]+)$/.exec(new URL(req.url ?? '/', 'http://x').pathname);
    const trace = m && req.method === 'GET' ? traces.get(m[1]) : undefined;
    if (!trace) {
      res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ data: null, total: 0, limit: 0, offset: 0, errors: [{ code: 404, msg: 'trace not found' }] }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [trace], total: 0, limit: 0, offset: 0, errors: null }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    put(traceId, spans, startedAt = new Date()) {
      const t0 = startedAt.getTime() * 1000;
      traces.set(traceId, {
        traceID: traceId,
        spans: spans.map((s) => ({
          traceID: traceId,
          spanID: s.id,
          operationName: s.name,
          references: s.parent ? [{ refType: 'CHILD_OF', traceID: traceId, spanID: s.parent }] : [],
          startTime: t0 + Math.round(s.startMs * 1000),
          duration: Math.round(s.durationMs * 1000),
          tags: Object.entries(s.tags ?? {}).map(([key, value]) => ({ key, type: typeof value === 'number' ? 'int64' : typeof value === 'boolean' ? 'bool' : 'string', value })),
          logs: [],
          processID: 'p1',
          warnings: null,
        })),
        processes: { p1: { serviceName: 'crewhouse', tags: [] } },
        warnings: null,
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/**
 * A fake OpenTelemetry collector with Jaeger's query API, for tests: it takes OTLP/HTTP with the
 * JSON encoding (`POST /v1/traces`, `Content-Type: application/json`, an `ExportTraceServiceRequest`,
 * checked as strictly as the protocol's JSON mapping says: hex ids, nanosecond strings, typed
 * attribute values) and answers `GET /api/traces/{id}` as Jaeger's query service does, from what
 * it took. `down` makes it refuse exports with 503, as a collector that is overloaded or
 * restarting does.
 */
import http from 'node:http';
import type net from 'node:net';

export interface CollectedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  kind: number;
  startNs: bigint;
  endNs: bigint;
  status: number;
  attributes: Record<string, unknown>;
  resource: Record<string, unknown>;
}

export interface FakeCollector {
  url: string;
  spans: CollectedSpan[];
  /** Export requests refused while down. */
  refused: number;
  /** Export requests taken. */
  accepted: number;
  down: boolean;
  close(): Promise<void>;
}

const HEX32 = /^[0-9a-f]{32}$/;
const HEX16 = /^[0-9a-f]{16}$/;
const NANOS = /^[0-9]{1,20}$/;

function valueOf(v: any): unknown {
  if (!v || typeof v !== 'object') throw new Error('an attribute value is not an AnyValue');
  if ('stringValue' in v) return String(v.stringValue);
  if ('boolValue' in v) return Boolean(v.boolValue);
  if ('intValue' in v) {
    if (!/^-?[0-9]+$/.test(String(v.intValue))) throw new Error('intValue is not an integer');
    return Number(v.intValue);
  }
  if ('doubleValue' in v) return Number(v.doubleValue);
  if ('arrayValue' in v) return (v.arrayValue?.values ?? []).map(valueOf);
  throw new Error(`unknown AnyValue ${JSON.stringify(v)}`);
}

function attributesOf(list: any): Record<string, unknown> {
  if (list === undefined) return {};
  if (!Array.isArray(list)) throw new Error('attributes is not a list');
  return Object.fromEntries(list.map((a: any) => [String(a.key), valueOf(a.value)]));
}

/** The spans of an export request, or an error naming what breaks the JSON mapping. */
export function parseExport(body: any): CollectedSpan[] {
  if (!body || !Array.isArray(body.resourceSpans)) throw new Error('resourceSpans is missing');
  const out: CollectedSpan[] = [];
  for (const rs of body.resourceSpans) {
    const resource = attributesOf(rs.resource?.attributes);
    for (const ss of rs.scopeSpans ?? []) {
      for (const s of ss.spans ?? []) {
        if (!HEX32.test(s.traceId)) throw new Error(`traceId ${s.traceId} is not 32 hex digits`);
        if (!HEX16.test(s.spanId)) throw new Error(`spanId ${s.spanId} is not 16 hex digits`);
        if (s.parentSpanId !== undefined && s.parentSpanId !== '' && !HEX16.test(s.parentSpanId)) throw new Error(`parentSpanId ${s.parentSpanId} is not 16 hex digits`);
        if (!NANOS.test(s.startTimeUnixNano) || !NANOS.test(s.endTimeUnixNano)) throw new Error('times must be nanosecond strings');
        if (typeof s.name !== 'string' || !s.name) throw new Error('a span has no name');
        out.push({
          traceId: s.traceId,
          spanId: s.spanId,
          parentSpanId: s.parentSpanId || null,
          name: s.name,
          kind: Number(s.kind ?? 0),
          startNs: BigInt(s.startTimeUnixNano),
          endNs: BigInt(s.endTimeUnixNano),
          status: Number(s.status?.code ?? 0),
          attributes: attributesOf(s.attributes),
          resource,
        });
      }
    }
  }
  return out;
}

/** Jaeger's JSON for one span (what its query service's `/api/traces/{id}` lists). */
function jaegerSpan(s: CollectedSpan) {
  return {
    traceID: s.traceId,
    spanID: s.spanId,
    operationName: s.name,
    references: s.parentSpanId ? [{ refType: 'CHILD_OF', traceID: s.traceId, spanID: s.parentSpanId }] : [],
    startTime: Number(s.startNs / 1000n),
    duration: Number((s.endNs - s.startNs) / 1000n),
    tags: Object.entries(s.attributes).map(([key, value]) => ({ key, type: typeof value === 'number' ? 'int64' : typeof value === 'boolean' ? 'bool' : 'string', value: Array.isArray(value) ? JSON.stringify(value) : value })),
    processID: 'p1',
  };
}

export async function startFakeCollector(): Promise<FakeCollector> {
  const state = { spans: [] as CollectedSpan[], refused: 0, accepted: 0, down: false };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://collector');
      if (req.method === 'POST' && url.pathname === '/v1/traces') {
        if (state.down) {
          state.refused++;
          res.writeHead(503, { 'content-type': 'application/json' }).end('{"code":14,"message":"unavailable"}');
          return;
        }
        if (!String(req.headers['content-type'] ?? '').startsWith('application/json')) {
          res.writeHead(415).end();
          return;
        }
        try {
          const spans = parseExport(JSON.parse(Buffer.concat(chunks).toString('utf8')));
          state.spans.push(...spans);
          state.accepted++;
          res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
        } catch (err) {
          res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify({ code: 3, message: (err as Error).message }));
        }
        return;
      }
      const m = /^\/api\/traces\/([0-9a-f]+)$/.exec(url.pathname);
      if (req.method === 'GET' && m) {
        const spans = state.spans.filter((s) => s.traceId === m[1]);
        if (!spans.length) {
          res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ data: null, errors: [{ code: 404, msg: 'trace not found' }] }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ data: [{ traceID: m[1], spans: spans.map(jaegerSpan), processes: { p1: { serviceName: String(spans[0].resource['service.name'] ?? '') } } }] }));
        return;
      }
      res.writeHead(404).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as net.AddressInfo).port;
  const collector: FakeCollector = {
    url: `http://127.0.0.1:${port}`,
    get spans() {
      return state.spans;
    },
    get refused() {
      return state.refused;
    },
    get accepted() {
      return state.accepted;
    },
    get down() {
      return state.down;
    },
    set down(v: boolean) {
      state.down = v;
    },
    async close() {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    },
  };
  return collector;
}

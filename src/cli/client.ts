import { ApiError, CliError } from './errors.ts';
import type { Profile } from './profile.ts';

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface Answer<T = any> {
  status: number;
  etag: string | null;
  location: string | null;
  body: T;
}

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** The largest page the API gives; lists are read in pages of it and followed to the end. */
const PAGE = 200;

/** Path segments are encoded one by one, so a name never changes the route. */
export const seg = (s: string | number) => encodeURIComponent(String(s));

/** The Console API through HTTP with a bearer token: problems become ApiError, lists are followed. */
export class ApiClient {
  readonly base: string;
  readonly #token: string;

  constructor(profile: Profile) {
    this.base = `${profile.url}/api/v1`;
    this.#token = profile.token;
  }

  url(path: string, query: Query = {}): string {
    const u = new URL(this.base + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, String(v));
    return u.toString();
  }

  async #fetch(url: string, init: RequestInit): Promise<Response> {
    try {
      return await fetch(url, init);
    } catch (err) {
      if (init.signal?.aborted) throw err;
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      // The URL is safe to show; the token is in a header and never part of it.
      throw new ApiError(0, { detail: `cannot reach ${new URL(url).origin}: ${cause?.code ?? cause?.message ?? (err as Error).message}` });
    }
  }

  /** One request; a problem answer throws ApiError with the problem. */
  async request<T = any>(method: string, path: string, opts: { query?: Query; body?: unknown; ifMatch?: string | null; headers?: Record<string, string>; raw?: Buffer; contentType?: string } = {}): Promise<Answer<T>> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, accept: 'application/json', ...opts.headers };
    let body: Uint8Array | string | undefined;
    if (opts.raw) {
      body = new Uint8Array(opts.raw);
      headers['content-type'] = opts.contentType ?? 'application/octet-stream';
    } else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] = 'application/json';
    }
    if (opts.ifMatch) headers['if-match'] = opts.ifMatch;
    const res = await this.#fetch(this.url(path, opts.query), { method, headers, body });
    const text = await res.text();
    const type = res.headers.get('content-type') ?? '';
    let parsed: any = text;
    if (type.includes('json') && text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = text;
      }
    }
    if (!res.ok) {
      const problem = parsed && typeof parsed === 'object' ? parsed : { detail: `${method} ${path} answered ${res.status} ${res.statusText}${text && !type.includes('html') ? `: ${text.slice(0, 200)}` : ''}` };
      throw new ApiError(res.status, problem);
    }
    return { status: res.status, etag: res.headers.get('etag'), location: res.headers.get('location'), body: parsed as T };
  }

  async get<T = any>(path: string, query?: Query): Promise<T> {
    return (await this.request<T>('GET', path, { query })).body;
  }

  /** A resource and its ETag, for a write that needs If-Match. */
  async read<T = any>(path: string): Promise<{ body: T; etag: string }> {
    const a = await this.request<T>('GET', path);
    if (!a.etag) throw new ApiError(a.status, { detail: `GET ${path} sent no ETag, so the write cannot be made safely` });
    return { body: a.body, etag: a.etag };
  }

  /**
   * A write of an existing resource: reads it for its ETag, then sends it as If-Match, so a
   * change someone made in between is a 412 rather than lost.
   */
  async write<T = any>(method: string, path: string, body?: unknown, readPath = path): Promise<Answer<T>> {
    const { etag } = await this.read(readPath);
    return this.request<T>(method, path, { body, ifMatch: etag });
  }

  /** Every item of a list, following `next_cursor`; `limit` stops early. */
  async list<T = any>(path: string, query: Query = {}, limit?: number): Promise<T[]> {
    const items: T[] = [];
    // A list whose cursor means something to a person (a run's posts after a seq) starts there.
    let cursor: string | null = query.cursor === undefined || query.cursor === null ? null : String(query.cursor);
    do {
      const want = limit === undefined ? PAGE : Math.min(PAGE, limit - items.length);
      const page: { items: T[]; next_cursor: string | null } = await this.get(path, { ...query, limit: want, cursor });
      items.push(...page.items);
      cursor = page.next_cursor;
    } while (cursor && (limit === undefined || items.length < limit));
    return items;
  }

  /**
   * A `text/event-stream` of a route, event by event, until the server ends it or `signal`
   * aborts. `lastEventId` resumes after the event of that id.
   */
  async *events(path: string, opts: { query?: Query; lastEventId?: string | null; signal?: AbortSignal } = {}): AsyncGenerator<SseEvent> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}`, accept: 'text/event-stream' };
    if (opts.lastEventId) headers['last-event-id'] = opts.lastEventId;
    const res = await this.#fetch(this.url(path, opts.query), { headers, signal: opts.signal });
    if (!res.ok) {
      const text = await res.text();
      let problem: ApiError['problem'];
      try {
        problem = JSON.parse(text);
      } catch {
        problem = { detail: `GET ${path} answered ${res.status}` };
      }
      throw new ApiError(res.status, problem);
    }
    if (!res.body) return;
    const decoder = new TextDecoder();
    let buffer = '';
    let event: SseEvent = { id: null, event: 'message', data: '' };
    let hasData = false;
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r?\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer[nl] === '\r' ? 2 : 1));
        if (line === '') {
          if (hasData) yield event;
          event = { id: null, event: 'message', data: '' };
          hasData = false;
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') event.id = value;
        else if (field === 'event') event.event = value;
        else if (field === 'data') {
          event.data = hasData ? `${event.data}\n${value}` : value;
          hasData = true;
        }
      }
    }
  }
}

/** A positive integer argument, or a usage error naming it. */
export function intArg(name: string, raw: string | undefined, opts: { min?: number } = {}): number | undefined {
  if (raw === undefined) return undefined;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < (opts.min ?? 1)) throw new CliError(`${name} must be an integer of at least ${opts.min ?? 1}, not "${raw}"`);
  return n;
}

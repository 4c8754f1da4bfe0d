/** The Console API from the browser: the session cookie rides along, unsafe requests carry the CSRF token. */

export const API = '/api/v1';

import type { SessionInfo } from './types.ts';

export type { Role, SessionInfo, SessionUser } from './types.ts';

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

/** An answer that is not a success: the problem document's detail, or a plain description. */
export class ApiError extends Error {
  readonly status: number;
  readonly errors: Array<{ field: string; message: string }>;

  constructor(status: number, detail: string, errors: Array<{ field: string; message: string }> = []) {
    super(detail);
    this.status = status;
    this.errors = errors;
  }
}

let csrfToken: string | null = null;
let onSessionEnded: (() => void) | null = null;

/** Remembers the CSRF token of the browser session (from log-in, setup or GET /session). */
export function rememberSession(info: SessionInfo | null) {
  csrfToken = info?.csrf_token ?? null;
}

/** Called when a signed-in request answers 401: the session ended elsewhere or expired. */
export function whenSessionEnds(fn: (() => void) | null) {
  onSessionEnded = fn;
}

const UNSAFE = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

export interface Answer<T> {
  status: number;
  body: T;
  etag: string | null;
}

export async function call<T = unknown>(
  method: string,
  path: string,
  opts: { body?: unknown; raw?: Blob; headers?: Record<string, string>; quietUnauthorized?: boolean; /** The answer may be any type (an image): its body is not read. */ anyType?: boolean } = {},
): Promise<Answer<T>> {
  const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
  if (UNSAFE.has(method) && csrfToken) headers['x-console-csrf'] = csrfToken;
  const init: RequestInit = { method, headers, credentials: 'same-origin' };
  if (opts.raw !== undefined) {
    headers['content-type'] = opts.raw.type || 'application/octet-stream';
    init.body = opts.raw;
  } else if (opts.body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = JSON.stringify(opts.body);
  }
  let res: Response;
  try {
    res = await fetch(API + path, init);
  } catch {
    throw new ApiError(0, 'the Console cannot be reached; check the connection and try again');
  }
  const type = res.headers.get('content-type') ?? '';
  const json = type.includes('json');
  const body: unknown = json && res.status !== 204 ? await res.json().catch(() => null) : null;
  if (!res.ok) {
    const p = (body ?? {}) as { detail?: unknown; title?: unknown; errors?: unknown };
    const detail = typeof p.detail === 'string' ? p.detail : typeof p.title === 'string' ? p.title : `the server answered ${res.status} ${res.statusText}`;
    const errors = Array.isArray(p.errors) ? (p.errors as Array<{ field: string; message: string }>) : [];
    if (res.status === 401 && !opts.quietUnauthorized && onSessionEnded) onSessionEnded();
    throw new ApiError(res.status, detail, errors);
  }
  if (res.status !== 204 && !json && !opts.anyType) {
    // The route is not served by the API (yet): whatever answered is not the Console API.
    throw new ApiError(res.status, `${method} ${API}${path} is not available on this deployment (the answer was not JSON)`);
  }
  return { status: res.status, body: body as T, etag: res.headers.get('etag') };
}

export const get = <T>(path: string) => call<T>('GET', path).then((a) => a.body);

/** A path segment: names may hold characters a URL treats specially. */
export const seg = (s: string | number) => encodeURIComponent(String(s));

/** Every item of a list, following `next_cursor` (the catalogues the forms pick from are short). */
export async function getAll<T>(path: string, max = 1000): Promise<T[]> {
  const items: T[] = [];
  let cursor: string | null = null;
  do {
    const sep = path.includes('?') ? '&' : '?';
    const page: Page<T> = await get<Page<T>>(`${path}${sep}limit=200${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor && items.length < max);
  return items;
}

/** The field problems of a failed request that name `field` or something inside it. */
export function fieldErrors(err: unknown, field: string): string[] {
  if (!(err instanceof ApiError)) return [];
  return err.errors.filter((e) => e.field === field || e.field.startsWith(`${field}.`) || e.field.startsWith(`${field}/`) || e.field.startsWith(`${field}[`)).map((e) => e.message);
}

/** A problem as one line: the detail, then each named field. */
export function describe(err: unknown): string {
  if (err instanceof ApiError) {
    // Each problem once: the detail often says the fields' problems already.
    const fields = err.errors
      .filter((e) => !err.message.includes(e.message))
      .map((e) => `${e.field}: ${e.message}`)
      .join('; ');
    return fields ? `${err.message} (${fields})` : err.message;
  }
  return err instanceof Error ? err.message : String(err);
}

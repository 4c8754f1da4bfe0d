import crypto from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { problems } from '../errors/problems.ts';

/**
 * The strong ETag of a row version. A resource whose body also shows what is derived at read
 * time (a team's state, its active runs, its spend today) passes that body as `shown`: the tag
 * is then `"<row version>.<digest of the body>"`, so it changes whenever the body would, and a
 * cache revalidating with If-None-Match never keeps a stale body. If-Match compares the row
 * version only (see requireIfMatch): a write is refused as stale when the resource itself
 * changed, not because a run started or money was spent meanwhile.
 */
export function etagOf(rowVersion: number | string, shown?: unknown): string {
  if (shown === undefined) return `"${rowVersion}"`;
  return `"${rowVersion}.${crypto.createHash('sha256').update(JSON.stringify(shown)).digest('hex').slice(0, 16)}"`;
}

/** Sets the ETag header of a single-resource answer (of its body `shown` too, when the body shows derived values). */
export function setEtag(reply: FastifyReply, rowVersion: number | string, shown?: unknown): void {
  reply.header('etag', etagOf(rowVersion, shown));
}

/**
 * The row version a write of an existing resource expects: 428 without If-Match, but only once
 * `mustExist` (the read of the addressed resource, which answers 404 when it is not there) has
 * passed: a client learns that the resource does not exist before being told to send a
 * precondition for it. The read runs only when If-Match is missing. An ETag that is not one of
 * ours can never match, so it becomes a version no row has (412); a value that is not one ETag
 * (`*`, a list) is a 400.
 */
export async function requireIfMatch(request: FastifyRequest, mustExist: () => Promise<unknown>): Promise<number> {
  if (request.headers['if-match'] === undefined || request.headers['if-match'] === '') {
    await mustExist();
    throw problems.preconditionRequired();
  }
  return ifMatchVersion(request);
}

function ifMatchVersion(request: FastifyRequest): number {
  const raw = request.headers['if-match']!;
  if (raw === '') throw problems.preconditionRequired();
  const value = String(raw).trim();
  // The row version, with or without the digest of a body showing derived values (etagOf).
  const match = /^"(\d{1,15})(?:\.[0-9a-f]{16})?"$/.exec(value);
  if (match) return Number(match[1]);
  // Another ETag (a weak one, or one we never gave) can never match: stale (412). `*` or a list
  // would be a different question than "is it still the version I read?", so it is refused.
  if (/^(W\/)?"[^",]*"$/.test(value)) return -1;
  throw problems.badRequest('If-Match must be one ETag as a GET of the resource gave it (such as "12"); * and lists of ETags are not accepted', [
    { field: 'If-Match', message: 'must be one ETag from a fresh GET' },
  ]);
}

/** If-Match when present (for create-or-replace routes), else null. */
export function optionalIfMatch(request: FastifyRequest): number | null {
  return request.headers['if-match'] === undefined ? null : ifMatchVersion(request);
}

import type { FastifyReply, FastifyRequest } from 'fastify';
import { problems } from '../errors/problems.ts';

/** The strong ETag of a row version. */
export function etagOf(rowVersion: number | string): string {
  return `"${rowVersion}"`;
}

/** Sets the ETag header of a single-resource answer. */
export function setEtag(reply: FastifyReply, rowVersion: number | string): void {
  reply.header('etag', etagOf(rowVersion));
}

/**
 * The row version a write of an existing resource expects: 428 without If-Match. A value
 * that is not one of our ETags can never match, so it becomes a version no row has (412).
 */
export function requireIfMatch(request: FastifyRequest): number {
  const raw = request.headers['if-match'];
  if (raw === undefined || raw === '') throw problems.preconditionRequired();
  const match = /^\s*"(\d{1,15})"\s*$/.exec(String(raw));
  return match ? Number(match[1]) : -1;
}

/** If-Match when present (for create-or-replace routes), else null. */
export function optionalIfMatch(request: FastifyRequest): number | null {
  return request.headers['if-match'] === undefined ? null : requireIfMatch(request);
}

import { sql } from 'kysely';
import { problems } from '../errors/problems.ts';

export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;

export type CursorValue = string | number;

/** Opaque cursor: the sort key of the last item of a page. */
export function encodeCursor(values: CursorValue[]): string {
  return Buffer.from(JSON.stringify(values)).toString('base64url');
}

/**
 * A key's type in a cursor: `time` is a timestamp as the list gave it out (ISO 8601, UTC, to the
 * millisecond), `digits` a bigint id given out as text.
 */
export type CursorKeyType = 'string' | 'number' | 'time' | 'digits';

const KEY_CHECKS: Record<CursorKeyType, (v: unknown) => boolean> = {
  string: (v) => typeof v === 'string',
  number: (v) => typeof v === 'number',
  time: (v) => typeof v === 'string' && isTime(v),
  digits: (v) => typeof v === 'string' && /^[0-9]{1,18}$/.test(v),
};

/** Half of a surrogate pair: with the `u` flag a whole pair is one code point, so only a lone half matches. */
const HALF_A_PAIR = /\p{Surrogate}/u;
const isTime = (v: string) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(v) && !Number.isNaN(Date.parse(v)) && new Date(v).toISOString() === v;

/**
 * Decodes a cursor made for `arity` keys, or for keys of the given types (`['time', 'string']`);
 * a cursor that is not one of ours is a 400 naming `cursor`. Give the types wherever a key is not
 * text: a value of another type would otherwise reach the database and fail there, without a field.
 * A key with NUL or half a surrogate pair (text the database cannot hold, so no list gave it out) is refused alike.
 */
export function decodeCursor(cursor: string | undefined, arity: number | CursorKeyType[]): CursorValue[] | null {
  const types = typeof arity === 'number' ? null : arity;
  const length = types ? types.length : (arity as number);
  if (cursor === undefined || cursor === '') return null;
  let values: unknown;
  try {
    values = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    values = undefined;
  }
  if (
    !Array.isArray(values) ||
    values.length !== length ||
    !values.every((v, i) => (types === null || KEY_CHECKS[types[i]!](v)) && ((typeof v === 'string' && v.length <= 512 && !v.includes('\u0000') && !HALF_A_PAIR.test(v)) || (typeof v === 'number' && Number.isFinite(v))))
  ) {
    throw problems.badRequest('cursor is not a cursor this list gave out', [{ field: 'cursor', message: 'not a valid cursor' }]);
  }
  return values as CursorValue[];
}

/**
 * Cuts a fetched `limit + 1` rows into a page: when the extra row is there, the last kept
 * row's key is the next cursor.
 */
export function toPage<R, I>(rows: R[], limit: number, keyOf: (row: R) => CursorValue[], present: (row: R) => I) {
  const more = rows.length > limit;
  const kept = more ? rows.slice(0, limit) : rows;
  return {
    items: kept.map(present),
    next_cursor: more ? encodeCursor(keyOf(kept[kept.length - 1])) : null,
  };
}

/**
 * A page of a list held whole in memory (a fixed catalogue, a team's links), in its given order:
 * the cursor is the key of the last item given out, as `keyset` makes it for a query.
 */
export function pageOfList<T, I>(all: readonly T[], keyOf: (item: T) => CursorValue[], present: (item: T) => I, query: { limit?: number; cursor?: string }) {
  const limit = limitOf(query);
  const first = all[0];
  const cursor = decodeCursor(query.cursor, first === undefined ? 1 : keyOf(first).map((v) => (typeof v === 'number' ? 'number' : 'string')));
  let start = 0;
  if (cursor) {
    const at = all.findIndex((item) => keyOf(item).every((v, i) => v === cursor[i]));
    if (at < 0) throw problems.badRequest('cursor is not a cursor this list gave out', [{ field: 'cursor', message: 'not a valid cursor' }]);
    start = at + 1;
  }
  return toPage(all.slice(start, start + limit + 1), limit, keyOf, present);
}

/** The limit of a list query with its default. */
export function limitOf(query: { limit?: number }): number {
  return query.limit ?? DEFAULT_LIMIT;
}

/**
 * Applies keyset pagination to a select: order by `columns` in one direction, start after
 * the cursor's key, fetch `limit + 1`. The columns must be unique together and indexed.
 */
export function keyset<Q>(qb: Q, columns: string[], direction: 'asc' | 'desc', cursor: CursorValue[] | null, limit: number): Q {
  let q = qb as any;
  if (cursor) {
    const op = direction === 'asc' ? sql.raw('>') : sql.raw('<');
    q = q.where(sql`(${sql.join(columns.map((c) => sql.ref(c)))}) ${op} (${sql.join(cursor)})`);
  }
  for (const c of columns) q = q.orderBy(c, direction);
  return q.limit(limit + 1) as Q;
}

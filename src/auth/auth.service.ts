/**
 * The auth module's public face: API tokens and browser sessions, over its own tables. It holds
 * no rules beyond these queries (the console's session and users modules hold them), so its
 * service is these functions, each taking the database or the caller's transaction.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.ts';
import { keyset, type CursorValue } from '../db/pagination.ts';

type Q = Kysely<Database> | Transaction<Database>;

/** A live API token by hash (its user is the users module's to tell). */
export function findToken(db: Q, tokenHash: string) {
  return db
    .selectFrom('api_tokens')
    .select(['api_tokens.user_id', 'api_tokens.id as token_id', 'api_tokens.last_used_at', 'api_tokens.kind', 'api_tokens.expires_at'])
    .where('api_tokens.token_hash', '=', tokenHash)
    .where('api_tokens.revoked_at', 'is', null)
    .where((eb) => eb.or([eb('api_tokens.expires_at', 'is', null), eb('api_tokens.expires_at', '>', sql<string>`now()`)]))
    .executeTakeFirst();
}

/** A live session by hash (its user is the users module's to tell). */
export function findSession(db: Q, tokenHash: string) {
  return db
    .selectFrom('sessions')
    .select(['sessions.user_id', 'sessions.id as session_id', 'sessions.csrf_token', 'sessions.expires_at'])
    .where('sessions.token_hash', '=', tokenHash)
    .where('sessions.revoked_at', 'is', null)
    .where('sessions.expires_at', '>', sql<string>`now()`)
    .executeTakeFirst();
}

export async function touchToken(db: Q, tokenId: number) {
  await db.updateTable('api_tokens').set({ last_used_at: sql`now()` }).where('id', '=', tokenId).execute();
}

export function insertToken(
  db: Q,
  row: { user_id: number; name: string; kind: 'api' | 'onboarding'; prefix: string; token_hash: string; expires_at: Date | null },
) {
  return db.insertInto('api_tokens').values(row).returningAll().executeTakeFirstOrThrow();
}

/** A user's live tokens, newest first, a keyset page (limit + 1 rows) after the cursor's id. */
export function listTokens(db: Q, userId: number, cursor: CursorValue[] | null, limit: number) {
  const q = db
    .selectFrom('api_tokens')
    .selectAll()
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where((eb) => eb.or([eb('expires_at', 'is', null), eb('expires_at', '>', sql<string>`now()`)]));
  return keyset(q, ['id'], 'desc', cursor, limit).execute();
}

export function revokeToken(db: Q, userId: number, tokenId: number) {
  return db
    .updateTable('api_tokens')
    .set({ revoked_at: sql`now()` })
    .where('id', '=', tokenId)
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .returningAll()
    .executeTakeFirst();
}

export function insertSession(db: Q, row: { user_id: number; token_hash: string; csrf_token: string; expires_at: Date }) {
  return db.insertInto('sessions').values(row).returningAll().executeTakeFirstOrThrow();
}

export async function revokeSession(db: Q, sessionId: number) {
  await db.updateTable('sessions').set({ revoked_at: sql`now()` }).where('id', '=', sessionId).execute();
}

/** Revokes every session and token of a user (the user was disabled). */
export async function revokeAllOf(db: Q, userId: number) {
  await db.updateTable('sessions').set({ revoked_at: sql`now()` }).where('user_id', '=', userId).where('revoked_at', 'is', null).execute();
  await db.updateTable('api_tokens').set({ revoked_at: sql`now()` }).where('user_id', '=', userId).where('revoked_at', 'is', null).execute();
}

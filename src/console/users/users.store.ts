import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { Role } from './users.tables.ts';

type Q = Kysely<Database> | Transaction<Database>;

export function getUser(db: Q, id: number) {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The users of some ids (those that exist). */
export function getUsers(db: Q, ids: number[]) {
  if (ids.length === 0) return Promise.resolve([]);
  return db.selectFrom('users').selectAll().where('id', 'in', ids).execute();
}

export function getUserByLogin(db: Q, login: string) {
  return db
    .selectFrom('users')
    .selectAll()
    .where((eb) => eb.or([eb(sql`lower(name)`, '=', login.toLowerCase()), eb(sql`lower(email)`, '=', login.toLowerCase())]))
    .orderBy('id')
    .executeTakeFirst();
}

export function listUsers(db: Q, cursor: CursorValue[] | null, limit: number) {
  return keyset(db.selectFrom('users').selectAll(), ['id'], 'asc', cursor, limit).execute();
}

export function insertUser(db: Q, row: { name: string; email: string | null; role: Role; password_hash?: string | null }) {
  return db.insertInto('users').values({ password_hash: null, ...row }).returningAll().executeTakeFirstOrThrow();
}

export async function countUsers(db: Q): Promise<number> {
  const r = await db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}

export async function countEnabledAdmins(db: Q, exceptId?: number): Promise<number> {
  let q = db.selectFrom('users').select((eb) => eb.fn.countAll<number>().as('n')).where('role', '=', 'admin').where('disabled', '=', false);
  if (exceptId !== undefined) q = q.where('id', '!=', exceptId);
  return Number((await q.executeTakeFirstOrThrow()).n);
}

export async function nameOrEmailTaken(db: Q, name: string | undefined, email: string | null | undefined, exceptId?: number) {
  let q = db.selectFrom('users').select(['id', 'name', 'email']);
  q = q.where((eb) => {
    const ors = [];
    if (name !== undefined) ors.push(eb(sql`lower(name)`, '=', name.toLowerCase()));
    if (email) ors.push(eb(sql`lower(email)`, '=', email.toLowerCase()));
    return ors.length ? eb.or(ors) : eb.val(false);
  });
  if (exceptId !== undefined) q = q.where('id', '!=', exceptId);
  return q.executeTakeFirst();
}

/** Stores a new setup token for a user and voids the user's earlier unused ones. */
export async function replaceSetupToken(db: Transaction<Database>, userId: number, tokenHash: string, expiresAt: Date) {
  await db.updateTable('setup_tokens').set({ used_at: sql`now()` }).where('user_id', '=', userId).where('used_at', 'is', null).execute();
  return db.insertInto('setup_tokens').values({ user_id: userId, token_hash: tokenHash, expires_at: expiresAt }).returningAll().executeTakeFirstOrThrow();
}

/** Marks a live setup token used and returns its user id; null when unknown, used or expired. */
export async function consumeSetupToken(db: Transaction<Database>, tokenHash: string): Promise<number | null> {
  const row = await db
    .updateTable('setup_tokens')
    .set({ used_at: sql`now()` })
    .where('token_hash', '=', tokenHash)
    .where('used_at', 'is', null)
    .where('expires_at', '>', sql<string>`now()`)
    .returning('user_id')
    .executeTakeFirst();
  return row?.user_id ?? null;
}

export async function setPassword(db: Q, userId: number, passwordHash: string) {
  await db
    .updateTable('users')
    .set({ password_hash: passwordHash, updated_at: sql`now()`, row_version: sql`nextval('row_version_seq')` })
    .where('id', '=', userId)
    .execute();
}

export async function markLogin(db: Q, userId: number) {
  await db.updateTable('users').set({ last_login_at: sql`now()` }).where('id', '=', userId).execute();
}

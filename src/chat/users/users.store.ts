import type { Insertable, Kysely, Transaction, Updateable } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { ChatTables } from '../chat.tables.ts';

type Q = Kysely<Database> | Transaction<Database>;
export type RealmRow = Awaited<ReturnType<typeof getRealm>> & {};
export type UserRow = Awaited<ReturnType<typeof getUser>> & {};

/** The columns a user object is made of (everything but credentials). */
export const USER_COLUMNS = [
  'id', 'realm_id', 'email', 'delivery_email', 'full_name', 'role', 'is_bot', 'bot_type', 'bot_owner_id', 'is_active',
  'is_imported_stub', 'is_deleted', 'timezone', 'avatar_source', 'avatar_version', 'avatar_hash', 'email_address_visibility',
  'presence_enabled', 'date_joined', 'date_joined_at_first_login',
] as const;

export function getRealm(db: Q, id: number) {
  return db.selectFrom('chat_realms').selectAll().where('id', '=', id).executeTakeFirst();
}

export function realmByStringId(db: Q, stringId: string) {
  return db.selectFrom('chat_realms').selectAll().where('string_id', '=', stringId).executeTakeFirst();
}

/** The oldest organization: the one a request reaches when its host names none. */
export function firstRealm(db: Q) {
  return db.selectFrom('chat_realms').selectAll().orderBy('id').limit(1).executeTakeFirst();
}

export function insertRealm(db: Q, values: Insertable<ChatTables['chat_realms']>) {
  return db.insertInto('chat_realms').values(values).returningAll().executeTakeFirstOrThrow();
}

export function updateRealm(db: Q, id: number, set: Updateable<ChatTables['chat_realms']>) {
  return db.updateTable('chat_realms').set(set).where('id', '=', id).returningAll().executeTakeFirstOrThrow();
}

export function getUser(db: Q, realmId: number, id: number) {
  return db.selectFrom('chat_users').select(USER_COLUMNS).where('realm_id', '=', realmId).where('id', '=', id).executeTakeFirst();
}

export function userByApiKeyHash(db: Q, hash: string) {
  return db.selectFrom('chat_users').select([...USER_COLUMNS]).where('api_key_hash', '=', hash).executeTakeFirst();
}

export function userByEmail(db: Q, realmId: number, email: string) {
  return db
    .selectFrom('chat_users')
    .select([...USER_COLUMNS, 'password_hash', 'api_key_sealed', 'api_key_key_id'])
    .where('realm_id', '=', realmId)
    .where((eb) => eb.or([eb(eb.fn('lower', ['delivery_email']), '=', email.toLowerCase()), eb(eb.fn('lower', ['email']), '=', email.toLowerCase())]))
    .executeTakeFirst();
}

export function sealedKeyOf(db: Q, id: number) {
  return db.selectFrom('chat_users').select(['api_key_sealed', 'api_key_key_id']).where('id', '=', id).executeTakeFirstOrThrow();
}

/** Users of an organization in id order, optionally only the given ids. */
export function listUsers(db: Q, realmId: number, ids?: number[]) {
  let q = db.selectFrom('chat_users').select(USER_COLUMNS).where('realm_id', '=', realmId);
  if (ids) q = q.where('id', 'in', ids.length ? ids : [0]);
  return q.orderBy('id').execute();
}

export function insertUser(db: Q, values: Insertable<ChatTables['chat_users']>) {
  return db.insertInto('chat_users').values(values).returning(USER_COLUMNS).executeTakeFirstOrThrow();
}

export function updateUser(db: Q, id: number, set: Updateable<ChatTables['chat_users']>) {
  return db.updateTable('chat_users').set(set).where('id', '=', id).returning(USER_COLUMNS).executeTakeFirstOrThrow();
}

export function countActiveOwners(db: Q, realmId: number) {
  return db
    .selectFrom('chat_users')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('realm_id', '=', realmId)
    .where('role', '=', 100)
    .where('is_active', '=', true)
    .where('is_bot', '=', false)
    .executeTakeFirstOrThrow()
    .then((r) => Number(r.n));
}

/** Custom profile field values of a realm's users (or of some of them), with each field's type. */
export function profileValues(db: Q, realmId: number, userIds?: number[]) {
  let q = db
    .selectFrom('chat_profile_values as v')
    .innerJoin('chat_profile_fields as f', 'f.id', 'v.field_id')
    .select(['v.user_id', 'v.field_id', 'v.value', 'v.rendered_value'])
    .where('f.realm_id', '=', realmId);
  if (userIds) q = q.where('v.user_id', 'in', userIds.length ? userIds : [0]);
  return q.execute();
}

export function setAvatar(db: Q, userId: number, contentType: string, image: Buffer) {
  return db
    .insertInto('chat_avatars')
    .values({ user_id: userId, content_type: contentType, image })
    .onConflict((oc) => oc.column('user_id').doUpdateSet({ content_type: contentType, image }))
    .execute();
}

export function avatarOf(db: Q, realmId: number, userId: number, hash: string) {
  return db
    .selectFrom('chat_avatars as a')
    .innerJoin('chat_users as u', 'u.id', 'a.user_id')
    .select(['a.content_type', 'a.image'])
    .where('u.realm_id', '=', realmId)
    .where('u.id', '=', userId)
    .where('u.avatar_hash', '=', hash)
    .executeTakeFirst();
}

export function deactivateBotsOf(db: Q, ownerId: number) {
  return db.updateTable('chat_users').set({ is_active: false }).where('bot_owner_id', '=', ownerId).where('is_active', '=', true).execute();
}

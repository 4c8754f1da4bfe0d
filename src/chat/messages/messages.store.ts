import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';

type Q = Kysely<Database> | Transaction<Database>;

export const MESSAGE_COLUMNS = [
  'm.id', 'm.realm_id', 'm.sender_id', 'm.type', 'm.stream_id', 'm.topic', 'm.dm_key', 'm.content', 'm.rendered_content', 'm.client',
  'm.date_sent', 'm.last_edit_time', 'm.last_moved_time', 'm.edit_history', 'm.row_version',
] as const;

/** A message with the viewer's flags (null: the viewer has no row for it, as for public history). */
export type MessageRow = Awaited<ReturnType<typeof messageForViewer>> & {};

/** The viewer's access condition: their own row, or history of a public channel they may read. */
export function accessSql(realmId: number, viewerId: number, guest: boolean) {
  const publicStreams = guest
    ? sql`select s.id from chat_streams s join chat_subscriptions sub on sub.stream_id = s.id and sub.user_id = ${viewerId} and sub.active where s.realm_id = ${realmId} and not s.invite_only`
    : sql`select s.id from chat_streams s where s.realm_id = ${realmId} and not s.invite_only`;
  return sql<boolean>`(um.user_id is not null or (m.type = 'stream' and m.stream_id in (${publicStreams})))`;
}

function base(db: Q, viewerId: number) {
  return db
    .selectFrom('chat_messages as m')
    .leftJoin('chat_user_messages as um', (j) => j.onRef('um.message_id', '=', 'm.id').on('um.user_id', '=', viewerId))
    .select([...MESSAGE_COLUMNS, 'um.flags as flags']);
}

export function messageForViewer(db: Q, realmId: number, id: number, viewerId: number, guest: boolean) {
  return base(db, viewerId).where('m.realm_id', '=', realmId).where('m.id', '=', id).where(accessSql(realmId, viewerId, guest)).executeTakeFirst();
}

/** Messages of the narrow on one side of an anchor: `before` newest first, `after` oldest first. */
export function messagesAround(
  db: Q,
  v: { realmId: number; viewerId: number; guest: boolean; conditions: ReturnType<typeof sql<boolean>>[]; anchor: number; side: 'before' | 'after'; inclusive: boolean; limit: number },
) {
  let q = base(db, v.viewerId).where('m.realm_id', '=', v.realmId).where(accessSql(v.realmId, v.viewerId, v.guest));
  for (const c of v.conditions) q = q.where(c);
  if (v.side === 'before') return q.where('m.id', v.inclusive ? '<=' : '<', v.anchor).orderBy('m.id', 'desc').limit(v.limit).execute();
  return q.where('m.id', v.inclusive ? '>=' : '>', v.anchor).orderBy('m.id', 'asc').limit(v.limit).execute();
}

export function firstUnread(db: Q, v: { realmId: number; viewerId: number; guest: boolean; conditions: ReturnType<typeof sql<boolean>>[] }) {
  let q = base(db, v.viewerId)
    .where('m.realm_id', '=', v.realmId)
    .where('um.user_id', 'is not', null)
    .where(sql<boolean>`um.flags & 1 = 0`);
  for (const c of v.conditions) q = q.where(c);
  return q.orderBy('m.id', 'asc').limit(1).executeTakeFirst();
}

export function reactionsOf(db: Q, ids: number[]) {
  if (!ids.length) return Promise.resolve([]);
  return db.selectFrom('chat_reactions').select(['message_id', 'user_id', 'emoji_name', 'emoji_code', 'reaction_type']).where('message_id', 'in', ids).orderBy('created_at').orderBy('user_id').execute();
}

export function usersByIds(db: Q, realmId: number, ids: number[]) {
  if (!ids.length) return Promise.resolve([]);
  return db
    .selectFrom('chat_users')
    .select(['id', 'email', 'delivery_email', 'full_name', 'avatar_source', 'avatar_hash', 'avatar_version', 'email_address_visibility', 'is_bot', 'is_active', 'role', 'bot_type'])
    .where('realm_id', '=', realmId)
    .where('id', 'in', ids)
    .execute();
}

export function streamNames(db: Q, ids: number[]) {
  if (!ids.length) return Promise.resolve([]);
  return db.selectFrom('chat_streams').select(['id', 'name']).where('id', 'in', ids).execute();
}

/** Active subscribers of a channel who are active users (the channels' own query). */
export { subscriberIds as activeSubscribers } from '../streams/streams.store.ts';

/** Who holds a row for these messages (the recipients events go to). */
export function recipientsOf(db: Q, ids: number[]) {
  if (!ids.length) return Promise.resolve([] as number[]);
  return db
    .selectFrom('chat_user_messages')
    .select('user_id')
    .distinct()
    .where('message_id', 'in', ids)
    .orderBy('user_id')
    .execute()
    .then((rows) => rows.map((r) => r.user_id));
}

export function insertUserMessages(db: Q, rows: Array<{ user_id: number; message_id: number; flags: number }>) {
  if (!rows.length) return Promise.resolve();
  return db
    .insertInto('chat_user_messages')
    .values(rows)
    .onConflict((oc) => oc.columns(['user_id', 'message_id']).doNothing())
    .execute()
    .then(() => undefined);
}

/** Sets or clears a flag bit on the viewer's rows; answers the ids whose flag changed. */
export async function changeFlag(db: Q, userId: number, bit: number, add: boolean, where: { ids?: number[]; streamId?: number; topic?: string; all?: boolean }) {
  let q = db
    .updateTable('chat_user_messages as um')
    .set({ flags: add ? sql`um.flags | ${bit}::integer` : sql`um.flags & ~(${bit}::integer)` })
    .where('um.user_id', '=', userId)
    .where(add ? sql<boolean>`um.flags & ${bit} = 0` : sql<boolean>`um.flags & ${bit} <> 0`);
  if (where.ids) q = q.where('um.message_id', 'in', where.ids.length ? where.ids : [0]);
  if (where.streamId !== undefined) {
    const inStream = sql<boolean>`um.message_id in (select id from chat_messages where stream_id = ${where.streamId}${where.topic !== undefined ? sql` and lower(topic) = ${where.topic.toLowerCase()}` : sql``})`;
    q = q.where(inStream);
  }
  const rows = await q.returning('um.message_id').execute();
  return rows.map((r) => r.message_id).sort((a, b) => a - b);
}

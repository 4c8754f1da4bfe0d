import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { writeEvents } from '../events/events.bus.ts';
import { chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import { FLAG } from '../messages/narrow.ts';
import { recordAudit } from '../../audit/audit.ts';
import { chatActor, type Caller } from '../users/users.service.ts';

type Q = Db | Transaction<Database>;

export type ChatMutingService = ReturnType<typeof createChatMutingService>;

/**
 * Muted users, as Zulip's: a person's muted users are stored, listed in /register's
 * `muted_users` (oldest first, with when), told to that person's queues as `muted_users` events,
 * and their messages reach the muter already read.
 */
export function createChatMutingService(deps: { db: Db; afterCommit: () => void }) {
  const { db, afterCommit } = deps;

  const mutedUsers = async (q: Q, userId: number) =>
    (await q.selectFrom('chat_muted_users').select(['muted_user_id', 'date_muted']).where('user_id', '=', userId).orderBy('date_muted').orderBy('muted_user_id').execute()).map((r) => ({
      id: r.muted_user_id,
      timestamp: Math.floor(new Date(r.date_muted).getTime() / 1000),
    }));

  /** The person to mute or unmute: anyone of the organization, active or not, bots too (as Zulip's access_user_by_id with allow_bots and allow_deactivated). */
  async function target(caller: Caller, id: number) {
    const u = await db.selectFrom('chat_users').select('id').where('realm_id', '=', caller.realm.id).where('id', '=', dbId(id)).executeTakeFirst();
    if (!u) throw chatErrors.noSuchUser();
    return u.id;
  }

  return {
    mutedUsers: (caller: Caller) => mutedUsers(db, caller.user.id),

    /** Of `recipients`, who has muted `senderId` (their copy of its new message arrives read). */
    async mutersOf(q: Q, senderId: number, recipients: number[]): Promise<Set<number>> {
      if (!recipients.length) return new Set();
      const rows = await q.selectFrom('chat_muted_users').select('user_id').where('muted_user_id', '=', senderId).where('user_id', 'in', recipients).execute();
      return new Set(rows.map((r) => r.user_id));
    },

    /** POST /users/me/muted_users/{muted_user_id}: mutes someone and marks their messages read. */
    async mute(caller: Caller, id: number) {
      if (id === caller.user.id) throw chatErrors.bad('Cannot mute self');
      const mutedId = await target(caller, id);
      await db.transaction().execute(async (trx) => {
        const added = await trx.insertInto('chat_muted_users').values({ user_id: caller.user.id, muted_user_id: mutedId }).onConflict((oc) => oc.doNothing()).returning('muted_user_id').executeTakeFirst();
        if (!added) throw chatErrors.bad('User already muted');
        await recordAudit(trx, chatActor(caller), 'chat.user.mute', { type: 'chat_user', id: mutedId });
        // As Zulip's do_mute_user: what they sent the muter so far is read.
        const read = await trx
          .updateTable('chat_user_messages as um')
          .set({ flags: sql`um.flags | ${FLAG.read}::integer` })
          .where('um.user_id', '=', caller.user.id)
          .where(sql<boolean>`um.flags & ${FLAG.read} = 0`)
          .where(sql<boolean>`um.message_id in (select id from chat_messages where sender_id = ${mutedId})`)
          .returning('um.message_id')
          .execute();
        const events = [{ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'muted_users', muted_users: await mutedUsers(trx, caller.user.id) } }];
        if (read.length) {
          const messages = read.map((r) => r.message_id).sort((a, b) => a - b);
          events.push({ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'update_message_flags', op: 'add', operation: 'add', flag: 'read', messages, all: false } as never });
        }
        await writeEvents(trx, events);
      });
      afterCommit();
    },

    /** DELETE /users/me/muted_users/{muted_user_id}. */
    async unmute(caller: Caller, id: number) {
      const mutedId = await target(caller, id);
      await db.transaction().execute(async (trx) => {
        const gone = await trx.deleteFrom('chat_muted_users').where('user_id', '=', caller.user.id).where('muted_user_id', '=', mutedId).returning('muted_user_id').executeTakeFirst();
        if (!gone) throw chatErrors.bad('User is not muted');
        await recordAudit(trx, chatActor(caller), 'chat.user.unmute', { type: 'chat_user', id: mutedId });
        await writeEvents(trx, [{ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'muted_users', muted_users: await mutedUsers(trx, caller.user.id) } }]);
      });
      afterCommit();
    },
  };
}

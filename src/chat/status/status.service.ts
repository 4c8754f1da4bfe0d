import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { ChatEmojiService } from '../emoji/emoji.service.ts';
import { writeEvents } from '../events/events.bus.ts';
import { chatErrors } from '../http/errors.ts';
import { chatActor, type Caller, type ChatUsersService } from '../users/users.service.ts';

export type ChatStatusService = ReturnType<typeof createChatStatusService>;

export function createChatStatusService(deps: { db: Db; emoji: ChatEmojiService; users: ChatUsersService }) {
  const { db, emoji, users } = deps;

  return {
    /**
     * POST /users/me/status, as Zulip's update_user_status_backend: only what is passed
     * changes; an empty emoji_name clears the emoji; `away` sets presence_enabled to its negation.
     */
    async update(caller: Caller, v: { away?: boolean; statusText?: string; emojiName?: string; emojiCode?: string; reactionType?: string }) {
      if (caller.user.is_bot) throw chatErrors.noBots();
      if (v.away === undefined && v.statusText === undefined && v.emojiName === undefined) throw chatErrors.bad('Client did not pass any new values.');
      let emojiCode = v.emojiCode;
      let reactionType = v.reactionType;
      if (v.emojiName === '') {
        emojiCode = '';
        reactionType = 'unicode_emoji';
      } else if (v.emojiName !== undefined) {
        if (emojiCode === undefined || reactionType === undefined) {
          const data = await emoji.emojiData(caller.realm.id, v.emojiName);
          emojiCode ??= data.code;
          reactionType ??= data.type;
        }
        await emoji.checkEmoji(caller.realm.id, v.emojiName, emojiCode, reactionType);
      } else if (reactionType || emojiCode) {
        throw chatErrors.bad('Client must pass emoji_name if they pass either emoji_code or reaction_type.');
      }

      const set: Record<string, string | Date> = { updated_at: new Date() };
      if (v.statusText !== undefined) set.status_text = v.statusText;
      if (v.emojiName !== undefined) Object.assign(set, { emoji_name: v.emojiName, emoji_code: emojiCode!, reaction_type: reactionType! });
      await db.transaction().execute(async (trx) => {
        await trx
          .insertInto('chat_user_status')
          .values({ user_id: caller.user.id, ...set, updated_at: new Date() })
          .onConflict((oc) => oc.column('user_id').doUpdateSet(set))
          .execute();
        if (v.away !== undefined) await trx.updateTable('chat_users').set({ presence_enabled: !v.away }).where('id', '=', caller.user.id).execute();
        // What changed, to everyone's queues (Zulip's user_status event).
        const event: Record<string, unknown> = { type: 'user_status', user_id: caller.user.id };
        if (v.away !== undefined) event.away = v.away;
        if (v.statusText !== undefined) event.status_text = v.statusText;
        if (v.emojiName !== undefined) Object.assign(event, { emoji_name: v.emojiName, emoji_code: emojiCode!, reaction_type: reactionType! });
        await writeEvents(trx, [{ realmId: caller.realm.id, users: null, payload: event }]);
        await recordAudit(trx, chatActor(caller), 'chat.status.update', { type: 'chat_user', id: caller.user.id }, { changed: Object.keys(set).filter((k) => k !== 'updated_at').concat(v.away !== undefined ? ['away'] : []) });
      });
    },

    /** GET /users/{user_id}/status: only the parts that are set. */
    async get(caller: Caller, userId: number) {
      const target = await users.accessUser(caller, userId, { allowDeactivated: false, allowBots: false, forAdmin: false });
      const row = await db.selectFrom('chat_user_status').selectAll().where('user_id', '=', target.id).executeTakeFirst();
      const status: Record<string, unknown> = {};
      if (!target.presence_enabled) status.away = true;
      if (row?.status_text) status.status_text = row.status_text;
      if (row?.emoji_name) Object.assign(status, { emoji_name: row.emoji_name, emoji_code: row.emoji_code, reaction_type: row.reaction_type });
      return status;
    },
  };
}

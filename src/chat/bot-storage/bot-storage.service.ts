import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import { chatErrors } from '../http/errors.ts';
import { chatActor, type Caller } from '../users/users.service.ts';

/** Zulip's USER_STATE_SIZE_LIMIT: keys and values of one bot, in characters. */
export const STORAGE_LIMIT = 10_000_000;

export type ChatBotStorageService = ReturnType<typeof createChatBotStorageService>;

export function createChatBotStorageService(deps: { db: Db }) {
  const { db } = deps;
  // Bots only since feature level 494.
  const botOnly = (caller: Caller) => {
    if (!caller.user.is_bot) throw chatErrors.botsOnly();
  };

  return {
    /** PUT /bot_storage: sets the given keys, within the size limit. */
    async put(caller: Caller, storage: Record<string, string>) {
      botOnly(caller);
      await db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_bot_storage:${caller.user.id}`);
        const rows = await trx.selectFrom('chat_bot_storage').select(['key', 'value']).where('bot_id', '=', caller.user.id).execute();
        const merged = new Map(rows.map((r) => [r.key, r.value]));
        for (const [k, v] of Object.entries(storage)) merged.set(k, v);
        let size = 0;
        for (const [k, v] of merged) size += k.length + v.length;
        if (size > STORAGE_LIMIT) throw chatErrors.bad(`Request exceeds storage limit by ${size - STORAGE_LIMIT} characters. The limit is ${STORAGE_LIMIT} characters.`);
        for (const [key, value] of Object.entries(storage)) {
          await trx
            .insertInto('chat_bot_storage')
            .values({ bot_id: caller.user.id, key, value })
            .onConflict((oc) => oc.columns(['bot_id', 'key']).doUpdateSet({ value }))
            .execute();
        }
        await recordAudit(trx, chatActor(caller), 'chat.bot_storage.update', { type: 'chat_user', id: caller.user.id }, { keys: Object.keys(storage).length });
      });
    },

    /** GET /bot_storage: the named keys (each must exist) or everything. */
    async get(caller: Caller, keys?: string[]) {
      botOnly(caller);
      let q = db.selectFrom('chat_bot_storage').select(['key', 'value']).where('bot_id', '=', caller.user.id);
      if (keys) q = q.where('key', 'in', keys.length ? keys : ['']);
      const rows = await q.orderBy('key').execute();
      const found = new Map(rows.map((r) => [r.key, r.value]));
      if (keys && keys.some((k) => !found.has(k))) throw chatErrors.bad('Key does not exist.');
      return Object.fromEntries(keys ? keys.map((k) => [k, found.get(k)!]) : found);
    },

    /** DELETE /bot_storage: the named keys, all or nothing, or every key when none are named. */
    async remove(caller: Caller, keys?: string[]) {
      botOnly(caller);
      await db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_bot_storage:${caller.user.id}`);
        if (keys) {
          const unique = [...new Set(keys)];
          const present = unique.length
            ? await trx.selectFrom('chat_bot_storage').select('key').where('bot_id', '=', caller.user.id).where('key', 'in', unique).execute()
            : [];
          if (present.length < unique.length) throw chatErrors.bad('Key does not exist.');
          if (unique.length) await trx.deleteFrom('chat_bot_storage').where('bot_id', '=', caller.user.id).where('key', 'in', unique).execute();
        } else {
          await trx.deleteFrom('chat_bot_storage').where('bot_id', '=', caller.user.id).execute();
        }
        await recordAudit(trx, chatActor(caller), 'chat.bot_storage.delete', { type: 'chat_user', id: caller.user.id }, { keys: keys ? keys.length : 'all' });
      });
    },
  };
}

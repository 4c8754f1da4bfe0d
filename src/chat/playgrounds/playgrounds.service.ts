import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import { chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import { isAdmin } from '../users/users.present.ts';
import { chatActor, type Caller } from '../users/users.service.ts';

export type ChatPlaygroundsService = ReturnType<typeof createChatPlaygroundsService>;

export function createChatPlaygroundsService(deps: { db: Db }) {
  const { db } = deps;
  const adminOnly = (caller: Caller) => {
    if (!isAdmin(caller.user)) throw chatErrors.adminRequired();
  };

  return {
    async list(caller: Caller) {
      return db.selectFrom('chat_playgrounds').select(['id', 'name', 'pygments_language', 'url_template']).where('realm_id', '=', caller.realm.id).orderBy('id').execute();
    },

    /** POST /realm/playgrounds (administrators). */
    async add(caller: Caller, v: { name: string; pygmentsLanguage: string; urlTemplate: string }) {
      adminOnly(caller);
      const name = v.name.trim();
      const language = v.pygmentsLanguage.trim();
      const template = v.urlTemplate.trim();
      if (!name) throw chatErrors.bad('Name cannot be blank.');
      if (!language) throw chatErrors.bad('Pygments language cannot be blank.');
      if (!/^[ a-zA-Z0-9_+\-./#]*$/.test(language)) throw chatErrors.bad('Invalid characters in pygments language');
      if (!/^https?:\/\/[^\s]+$/.test(template)) throw chatErrors.bad('Invalid URL template.');
      if (!template.includes('{code}')) throw chatErrors.bad('Missing the required variable "code" in the URL template');
      return db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_playgrounds:${caller.realm.id}`);
        const dup = await trx.selectFrom('chat_playgrounds').select('id').where('realm_id', '=', caller.realm.id).where('pygments_language', '=', language).where('name', '=', name).executeTakeFirst();
        if (dup) throw chatErrors.bad('Realm playground with this Realm, Pygments language and Name already exists.');
        const row = await trx
          .insertInto('chat_playgrounds')
          .values({ realm_id: caller.realm.id, name, pygments_language: language, url_template: template })
          .returning('id')
          .executeTakeFirstOrThrow();
        await recordAudit(trx, chatActor(caller), 'chat.playground.create', { type: 'chat_playground', id: row.id }, { name, pygments_language: language });
        return row.id;
      });
    },

    /**
     * DELETE /realm/playgrounds/{id} (administrators). When no playground is left for the
     * realm's default code-block language, that default is reset.
     */
    async remove(caller: Caller, id: number) {
      adminOnly(caller);
      await db.transaction().execute(async (trx) => {
        await lockKey(trx, `chat_playgrounds:${caller.realm.id}`);
        const pg = await trx.selectFrom('chat_playgrounds').selectAll().where('realm_id', '=', caller.realm.id).where('id', '=', dbId(id)).executeTakeFirst();
        if (!pg) throw chatErrors.bad('Invalid playground');
        await trx.deleteFrom('chat_playgrounds').where('id', '=', pg.id).execute();
        const realm = await trx.selectFrom('chat_realms').select('default_code_block_language').where('id', '=', caller.realm.id).executeTakeFirstOrThrow();
        const left = await trx.selectFrom('chat_playgrounds').select('id').where('realm_id', '=', caller.realm.id).where('pygments_language', '=', pg.pygments_language).executeTakeFirst();
        const reset = realm.default_code_block_language !== '' && realm.default_code_block_language === pg.pygments_language && !left;
        if (reset) await trx.updateTable('chat_realms').set({ default_code_block_language: '' }).where('id', '=', caller.realm.id).execute();
        await recordAudit(trx, chatActor(caller), 'chat.playground.delete', { type: 'chat_playground', id: pg.id }, { name: pg.name, default_code_block_language_reset: reset });
      });
    },
  };
}

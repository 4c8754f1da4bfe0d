import type { Kysely, Transaction } from 'kysely';
import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { chatErrors } from '../http/errors.ts';
import { writeEvents } from '../events/events.bus.ts';
import { dbId } from '../http/params.ts';
import { isAdmin, isGuest } from '../users/users.present.ts';
import { chatActor, type Caller } from '../users/users.service.ts';
import { codepointToName, EXTRA_EMOJI, EXTRA_EMOJI_TYPES, nameToCodepoint } from './emoji-data.ts';

type Q = Kysely<Database> | Transaction<Database>;

// The queries of this module (its "store"), kept beside the few rules that use them.
const allRealmEmoji = (db: Q, realmId: number) =>
  db.selectFrom('chat_realm_emoji').select(['id', 'name', 'author_id', 'deactivated', 'content_type']).where('realm_id', '=', realmId).orderBy('id').execute();
const activeByName = (db: Q, realmId: number, name: string) =>
  db.selectFrom('chat_realm_emoji').select(['id', 'name']).where('realm_id', '=', realmId).where('name', '=', name).where('deactivated', '=', false).executeTakeFirst();

const imageUrl = (realm: Pick<Caller['realm'], 'id' | 'url'>, id: number) => `${realm.url}/user_avatars/${realm.id}/emoji/images/${id}`;

/** Every custom emoji of a realm as Zulip's RealmEmoji objects, keyed by id. */
async function presentAll(db: Q, realm: Pick<Caller['realm'], 'id' | 'url'>) {
  const emoji: Record<string, unknown> = {};
  for (const e of await allRealmEmoji(db, realm.id)) {
    emoji[String(e.id)] = { id: String(e.id), name: e.name, source_url: imageUrl(realm, e.id), deactivated: e.deactivated, author_id: e.author_id };
  }
  return emoji;
}

/** Zulip's realm_emoji update event: the whole set, sent to everyone in the realm after a change. */
async function emojiChanged(trx: Transaction<Database>, realm: Pick<Caller['realm'], 'id' | 'url'>) {
  await writeEvents(trx, [{ realmId: realm.id, users: null, payload: { type: 'realm_emoji', op: 'update', realm_emoji: await presentAll(trx, realm) } }]);
}

export type ChatEmojiService = ReturnType<typeof createChatEmojiService>;

export function createChatEmojiService(deps: { db: Db }) {
  const { db } = deps;

  return {
    /** Zulip's get_emoji_data: a name's code and namespace, custom emoji first. */
    async emojiData(realmId: number, name: string): Promise<{ code: string; type: string }> {
      const custom = await activeByName(db, realmId, name);
      if (custom) return { code: String(custom.id), type: 'realm_emoji' };
      if (EXTRA_EMOJI.has(name)) return { code: name, type: 'zulip_extra_emoji' };
      const code = nameToCodepoint.get(name);
      if (code) return { code, type: 'unicode_emoji' };
      throw chatErrors.bad(`Emoji '${name}' does not exist`);
    },

    /** Zulip's check_emoji_request: the name, code and namespace must agree. */
    async checkEmoji(realmId: number, name: string, code: string, type: string) {
      if (type === 'realm_emoji') {
        const all = await allRealmEmoji(db, realmId);
        const e = all.find((x) => String(x.id) === code);
        if (!e) throw chatErrors.bad('Invalid custom emoji.');
        if (e.name !== name) throw chatErrors.bad('Invalid custom emoji name.');
        if (e.deactivated) throw chatErrors.bad('This custom emoji has been deactivated.');
      } else if (EXTRA_EMOJI_TYPES.has(type)) {
        if (!EXTRA_EMOJI.has(code)) throw chatErrors.bad('Invalid emoji code.');
        if (name !== code) throw chatErrors.bad('Invalid emoji name.');
      } else if (type === 'unicode_emoji') {
        if (!codepointToName.has(code)) throw chatErrors.bad('Invalid emoji code.');
        if (nameToCodepoint.get(name) !== code) throw chatErrors.bad('Invalid emoji name.');
      } else {
        throw chatErrors.bad('Invalid emoji type.');
      }
    },

    /** GET /realm/emoji and /register's `realm_emoji`: every custom emoji, deactivated ones included, keyed by id. */
    list: (caller: Caller) => presentAll(db, caller.realm),

    /** POST /realm/emoji/{name}: one image file; names are lowercase letters, digits, `_`, `-` and spaces. */
    async upload(caller: Caller, name: string, files: Array<{ contentType: string; data: Buffer }>) {
      if (isGuest(caller.user)) throw chatErrors.noGuests();
      if (!/^[0-9a-z_ -]{1,60}$/.test(name) || /^[ _-]|[ _-]$/.test(name)) throw chatErrors.bad('Emoji names must contain only lowercase English letters, digits, spaces, dashes, and underscores.');
      if (files.length !== 1) throw chatErrors.bad('You must upload exactly one file.');
      const file = files[0];
      if (!/^image\/(png|gif|jpeg|webp)$/.test(file.contentType)) throw chatErrors.bad('Invalid image format');
      if (file.data.length > 5 * 1024 * 1024) throw chatErrors.bad('Uploaded file is larger than the allowed limit of 5 MiB');
      if (await activeByName(db, caller.realm.id, name)) throw chatErrors.bad('A custom emoji with this name already exists.');
      await db.transaction().execute(async (trx) => {
        const row = await trx
          .insertInto('chat_realm_emoji')
          .values({ realm_id: caller.realm.id, name, author_id: caller.user.id, content_type: file.contentType, image: file.data, created_at: new Date() })
          .returning('id')
          .executeTakeFirstOrThrow();
        await emojiChanged(trx, caller.realm);
        await recordAudit(trx, chatActor(caller), 'chat.emoji.create', { type: 'chat_realm_emoji', id: row.id }, { name });
      });
    },

    /** DELETE /realm/emoji/{name}: deactivates it (its id stays valid for what already names it). */
    async deactivate(caller: Caller, name: string) {
      const e = await db.selectFrom('chat_realm_emoji').select(['id', 'author_id']).where('realm_id', '=', caller.realm.id).where('name', '=', name).where('deactivated', '=', false).executeTakeFirst();
      if (!e) throw chatErrors.bad('Emoji does not exist');
      if (!isAdmin(caller.user) && e.author_id !== caller.user.id) throw chatErrors.bad('Must be an organization administrator or emoji author');
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('chat_realm_emoji').set({ deactivated: true }).where('id', '=', e.id).execute();
        await emojiChanged(trx, caller.realm);
        await recordAudit(trx, chatActor(caller), 'chat.emoji.deactivate', { type: 'chat_realm_emoji', id: e.id }, { name });
      });
    },

    async image(realmId: number, id: number) {
      return db.selectFrom('chat_realm_emoji').select(['content_type', 'image']).where('realm_id', '=', dbId(realmId)).where('id', '=', dbId(id)).executeTakeFirst();
    },

    /** For the demo organization: a custom emoji from bytes. */
    async create(trx: Q, realmId: number, authorId: number, name: string, contentType: string, image: Buffer) {
      return trx.insertInto('chat_realm_emoji').values({ realm_id: realmId, name, author_id: authorId, content_type: contentType, image, created_at: new Date() }).returning('id').executeTakeFirstOrThrow();
    },
  };
}

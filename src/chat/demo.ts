import { recordAudit, type Actor } from '../audit/audit.ts';
import type { Db } from '../db/database.ts';
import type { ChatServices } from './app.ts';
import type { ChatRole } from './chat.tables.ts';
import { FIELD_TYPE } from './profile-fields/profile-fields.service.ts';
import { VISIBILITY } from './users/users.present.ts';

// A 1×1 PNG, the image of the demo's custom emoji.
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

/**
 * `crewhouse chat demo`: an organization with one of everything the API shows — every role,
 * bots of each type, deactivated, imported and deleted accounts, profile fields with values,
 * public, private and archived channels, muted topics, statuses, custom emoji (one
 * deactivated), bot storage, invitations of both kinds and code playgrounds.
 */
export async function loadDemoOrganization(db: Db, services: ChatServices, actor: Actor, opts: { subdomain: string; url: string }) {
  const host = new URL(opts.url).hostname;
  const at = (local: string) => `${local}@${host}`;
  const { realm, owner, apiKey } = await services.realms.createRealm(actor, {
    stringId: opts.subdomain,
    name: 'Crewhouse demo',
    url: opts.url,
    ownerEmail: at('owner'),
    ownerName: 'Olivia Owner',
    ownerPassword: null,
  });

  return db.transaction().execute(async (trx) => {
    const make = (email: string, fullName: string, role: ChatRole, extra: Parameters<ChatServices['users']['createAccount']>[2] extends infer T ? Partial<T> : never = {}) =>
      services.users.createAccount(trx, realm, { email, fullName, role, ...extra }).then((r) => r.row);
    const admin = await make(at('admin'), 'Ada Admin', 200, { timezone: 'Europe/Paris', visibility: VISIBILITY.admins });
    const moderator = await make(at('moderator'), 'Mo Moderator', 300, { timezone: 'America/New_York' });
    const member = await make(at('member'), 'Mel Member', 400, { visibility: VISIBILITY.members });
    const guest = await make(at('guest'), 'Gus Guest', 600, { visibility: VISIBILITY.nobody });
    await make(at('former'), 'Fay Former', 400, { active: false });
    await make(at('imported'), 'Ivan Imported', 400, { importedStub: true, dateJoinedAtFirstLogin: true, active: false });
    await make(at('deleted'), 'Deleted User', 400, { isDeleted: true, active: false });
    const bots = [];
    for (const [type, name] of [[1, 'helper'], [2, 'webhook'], [3, 'outgoing'], [4, 'embedded']] as const) {
      bots.push(await make(`${name}-bot@${host}`, `${name[0].toUpperCase()}${name.slice(1)} Bot`, 400, { bot: { type, ownerId: type === 4 ? null : member.id } }));
    }

    const pronouns = await trx.insertInto('chat_profile_fields').values({ realm_id: realm.id, name: 'Pronouns', field_type: FIELD_TYPE.pronouns, sort_order: 1 }).returning('id').executeTakeFirstOrThrow();
    const bio = await trx.insertInto('chat_profile_fields').values({ realm_id: realm.id, name: 'Biography', field_type: FIELD_TYPE.longText, sort_order: 2 }).returning('id').executeTakeFirstOrThrow();
    const team = await trx
      .insertInto('chat_profile_fields')
      .values({ realm_id: realm.id, name: 'Team', field_type: FIELD_TYPE.select, field_data: JSON.stringify({ eng: { text: 'Engineering', order: '1' }, ops: { text: 'Operations', order: '2' } }), sort_order: 3 })
      .returning('id')
      .executeTakeFirstOrThrow();
    const values: Array<[number, { id: number; name: string; field_type: number; field_data: string }, string]> = [
      [owner.id, { id: pronouns.id, name: 'Pronouns', field_type: FIELD_TYPE.pronouns, field_data: '' }, 'she/her'],
      [owner.id, { id: bio.id, name: 'Biography', field_type: FIELD_TYPE.longText, field_data: '' }, 'Runs **Crewhouse**; see https://example.com/olivia'],
      [member.id, { id: team.id, name: 'Team', field_type: FIELD_TYPE.select, field_data: JSON.stringify({ eng: {}, ops: {} }) }, 'eng'],
    ];
    for (const [userId, field, value] of values) {
      const checked = await services.profileFields.checkValue(realm.id, field, value);
      await trx.insertInto('chat_profile_values').values({ user_id: userId, field_id: field.id, value: checked.value, rendered_value: checked.rendered }).execute();
    }

    const stream = async (name: string, inviteOnly: boolean, archived: boolean, subscribers: number[]) => {
      const s = await trx.insertInto('chat_streams').values({ realm_id: realm.id, name, description: `The ${name} channel`, invite_only: inviteOnly, is_archived: archived, creator_id: owner.id, date_created: new Date() }).returning('id').executeTakeFirstOrThrow();
      for (const u of subscribers) await trx.insertInto('chat_subscriptions').values({ user_id: u, stream_id: s.id }).execute();
      return s.id;
    };
    const general = await stream('general', false, false, [owner.id, admin.id, moderator.id, member.id, guest.id]);
    await stream('leadership', true, false, [owner.id, admin.id]);
    await stream('old-project', false, true, [owner.id]);
    await trx.insertInto('chat_user_topics').values({ user_id: member.id, stream_id: general, topic_name: 'Lunch plans', visibility_policy: 1, last_updated: new Date() }).execute();

    await trx.insertInto('chat_user_status').values({ user_id: admin.id, status_text: 'In a meeting', emoji_name: 'calendar', emoji_code: '1f4c6', reaction_type: 'unicode_emoji', updated_at: new Date() }).execute();
    await trx.updateTable('chat_users').set({ presence_enabled: false }).where('id', '=', moderator.id).execute();
    const party = await services.emoji.create(trx, realm.id, owner.id, 'party_parrot', 'image/png', PNG);
    const old = await services.emoji.create(trx, realm.id, owner.id, 'old_logo', 'image/png', PNG);
    await trx.updateTable('chat_realm_emoji').set({ deactivated: true }).where('id', '=', old.id).execute();
    await trx.insertInto('chat_user_status').values({ user_id: member.id, status_text: 'Celebrating', emoji_name: 'party_parrot', emoji_code: String(party.id), reaction_type: 'realm_emoji', updated_at: new Date() }).execute();

    await trx.insertInto('chat_bot_storage').values([{ bot_id: bots[0].id, key: 'counter', value: '3' }, { bot_id: bots[0].id, key: 'greeting', value: 'hello' }]).execute();
    const day = 24 * 3600 * 1000;
    await trx
      .insertInto('chat_invites')
      .values([
        { realm_id: realm.id, referred_by: owner.id, email: at('newcomer'), invited_as: 400 as ChatRole, stream_ids: JSON.stringify([general]), invited_at: new Date(), expiry_date: new Date(Date.now() + 10 * day) },
        { realm_id: realm.id, referred_by: member.id, email: at('friend'), invited_as: 600 as ChatRole, notify_referrer_on_join: false, stream_ids: '[]', invited_at: new Date(), expiry_date: null },
      ])
      .execute();
    await trx
      .insertInto('chat_multiuse_invites')
      .values({ realm_id: realm.id, referred_by: admin.id, invited_as: 400, stream_ids: JSON.stringify([general]), invited_at: new Date(), expiry_date: new Date(Date.now() + 7 * day), confirmation_key: 'demo0000000000000000000000'.slice(0, 24) })
      .execute();
    await trx
      .insertInto('chat_playgrounds')
      .values([
        { realm_id: realm.id, name: 'Python playground', pygments_language: 'Python', url_template: 'https://python.example.com/?code={code}' },
        { realm_id: realm.id, name: 'Rust playground', pygments_language: 'Rust', url_template: 'https://play.rust-lang.org/?code={code}' },
      ])
      .execute();
    await trx.updateTable('chat_realms').set({ default_code_block_language: 'Python' }).where('id', '=', realm.id).execute();
    await recordAudit(trx, actor, 'chat.realm.demo', { type: 'chat_realm', id: realm.id }, { string_id: realm.string_id });
    return { realm, ownerEmail: owner.delivery_email, apiKey };
  });
}

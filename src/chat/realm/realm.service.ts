import crypto from 'node:crypto';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { chatErrors } from '../http/errors.ts';
import { isAdmin } from '../users/users.present.ts';
import { chatActor, checkFullName, validEmail, type Caller, type ChatUsersService } from '../users/users.service.ts';
import * as store from '../users/users.store.ts';

/** The newest change of spec/chat-api.md this server implements (bot storage for bots only). */
export const FEATURE_LEVEL = 494;
export const ZULIP_VERSION = '11.0-crewhouse';

export type ChatRealmService = ReturnType<typeof createChatRealmService>;

export function createChatRealmService(deps: { db: Db; users: ChatUsersService }) {
  const { db, users } = deps;

  return {
    /** `crewhouse chat init`: an organization and its first owner, whose API key is returned once. */
    async createRealm(actor: Actor, v: { stringId: string; name: string; url: string; ownerEmail: string; ownerName: string; ownerPassword: string | null }) {
      if (!/^[a-z0-9][a-z0-9-]{0,39}$/.test(v.stringId)) throw chatErrors.bad('Subdomain may only have lowercase letters, digits and dashes');
      if (!validEmail(v.ownerEmail)) throw chatErrors.bad('Bad name or username');
      const ownerName = checkFullName(v.ownerName);
      let url: URL;
      try {
        url = new URL(v.url);
      } catch {
        throw chatErrors.bad('Invalid organization URL');
      }
      if (await store.realmByStringId(db, v.stringId)) throw chatErrors.bad(`Subdomain '${v.stringId}' is already in use`);
      return db.transaction().execute(async (trx) => {
        const realm = await store.insertRealm(trx, { string_id: v.stringId, name: v.name.trim() || v.stringId, url: url.origin, date_created: new Date() });
        const { row, apiKey } = await users.createAccount(trx, realm, { email: v.ownerEmail, fullName: ownerName, role: 100, password: v.ownerPassword });
        await recordAudit(trx, actor, 'chat.realm.create', { type: 'chat_realm', id: realm.id }, { string_id: realm.string_id, owner: row.delivery_email });
        return { realm, owner: row, apiKey };
      });
    },

    /** The organization a request without credentials reaches: the one its host's first label names, else the oldest. */
    async realmForHost(host: string | undefined) {
      const label = (host ?? '').split(':')[0].split('.')[0].toLowerCase();
      const named = label ? await store.realmByStringId(db, label) : undefined;
      return named ?? (await store.firstRealm(db)) ?? null;
    },

    /** GET /server_settings. */
    async serverSettings(host: string | undefined) {
      const realm = await this.realmForHost(host);
      const base = {
        authentication_methods: { password: true, dev: false, email: true, ldap: false, remoteuser: false, github: false, azuread: false, gitlab: false, apple: false, google: false, saml: false, 'openid connect': false },
        zulip_version: ZULIP_VERSION,
        zulip_merge_base: ZULIP_VERSION,
        zulip_feature_level: FEATURE_LEVEL,
        push_notifications_enabled: false,
        is_incompatible: false,
        email_auth_enabled: true,
        require_email_format_usernames: true,
        external_authentication_methods: [] as unknown[],
      };
      if (!realm) return base;
      return {
        ...base,
        realm_uri: realm.url,
        realm_url: realm.url,
        realm_name: realm.name,
        realm_icon: `https://secure.gravatar.com/avatar/${crypto.createHash('md5').update(String(realm.id)).digest('hex')}?d=identicon&s=100`,
        realm_description: realm.description,
        realm_web_public_access_enabled: false,
      };
    },

    /** PATCH /realm: the settings this server keeps (the default code-block language). */
    async update(caller: Caller, v: { defaultCodeBlockLanguage?: string; name?: string; description?: string }) {
      if (!isAdmin(caller.user)) throw chatErrors.adminRequired();
      const set: Parameters<typeof store.updateRealm>[2] = {};
      if (v.defaultCodeBlockLanguage !== undefined) set.default_code_block_language = v.defaultCodeBlockLanguage.trim();
      if (v.name !== undefined) {
        if (!v.name.trim()) throw chatErrors.bad('Organization name cannot be empty');
        set.name = v.name.trim();
      }
      if (v.description !== undefined) set.description = v.description;
      if (!Object.keys(set).length) return;
      await db.transaction().execute(async (trx) => {
        await store.updateRealm(trx, caller.realm.id, set);
        await recordAudit(trx, chatActor(caller), 'chat.realm.update', { type: 'chat_realm', id: caller.realm.id }, { changed: Object.keys(set) });
      });
    },

    /** Deactivates an organization: its accounts can no longer authenticate. */
    async setDeactivated(actor: Actor, realmId: number, deactivated: boolean) {
      await db.transaction().execute(async (trx) => {
        await store.updateRealm(trx, realmId, { deactivated });
        await recordAudit(trx, actor, deactivated ? 'chat.realm.deactivate' : 'chat.realm.reactivate', { type: 'chat_realm', id: realmId });
      });
    },

    realm: (id: number) => store.getRealm(db, id),
  };
}

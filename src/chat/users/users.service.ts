import crypto from 'node:crypto';
import type { Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import { hashPassword, hashToken, verifyPassword } from '../../auth/credentials.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { Cipher } from '../../secrets/cipher.ts';
import type { ChatRole } from '../chat.tables.ts';
import { ChatError, chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import { writeEvents } from '../events/events.bus.ts';
import { apiEmail, avatarUrl, canAccessDeliveryEmail, presentUserForEvents, isAdmin, isGuest, isOwner, presentUser, VISIBILITY, type ProfileData } from './users.present.ts';
import * as store from './users.store.ts';
import type { RealmRow, UserRow } from './users.store.ts';

export interface Caller {
  user: UserRow;
  realm: RealmRow;
  requestId: string | null;
}

const API_KEY_AAD = 'chat_users.api_key';
const ALPHANUM = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const EMAIL = /^[^\s@<>()[\],;:"]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const TIMEZONES = new Set(Intl.supportedValuesOf('timeZone').concat(['UTC']));

/** A fresh API key: 32 letters and digits, as Zulip's. */
export function newApiKey(): string {
  const bytes = crypto.randomBytes(32);
  let out = '';
  for (const b of bytes) out += ALPHANUM[b % 62];
  return out;
}

export const validEmail = (email: string) => email.length <= 254 && EMAIL.test(email);

/** Who acts, for the audit log: a chat account (its id and address, never its key). */
export function chatActor(caller: Caller | null, fallback = 'chat'): Actor {
  if (!caller) return { userId: null, name: fallback, email: null, role: 'admin', via: 'system', requestId: null };
  return { userId: null, name: `chat:${caller.realm.string_id}:${caller.user.id}`, email: caller.user.delivery_email, role: 'viewer', via: 'token', requestId: caller.requestId };
}

/** A control character (C0, DEL) or a Unicode non-character, which names may not hold. */
export function isControl(ch: string): boolean {
  const c = ch.codePointAt(0)!;
  return c < 0x20 || c === 0x7f || c === 0xfffe || c === 0xffff;
}

/** Zulip's check_full_name. */
export function checkFullName(raw: string): string {
  const name = raw.trim();
  if (name.length > 100) throw chatErrors.bad('Name too long!');
  if (!name.length) throw chatErrors.bad('Name too short!');
  if ([...name].some(isControl) || /[*`\\>"@]/.test(name)) throw chatErrors.bad('Invalid characters in name!');
  return name;
}

export type ChatUsersService = ReturnType<typeof createChatUsersService>;

export function createChatUsersService(deps: { db: Db; cipher: Cipher }) {
  const { db, cipher } = deps;

  async function profileMap(realmId: number, userIds?: number[]): Promise<Map<number, ProfileData>> {
    const map = new Map<number, ProfileData>();
    for (const v of await store.profileValues(db, realmId, userIds)) {
      let data = map.get(v.user_id);
      if (!data) map.set(v.user_id, (data = {}));
      data[String(v.field_id)] = v.rendered_value === null ? { value: v.value } : { value: v.value, rendered_value: v.rendered_value };
    }
    return map;
  }

  /** Zulip's access_user_by_id. */
  async function accessUser(caller: Caller, id: number, opts: { allowDeactivated: boolean; allowBots: boolean; forAdmin: boolean }) {
    const target = await store.getUser(db, caller.realm.id, dbId(id));
    if (!target || (target.is_bot && !opts.allowBots)) throw chatErrors.noSuchUser();
    if (!target.is_active && !opts.allowDeactivated) throw chatErrors.bad('User is deactivated');
    if (opts.forAdmin && !canAdminUser(caller.user, target)) throw chatErrors.insufficientPermission();
    return target;
  }

  const canAdminUser = (actor: UserRow, target: UserRow) => isAdmin(actor) || (target.is_bot && target.bot_owner_id === actor.id);

  /**
   * Creates an account with a fresh API key (sealed at rest; only its hash is looked up).
   * People whose address is not visible to everyone get a fake API email on the realm's host.
   */
  async function createAccount(
    trx: Transaction<Database>,
    realm: RealmRow,
    v: {
      email: string;
      fullName: string;
      role: ChatRole;
      password?: string | null;
      bot?: { type: number; ownerId: number | null };
      timezone?: string;
      visibility?: number;
      importedStub?: boolean;
      isDeleted?: boolean;
      active?: boolean;
      dateJoinedAtFirstLogin?: boolean;
    },
  ) {
    const key = newApiKey();
    const sealed = cipher.seal(key, API_KEY_AAD);
    const visibility = v.visibility ?? VISIBILITY.everyone;
    let row = await store.insertUser(trx, {
      realm_id: realm.id,
      email: v.email,
      delivery_email: v.email,
      full_name: v.fullName,
      password_hash: v.password ? await hashPassword(v.password) : null,
      api_key_hash: hashToken(key),
      api_key_sealed: sealed.blob,
      api_key_key_id: sealed.keyId,
      role: v.role,
      is_bot: !!v.bot,
      bot_type: v.bot?.type ?? null,
      bot_owner_id: v.bot?.ownerId ?? null,
      is_active: v.active ?? true,
      is_imported_stub: v.importedStub ?? false,
      is_deleted: v.isDeleted ?? false,
      timezone: v.timezone ?? '',
      email_address_visibility: visibility,
      date_joined: new Date(),
      date_joined_at_first_login: v.dateJoinedAtFirstLogin ?? false,
    });
    const email = apiEmail(realm, row.id, v.email, visibility, !!v.bot);
    if (email !== row.email) row = await store.updateUser(trx, row.id, { email });
    // Everyone's event queues learn of the new account, as a member sees it.
    if (row.is_active) {
      const person = presentUserForEvents(row, { caller: { id: 0, role: 400 }, realm, clientGravatar: false, profile: row.is_bot ? undefined : new Map() });
      await writeEvents(trx, [{ realmId: realm.id, users: null, payload: { type: 'realm_user', op: 'add', person } }]);
    }
    return { row, apiKey: key };
  }

  return {
    createAccount,
    profileMap,

    /**
     * HTTP Basic authentication as Zulip's REST decorator does it: every failure is a 401
     * UNAUTHORIZED with its own message and a Basic challenge.
     */
    async authenticate(header: string | undefined, requestId: string | null = null): Promise<Caller> {
      if (header === undefined) throw chatErrors.unauthorized();
      const parts = header.trim().split(/\s+/);
      if (parts.length !== 2) throw chatErrors.unauthorized('Invalid authorization header for basic auth');
      if (parts[0].toLowerCase() !== 'basic') throw chatErrors.bad('This endpoint requires HTTP basic authentication.');
      if (!/^[A-Za-z0-9+/]*={0,2}$/.test(parts[1]) || parts[1].length % 4 !== 0) throw chatErrors.unauthorized('Invalid authorization header for basic auth');
      const pair = Buffer.from(parts[1], 'base64').toString('utf8').split(':');
      if (pair.length !== 2) throw chatErrors.unauthorized('Invalid authorization header for basic auth');
      const email = pair[0].trim().toLowerCase();
      const key = pair[1].trim();
      if (!/^[A-Za-z0-9]{32}$/.test(key)) throw chatErrors.unauthorized('Malformed API key');
      const user = await store.userByApiKeyHash(db, hashToken(key));
      if (!user || (email !== user.delivery_email.toLowerCase() && email !== user.email.toLowerCase())) throw chatErrors.unauthorized('Invalid API key');
      const realm = (await store.getRealm(db, user.realm_id))!;
      if (realm.deactivated) throw chatErrors.unauthorized('This organization has been deactivated');
      if (!user.is_active) throw chatErrors.unauthorized('Account is deactivated');
      return { user, realm, requestId };
    },

    /** POST /fetch_api_key: a password log-in that answers with the account's API key. */
    async fetchApiKey(realm: RealmRow, username: string, password: string) {
      const user = await store.userByEmail(db, realm.id, username);
      const ok = await verifyPassword(password, user?.password_hash ?? null);
      if (!user || !ok) throw chatErrors.authenticationFailed();
      if (realm.deactivated) throw chatErrors.realmDeactivated();
      if (!user.is_active) throw chatErrors.userDeactivated();
      const key = cipher.open({ keyId: user.api_key_key_id, blob: user.api_key_sealed }, API_KEY_AAD);
      await db.transaction().execute(async (trx) => {
        // Imported and API-created accounts count as joining at their first log-in (feature level 475).
        await store.updateUser(trx, user.id, {
          last_login: new Date(),
          ...(user.date_joined_at_first_login ? { date_joined: new Date(), date_joined_at_first_login: false } : {}),
        });
        await recordAudit(trx, chatActor(null, `chat:${realm.string_id}:${user.id}`), 'chat.user.login', { type: 'chat_user', id: user.id });
      });
      return { api_key: key, email: user.email, user_id: user.id };
    },

    async list(caller: Caller, opts: { clientGravatar: boolean; includeCustomProfileFields: boolean; userIds?: number[] }) {
      const ids = opts.userIds?.map(dbId);
      const rows = await store.listUsers(db, caller.realm.id, ids);
      const profile = opts.includeCustomProfileFields ? await profileMap(caller.realm.id, ids) : undefined;
      return rows.map((r) => presentUser(r, { caller: caller.user, realm: caller.realm, clientGravatar: opts.clientGravatar, profile }));
    },

    async get(caller: Caller, id: number, opts: { clientGravatar: boolean; includeCustomProfileFields: boolean }) {
      const row = await accessUser(caller, id, { allowDeactivated: true, allowBots: true, forAdmin: false });
      const profile = opts.includeCustomProfileFields ? await profileMap(caller.realm.id, [row.id]) : undefined;
      return presentUser(row, { caller: caller.user, realm: caller.realm, clientGravatar: opts.clientGravatar, profile });
    },

    /**
     * GET /users/{email}, as Zulip (feature level 302): the dummy API address `user{id}@{host}`
     * finds anyone by the id in it; an address the organization shows as the API email finds its
     * person; a real address finds its person only when the caller may see it.
     */
    async getByEmail(caller: Caller, email: string, opts: { clientGravatar: boolean; includeCustomProfileFields: boolean }) {
      const dummy = /^user(\d{1,10})@(.+)$/i.exec(email);
      let row: UserRow | undefined;
      if (dummy && dummy[2].toLowerCase() === new URL(caller.realm.url).hostname.toLowerCase()) row = await store.getUser(db, caller.realm.id, dbId(Number(dummy[1])));
      if (!row) {
        const found = await store.userByEmail(db, caller.realm.id, email);
        const matchesApiEmail = found?.email.toLowerCase() === email.toLowerCase();
        if (found && (matchesApiEmail || found.is_bot || canAccessDeliveryEmail(caller.user, found.id, found.email_address_visibility))) row = await store.getUser(db, caller.realm.id, found.id);
      }
      if (!row) throw chatErrors.noSuchUser();
      const profile = opts.includeCustomProfileFields ? await profileMap(caller.realm.id, [row.id]) : undefined;
      return presentUser(row, { caller: caller.user, realm: caller.realm, clientGravatar: opts.clientGravatar, profile });
    },

    async me(caller: Caller) {
      const profile = caller.user.is_bot ? undefined : await profileMap(caller.realm.id, [caller.user.id]);
      // The newest message the caller received (Zulip answers -1 when there is none).
      const max = await db.selectFrom('chat_user_messages').select((eb) => eb.fn.max('message_id').as('max')).where('user_id', '=', caller.user.id).executeTakeFirst();
      return { ...presentUser(caller.user, { caller: caller.user, realm: caller.realm, clientGravatar: false, profile }), max_message_id: max?.max == null ? -1 : Number(max.max) };
    },

    accessUser,

    /** POST /users: an administrator creates an account that can log in with the given password. */
    async createUser(caller: Caller, v: { email: string; password: string; fullName: string }) {
      if (!isAdmin(caller.user)) throw chatErrors.adminRequired();
      const fullName = checkFullName(v.fullName);
      const email = v.email.trim();
      if (!validEmail(email)) throw chatErrors.bad('Bad name or username');
      if (await store.userByEmail(db, caller.realm.id, email)) throw chatErrors.bad(`Email '${email}' already in use`);
      if (v.password.length < 6) throw chatErrors.bad('The password is too weak.');
      return db.transaction().execute(async (trx) => {
        const { row } = await createAccount(trx, caller.realm, { email, fullName, role: 400, password: v.password, dateJoinedAtFirstLogin: true });
        await recordAudit(trx, chatActor(caller), 'chat.user.create', { type: 'chat_user', id: row.id }, { email });
        return { user_id: row.id };
      });
    },

    /** POST /bots: a member creates a bot it owns; the answer carries the bot's API key. */
    async createBot(caller: Caller, v: { fullName: string; shortName: string; botType: number }) {
      if (isGuest(caller.user)) throw chatErrors.noGuests();
      if (caller.user.is_bot) throw chatErrors.noBots();
      if (![1, 2, 3, 4].includes(v.botType)) throw chatErrors.bad('Invalid bot type');
      const fullName = checkFullName(v.fullName);
      const short = v.shortName.trim().toLowerCase();
      if (!/^[a-z0-9._-]{1,60}$/.test(short)) throw chatErrors.bad('Bad name or username');
      const email = `${short.endsWith('-bot') ? short : `${short}-bot`}@${new URL(caller.realm.url).hostname}`;
      if (!validEmail(email)) throw chatErrors.bad('Bad name or username');
      if (await store.userByEmail(db, caller.realm.id, email)) throw chatErrors.bad('Username already in use');
      return db.transaction().execute(async (trx) => {
        const { row, apiKey } = await createAccount(trx, caller.realm, { email, fullName, role: 400, bot: { type: v.botType, ownerId: caller.user.id } });
        await recordAudit(trx, chatActor(caller), 'chat.bot.create', { type: 'chat_user', id: row.id }, { email, bot_type: v.botType });
        return {
          user_id: row.id,
          api_key: apiKey,
          avatar_url: avatarUrl(caller.realm, row),
          default_sending_stream: null,
          default_events_register_stream: null,
          default_all_public_streams: false,
        };
      });
    },

    /** PATCH /settings: only the passed settings change. */
    async updateSettings(caller: Caller, v: { emailAddressVisibility?: number; fullName?: string; timezone?: string; presenceEnabled?: boolean }) {
      const set: Parameters<typeof store.updateUser>[2] = {};
      if (v.emailAddressVisibility !== undefined) {
        if (!Object.values(VISIBILITY).includes(v.emailAddressVisibility as 1)) throw chatErrors.bad('Invalid email_address_visibility');
        set.email_address_visibility = v.emailAddressVisibility;
        set.email = apiEmail(caller.realm, caller.user.id, caller.user.delivery_email, v.emailAddressVisibility, caller.user.is_bot);
      }
      if (v.fullName !== undefined) set.full_name = checkFullName(v.fullName);
      if (v.timezone !== undefined) {
        if (v.timezone !== '' && !TIMEZONES.has(v.timezone)) throw chatErrors.bad('Not a recognized time zone');
        set.timezone = v.timezone;
      }
      if (v.presenceEnabled !== undefined) set.presence_enabled = v.presenceEnabled;
      if (!Object.keys(set).length) return;
      await db.transaction().execute(async (trx) => {
        await store.updateUser(trx, caller.user.id, set);
        if (set.full_name !== undefined) {
          await writeEvents(trx, [{ realmId: caller.realm.id, users: null, payload: { type: 'realm_user', op: 'update', person: { user_id: caller.user.id, full_name: set.full_name } } }]);
        }
        // The user's own clients learn each changed setting of /register's user_settings.
        const changed = (['timezone', 'presence_enabled', 'email_address_visibility'] as const).filter((k) => set[k] !== undefined);
        await writeEvents(trx, changed.map((k) => ({ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'user_settings', op: 'update', property: k, value: set[k] } })));
        await recordAudit(trx, chatActor(caller), 'chat.settings.update', { type: 'chat_user', id: caller.user.id }, { changed: Object.keys(set).filter((k) => k !== 'email') });
      });
    },

    /** DELETE /users/{id} (administrators) and DELETE /bots/{id} (administrators and the bot's owner). */
    async deactivate(caller: Caller, id: number, kind: 'user' | 'bot') {
      let target: UserRow;
      if (kind === 'bot') {
        const row = await store.getUser(db, caller.realm.id, dbId(id));
        if (!row || !row.is_bot || !row.is_active) throw chatErrors.bad('No such bot');
        if (!canAdminUser(caller.user, row)) throw chatErrors.insufficientPermission();
        target = row;
      } else {
        target = await accessUser(caller, id, { allowDeactivated: false, allowBots: false, forAdmin: true });
        if (isOwner(target) && !isOwner(caller.user)) throw chatErrors.ownerRequired();
        if (isOwner(target) && (await store.countActiveOwners(db, caller.realm.id)) <= 1) throw chatErrors.bad('Cannot deactivate the only organization owner');
      }
      await setActive(caller, target, false);
    },

    /** DELETE /users/me. */
    async deactivateSelf(caller: Caller) {
      if (isOwner(caller.user) && (await store.countActiveOwners(db, caller.realm.id)) <= 1) {
        throw new ChatError('Cannot deactivate the only organization owner.', { code: 'CANNOT_DEACTIVATE_LAST_USER', data: { is_last_owner: true, entity: 'organization owner' } });
      }
      await setActive(caller, caller.user, false);
    },

    /** POST /users/{id}/reactivate. */
    async reactivate(caller: Caller, id: number) {
      const target = await accessUser(caller, id, { allowDeactivated: true, allowBots: true, forAdmin: true });
      if (target.is_active) throw chatErrors.bad('User is already active.');
      if (target.is_deleted) throw chatErrors.noSuchUser();
      await setActive(caller, target, true);
    },

    /** POST /users/me/avatar: the uploaded image becomes the avatar and avatar_version goes up. */
    async setAvatar(caller: Caller, file: { contentType: string; data: Buffer }) {
      if (!/^image\/(png|jpeg|gif|webp)$/.test(file.contentType)) throw chatErrors.bad('Invalid image format');
      if (file.data.length > 5 * 1024 * 1024) throw chatErrors.bad('Uploaded file is larger than the allowed limit of 5 MiB');
      return db.transaction().execute(async (trx) => {
        await store.setAvatar(trx, caller.user.id, file.contentType, file.data);
        const row = await store.updateUser(trx, caller.user.id, {
          avatar_source: 'U',
          avatar_hash: crypto.randomBytes(20).toString('hex'),
          avatar_version: caller.user.avatar_version + 1,
        });
        await recordAudit(trx, chatActor(caller), 'chat.avatar.update', { type: 'chat_user', id: caller.user.id });
        return { avatar_url: avatarUrl(caller.realm, row) };
      });
    },

    async avatar(realmId: number, userId: number, hash: string) {
      return store.avatarOf(db, dbId(realmId), dbId(userId), hash);
    },
  };

  async function setActive(caller: Caller, target: UserRow, active: boolean) {
    await db.transaction().execute(async (trx) => {
      await store.updateUser(trx, target.id, { is_active: active });
      await writeEvents(trx, [{ realmId: caller.realm.id, users: null, payload: { type: 'realm_user', op: 'update', person: { user_id: target.id, is_active: active } } }]);
      // A deactivated owner's bots stop with it, as in Zulip.
      if (!active && !target.is_bot) {
        await store.deactivateBotsOf(trx, target.id);
      }
      await recordAudit(trx, chatActor(caller), active ? 'chat.user.reactivate' : 'chat.user.deactivate', { type: 'chat_user', id: target.id });
    });
  }
}

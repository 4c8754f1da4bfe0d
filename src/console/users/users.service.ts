import type { Kysely, Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import { insertToken, revokeAllOf } from '../../auth/auth.service.ts';
import { hashToken, newSecret } from '../../auth/credentials.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { lockKey, updateIfVersion } from '../../db/conditional.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import type { User, UserCreate, UserPatch } from './users.schemas.ts';
import * as store from './users.store.ts';

type Q = Kysely<Database> | Transaction<Database>;

type UserRow = NonNullable<Awaited<ReturnType<typeof store.getUser>>>;

export const SETUP_TOKEN_TTL_MS = 7 * 24 * 3600 * 1000;
const ADMIN_GUARD = 'users:enabled-admins';

/** The whitelist of what leaves the server about a user. */
export function presentUser(row: UserRow): User {
  return {
    id: row.id,
    name: row.name,
    email: row.email,
    role: row.role,
    disabled: row.disabled,
    password_set: row.password_hash !== null,
    last_login_at: row.last_login_at,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

/** What authenticating a request needs of a token's or session's user (the auth module keeps no users of its own). */
export async function authUser(db: Q, id: number): Promise<{ user_id: number; name: string; email: string | null; role: User['role']; disabled: boolean } | null> {
  const row = await store.getUser(db, id);
  return row ? { user_id: row.id, name: row.name, email: row.email, role: row.role, disabled: row.disabled } : null;
}

export function createUsersService(deps: { db: Db; publicBaseUrl: string }) {
  const { db } = deps;
  const setupUrl = (token: string) => `${deps.publicBaseUrl}/#setup?token=${encodeURIComponent(token)}`;

  async function assertFree(name: string | undefined, email: string | null | undefined, exceptId?: number) {
    const taken = await store.nameOrEmailTaken(db, name, email, exceptId);
    if (!taken) return;
    const field = name !== undefined && taken.name.toLowerCase() === name.toLowerCase() ? 'name' : 'email';
    throw problems.conflict(`a user with that ${field} already exists`, [{ field, message: 'is taken' }]);
  }

  async function issue(trx: Parameters<typeof store.replaceSetupToken>[0], userId: number) {
    const token = newSecret('chu_');
    const expires = new Date(Date.now() + SETUP_TOKEN_TTL_MS);
    await store.replaceSetupToken(trx, userId, hashToken(token), expires);
    return { setup_token: token, setup_url: setupUrl(token), setup_expires_at: expires.toISOString() };
  }

  return {
    setupUrl,

    // What the session module (log-in, setup links) needs of a user; inside its transaction where one is taken.
    /** A user by name or e-mail, case-insensitively, for log-in. */
    byLogin: (login: string) => store.getUserByLogin(db, login),
    byId: (q: Q, id: number) => store.getUser(q, id),
    /** Names and e-mail addresses of some users, by id (for lists of members). */
    async namesOf(ids: number[]): Promise<Map<number, { name: string; email: string | null }>> {
      return new Map((await store.getUsers(db, ids)).map((u) => [u.id, { name: u.name, email: u.email }]));
    },
    /** Uses a one-time setup token: its user's id, or null when unknown, used or expired. */
    consumeSetupToken: (trx: Transaction<Database>, tokenHash: string) => store.consumeSetupToken(trx, tokenHash),
    setPassword: (trx: Transaction<Database>, userId: number, passwordHash: string) => store.setPassword(trx, userId, passwordHash),
    markLogin: (trx: Transaction<Database>, userId: number) => store.markLogin(trx, userId),

    async list(query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['number']);
      const rows = await store.listUsers(db, cursor, query.limit);
      return toPage(rows, query.limit, (r) => [r.id], presentUser);
    },

    /** One user: admins read anyone, others only themselves. */
    async get(actor: Actor, id: number) {
      if (actor.role !== 'admin' && actor.userId !== id) throw problems.forbidden('only an admin may read another user');
      const row = await store.getUser(db, id);
      if (!row) throw problems.notFoundById('user', id);
      return row;
    },

    async create(actor: Actor, input: UserCreate) {
      const email = input.email ?? null;
      await assertFree(input.name, email);
      return db.transaction().execute(async (trx) => {
        const row = await store.insertUser(trx, { name: input.name, email, role: input.role });
        const setup = await issue(trx, row.id);
        await recordAudit(trx, actor, 'user.create', { type: 'user', id: row.id }, { name: row.name, role: row.role });
        return { row, setup };
      });
    },

    async patch(actor: Actor, id: number, expected: number, patch: UserPatch) {
      await assertFree(patch.name, patch.email, id);
      return db.transaction().execute(async (trx) => {
        // Enabled admins change one writer at a time, so two admins demoting each other
        // cannot both succeed and leave none.
        await lockKey(trx, ADMIN_GUARD);
        const before = await store.getUser(trx, id);
        if (!before) throw problems.notFoundById('user', id);
        const losesAdmin =
          before.role === 'admin' && !before.disabled && ((patch.role !== undefined && patch.role !== 'admin') || patch.disabled === true);
        if (losesAdmin && (await store.countEnabledAdmins(trx, id)) === 0) {
          throw problems.conflict('this change would leave the Console without an enabled admin');
        }
        const row = await updateIfVersion<UserRow>(trx, { table: 'users', where: { id }, expected, set: { ...patch }, what: 'user', label: String(id) });
        if (patch.disabled === true && !before.disabled) await revokeAllOf(trx, id);
        await recordAudit(trx, actor, 'user.update', { type: 'user', id }, { fields: Object.keys(patch) });
        return row;
      });
    },

    async issueSetupToken(actor: Actor, id: number) {
      return db.transaction().execute(async (trx) => {
        const row = await store.getUser(trx, id);
        if (!row) throw problems.notFoundById('user', id);
        const setup = await issue(trx, id);
        await recordAudit(trx, actor, 'user.setup_token', { type: 'user', id });
        return { row, setup };
      });
    },

    /** First start: on an empty database, create `admin`. Returns its setup link when no token was configured. */
    async ensureFirstAdmin(actor: Actor, adminToken: string | null): Promise<{ created: boolean; setupUrl: string | null }> {
      return db.transaction().execute(async (trx) => {
        await lockKey(trx, ADMIN_GUARD);
        if ((await store.countUsers(trx)) > 0) return { created: false, setupUrl: null };
        const row = await store.insertUser(trx, { name: 'admin', email: null, role: 'admin' });
        await recordAudit(trx, actor, 'user.create', { type: 'user', id: row.id }, { name: 'admin', role: 'admin', first_start: true });
        if (adminToken) {
          await insertToken(trx, { user_id: row.id, name: 'SERVICE_ADMIN_TOKEN', kind: 'api', prefix: adminToken.slice(0, 8), token_hash: hashToken(adminToken), expires_at: null });
          return { created: true, setupUrl: null };
        }
        const setup = await issue(trx, row.id);
        return { created: true, setupUrl: setup.setup_url };
      });
    },
  };
}

export type UsersService = ReturnType<typeof createUsersService>;

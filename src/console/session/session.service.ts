import type { Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import * as auth from '../../auth/auth.service.ts';
import { hashPassword, hashToken, newSecret, verifyPassword } from '../../auth/credentials.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import type { UsersService } from '../users/users.service.ts';

export const SESSION_TTL_MS = 7 * 24 * 3600 * 1000;
export const ONBOARDING_TOKEN_TTL_MS = 24 * 3600 * 1000;
const LOGIN_WINDOW_MS = 15 * 60 * 1000;
const LOGIN_MAX_FAILURES = 10;

type TokenRow = Awaited<ReturnType<typeof auth.insertToken>>;

export function presentToken(row: TokenRow) {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    prefix: row.prefix,
    created_at: row.created_at,
    expires_at: row.expires_at,
    last_used_at: row.last_used_at,
  };
}

export function createSessionService(deps: { db: Db; users: Pick<UsersService, 'byLogin' | 'byId' | 'consumeSetupToken' | 'setPassword' | 'markLogin'> }) {
  const { db, users } = deps;
  // Failed log-ins per name, in memory: enough to slow a password guesser on one process.
  const failures = new Map<string, { count: number; since: number }>();

  /**
   * Counts an attempt before the password is checked, so parallel guesses cannot all slip
   * past the limit while their hashes are computed; a success forgets the count.
   */
  function attempt(name: string) {
    const key = name.toLowerCase();
    const now = Date.now();
    let f = failures.get(key);
    if (!f || now - f.since >= LOGIN_WINDOW_MS) {
      f = { count: 0, since: now };
      failures.delete(key);
      failures.set(key, f);
    }
    if (f.count >= LOGIN_MAX_FAILURES) {
      throw problems.tooManyRequests('too many failed log-ins for this account; wait and try again', Math.ceil((f.since + LOGIN_WINDOW_MS - now) / 1000));
    }
    f.count++;
    // Bounded memory: drop the oldest windows first (a Map keeps insertion order), never the
    // whole table, so a flood of other names cannot reset a guessed account's count.
    for (const [k, v] of failures) {
      if (failures.size <= 10_000 && now - v.since < LOGIN_WINDOW_MS) break;
      failures.delete(k);
    }
  }

  async function open(trx: Transaction<Database>, userId: number) {
    const token = newSecret('chs_', 32);
    const csrf = newSecret('', 24);
    const expires = new Date(Date.now() + SESSION_TTL_MS);
    await auth.insertSession(trx, { user_id: userId, token_hash: hashToken(token), csrf_token: csrf, expires_at: expires });
    await users.markLogin(trx, userId);
    return { token, csrf, expiresAt: expires.toISOString() };
  }

  return {
    async login(name: string, password: string, requestId: string) {
      attempt(name);
      const user = await users.byLogin(name);
      const ok = await verifyPassword(password, user?.password_hash ?? null);
      if (!user || !ok || user.disabled) {
        throw problems.unauthorized('the name or password is wrong, or the account is disabled');
      }
      failures.delete(name.toLowerCase());
      return db.transaction().execute(async (trx) => {
        const s = await open(trx, user.id);
        await recordAudit(trx, { userId: user.id, name: user.name, email: user.email, role: user.role, via: 'session', requestId }, 'session.login', { type: 'user', id: user.id });
        return { user, ...s };
      });
    },

    /** Sets the password with a one-time setup token and opens a session. */
    async setup(token: string, password: string, requestId: string) {
      const passwordHash = await hashPassword(password);
      return db.transaction().execute(async (trx) => {
        const userId = await users.consumeSetupToken(trx, hashToken(token));
        if (userId === null) throw problems.invalidField('token', 'is unknown, used or expired', 422);
        const user = await users.byId(trx, userId);
        if (!user || user.disabled) throw problems.invalidField('token', 'belongs to a disabled account', 422);
        await users.setPassword(trx, userId, passwordHash);
        const s = await open(trx, userId);
        await recordAudit(trx, { userId, name: user.name, email: user.email, role: user.role, via: 'session', requestId }, 'user.password_set', { type: 'user', id: userId });
        return { user, ...s };
      });
    },

    async logout(actor: Actor, sessionId: number) {
      await db.transaction().execute(async (trx) => {
        await auth.revokeSession(trx, sessionId);
        await recordAudit(trx, actor, 'session.logout', { type: 'user', id: actor.userId ?? 0 });
      });
    },

    async listTokens(userId: number, query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['number']);
      const rows = await auth.listTokens(db, userId, cursor, query.limit);
      return toPage(rows, query.limit, (r) => [r.id], presentToken);
    },

    async createToken(actor: Actor, name: string, kind: 'api' | 'onboarding', ttlMs: number | null) {
      const token = newSecret('chk_');
      return db.transaction().execute(async (trx) => {
        const row = await auth.insertToken(trx, {
          user_id: actor.userId!,
          name,
          kind,
          prefix: token.slice(0, 8),
          token_hash: hashToken(token),
          expires_at: ttlMs ? new Date(Date.now() + ttlMs) : null,
        });
        await recordAudit(trx, actor, 'token.create', { type: 'token', id: row.id }, { kind, name });
        return { row, token };
      });
    },

    async revokeToken(actor: Actor, tokenId: number) {
      await db.transaction().execute(async (trx) => {
        const row = await auth.revokeToken(trx, actor.userId!, tokenId);
        if (!row) throw problems.notFoundById('token', tokenId);
        await recordAudit(trx, actor, 'token.revoke', { type: 'token', id: tokenId });
      });
    },
  };
}

export type SessionService = ReturnType<typeof createSessionService>;

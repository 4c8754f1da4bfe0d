import crypto from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import { recordAudit } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { ChatRole } from '../chat.tables.ts';
import { ChatError, chatErrors } from '../http/errors.ts';
import { dbId } from '../http/params.ts';
import type { ChatStreamsService } from '../streams/streams.service.ts';
import { isAdmin, isGuest, isOwner } from '../users/users.present.ts';
import { chatActor, validEmail, type Caller } from '../users/users.service.ts';

type Q = Kysely<Database> | Transaction<Database>;

/** The latest expiry an invite may have: the end of year 9999. */
const MAX_DATE = Date.UTC(9999, 11, 31, 23, 59, 59);

/** Zulip's INVITATION_LINK_VALIDITY_DAYS (10), in minutes: the default lifetime of an invitation. */
export const DEFAULT_INVITE_MINUTES = 10 * 24 * 60;
const ROLES: ChatRole[] = [100, 200, 300, 400, 600];

const unix = (iso: string) => Math.floor(new Date(iso).getTime() / 1000);

// The queries of this module.
/** Unexpired, unused invitations of one kind (email invitations or reusable links), oldest first. */
function pending<T extends 'chat_invites' | 'chat_multiuse_invites'>(db: Q, table: T, realmId: number, referredBy?: number) {
  let q = (db as Kysely<Database>)
    .selectFrom(table as 'chat_invites')
    .selectAll()
    .where('realm_id', '=', realmId)
    .where('status', '=', 'pending')
    .where((eb) => eb.or([eb('expiry_date', 'is', null), eb('expiry_date', '>', new Date().toISOString())]));
  if (referredBy !== undefined) q = q.where('referred_by', '=', referredBy);
  return q.orderBy('id').execute() as Promise<Array<Selectable<Database[T]>>>;
}
const pendingEmailInvites = (db: Q, realmId: number, referredBy?: number) => pending(db, 'chat_invites', realmId, referredBy);
const pendingLinks = (db: Q, realmId: number, referredBy?: number) => pending(db, 'chat_multiuse_invites', realmId, referredBy);

export type ChatInvitesService = ReturnType<typeof createChatInvitesService>;

export function createChatInvitesService(deps: { db: Db; streams: ChatStreamsService }) {
  const { db, streams } = deps;

  /** Zulip's require_member_or_admin. */
  const memberOrAdmin = (caller: Caller) => {
    if (isGuest(caller.user)) throw chatErrors.noGuests();
    if (caller.user.is_bot) throw chatErrors.noBots();
  };

  /** Zulip's check_role_based_permissions: owners invite owners; admins invite admins and moderators. */
  const checkRole = (caller: Caller, invitedAs: number, requireAdmin: boolean) => {
    if (invitedAs === 100 && !isOwner(caller.user)) throw chatErrors.ownerRequired();
    if (requireAdmin && !isAdmin(caller.user)) throw chatErrors.bad('Must be an organization administrator');
  };

  const checkInviteAs = (invitedAs: number) => {
    if (!ROLES.includes(invitedAs as ChatRole)) throw chatErrors.bad('Invalid invite_as');
    return invitedAs as ChatRole;
  };

  /** An invite's expiry, counted from `now` (the same moment the invite is stamped with). */
  const expiry = (minutes: number | null, now: Date) => {
    if (minutes === null) return null;
    const at = new Date(now.getTime() + minutes * 60_000);
    // Beyond year 9999 a date is no date the database (or a client) takes.
    if (minutes < 1 || !(at.getTime() <= MAX_DATE)) throw chatErrors.bad('Invalid invite_expires_in_minutes');
    return at;
  };

  async function checkStreams(caller: Caller, ids: number[]) {
    for (const id of ids) {
      try {
        await streams.byId(caller, id);
      } catch {
        throw chatErrors.bad(`Invalid channel ID ${id}. No invites were sent.`);
      }
    }
  }

  /** Zulip's access_invite_by_id: the caller's own invitations, or any as an administrator (owner invitations need an owner). */
  async function accessInvite(caller: Caller, id: number) {
    const invite = await db.selectFrom('chat_invites').selectAll().where('id', '=', dbId(id)).where('realm_id', '=', caller.realm.id).executeTakeFirst();
    const live = invite && invite.status === 'pending' && (invite.expiry_date === null || new Date(invite.expiry_date) > new Date());
    if (!invite || !live) throw chatErrors.bad('No such invitation');
    if (invite.referred_by !== caller.user.id) checkRole(caller, invite.invited_as, true);
    return invite;
  }

  return {
    /** POST /invites: email invitations, all or none. */
    async invite(caller: Caller, v: { emails: string; inviteAs: number; expiresInMinutes: number | null; notifyReferrerOnJoin: boolean; streamIds: number[] }) {
      memberOrAdmin(caller);
      const inviteAs = checkInviteAs(v.inviteAs);
      checkRole(caller, inviteAs, [100, 200, 300].includes(inviteAs));
      if (!v.emails) throw chatErrors.bad('You must specify at least one email address.');
      const emails = [...new Set(v.emails.split(/[,\n]/).map((e) => (/<(.*)>/.exec(e)?.[1] ?? e).trim()))].filter(Boolean);
      if (!emails.length) throw chatErrors.bad('You must specify at least one email address.');
      await checkStreams(caller, v.streamIds);
      const now = new Date();
      const expiryDate = expiry(v.expiresInMinutes, now);

      const invalid = emails.filter((e) => !validEmail(e));
      if (invalid.length) {
        throw new ChatError("Some emails did not validate, so we didn't send any invitations.", {
          code: 'INVITATION_FAILED',
          data: { errors: invalid.map((e) => [e, 'Invalid address.', false]), sent_invitations: false, license_limit_reached: false, daily_limit_reached: false },
        });
      }
      const existing = await db
        .selectFrom('chat_users')
        .select(['delivery_email', 'is_active'])
        .where('realm_id', '=', caller.realm.id)
        .where((eb) => eb(eb.fn('lower', ['delivery_email']), 'in', emails.map((e) => e.toLowerCase())))
        .execute();
      const taken = new Map(existing.map((u) => [u.delivery_email.toLowerCase(), u.is_active]));
      const skipped = emails.filter((e) => taken.has(e.toLowerCase())).map((e) => [e, taken.get(e.toLowerCase()) ? 'Already has an account.' : 'Account has been deactivated.', false]);
      const toInvite = emails.filter((e) => !taken.has(e.toLowerCase()));
      if (!toInvite.length) {
        throw new ChatError("We weren't able to invite anyone.", { code: 'INVITATION_FAILED', data: { errors: skipped, sent_invitations: false, license_limit_reached: false, daily_limit_reached: false } });
      }
      await db.transaction().execute(async (trx) => {
        for (const email of toInvite) {
          const row = await trx
            .insertInto('chat_invites')
            .values({
              realm_id: caller.realm.id,
              referred_by: caller.user.id,
              email,
              invited_as: inviteAs,
              notify_referrer_on_join: v.notifyReferrerOnJoin,
              stream_ids: JSON.stringify(v.streamIds),
              invited_at: now,
              expiry_date: expiryDate,
            })
            .returning('id')
            .executeTakeFirstOrThrow();
          await recordAudit(trx, chatActor(caller), 'chat.invite.create', { type: 'chat_invite', id: row.id }, { email, invited_as: inviteAs });
        }
      });
      if (skipped.length) {
        throw new ChatError("Some of those addresses are already using Zulip, so we didn't send them an invitation. We did send invitations to everyone else!", {
          code: 'INVITATION_FAILED',
          data: { errors: skipped, sent_invitations: true, license_limit_reached: false, daily_limit_reached: false },
        });
      }
    },

    /** POST /invites/multiuse: a reusable link (administrators, by the realm's default policy). */
    async createLink(caller: Caller, v: { inviteAs: number; expiresInMinutes: number | null; streamIds: number[] }) {
      memberOrAdmin(caller);
      if (!isAdmin(caller.user)) throw chatErrors.insufficientPermission();
      const inviteAs = checkInviteAs(v.inviteAs);
      checkRole(caller, inviteAs, [100, 200, 300].includes(inviteAs));
      await checkStreams(caller, v.streamIds);
      const now = new Date();
      const expiryDate = expiry(v.expiresInMinutes, now);
      const key = crypto.randomBytes(18).toString('base64url').toLowerCase().replace(/[^a-z0-9]/g, 'x');
      await db.transaction().execute(async (trx) => {
        const row = await trx
          .insertInto('chat_multiuse_invites')
          .values({ realm_id: caller.realm.id, referred_by: caller.user.id, invited_as: inviteAs, stream_ids: JSON.stringify(v.streamIds), invited_at: now, expiry_date: expiryDate, confirmation_key: key })
          .returning('id')
          .executeTakeFirstOrThrow();
        await recordAudit(trx, chatActor(caller), 'chat.invite_link.create', { type: 'chat_multiuse_invite', id: row.id }, { invited_as: inviteAs });
      });
      return `${caller.realm.url}/join/${key}/`;
    },

    /** GET /invites: unexpired, unused invitations the caller can manage (an administrator manages everyone's). */
    async list(caller: Caller) {
      memberOrAdmin(caller);
      const referredBy = isAdmin(caller.user) ? undefined : caller.user.id;
      const [emails, links] = await Promise.all([pendingEmailInvites(db, caller.realm.id, referredBy), pendingLinks(db, caller.realm.id, referredBy)]);
      // Only owners manage invitations to become an owner.
      const visible = (r: { invited_as: number; referred_by: number }) => r.referred_by === caller.user.id || r.invited_as !== 100 || isOwner(caller.user);
      const common = (r: (typeof emails)[number] | (typeof links)[number]) => ({
        id: r.id,
        invited_by_user_id: r.referred_by,
        invited: unix(r.invited_at),
        expiry_date: r.expiry_date === null ? null : unix(r.expiry_date),
        invited_as: r.invited_as,
        notify_referrer_on_join: r.notify_referrer_on_join,
      });
      return [
        ...emails.filter(visible).map((r) => ({ ...common(r), email: r.email, is_multiuse: false })),
        ...links.filter(visible).map((r) => ({ ...common(r), link_url: `${caller.realm.url}/join/${r.confirmation_key}/`, is_multiuse: true })),
      ];
    },

    /** DELETE /invites/{id}. */
    async revoke(caller: Caller, id: number) {
      memberOrAdmin(caller);
      const invite = await accessInvite(caller, id);
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('chat_invites').set({ status: 'revoked' }).where('id', '=', invite.id).execute();
        await recordAudit(trx, chatActor(caller), 'chat.invite.revoke', { type: 'chat_invite', id: invite.id });
      });
    },

    /** DELETE /invites/multiuse/{id}. */
    async revokeLink(caller: Caller, id: number) {
      memberOrAdmin(caller);
      const invite = await db.selectFrom('chat_multiuse_invites').selectAll().where('id', '=', dbId(id)).where('realm_id', '=', caller.realm.id).executeTakeFirst();
      if (!invite) throw chatErrors.bad('No such invitation');
      if (invite.referred_by !== caller.user.id) checkRole(caller, invite.invited_as, true);
      if (invite.status === 'revoked') throw chatErrors.bad('Invitation has already been revoked');
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('chat_multiuse_invites').set({ status: 'revoked' }).where('id', '=', invite.id).execute();
        await recordAudit(trx, chatActor(caller), 'chat.invite_link.revoke', { type: 'chat_multiuse_invite', id: invite.id });
      });
    },

    /**
     * POST /invites/{id}/resend: an email invitation the caller can manage. There is no mail
     * transport in this deployment, so the resend is recorded (time and count) for the referrer.
     */
    async resend(caller: Caller, id: number) {
      memberOrAdmin(caller);
      const invite = await accessInvite(caller, id);
      await db.transaction().execute(async (trx) => {
        await trx.updateTable('chat_invites').set((eb) => ({ invited_at: new Date(), times_sent: eb('times_sent', '+', 1) })).where('id', '=', invite.id).execute();
        await recordAudit(trx, chatActor(caller), 'chat.invite.resend', { type: 'chat_invite', id: invite.id });
      });
    },
  };
}

import { Type } from 'typebox';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import { DEFAULT_INVITE_MINUTES, type ChatInvitesService } from './invites.service.ts';

const tags = ['chat-invites'];

const Invite = Type.Object({
  id: Type.Integer(),
  invited_by_user_id: Type.Integer(),
  invited: Type.Integer(),
  expiry_date: Type.Union([Type.Integer(), Type.Null()]),
  invited_as: Type.Integer(),
  email: Type.Optional(Type.String()),
  notify_referrer_on_join: Type.Boolean(),
  link_url: Type.Optional(Type.String()),
  is_multiuse: Type.Boolean(),
});

export function chatInvitesRoutes(r: ChatRouter, deps: { invites: ChatInvitesService }) {
  const { invites } = deps;

  r.authed({ method: 'GET', url: '/invites', operationId: 'getInvites', tags, response: Envelope({ invites: Type.Array(Invite) }) }, async ({ caller }) => ({
    invites: await invites.list(caller),
  }));

  r.authed({ method: 'POST', url: '/invites', operationId: 'sendInvites', tags, response: Envelope() }, async ({ params, caller }) => {
    const inviteAs = params.int('invite_as') ?? 400;
    const expires = params.intOrNull('invite_expires_in_minutes');
    const emails = params.string('invitee_emails', { required: true, maxLength: 100_000 });
    const notifyReferrerOnJoin = params.bool('notify_referrer_on_join') ?? true;
    const streamIds = params.intList('stream_ids', true);
    await invites.invite(caller, { emails, inviteAs, expiresInMinutes: expires === undefined ? DEFAULT_INVITE_MINUTES : expires, notifyReferrerOnJoin, streamIds });
    return {};
  });

  r.authed({ method: 'POST', url: '/invites/multiuse', operationId: 'createInviteLink', tags, response: Envelope({ invite_link: Type.String() }) }, async ({ params, caller }) => {
    const inviteAs = params.int('invite_as') ?? 400;
    const expires = params.intOrNull('invite_expires_in_minutes');
    const streamIds = params.intList('stream_ids') ?? [];
    return { invite_link: await invites.createLink(caller, { inviteAs, expiresInMinutes: expires === undefined ? DEFAULT_INVITE_MINUTES : expires, streamIds }) };
  });

  r.authed({ method: 'DELETE', url: '/invites/:invite_id', operationId: 'revokeInvite', tags, response: Envelope() }, async ({ req, caller }) => {
    await invites.revoke(caller, pathId((req.params as { invite_id: string }).invite_id));
    return {};
  });

  r.authed({ method: 'DELETE', url: '/invites/multiuse/:invite_id', operationId: 'revokeInviteLink', tags, response: Envelope() }, async ({ req, caller }) => {
    await invites.revokeLink(caller, pathId((req.params as { invite_id: string }).invite_id));
    return {};
  });

  r.authed({ method: 'POST', url: '/invites/:invite_id/resend', operationId: 'resendInvite', tags, response: Envelope() }, async ({ req, caller }) => {
    await invites.resend(caller, pathId((req.params as { invite_id: string }).invite_id));
    return {};
  });
}

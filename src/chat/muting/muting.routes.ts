import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import type { ChatMutingService } from './muting.service.ts';

const tags = ['chat-users'];

export function chatMutingRoutes(r: ChatRouter, deps: { muting: ChatMutingService }) {
  const { muting } = deps;
  const idOf = (p: unknown) => pathId((p as { muted_user_id: string }).muted_user_id);
  r.authed(
    { method: 'POST', url: '/users/me/muted_users/:muted_user_id', operationId: 'muteUser', tags, description: "Mutes a user: their messages reach the caller already read (those so far are marked read); /register's muted_users and muted_users events list them.", response: Envelope() },
    async ({ req, caller }) => {
      await muting.mute(caller, idOf(req.params));
      return {};
    },
  );
  r.authed({ method: 'DELETE', url: '/users/me/muted_users/:muted_user_id', operationId: 'unmuteUser', tags, description: 'Unmutes a user.', response: Envelope() }, async ({ req, caller }) => {
    await muting.unmute(caller, idOf(req.params));
    return {};
  });
}

import { Type } from 'typebox';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import type { ChatStatusService } from './status.service.ts';

const tags = ['chat-status'];

export function chatStatusRoutes(r: ChatRouter, deps: { status: ChatStatusService }) {
  const { status } = deps;

  r.authed({ method: 'POST', url: '/users/me/status', operationId: 'updateStatus', tags, response: Envelope() }, async ({ params, caller }) => {
    // Read in Zulip's order, so the first bad parameter is the one reported.
    const away = params.bool('away');
    const emojiCode = params.string('emoji_code', { maxLength: 100 });
    const emojiName = params.string('emoji_name', { maxLength: 100 });
    const reactionType = params.string('reaction_type', { maxLength: 100 });
    const statusText = params.string('status_text', { strip: true, maxLength: 60 });
    await status.update(caller, { away, statusText, emojiName, emojiCode, reactionType });
    return {};
  });

  r.authed(
    {
      method: 'GET',
      url: '/users/:user_id/status',
      operationId: 'getUserStatus',
      tags,
      response: Envelope({
        status: Type.Object({
          away: Type.Optional(Type.Boolean()),
          status_text: Type.Optional(Type.String()),
          emoji_name: Type.Optional(Type.String()),
          emoji_code: Type.Optional(Type.String()),
          reaction_type: Type.Optional(Type.String()),
        }),
      }),
    },
    async ({ req, caller }) => ({ status: await status.get(caller, pathId((req.params as { user_id: string }).user_id)) }),
  );
}

import { Type } from 'typebox';
import { Envelope, type ChatRouter } from '../http/server.ts';
import type { ChatEmojiService } from './emoji.service.ts';

const tags = ['chat-emoji'];

export function chatEmojiRoutes(r: ChatRouter, deps: { emoji: ChatEmojiService }) {
  const { emoji } = deps;

  r.authed(
    {
      method: 'GET',
      url: '/realm/emoji',
      operationId: 'getCustomEmoji',
      tags,
      response: Envelope({
        emoji: Type.Record(
          Type.String(),
          Type.Object({ id: Type.String(), name: Type.String(), source_url: Type.String(), deactivated: Type.Boolean(), author_id: Type.Union([Type.Integer(), Type.Null()]) }),
        ),
      }),
    },
    async ({ caller }) => ({ emoji: await emoji.list(caller) }),
  );

  r.authed({ method: 'POST', url: '/realm/emoji/:emoji_name', operationId: 'uploadCustomEmoji', tags, response: Envelope() }, async ({ req, files, caller }) => {
    await emoji.upload(caller, (req.params as { emoji_name: string }).emoji_name, files);
    return {};
  });

  r.authed({ method: 'DELETE', url: '/realm/emoji/:emoji_name', operationId: 'deactivateCustomEmoji', tags, response: Envelope() }, async ({ req, caller }) => {
    await emoji.deactivate(caller, (req.params as { emoji_name: string }).emoji_name);
    return {};
  });
}

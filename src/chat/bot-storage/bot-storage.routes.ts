import { Type } from 'typebox';
import { Envelope, type ChatRouter } from '../http/server.ts';
import type { ChatBotStorageService } from './bot-storage.service.ts';

const tags = ['chat-bot-storage'];

export function chatBotStorageRoutes(r: ChatRouter, deps: { botStorage: ChatBotStorageService }) {
  const { botStorage } = deps;

  r.authed({ method: 'PUT', url: '/bot_storage', operationId: 'updateBotStorage', tags, response: Envelope() }, async ({ params, caller }) => {
    await botStorage.put(caller, params.stringDict('storage', true));
    return {};
  });

  r.authed({ method: 'GET', url: '/bot_storage', operationId: 'getBotStorage', tags, response: Envelope({ storage: Type.Record(Type.String(), Type.String()) }) }, async ({ params, caller }) => ({
    storage: await botStorage.get(caller, params.stringList('keys')),
  }));

  r.authed({ method: 'DELETE', url: '/bot_storage', operationId: 'removeBotStorage', tags, description: 'Bots only; without keys every key goes; a missing key deletes nothing.', response: Envelope() }, async ({ params, caller }) => {
    await botStorage.remove(caller, params.stringList('keys'));
    return {};
  });
}

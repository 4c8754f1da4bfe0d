import { Type } from 'typebox';
import { Envelope, type ChatRouter } from '../http/server.ts';
import type { ChatRealmService } from './realm.service.ts';

const tags = ['chat-server'];

export function chatRealmRoutes(r: ChatRouter, deps: { realms: ChatRealmService }) {
  const { realms } = deps;

  r.open(
    {
      method: 'GET',
      url: '/server_settings',
      operationId: 'getServerSettings',
      tags,
      description: 'Public: the feature level and how to log in to the organization this host names.',
      response: Envelope({ zulip_feature_level: Type.Integer(), zulip_version: Type.String() }, { open: true }),
    },
    async ({ req }) => realms.serverSettings(req.headers.host),
  );

  r.authed({ method: 'PATCH', url: '/realm', operationId: 'updateRealm', tags, response: Envelope() }, async ({ params, caller }) => {
    await realms.update(caller, {
      defaultCodeBlockLanguage: params.string('default_code_block_language', { maxLength: 40 }),
      name: params.string('name', { maxLength: 40 }),
      description: params.string('description', { maxLength: 1000 }),
    });
    return {};
  });
}

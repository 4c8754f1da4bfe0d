import { Type } from 'typebox';
import type { ChatRealmService } from '../realm/realm.service.ts';
import { chatErrors } from '../http/errors.ts';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import { UserObject } from './users.present.ts';
import type { ChatUsersService } from './users.service.ts';

const tags = ['chat-users'];

export function chatUsersRoutes(r: ChatRouter, deps: { users: ChatUsersService; realms: ChatRealmService }) {
  const { users, realms } = deps;

  r.open(
    {
      method: 'POST',
      url: '/fetch_api_key',
      operationId: 'fetchApiKey',
      tags,
      description: 'Logs in with the account email and password; answers with the API key.',
      response: Envelope({ api_key: Type.String(), email: Type.String(), user_id: Type.Integer() }),
    },
    async ({ req, params }) => {
      const username = params.string('username', { required: true, maxLength: 254 });
      const password = params.string('password', { required: true, maxLength: 1000 });
      const realm = await realms.realmForHost(req.headers.host);
      if (!realm) throw chatErrors.authenticationFailed();
      return users.fetchApiKey(realm, username, password);
    },
  );

  r.authed(
    { method: 'GET', url: '/users', operationId: 'getUsers', tags, response: Envelope({ members: Type.Array(UserObject) }) },
    async ({ params, caller }) => {
      const clientGravatar = params.bool('client_gravatar') ?? true;
      const includeCustomProfileFields = params.bool('include_custom_profile_fields') ?? false;
      const userIds = params.intList('user_ids');
      return { members: await users.list(caller, { clientGravatar, includeCustomProfileFields, userIds }) };
    },
  );

  r.authed(
    { method: 'GET', url: '/users/me', operationId: 'getOwnUser', tags, response: Envelope({ ...UserObject.properties, max_message_id: Type.Integer() }) },
    async ({ caller }) => users.me(caller),
  );

  r.authed(
    {
      method: 'GET',
      url: '/users/:user_id',
      operationId: 'getUser',
      tags,
      description: 'One person by user ID or, as Zulip\'s GET /users/{email}, by an email address: their API email (`user{id}@{host}` for anyone), or their real address when the caller may see it.',
      response: Envelope({ user: UserObject }),
    },
    async ({ req, params, caller }) => {
      const raw = (req.params as { user_id: string }).user_id;
      const clientGravatar = params.bool('client_gravatar') ?? true;
      const includeCustomProfileFields = params.bool('include_custom_profile_fields') ?? false;
      if (raw.includes('@')) return { user: await users.getByEmail(caller, raw, { clientGravatar, includeCustomProfileFields }) };
      return { user: await users.get(caller, pathId(raw), { clientGravatar, includeCustomProfileFields }) };
    },
  );

  r.authed(
    { method: 'POST', url: '/users', operationId: 'createUser', tags, description: 'Administrators create an account that logs in with the given password.', response: Envelope({ user_id: Type.Integer() }) },
    async ({ params, caller }) => {
      const email = params.string('email', { required: true, maxLength: 254 });
      const password = params.string('password', { required: true, maxLength: 1000 });
      const fullName = params.string('full_name', { required: true, maxLength: 1000 });
      return users.createUser(caller, { email, password, fullName });
    },
  );

  r.authed({ method: 'DELETE', url: '/users/me', operationId: 'deactivateOwnUser', tags, response: Envelope() }, async ({ caller }) => {
    await users.deactivateSelf(caller);
    return {};
  });

  r.authed({ method: 'DELETE', url: '/users/:user_id', operationId: 'deactivateUser', tags, response: Envelope() }, async ({ req, params, caller }) => {
    params.string('deactivation_notification_comment', { maxLength: 2000 });
    await users.deactivate(caller, pathId((req.params as { user_id: string }).user_id), 'user');
    return {};
  });

  r.authed({ method: 'POST', url: '/users/:user_id/reactivate', operationId: 'reactivateUser', tags, response: Envelope() }, async ({ req, caller }) => {
    await users.reactivate(caller, pathId((req.params as { user_id: string }).user_id));
    return {};
  });

  r.authed(
    {
      method: 'POST',
      url: '/bots',
      operationId: 'createBot',
      tags,
      description: 'Creates a bot owned by the caller; the answer carries its API key.',
      response: Envelope({
        user_id: Type.Integer(),
        api_key: Type.String(),
        avatar_url: Type.String(),
        default_sending_stream: Type.Null(),
        default_events_register_stream: Type.Null(),
        default_all_public_streams: Type.Boolean(),
      }),
    },
    async ({ params, caller }) => {
      const fullName = params.string('full_name', { required: true, maxLength: 1000 });
      const shortName = params.string('short_name', { required: true, maxLength: 1000 });
      const botType = params.int('bot_type') ?? 1;
      return users.createBot(caller, { fullName, shortName, botType });
    },
  );

  r.authed({ method: 'DELETE', url: '/bots/:bot_id', operationId: 'deactivateBot', tags, response: Envelope() }, async ({ req, caller }) => {
    await users.deactivate(caller, pathId((req.params as { bot_id: string }).bot_id), 'bot');
    return {};
  });

  r.authed({ method: 'PATCH', url: '/settings', operationId: 'updateSettings', tags, response: Envelope() }, async ({ params, caller }) => {
    await users.updateSettings(caller, {
      emailAddressVisibility: params.int('email_address_visibility'),
      fullName: params.string('full_name', { maxLength: 1000 }),
      timezone: params.string('timezone', { maxLength: 100 }),
      presenceEnabled: params.bool('presence_enabled'),
    });
    return {};
  });

  r.authed({ method: 'POST', url: '/users/me/avatar', operationId: 'setOwnAvatar', tags, response: Envelope({ avatar_url: Type.String() }) }, async ({ files, caller }) => {
    if (files.length !== 1) throw chatErrors.bad('You must upload exactly one avatar.');
    return users.setAvatar(caller, files[0]);
  });
}

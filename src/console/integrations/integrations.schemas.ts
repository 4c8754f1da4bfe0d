import { Type, type Static } from 'typebox';

const Nullable = <T extends import('typebox').TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const IntegrationKindName = Type.Union(
  [Type.Literal('chat_a'), Type.Literal('chat_b'), Type.Literal('code_host'), Type.Literal('tracker_a'), Type.Literal('tracker_b')],
  { description: '`chat_a` (self-hosted chat), `chat_b` (hosted chat workspace), `code_host` (code-hosting app), `tracker_a` and `tracker_b` (issue trackers)' },
);

export const IntegrationParams = Type.Object({ kind: Type.String({ minLength: 1, maxLength: 32, description: 'one of chat_a, chat_b, code_host, tracker_a, tracker_b; anything else is 404' }) });

export const IntegrationSettingValue = Type.Union([Type.String({ maxLength: 2000 }), Type.Boolean()]);

export const IntegrationSettingField = Type.Object({
  name: Type.String(),
  type: Type.Union([Type.Literal('string'), Type.Literal('id'), Type.Literal('url'), Type.Literal('boolean')], {
    description: '`id`: a number (sent as a number or a string of digits; the code host\'s app_id also takes a client id `Iv...`); `url`: an http(s) URL without credentials',
  }),
  required: Type.Boolean({ description: 'needed to enable the integration, with the settings as they are now' }),
  default: Nullable(IntegrationSettingValue),
  description: Type.String(),
});

export const IntegrationSecret = Type.Object({
  name: Type.String({ description: 'the setting, e.g. app_key' }),
  ref: Type.String({ description: '`secret:integrations/<kind>/<name>`: the secret reference holding its value' }),
  required: Type.Boolean({ description: 'needed to enable the integration, with the settings as they are now' }),
  status: Type.Union([Type.Literal('set'), Type.Literal('unset')], { description: 'whether the reference has a value; never the value' }),
  set_with: Type.String({ description: 'the request that writes its value (an admin\'s)' }),
  description: Type.String(),
});

export const IntegrationStatus = Type.Object({
  applied: Type.Union([Type.Literal('current'), Type.Literal('pending')], {
    description:
      '`pending` after a PUT until every live sandbox host\'s gateway has loaded the new settings (at its start, or at once when told of the change), then `current`. With no live host it is `current`: a gateway that starts loads the settings as they are.',
  }),
  generation: Type.Integer({ description: 'the settings generation of the last PUT (0 before the first)' }),
  pending_hosts: Type.Array(Type.String(), { description: 'the live hosts (their addresses) whose gateway has not loaded this generation yet' }),
  complete: Type.Boolean({ description: 'every setting and secret needed to enable it is there (`missing` is empty)' }),
});

export const Integration = Type.Object(
  {
    kind: IntegrationKindName,
    purpose: Type.String(),
    enabled: Type.Boolean(),
    settings: Type.Record(Type.String(), IntegrationSettingValue, { description: 'the settings as written by the last PUT; a setting left out takes its default (see `fields`)' }),
    fields: Type.Array(IntegrationSettingField, { description: 'the settings this kind takes' }),
    secrets: Type.Array(IntegrationSecret, { description: 'the secrets this kind takes, with their status' }),
    missing: Type.Array(Type.String(), { description: 'what enabling needs and is not there yet: `settings.<name>` and `secrets.<name>`' }),
    webhook_url: Nullable(Type.String({ description: 'the URL to give the outside service for its webhooks (from SERVICE_PUBLIC_BASE_URL); null for the chat kinds, which receive none' })),
    status: IntegrationStatus,
    updated_by: Nullable(Type.String()),
    updated_at: Type.String(),
  },
  {
    description: 'An integration as an admin sees it: its settings, the secrets it needs (set or unset, never a value), what enabling still needs, the webhook URL and whether the gateways have loaded its last change.',
  },
);
export type Integration = Static<typeof Integration>;

export const IntegrationPut = Type.Object(
  {
    enabled: Type.Boolean({ description: 'true needs every required setting and secret (422 naming each one missing)' }),
    settings: Type.Record(Type.String({ maxLength: 64 }), Type.Union([Type.String({ maxLength: 2000 }), Type.Integer({ minimum: 0 }), Type.Boolean()]), {
      maxProperties: 20,
      description: 'every setting (a PUT replaces them all); a name the kind does not take is 422, and so is a secret\'s name (secrets are written with PUT /secrets/integrations/<kind>/<name>)',
    }),
  },
  { additionalProperties: false, examples: [{ enabled: true, settings: { app_id: 123456, installation_id: 7890123 } }] },
);
export type IntegrationPut = Static<typeof IntegrationPut>;

export const IntegrationList = Type.Object({
  items: Type.Array(Integration, { description: 'the five integrations, by kind' }),
  next_cursor: Nullable(Type.String({ description: 'pass as cursor for the next page; null on the last page' })),
});

export const IntegrationTestResult = Type.Object(
  {
    kind: IntegrationKindName,
    state: Type.Union([Type.Literal('ok'), Type.Literal('error'), Type.Literal('unknown')], {
      description: '`ok`: the service answered as configured; `error`: it did not, or the integration lacks what the test needs; `unknown`: no adapter can test this kind yet',
    }),
    detail: Type.String({ description: 'one line saying what was found, or why it failed; never a secret' }),
    tested_at: Type.String(),
  },
  { examples: [{ kind: 'code_host', state: 'ok', detail: 'app crewhouse installed on acme (installation 7890123), 12 repositories', tested_at: '2026-11-22T20:00:00Z' }] },
);
export type IntegrationTestResult = Static<typeof IntegrationTestResult>;

export const RoleBot = Type.Object({
  team: Type.String(),
  room_id: Nullable(Type.String({ description: 'the team\'s home room on chat_a' })),
  role: Type.String(),
  agent: Type.String(),
  posts_as: Type.Union([Type.Literal('role_bot'), Type.Literal('surface_bot')], {
    description: '`role_bot`: the role has a bot of its own (its key is set) and posts as it; `surface_bot`: it has none, and the surface bot posts for it with the role named in the text',
  }),
  bot_secret: Type.Object({
    ref: Type.String({ description: '`secret:integrations/chat_a/bots/<team>/<role>`: where the gateway holds the role bot\'s API key' }),
    status: Type.Union([Type.Literal('set'), Type.Literal('unset')]),
  }),
  display_name: Type.String({ description: 'the name its posts show: the agent\'s display name (or `<role>`) for a role bot; the surface bot\'s posts start with `[<role>]`' }),
  avatar_url: Nullable(Type.String({ description: 'the picture its posts show: the agent\'s avatar for a role bot; null for the surface bot (the chat server\'s own picture of it)' })),
});

export const RoleBotList = Type.Object({
  items: Type.Array(RoleBot, { description: 'one entry per role of each active team whose home is chat_a, by team and role' }),
  next_cursor: Nullable(Type.String({ description: 'pass as cursor for the next page; null on the last page' })),
});

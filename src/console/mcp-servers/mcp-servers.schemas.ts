import { Type, type Static } from 'typebox';
import { matching } from '../../http/schemas.ts';
import { SECRET_NAME_MAX, SECRET_NAME_PATTERN, SECRET_NAME_WORDS } from '../../secrets/secrets.service.ts';
import { DASH_NAME_WORDS, MAX_ROLES, ROLE_NAME, ROLE_NAME_WORDS } from '../templates/templates.schemas.ts';

export const MCP_SERVER_NAME = '^[a-z0-9][a-z0-9-]{0,62}$';
/** The `{team}` path segment: a team's name, or `platform` for the platform servers. */
export const PLATFORM_SEGMENT = 'platform';
const TEAM_SEGMENT = '^[a-z0-9][a-z0-9-]{0,62}$';
export const MCP_URL_MAX = 2000;

const Nullable = <T extends import('typebox').TSchema>(t: T) => Type.Union([t, Type.Null()]);

export const McpAuth = Type.Union([Type.Literal('none'), Type.Literal('bearer'), Type.Literal('header')], {
  description: '`none`: no credential; `bearer`: the secret goes in `Authorization: Bearer`; `header`: the secret is the value of the header named by `header`',
});
export const McpStatus = Type.Union([Type.Literal('curated'), Type.Literal('proposed')], {
  description: '`proposed`: an agent proposed it and it is not given to any role yet; `curated`: a person created, replaced or accepted it',
});

const SecretRef = Type.String({
  maxLength: SECRET_NAME_MAX + 7,
  ...matching(`^secret:${SECRET_NAME_PATTERN.slice(1)}`, `"secret:" and a secret name: ${SECRET_NAME_WORDS}`),
  description: '`secret:<name>` of an existing secret reference (PUT /secrets/<name>); for bearer and header auth; left out, the server gets its own reference, created unset (`secret:teams/<team>/mcp/<name>`, or `secret:mcp/<name>` for a platform server), for an admin to give a value. Refused for none. A team server may only name its team\'s secrets, `secret:teams/<team>/<name>`, so no platform credential can be sent to a URL an operator chose',
});

export const McpServer = Type.Object({
  id: Type.String({ description: '`platform:<name>` for a platform server, `<team>/<name>` for a team server' }),
  scope: Type.Union([Type.Literal('platform'), Type.Literal('team')]),
  team: Nullable(Type.String({ description: 'null for a platform server' })),
  name: Type.String(),
  url: Type.String(),
  destination: Type.String({ description: 'the destination whose egress reaches the server' }),
  auth: McpAuth,
  header: Nullable(Type.String({ description: 'the header the credential goes in, for auth `header`; null otherwise' })),
  roles: Type.Array(Type.String(), { description: 'the team roles that get the server; empty: every role of the team (always empty for a platform server)' }),
  secret: Type.Object({
    ref: Nullable(Type.String({ description: '`secret:<name>`, or null for auth none' })),
    status: Type.Union([Type.Literal('set'), Type.Literal('unset'), Type.Literal('missing'), Type.Literal('none')], {
      description: '`set`: the secret has a value; `unset`: its reference exists without a value; `missing`: the reference was deleted since; `none`: the server needs no secret. Never the value.',
    }),
    set_with: Type.Optional(Type.String({ description: 'for `unset` and `missing`: the request that gives the secret its value (an admin\'s)' })),
  }),
  status: McpStatus,
  proposed_by: Nullable(Type.String({ description: 'who proposed it (an agent role), for a server that started as a proposal' })),
  warnings: Type.Array(Type.String(), {
    description:
      'for a team server: the roles it is given to (`roles`, or every role when empty) whose egress (the team override, else the agent\'s) lacks `destination`; allow_all lacks nothing and the built-ins llm, mcp, otel are in every egress. Always empty for a platform server: it is not tied to a team, and a role reaches it only where an agent or template names it.',
  }),
  created_by: Type.String(),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export type McpServer = Static<typeof McpServer>;

const fields = {
  url: Type.String({ minLength: 8, maxLength: MCP_URL_MAX, ...matching('^[Hh][Tt][Tt][Pp][Ss]?://\\S+$', 'an http:// or https:// URL, without spaces'), description: 'http(s) URL of the server, without credentials (put those in a secret)' }),
  destination: Type.String({ minLength: 1, maxLength: 128, description: 'an existing destination (GET /destinations), built-ins included' }),
  auth: McpAuth,
  header: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 64, ...matching('^[A-Za-z0-9][A-Za-z0-9-]*$', 'a header name: letters, digits and "-", starting with a letter or digit'), description: 'required for auth `header`, refused otherwise' }))),
  secret: Type.Optional(Nullable(SecretRef)),
  roles: Type.Array(Type.String({ ...matching(ROLE_NAME, ROLE_NAME_WORDS), maxLength: 32 }), {
    maxItems: MAX_ROLES,
    uniqueItems: true,
    description: 'team roles that get the server; empty: every role of the team. Unknown roles are a 422; a platform server takes none.',
  }),
};

export const McpServerCreate = Type.Object(
  {
    team: Type.Optional(Nullable(Type.String({ ...matching(TEAM_SEGMENT, DASH_NAME_WORDS), maxLength: 63, description: 'a live team: a team server (operator); null or absent: a platform server (admin)' }))),
    name: Type.String({ ...matching(MCP_SERVER_NAME, DASH_NAME_WORDS), maxLength: 63 }),
    ...fields,
  },
  { additionalProperties: false },
);
export type McpServerCreate = Static<typeof McpServerCreate>;

export const McpServerPut = Type.Object(
  {
    team: Type.Optional(Nullable(Type.String({ maxLength: 63, description: 'when sent, must name the path\'s server (null for platform)' }))),
    name: Type.Optional(Type.String({ maxLength: 63, description: 'when sent, must be the path\'s name: servers are not renamed' })),
    ...fields,
  },
  { additionalProperties: false },
);
export type McpServerPut = Static<typeof McpServerPut>;

/** What the runtime sends when an agent proposes a server for its team. */
export type McpServerProposal = Omit<McpServerCreate, 'team'>;

export const McpServerParams = Type.Object({
  team: Type.String({ ...matching(TEAM_SEGMENT, DASH_NAME_WORDS), maxLength: 63, description: 'a team\'s name, or `platform` for a platform server' }),
  name: Type.String({ ...matching(MCP_SERVER_NAME, DASH_NAME_WORDS), maxLength: 63 }),
});

export const McpServerIdParams = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 140, description: '`platform:<name>`, or `<team>/<name>` with the slash sent as %2F' }),
});

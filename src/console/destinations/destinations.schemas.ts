import { Type, type Static } from 'typebox';
import { matching } from '../../http/schemas.ts';

export const DESTINATION_NAME_PATTERN = '^[a-z0-9][a-z0-9_-]{0,62}$';
/** What DESTINATION_NAME_PATTERN allows, in words. */
export const DESTINATION_NAME_WORDS = 'lowercase letters, digits, "_" and "-", starting with a letter or digit; at most 63 characters';
const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);
const GithubScope = Type.Union([Type.Literal('api'), Type.Literal('git'), Type.Literal('repo_metadata'), Type.Literal('mcp')]);

export const Destination = Type.Object({
  name: Type.String(),
  host: Nullable(Type.String()),
  methods: Type.Array(Type.String(), { description: 'empty means any method' }),
  paths: Type.Array(Type.String()),
  header_allowlist: Type.Array(Type.String(), { description: 'request headers the agent may send' }),
  inject_secret: Nullable(Type.String({ description: 'a gateway key, mcp:<name> or secret:<name>' })),
  git_push_ref_globs: Type.Array(Type.String()),
  what: Type.String(),
  builtin: Type.Boolean(),
  github_scope: Nullable(GithubScope),
  dev_only: Type.Boolean(),
  policy_name: Nullable(Type.String()),
  updated_at: Type.Optional(Type.String()),
});
export type Destination = Static<typeof Destination>;

const fields = {
  host: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 300, description: 'DNS name (optionally *.name), IPv4 or IPv6 address, optional :port; a loopback or private host needs dev_only' }))),
  methods: Type.Optional(Type.Array(Type.String({ ...matching('^[A-Za-z]{1,16}$', 'an HTTP method such as GET or POST: letters only, at most 16') }), { maxItems: 16, description: 'HTTP methods; empty means any' })),
  paths: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 512, ...matching('^/', 'a path starting with "/"') }), { maxItems: 100, description: 'path prefixes or globs (`*`), each starting with /' })),
  header_allowlist: Type.Optional(Type.Array(Type.String({ ...matching("^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$", 'a header name such as content-type: letters, digits and the signs HTTP allows in names (no spaces or colons), at most 100 characters') }), { maxItems: 100 })),
  inject_secret: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 300 }))),
  git_push_ref_globs: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 256 }), { maxItems: 50 })),
  what: Type.Optional(Type.String({ maxLength: 500 })),
  builtin: Type.Optional(Type.Boolean({ description: 'only false: built-ins are defined by the service' })),
  github_scope: Type.Optional(Nullable(GithubScope)),
  dev_only: Type.Optional(Type.Boolean()),
  policy_name: Type.Optional(Nullable(Type.String({ minLength: 1, maxLength: 100 }))),
};

export const DestinationCreate = Type.Object({ name: Type.String({ ...matching(DESTINATION_NAME_PATTERN, DESTINATION_NAME_WORDS), description: 'lowercase letters, digits, _ and -; at most 63' }), ...fields }, { additionalProperties: false });
export type DestinationCreate = Static<typeof DestinationCreate>;

export const DestinationPut = Type.Object(
  { name: Type.Optional(Type.String({ maxLength: 128, description: 'if given, the name in the path' })), ...fields },
  { additionalProperties: false },
);
export type DestinationPut = Static<typeof DestinationPut>;

export const DestinationParams = Type.Object({ name: Type.String({ minLength: 1, maxLength: 128 }) });

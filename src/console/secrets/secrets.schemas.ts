import { Type } from 'typebox';
import { matching } from '../../http/schemas.ts';
import { SECRET_NAME_MAX, SECRET_NAME_PATTERN, SECRET_NAME_WORDS, SECRET_VALUE_MAX_BYTES } from '../../secrets/secrets.service.ts';

/** A secret reference: metadata only, never a value. */
export const SecretReference = Type.Object({
  name: Type.String(),
  kind: Type.Union([Type.Literal('integration'), Type.Literal('platform')], { description: '`integration` for integrations/<kind>/<setting>' }),
  set: Type.Boolean({ description: 'whether a value is stored' }),
  used_by: Type.Integer({ description: 'how many destinations, integrations, MCP servers and model aliases refer to it as secret:<name>' }),
  created_at: Type.String(),
  updated_at: Type.String(),
  created_by: Type.String(),
  updated_by: Type.String({ description: 'who last wrote or removed the value' }),
  value_set_at: Type.Union([Type.String(), Type.Null()], { description: 'when the current value was written; null when unset' }),
});

export const SecretPut = Type.Object(
  { value: Type.String({ minLength: 1, maxLength: SECRET_VALUE_MAX_BYTES, description: 'written once and never returned' }) },
  { additionalProperties: false },
);

export const SecretParams = Type.Object({
  '*': Type.String({ minLength: 1, maxLength: SECRET_NAME_MAX, ...matching(SECRET_NAME_PATTERN, SECRET_NAME_WORDS), description: 'the secret name; may contain `/`' }),
});

export const SecretListQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50 })),
    cursor: Type.Optional(Type.String({ maxLength: 1024 })),
    prefix: Type.Optional(Type.String({ minLength: 1, maxLength: SECRET_NAME_MAX, description: 'only names starting with this, e.g. integrations/code_host/' })),
  },
  { additionalProperties: false },
);

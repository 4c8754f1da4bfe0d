import { Type, type Static } from 'typebox';
import { matching } from '../../http/schemas.ts';

export const RoleSchema = Type.Union([Type.Literal('viewer'), Type.Literal('operator'), Type.Literal('admin')]);
const Name = Type.String({ minLength: 1, maxLength: 100, ...matching('^\\S(.*\\S)?$', 'a name that neither starts nor ends with a space'), description: 'log-in name, unique regardless of case' });
const Email = Type.String({ maxLength: 254, format: 'email' });

export const User = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  email: Type.Union([Type.String(), Type.Null()]),
  role: RoleSchema,
  disabled: Type.Boolean(),
  password_set: Type.Boolean({ description: 'false until the person used a setup token' }),
  last_login_at: Type.Union([Type.String(), Type.Null()]),
  created_at: Type.String(),
  updated_at: Type.String(),
});
export type User = Static<typeof User>;

export const UserWithSetup = Type.Object({
  ...User.properties,
  setup_token: Type.String({ description: 'one-time; shown only in this answer' }),
  setup_url: Type.String({ description: '<console_url>/#setup?token=<setup_token>' }),
  setup_expires_at: Type.String(),
});

export const UserCreate = Type.Object(
  { name: Name, email: Type.Optional(Type.Union([Email, Type.Null()])), role: RoleSchema },
  { additionalProperties: false },
);
export type UserCreate = Static<typeof UserCreate>;

export const UserPatch = Type.Object(
  {
    name: Type.Optional(Name),
    email: Type.Optional(Type.Union([Email, Type.Null()])),
    role: Type.Optional(RoleSchema),
    disabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UserPatch = Static<typeof UserPatch>;

export const UserIdParams = Type.Object({ id: Type.Integer({ minimum: 1, maximum: 2147483647 }) });

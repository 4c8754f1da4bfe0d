import { Type } from 'typebox';
import { RoleSchema } from '../users/users.schemas.ts';

export const Me = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  email: Type.Union([Type.String(), Type.Null()]),
  role: RoleSchema,
  via: Type.Union([Type.Literal('session'), Type.Literal('token')], { description: 'how the credentials were presented' }),
});

export const SessionInfo = Type.Object({
  user: Type.Object({ id: Type.Integer(), name: Type.String(), email: Type.Union([Type.String(), Type.Null()]), role: RoleSchema }),
  via: Type.Union([Type.Literal('session'), Type.Literal('token')]),
  csrf_token: Type.Union([Type.String(), Type.Null()], { description: `send in X-Console-CSRF on every unsafe request of a browser session; null with a token` }),
  expires_at: Type.Union([Type.String(), Type.Null()]),
});

const Password = Type.String({ minLength: 12, maxLength: 1024, description: 'at least 12 characters' });

export const LoginBody = Type.Object(
  { name: Type.String({ minLength: 1, maxLength: 254, description: 'the user\'s name or email' }), password: Type.String({ minLength: 1, maxLength: 1024 }) },
  { additionalProperties: false },
);

export const SetupBody = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 256 }), password: Password },
  { additionalProperties: false },
);

export const TokenSchema = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  kind: Type.Union([Type.Literal('api'), Type.Literal('onboarding')]),
  prefix: Type.String({ description: 'the first characters of the token, to recognise it' }),
  created_at: Type.String(),
  expires_at: Type.Union([Type.String(), Type.Null()]),
  last_used_at: Type.Union([Type.String(), Type.Null()]),
});

export const NewToken = Type.Object({ ...TokenSchema.properties, token: Type.String({ description: 'shown once' }) });

export const TokenCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    expires_in_days: Type.Optional(Type.Union([Type.Integer({ minimum: 1, maximum: 3650 }), Type.Null()], { description: 'null or absent: never expires' })),
  },
  { additionalProperties: false },
);

export const OnboardingToken = Type.Object({
  ...NewToken.properties,
  prompt: Type.String({ description: 'the onboarding prompt with this token filled in, to paste into an agent' }),
});

export const Onboarding = Type.Object({
  role: RoleSchema,
  console_url: Type.String(),
  api_base_url: Type.String(),
  openapi_url: Type.String(),
  prompt: Type.String({ description: 'two sentences to give an agent; no token' }),
  instructions: Type.String({ description: 'an agent-instructions snippet (Markdown) for the caller\'s role; no token' }),
});

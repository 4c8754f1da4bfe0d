import { Type } from 'typebox';

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    errors: Type.Array(Type.Object({ field: Type.String(), message: Type.String() })),
  },
  { $id: 'Problem', description: 'RFC 9457 problem; errors[] names each bad field' },
);

/** Headers a write of an existing resource takes. */
export const IfMatchHeader = Type.Object({
  'if-match': Type.Optional(Type.String({ description: 'the ETag from a fresh GET; 428 when missing, 412 when stale' })),
});

export const NoContent = Type.Null({ description: 'no content' });

/** A path segment name: what most resources are called by. */
export const NameParam = (pattern = '^[a-z0-9][a-z0-9._-]{0,62}$') => Type.String({ minLength: 1, maxLength: 128, pattern });

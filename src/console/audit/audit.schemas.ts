import { Type } from 'typebox';

/** One write recorded in the audit log. `details` never holds a secret (recordAudit's rule). */
export const AuditEntry = Type.Object({
  id: Type.Integer(),
  at: Type.String(),
  actor: Type.String({ description: 'the user name, or the system component that acted' }),
  actor_user_id: Type.Union([Type.Integer(), Type.Null()]),
  via: Type.String({ description: '`session`, `token` or `system`' }),
  action: Type.String({ description: 'e.g. `agent.create`, `team.archive`, `skill.update`' }),
  target_type: Type.String(),
  target: Type.String(),
  request_id: Type.Union([Type.String(), Type.Null()]),
  details: Type.Record(Type.String(), Type.Unknown()),
});

export const AuditQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 200, default: 50, description: 'page size, 1 to 200; default 50' })),
    cursor: Type.Optional(Type.String({ maxLength: 1024, description: 'the next_cursor of the previous page' })),
    action: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'only entries of this action' })),
    target_type: Type.Optional(Type.String({ minLength: 1, maxLength: 100, description: 'only entries about this kind of target' })),
  },
  { additionalProperties: false },
);

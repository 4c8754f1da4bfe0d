import { Type, type Static } from 'typebox';

const Nullable = <T extends import('typebox').TSchema>(t: T) => Type.Union([t, Type.Null()]);
const Kind = Type.Union([Type.Literal('agent'), Type.Literal('template'), Type.Literal('policy'), Type.Literal('skill')], { description: 'agent (agents/), team template (templates/), gateway policy: an egress destination (policies/), platform skill (skills/)' });

export const ImportRequest = Type.Object(
  {
    dry_run: Type.Optional(Type.Boolean({ description: 'true (the default): answer the plan and write nothing; false: apply the whole plan in one transaction' })),
    force: Type.Optional(Type.Boolean({ description: 'overwrite platform skills edited through the API since the last import (default false: they are skipped)' })),
    prune: Type.Optional(Type.Boolean({ description: 'delete what the repository does not name (default false: it is left alone and listed in left_alone)' })),
  },
  { additionalProperties: false },
);
export type ImportRequest = Static<typeof ImportRequest>;

export const PlanEntry = Type.Object({
  kind: Kind,
  name: Type.String(),
  file: Nullable(Type.String({ description: 'the file in the repository; null for a deletion' })),
  action: Type.Union([Type.Literal('create'), Type.Literal('update'), Type.Literal('unchanged'), Type.Literal('skip'), Type.Literal('delete')]),
  reason: Nullable(Type.String({ description: 'why: a skip (edited through the API, a built-in, refused by a rule), a skill that returns, a deletion' })),
  diff: Nullable(Type.String({ description: 'what changes, line by line (`-` now, `+` after the import); null when unchanged or deleted' })),
  version: Nullable(Type.Integer({ description: 'the new version of an agent or template (the revision of a skill); null when none is made' })),
});
export type PlanEntry = Static<typeof PlanEntry>;

export const PlanProblem = Type.Object({
  file: Type.String({ description: 'the file in the repository' }),
  line: Nullable(Type.Integer({ description: '1-based line, where it can be told' })),
  field: Nullable(Type.String({ description: 'the field of the body, as the API names it' })),
  message: Type.String({ description: 'the rule broken, in the API\'s words' }),
});
export type PlanProblem = Static<typeof PlanProblem>;

export const ImportPlan = Type.Object({
  commit: Nullable(Type.String({ description: 'the commit the definitions came from (null for a directory that is not a git checkout)' })),
  dry_run: Type.Boolean(),
  applied: Type.Boolean({ description: 'true when the plan was written (an apply without problems)' }),
  force: Type.Boolean(),
  prune: Type.Boolean(),
  entries: Type.Array(PlanEntry, { description: 'one per definition of the repository (and per deletion with prune), skills, policies, agents, templates in that order' }),
  left_alone: Type.Array(Type.Object({ kind: Kind, name: Type.String() }), { description: 'what exists but the repository does not name: left as it is (prune deletes it)' }),
  problems: Type.Array(PlanProblem, { description: 'every problem found; an apply with any writes nothing (422)' }),
});
export type ImportPlan = Static<typeof ImportPlan>;

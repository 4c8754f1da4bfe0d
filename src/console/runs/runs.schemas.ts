import { Type, type Static } from 'typebox';
import { ListQuery } from '../../http/pagination.ts';
import { matching } from '../../http/schemas.ts';

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);
const Time = Type.String({ format: 'date-time' });


export const MAX_TASK_CHARS = 32_000;
export const MAX_REPLY_CHARS = 16_000;

export const RunStateSchema = Type.Union([Type.Literal('running'), Type.Literal('waiting'), Type.Literal('succeeded'), Type.Literal('failed'), Type.Literal('cancelled')]);
export const PostKindSchema = Type.Union([Type.Literal('notice'), Type.Literal('working'), Type.Literal('question'), Type.Literal('answer'), Type.Literal('completed'), Type.Literal('failed'), Type.Literal('canceled'), Type.Literal('task'), Type.Literal('reply'), Type.Literal('artifact'), Type.Literal('command_result')]);

export const TaskInput = Type.Object(
  { text: Type.String({ minLength: 1, maxLength: MAX_TASK_CHARS, description: `what the team should do; 1 to ${MAX_TASK_CHARS} characters` }) },
  { additionalProperties: false },
);

export const TaskAccepted = Type.Object({
  run_id: Type.String(),
  work_item_id: Type.String(),
  state: RunStateSchema,
});

export const RunTask = Type.Object({
  id: Type.String(),
  role: Type.String(),
  state: Type.Union([Type.Literal('queued'), Type.Literal('running'), Type.Literal('waiting'), Type.Literal('done'), Type.Literal('failed'), Type.Literal('cancelled')]),
  agent_version: Nullable(Type.Integer()),
  iterations: Type.Integer({ description: 'model calls made for this task' }),
  cost_usd: Type.Number(),
  created_at: Time,
  started_at: Nullable(Time),
  finished_at: Nullable(Time),
});

export const RunSummary = Type.Object({
  id: Type.String(),
  team: Type.String(),
  work_item_id: Type.String(),
  state: RunStateSchema,
  surface: Type.String({ description: 'where the work came from, and where the run is answered and cancelled: `console`, `code_host`, `tracker_a`, `tracker_b`, or a chat surface (`chat_a`, `chat_b`: answered and cancelled there, the routes answer 409)' }),
  text: Type.String({ description: 'the task as given' }),
  lead: Type.String(),
  cost_usd: Type.Number({ description: 'model spend of every role of the run' }),
  waiting_for: Nullable(Type.Object({ role: Type.String(), kind: Type.Union([Type.Literal('question'), Type.Literal('confirmation')]), since: Time })),
  open_question: Nullable(Type.Object({ seq: Type.Integer(), role: Type.String(), text: Type.String() })),
  failure_reason: Nullable(Type.String()),
  created_by: Type.String(),
  created_at: Time,
  updated_at: Time,
  finished_at: Nullable(Time),
});

export const Run = Type.Object({
  ...RunSummary.properties,
  tasks: Type.Array(RunTask),
  delivery: Nullable(
    Type.Object({
      branch: Nullable(Type.String()),
      commit: Nullable(Type.String()),
      pull_request: Nullable(Type.Object({ url: Type.String(), number: Nullable(Type.Integer()), state: Nullable(Type.String()) })),
    }),
  ),
  agent_versions: Type.Record(Type.String(), Type.Integer(), { description: 'the agent version each role runs, fixed when the run started' }),
  chat_thread_url: Nullable(Type.String()),
  origin_url: Nullable(Type.String({ description: 'the link back to where the work came from: the tracker issue or the code host issue of a run from there; null for the console and chat (see `chat_thread_url`)' })),
  jaeger_url: Nullable(Type.String()),
});
export type Run = Static<typeof Run>;

export const Post = Type.Object({
  seq: Type.Integer({ description: 'ordering cursor: pass the last seen as `cursor` for newer posts' }),
  kind: PostKindSchema,
  role: Nullable(Type.String()),
  text: Type.String(),
  data: Type.Record(Type.String(), Type.Unknown()),
  created_at: Time,
});
export type Post = Static<typeof Post>;

export const RunParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64, ...matching('^[A-Za-z0-9_-]+$', 'a run id: letters, digits, "_" and "-"') }) });

export const RunListQuery = Type.Object(
  {
    ...ListQuery.properties,
    state: Type.Optional(RunStateSchema),
    team: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
  },
  { additionalProperties: false },
);

/** A team's runs: the team is the path's, so there is no `team` filter to offer. */
export const TeamRunListQuery = Type.Object({ ...ListQuery.properties, state: Type.Optional(RunStateSchema) }, { additionalProperties: false });

export const PostsQuery = Type.Object(
  {
    cursor: Type.Optional(Type.String({ ...matching('^[0-9]{1,9}$', 'a whole number of at most 9 digits'), description: 'the last `seq` seen: only newer posts are returned' })),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 200 })),
  },
  { additionalProperties: false },
);

export const ReplyInput = Type.Object(
  {
    text: Type.String({ minLength: 1, maxLength: MAX_REPLY_CHARS }),
    in_reply_to: Type.Optional(Nullable(Type.Integer({ minimum: 1, maximum: 2147483647, description: 'the open question\'s `seq`: the text answers it; without it the text is a follow-up task' }))),
    approve: Type.Optional(Type.Boolean({ description: 'for a confirmation (with `in_reply_to` its seq): true approves, false refuses; without it the text decides ("approve"/"yes" or "refuse"/"no"). Sent without `in_reply_to` or for a question that is not a confirmation, it is a 422' })),
  },
  { additionalProperties: false },
);
export type ReplyInput = Static<typeof ReplyInput>;

export const ReplyAccepted = Type.Object({ run_id: Type.String(), seq: Type.Integer({ description: 'the post the reply became' }), state: RunStateSchema });

export const TraceSpan = Type.Object({
  trace_id: Type.String(),
  span_id: Type.String(),
  parent_span_id: Nullable(Type.String()),
  name: Type.String(),
  start_time: Time,
  duration_ms: Type.Number(),
  attributes: Type.Record(Type.String(), Type.Unknown()),
});
export const Trace = Type.Object({ run_id: Type.String(), trace_id: Nullable(Type.String()), spans: Type.Array(TraceSpan) });

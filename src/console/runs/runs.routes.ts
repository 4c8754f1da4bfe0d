import { Type } from 'typebox';
import { actorOf } from '../../http/auth.ts';
import { setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { TeamParams } from '../teams/teams.schemas.ts';
import { MAX_REPLY_CHARS, MAX_TASK_CHARS, Post, PostsQuery, ReplyAccepted, ReplyInput, Run, RunListQuery, RunParams, RunSummary, TaskAccepted, TaskInput, TeamRunListQuery, Trace } from './runs.schemas.ts';
import type { RunsService } from './runs.service.ts';
import type { TraceReader } from './trace.ts';
import { watchPosts } from './watch.ts';
import { prefers } from '../../http/negotiation.ts';
import { matching } from '../../http/schemas.ts';

/** The stream resumes after the post whose seq a reconnecting client names (the EventSource standard's header). */
const PostsStreamHeaders = Type.Object({
  'last-event-id': Type.Optional(Type.String({ description: 'With `Accept: text/event-stream`: resume after this seq (what EventSource sends when it reconnects); it takes precedence over `cursor`. The ids this stream sends are seqs, so anything else is a 400.', ...matching('^[0-9]{1,15}$', 'a post\'s seq: digits only, at most 15') })),
});

export function runsRoutes(app: App, deps: { runs: RunsService; traces: TraceReader }) {
  const { runs } = deps;
  const tags = ['runs'];

  app.post('/teams/:name/tasks', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'createTeamTask',
      summary: 'Give a team a task',
      location: true,
      problems: { 409: 'the team is archived, not yet active, or lives on a chat surface', 429: "the team's daily budget is spent", 503: 'no live sandbox host (and its gateway) can take the work' },
      tags,
      description: `Starts a run: the team's lead role gets the text (1 to ${MAX_TASK_CHARS} characters; 422 when it is only blanks). 202 with the run's id and a Location; 404 unknown team; 409 when the team is archived, not yet active, or lives on a chat surface; 429 when its daily budget is spent; 503 when no live sandbox host (and its gateway) can take the team's work.`,
      params: TeamParams,
      body: TaskInput,
      response: { 202: TaskAccepted },
    },
    handler: async (req, reply) => {
      const accepted = await runs.createRun(actorOf(req), { team: req.params.name, text: req.body.text, surface: 'console' });
      return reply.status(202).header('location', `/api/v1/runs/${accepted.run_id}`).send(accepted);
    },
  });

  app.get('/runs', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listRuns',
      summary: 'List runs',
      tags,
      description: 'Runs, newest first. `state=waiting` finds the runs with an open question; `team` keeps the runs of the team of that name (archived ones too): 404 when no team ever had the name, as for the team\'s own list of runs.',
      problems: { 404: 'no team ever had the name given as `team`' },
      querystring: RunListQuery,
      response: { 200: Page(RunSummary) },
    },
    handler: (req) => runs.list({ limit: limitOf(req.query), cursor: req.query.cursor, state: req.query.state, team: req.query.team }),
  });

  app.get('/teams/:name/runs', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listTeamRuns', summary: "List a team's runs", tags, description: "A team's runs, newest first.", params: TeamParams, querystring: TeamRunListQuery, response: { 200: Page(RunSummary) } },
    handler: (req) => runs.listOfTeam(req.params.name, { limit: limitOf(req.query), cursor: req.query.cursor, state: req.query.state }),
  });

  app.get('/runs/:id', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getRun',
      summary: 'Get a run',
      etag: true,
      tags,
      description: 'State, each role\'s tasks, cost, `waiting_for` and `open_question` while it waits, `failure_reason`, `delivery` (branch, commit, pull request), trace link, and the agent version each role runs.',
      params: RunParams,
      response: { 200: Run },
    },
    handler: async (req, reply) => {
      const { run, version } = await runs.get(req.params.id);
      setEtag(reply, version, run);
      return run;
    },
  });

  app.get('/runs/:id/posts', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listRunPosts',
      summary: "Read a run's conversation",
      tags,
      description:
        'The conversation in order. `cursor` = the last `seq` seen returns only newer posts. With `Accept: text/event-stream` (preferred by its quality over application/json; a tie goes to the stream) the same route streams posts as they come (each event\'s `id` is its seq, `event` its kind, `data` the post as JSON), starting after `cursor` or the `Last-Event-ID` header; comments keep the connection alive. A client that reads too slowly (more than 1 MiB waiting for it) gets an `overflow` event (`data`: `{detail, last_event_id}`, no `id`) and the stream ends; reconnecting with `Last-Event-ID` resumes without a post lost or repeated.',
      params: RunParams,
      querystring: PostsQuery,
      headers: PostsStreamHeaders,
      response: {
        200: {
          description: 'A page of posts; or, asked for with `Accept: text/event-stream`, the stream of posts',
          content: {
            'application/json': { schema: Page(Post) },
            'text/event-stream': {
              schema: Type.String({ description: 'Server-sent events: `id: <seq>`, `event: <kind>`, `data: <the post as JSON>`, and `:` comments that keep the connection alive; it goes on until the client closes it',
                examples: [': stream of run posts\n\nid: 8\nevent: artifact\ndata: {"seq":8,"kind":"artifact","role":"dev","text":"pushed crewhouse/run_8Kq2 at 3f9c2d41e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3","data":{"branch":"crewhouse/run_8Kq2","commit":"3f9c2d41e8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3"},"created_at":"2026-11-02T10:05:00.000Z"}\n\n'],
              }),
            },
          },
        },
      },
    },
    handler: async (req, reply) => {
      const after = Number(req.query.cursor ?? 0);
      const limit = req.query.limit ?? 200;
      if (!prefers(req.headers.accept, 'text/event-stream')) return runs.posts(req.params.id, after, limit);

      // The header wins over `cursor` whenever it is sent, 0 (resume from the start) included.
      const lastEventId = req.headers['last-event-id'];
      await watchPosts(req, reply, runs, req.params.id, lastEventId ? Number(lastEventId) : after);
    },
  });

  app.post('/runs/:id/replies', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'replyToRun',
      summary: 'Answer a run or give it a follow-up',
      problems: { 409: 'the question is no longer open, the run waits for an answer, was cancelled, its team was archived, or it lives on a chat surface', 429: "a follow-up would reopen a finished run while the team's daily budget is spent" },
      tags,
      description: `With \`in_reply_to\` = the open question's seq, the text answers it (a confirmation takes "approve"/"refuse", or \`approve\`) and the run goes on: 409 when that question is no longer open, 422 when the seq is not a question, and 422 naming \`approve\` when it is sent for a question that is not a confirmation or without \`in_reply_to\`. Without it, the text (1 to ${MAX_REPLY_CHARS} characters) is a follow-up task for the lead in the same run (422 when it is only blanks); a succeeded or failed run reopens (429 with Retry-After while the team's daily budget is spent); 409 while the run waits for an answer or after a cancel, and 409 once the run's team is archived. 409 for a run on a chat surface. 202.`,
      params: RunParams,
      body: ReplyInput,
      response: { 202: ReplyAccepted },
    },
    handler: async (req, reply) => reply.status(202).send(await runs.reply(actorOf(req), req.params.id, req.body)),
  });

  app.post('/runs/:id/cancel', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'cancelRun',
      summary: 'Cancel a run',
      etag: true,
      problems: { 409: 'the run has already ended, or lives on a chat surface' },
      tags,
      description: 'Cancels the run at once: its running tools and agent loop are stopped. 409 for a run that has already ended, and for a run on a chat surface (cancel it there).',
      params: RunParams,
      response: { 200: Run },
    },
    handler: async (req, reply) => {
      const { run, version } = await runs.cancel(actorOf(req), req.params.id);
      setEtag(reply, version, run);
      return run;
    },
  });

  app.get('/runs/:id/trace', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getRunTrace',
      summary: "Read a run's trace",
      tags,
      description: 'The spans of the run from the trace store (SERVICE_JAEGER_URL): the run, each role\'s task, each model and tool call. Empty when no store is configured, it does not answer, or it has no such trace.',
      params: RunParams,
      response: { 200: Trace },
    },
    handler: async (req) => {
      const traceId = await runs.traceId(req.params.id);
      return { run_id: req.params.id, trace_id: traceId, spans: traceId ? await deps.traces.spans(traceId) : [] };
    },
  });
}

import readline from 'node:readline/promises';
import { intArg } from '../client.ts';
import { LIMIT_HELP, LIMIT_OPTION, readStdin, type Ctx, type Group } from '../command.ts';
import { ApiError, CliError } from '../errors.ts';
import { block, emit, table, type Column } from '../output.ts';
import { listCommand, seg, showCommand } from './shared.ts';

const FINISHED = new Set(['succeeded', 'failed', 'cancelled']);
/** Posts that end a run: after one, the run's state is read to decide the exit. */
const ENDING_POSTS = new Set(['completed', 'failed', 'canceled']);
/** How often `watch` reads the run's state besides the stream (a run may end without a post). */
const STATE_EVERY_MS = 3000;
/** A dropped stream is resumed this many times in a row before `watch` gives up. */
const MAX_RECONNECTS = 20;

export const runColumns: Array<Column<any>> = [['ID', (r) => r.id], ['TEAM', (r) => r.team], ['FROM', (r) => r.surface], ['STATE', (r) => r.state], ['WAITING', (r) => (r.waiting_for ? `${r.waiting_for.kind} (${r.waiting_for.role})` : '')], ['COST USD', (r) => r.cost_usd], ['CREATED', (r) => r.created_at], ['TASK', (r) => (r.text?.length > 60 ? `${r.text.slice(0, 57)}...` : r.text)]];

/** The exit status of a finished run: 0 when it succeeded. */
export const exitOf = (state: string) => (state === 'succeeded' ? 0 : state === 'cancelled' ? 3 : 1);

/** Who a post is by: its role; else the person for what people post (a task, a reply, an answer), else the service (a notice, the end of the run). */
const PEOPLE_POSTS = new Set(['task', 'reply', 'answer']);
export const renderPost = (p: any) => `#${p.seq} ${p.role ?? (PEOPLE_POSTS.has(p.kind) ? 'you' : 'crewhouse')} [${p.kind}] ${p.text}\n`;

/**
 * One run for people: where its work came from (`surface`, and `origin_url`, the issue or pull
 * request it links back to) beside where it is talked about (`chat_thread_url`).
 */
function renderRun(r: any): string {
  let s = block(r, ['id', 'team', 'state', 'text', 'lead', 'cost_usd', 'failure_reason', 'created_by', 'created_at', 'finished_at', 'surface', 'origin_url', 'chat_thread_url', 'jaeger_url']);
  if (r.open_question) s += `\nopen question (#${r.open_question.seq}, ${r.open_question.role}): ${r.open_question.text}\n  answer with: crewhouse runs reply ${r.id} "..." --to ${r.open_question.seq}\n`;
  if (r.delivery) s += `\ndelivery: ${JSON.stringify(r.delivery)}\n`;
  if (r.tasks?.length) s += '\ntasks:\n' + table(r.tasks, [['ROLE', (t: any) => t.role], ['STATE', (t) => t.state], ['ITERATIONS', (t) => t.iterations], ['COST USD', (t) => t.cost_usd]]);
  return s;
}

/** Reads one line from the terminal, on stderr so stdout stays the posts. */
async function ask(ctx: Ctx, question: string): Promise<string> {
  const rl = readline.createInterface({ input: ctx.stdin, output: process.stderr, terminal: true });
  try {
    return (await rl.question(question)).trim();
  } finally {
    rl.close();
  }
}

/**
 * Follows a run's posts live until it ends, printing each once: the stream of
 * `GET /runs/{id}/posts` (resumed with Last-Event-ID when the connection drops), with the
 * run's state read beside it. Prompts for an answer to a question when stdin is a terminal.
 * Returns the exit status of the run.
 */
export async function watchRun(ctx: Ctx, id: string): Promise<number> {
  const api = ctx.api();
  const path = `/runs/${seg(id)}`;
  let last = 0;
  let finished: string | null = null;
  const asked = new Set<number>();
  const print = (p: any) => {
    if (p.seq <= last) return;
    last = p.seq;
    ctx.out.stdout(ctx.out.json ? JSON.stringify(p) + '\n' : renderPost(p));
  };
  const interactive = Boolean(ctx.stdin.isTTY) && !ctx.out.json;
  const answer = async (p: any) => {
    if (!interactive) {
      // No terminal to ask on: say how to answer, once per question.
      if (!asked.has(p.seq) && !ctx.out.json) ctx.out.progress(`no terminal to answer on; answer with: crewhouse runs reply ${id} "..." --to ${p.seq}\n`);
      asked.add(p.seq);
      return;
    }
    if (asked.has(p.seq)) return;
    asked.add(p.seq);
    const text = await ask(ctx, `answer #${p.seq} (empty: skip)> `);
    if (!text) return;
    const res = await api.request('POST', `${path}/replies`, { body: { text, in_reply_to: p.seq } });
    ctx.out.progress(`sent as #${res.body.seq}\n`);
  };

  const first = await api.get(path); // a 404 before anything is printed
  if (FINISHED.has(first.state)) finished = first.state;
  ctx.out.progress(`run ${id} of team ${first.team}: ${first.state}\n`);

  let reconnects = 0;
  while (!finished) {
    if (ctx.signal?.aborted) return 130;
    const ac = new AbortController();
    // The caller gave up (a test that failed): the stream ends, and so does the watch.
    const giveUp = () => ac.abort();
    ctx.signal?.addEventListener('abort', giveUp);
    const stateTimer = setInterval(() => {
      api.get(path).then(
        (r) => {
          if (FINISHED.has(r.state)) {
            finished = r.state;
            ac.abort();
          }
        },
        () => {},
      );
    }, STATE_EVERY_MS);
    let dropped: string | null = 'the server ended the stream';
    try {
      for await (const ev of api.events(`${path}/posts`, { lastEventId: last > 0 ? String(last) : null, signal: ac.signal })) {
        reconnects = 0;
        // The server dropped this client for reading too slowly: the stream ends, and is resumed after the last post.
        if (ev.event === 'overflow') {
          dropped = 'this terminal read the posts too slowly';
          continue;
        }
        const post = JSON.parse(ev.data);
        print(post);
        if (post.kind === 'question') await answer(post);
        if (ENDING_POSTS.has(post.kind)) {
          const r = await api.get(path);
          if (FINISHED.has(r.state)) {
            finished = r.state;
            break;
          }
        }
      }
    } catch (err) {
      if (err instanceof ApiError && err.status > 0) throw err;
      dropped = (err as Error).message;
    } finally {
      clearInterval(stateTimer);
      ctx.signal?.removeEventListener('abort', giveUp);
      ac.abort();
    }
    if (ctx.signal?.aborted) return 130;
    // A stream that dropped or ended while the run goes on is resumed after the last post seen.
    if (!finished) {
      if (++reconnects > MAX_RECONNECTS) throw new ApiError(0, { detail: `the stream of run ${id} keeps ending (${dropped}); run crewhouse runs watch ${id} again` });
      ctx.out.progress(`the stream dropped (${dropped}); resuming after #${last}\n`);
      await new Promise((r) => setTimeout(r, Math.min(500 * reconnects, 5000)));
    }
  }
  // Posts written before the run ended that the stream had not yet delivered.
  for (const p of await api.list(`${path}/posts`, { cursor: last })) print(p);
  const end = await api.get(path);
  ctx.out.progress(`run ${id} ${end.state}${end.failure_reason ? `: ${end.failure_reason}` : ''}\n`);
  return exitOf(end.state);
}

/** A task's text: the argument, or stdin for `-`. */
async function textOf(ctx: Ctx, raw: string): Promise<string> {
  const text = raw === '-' ? (await readStdin(ctx.stdin)).trim() : raw;
  if (!text) throw new CliError('the text is empty');
  return text;
}

export const runs: Group = {
  name: 'runs',
  summary: 'Runs: a task a team works on, its posts, questions and replies',
  commands: [
    listCommand({ path: '/runs', summary: 'list runs, newest first', filters: { state: 'running, waiting (open questions), succeeded, failed or cancelled', team: 'one team\'s runs' }, columns: runColumns }),
    showCommand({ path: (id) => `/runs/${seg(id)}`, arg: 'ID', summary: 'show a run: state, tasks of every role, cost, the open question', render: renderRun }),
    {
      name: 'posts',
      args: 'ID',
      summary: 'print a run\'s conversation so far',
      options: { ...LIMIT_OPTION, after: { type: 'string' } },
      help: [LIMIT_HELP, '--after SEQ         only posts after this one'],
      async run(ctx, [id], flags) {
        const items = await ctx.api().list(`/runs/${seg(id)}/posts`, { cursor: intArg('--after', flags.after, { min: 0 }) }, intArg('--limit', flags.limit));
        emit(ctx.out, items, () => items.map(renderPost).join('') || '(no posts)\n');
      },
    },
    {
      name: 'watch',
      args: 'ID',
      summary: 'follow a run live until it ends (prompts for answers on a terminal); exit 0 when it succeeded, 1 failed, 3 cancelled',
      help: ['--json prints each post as a JSON line'],
      run: (ctx, [id]) => watchRun(ctx, id),
    },
    {
      name: 'reply',
      args: 'ID TEXT',
      summary: 'answer a run\'s question (--to SEQ, default: the open one) or give it a follow-up (--follow-up); TEXT - reads stdin',
      options: { to: { type: 'string' }, 'follow-up': { type: 'boolean' }, approve: { type: 'boolean' }, refuse: { type: 'boolean' } },
      help: ['--to SEQ            the question\'s post number', '--follow-up         the text is a follow-up task, not an answer', '--approve / --refuse  decide a risky action\'s confirmation'],
      async run(ctx, [id, raw], flags) {
        // What was typed wrongly is said before anything is read from the server.
        if (flags.approve && flags.refuse) throw new CliError('--approve and --refuse exclude each other');
        if ((flags.approve || flags.refuse) && flags['follow-up']) throw new CliError('--approve and --refuse decide a confirmation, so they do not go with --follow-up');
        const api = ctx.api();
        const text = await textOf(ctx, raw);
        let to = intArg('--to', flags.to) ?? null;
        if (to === null && !flags['follow-up']) {
          const run = await api.get(`/runs/${seg(id)}`);
          if (!run.open_question) throw new CliError(`run ${id} has no open question: pass --follow-up to give it more work, or --to SEQ`);
          to = run.open_question.seq;
        }
        const body: Record<string, unknown> = { text, in_reply_to: to };
        if (flags.approve || flags.refuse) body.approve = Boolean(flags.approve);
        const res = await api.request('POST', `/runs/${seg(id)}/replies`, { body });
        emit(ctx.out, res.body, () => `sent as #${res.body.seq}; run ${id} is ${res.body.state}\n`);
      },
    },
    {
      name: 'cancel',
      args: 'ID',
      summary: 'cancel a run',
      async run(ctx, [id]) {
        const res = await ctx.api().request('POST', `/runs/${seg(id)}/cancel`);
        emit(ctx.out, res.body, () => `run ${id} is ${res.body.state}\n`);
      },
    },
    {
      name: 'trace',
      args: 'ID',
      summary: 'the spans of a run from the trace store',
      async run(ctx, [id]) {
        const body = await ctx.api().get(`/runs/${seg(id)}/trace`);
        emit(ctx.out, body, () => (body.spans.length ? table(body.spans, [['SPAN', (s: any) => s.name], ['START', (s) => s.start_time], ['MS', (s) => s.duration_ms]]) : `no spans for run ${id} (no trace store, or no such trace)\n`));
      },
    },
  ],
};

/** `crewhouse task TEAM TEXT`: gives a team a task and prints the run id. */
export const task: Group = {
  name: 'task',
  summary: 'Give a team a task',
  commands: [
    {
      name: '',
      args: 'TEAM TEXT',
      summary: 'give a team a task and print the run id (TEXT - reads stdin); --watch follows it to the end',
      options: { watch: { type: 'boolean', short: 'w' } },
      help: ['--watch, -w         follow the run live (see crewhouse runs watch)'],
      async run(ctx, [team, raw], flags) {
        const text = await textOf(ctx, raw);
        const res = await ctx.api().request('POST', `/teams/${seg(team)}/tasks`, { body: { text } });
        if (ctx.out.json) ctx.out.stdout(JSON.stringify(res.body, null, 2) + '\n');
        else ctx.out.stdout(`${res.body.run_id}\n`);
        return flags.watch ? watchRun(ctx, res.body.run_id) : 0;
      },
    },
  ],
};

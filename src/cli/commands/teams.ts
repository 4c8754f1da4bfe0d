import { intArg } from '../client.ts';
import { bodyOf, FILE_HELP, FILE_OPTION, flagsOf, readObject, type Ctx, type Group } from '../command.ts';
import { ApiError, CliError } from '../errors.ts';
import { block, emit, table } from '../output.ts';
import { documentCommands } from './documents.ts';
import { deleteCommand, listCommand, seg, showCommand, written } from './shared.ts';
import { runColumns } from './runs.ts';

const SHOWN = ['name', 'status', 'state', 'lead', 'roles', 'repo_url', 'active_runs', 'spent_usd', 'budget_usd_per_day', 'budget_state', 'last_run_at', 'created_by', 'created_at'];
const PATCH = { budget_usd_per_day: 'number', rework_rounds: 'int', idle_after_seconds: 'int', deep_sleep_after_seconds: 'int' } as const;
const ROLE = { model: 'string', max_iterations: 'int', replicas_max: 'int', concurrent_runs: 'int', confirmation_policy: 'nullable' } as const;

function renderTeam(t: any): string {
  return (
    block({ ...t, template: `${t.template?.name} v${t.template?.version ?? 'current'}`, home: t.home?.surface }, ['name', 'template', 'home', ...SHOWN.slice(1)]) +
    '\nroles:\n' +
    table(t.role_settings ?? [], [['ROLE', (r: any) => r.role], ['AGENT', (r) => r.agent], ['MODEL', (r) => r.model], ['REPLICAS', (r) => r.replicas_max], ['RUNS', (r) => r.concurrent_runs], ['ITERATIONS', (r) => r.max_iterations], ['CONFIRM', (r) => r.confirmation_policy]])
  );
}

/**
 * Reports on stderr, while `work` is under way, how the team reads from another request: a
 * team is `provisioning` until every role has its model key and the budget is set.
 */
async function withProgress<T>(ctx: Ctx, name: string, work: Promise<T>): Promise<T> {
  const started = Date.now();
  let last = '';
  let done = false;
  const poll = (async () => {
    while (!done) {
      await new Promise((r) => setTimeout(r, 1000));
      if (done) return;
      const status = await ctx.api().get(`/teams/${seg(name)}`).then((t) => String(t.status), (err) => (err instanceof ApiError && err.status === 404 ? 'starting' : null));
      const secs = Math.round((Date.now() - started) / 1000);
      if (status && (status !== last || secs % 5 === 0)) ctx.out.progress(`team ${name}: ${status} (${secs} s)\n`);
      if (status) last = status;
    }
  })();
  try {
    return await work;
  } finally {
    done = true;
    await poll;
  }
}

export const teams: Group = {
  name: 'teams',
  summary: 'Teams: made from a template, given tasks, with budgets, role settings, links and egress overrides',
  commands: [
    listCommand({
      path: '/teams',
      summary: 'list teams',
      filters: { state: 'running, waiting, sleeping, idle or archived', q: 'part of the name' },
      columns: [['NAME', (t: any) => t.name], ['TEMPLATE', (t) => `${t.template?.name}@${t.template?.version ?? 'current'}`], ['STATUS', (t) => t.status], ['STATE', (t) => t.state], ['RUNS', (t) => t.active_runs], ['SPENT', (t) => t.spent_usd], ['BUDGET', (t) => t.budget_usd_per_day], ['BUDGET STATE', (t) => t.budget_state]],
    }),
    showCommand({ path: (n) => `/teams/${seg(n)}`, summary: 'show a team and its roles', render: renderTeam }),
    {
      name: 'create',
      args: 'NAME',
      summary: 'create a team from a template (shows progress while it provisions)',
      options: { ...FILE_OPTION, template: { type: 'string', short: 't' }, version: { type: 'string' }, 'repo-url': { type: 'string' }, 'budget-usd-per-day': { type: 'string' }, home: { type: 'string' }, room: { type: 'string' } },
      help: [FILE_HELP, '--template T, -t T  the template (required unless in --file)', '--version N         its version (default: the current one)', '--repo-url URL      the repository, when the template needs one', '--budget-usd-per-day N  the daily budget (default: the template\'s)', '--home SURFACE      chat_a, chat_b or none (default: the console)', '--room ID           the home room\'s channel id (with --home chat_a or chat_b)'],
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, { repo_url: 'string', budget_usd_per_day: 'number' });
        body.name = name;
        if (flags.template) body.template = { name: flags.template, version: intArg('--version', flags.version) ?? null };
        if (!body.template) throw new CliError('a team needs --template NAME');
        if (flags.home) body.home = flags.room ? { surface: flags.home, room_id: flags.room } : { surface: flags.home };
        ctx.out.progress(`creating team ${name} from template ${(body.template as { name: string }).name}: a model key per role and the budget...\n`);
        const res = await withProgress(ctx, name, ctx.api().request('POST', '/teams', { body }));
        ctx.out.progress(`team ${name} is ${res.body.status}\n`);
        emit(ctx.out, res.body, () => renderTeam(res.body));
      },
    },
    {
      name: 'update',
      args: 'NAME',
      summary: 'change a team\'s budget, rework rounds or sleep times (or anything of TeamPatch with --file)',
      options: { ...FILE_OPTION, ...flagsOf(PATCH) },
      help: [FILE_HELP + ' (a TeamPatch: also memory and role_settings)', '--budget-usd-per-day N', '--rework-rounds N', '--idle-after-seconds N', '--deep-sleep-after-seconds N'],
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, PATCH);
        if (Object.keys(body).length === 0) throw new CliError('nothing to change: give a flag or --file');
        const res = await ctx.api().write('PATCH', `/teams/${seg(name)}`, body);
        emit(ctx.out, res.body, () => `updated team ${name}\n${renderTeam(res.body)}`);
      },
    },
    {
      name: 'role',
      args: 'NAME ROLE',
      summary: 'change one role\'s settings: model, iteration cap, replicas, concurrent runs, confirmation policy',
      options: flagsOf(ROLE),
      help: ['--model ALIAS', '--max-iterations N', '--replicas-max N', '--concurrent-runs N', '--confirmation-policy P  never_confirm or confirm_risky ("" for the agent\'s)'],
      async run(ctx, [name, role], flags) {
        const settings = await bodyOf(ctx, flags, ROLE);
        if (Object.keys(settings).length === 0) throw new CliError('nothing to change: give a flag (see --help)');
        const res = await ctx.api().write('PATCH', `/teams/${seg(name)}`, { role_settings: { [role]: settings } });
        const r = (res.body.role_settings as any[]).find((x) => x.role === role);
        emit(ctx.out, res.body, () => `updated role ${role} of team ${name}\n${block(r ?? {})}`);
      },
    },
    deleteCommand({
      name: 'archive',
      path: (n) => `/teams/${seg(n)}`,
      summary: 'archive a team (its open runs are cancelled, its sandboxes and keys removed); asks first on a terminal',
      done: 'archived',
      confirm: (n) => `Archive team ${n}? Its open runs are cancelled and its sandboxes and model keys removed; this cannot be undone.`,
    }),
    {
      name: 'upgrade',
      args: 'NAME [VERSION]',
      summary: 'move a team to another version of its template (default: the current one)',
      async run(ctx, [name, version]) {
        const res = await ctx.api().write('POST', `/teams/${seg(name)}/upgrade`, { version: intArg('VERSION', version) ?? null }, `/teams/${seg(name)}`);
        emit(ctx.out, res.body, () => `team ${name} is on template ${res.body.template.name} v${res.body.template.version}\n`);
      },
    },
    {
      name: 'budget',
      args: 'NAME',
      summary: 'a team\'s budget and spend per UTC day',
      options: { days: { type: 'string' } },
      help: ['--days N            days ending today (default: the API\'s)'],
      async run(ctx, [name], flags) {
        const body = await ctx.api().get(`/teams/${seg(name)}/budget`, { days: intArg('--days', flags.days) });
        emit(ctx.out, body, () => block(body, ['team', 'budget_usd_per_day', 'spent_today_usd', 'state', 'days', 'totals']) + '\n' + table(body.series ?? [], [['DAY', (d: any) => d.date], ['SPEND USD', (d) => d.spend_usd], ['TOKENS', (d) => d.tokens], ['REQUESTS', (d) => d.requests]]));
      },
    },
    {
      name: 'runs',
      args: 'NAME',
      summary: 'a team\'s runs, newest first',
      options: { state: { type: 'string' }, limit: { type: 'string' } },
      help: ['--state S           running, waiting, succeeded, failed or cancelled', '--limit N           at most N runs'],
      async run(ctx, [name], flags) {
        const items = await ctx.api().list(`/teams/${seg(name)}/runs`, { state: flags.state }, intArg('--limit', flags.limit));
        emit(ctx.out, items, () => table(items, runColumns));
      },
    },
    {
      name: 'links',
      args: 'NAME',
      summary: 'a team\'s links to chat rooms, trackers and repositories',
      async run(ctx, [name]) {
        const items = await ctx.api().list(`/teams/${seg(name)}/links`);
        emit(ctx.out, items, () => table(items, [['SURFACE', (l: any) => l.surface], ['EXTERNAL ID', (l) => l.external_id], ['LABEL', (l) => l.label], ['VERIFICATION', (l) => l.verification]]));
      },
    },
    {
      name: 'link',
      args: 'NAME SURFACE EXTERNAL_ID',
      summary: 'link a surface (a code_host repository owner/repo, a tracker project, a chat room) to a team',
      options: { label: { type: 'string' } },
      help: ['--label T           how the link is shown'],
      async run(ctx, [name, surface, externalId], flags) {
        const res = await ctx.api().request('PUT', `/teams/${seg(name)}/links`, { body: { surface, external_id: externalId, ...(flags.label ? { label: flags.label } : {}) } });
        emit(ctx.out, res.body, () => `linked ${surface} ${externalId} to team ${name} (${res.body.verification})\n`);
      },
    },
    {
      name: 'unlink',
      args: 'NAME SURFACE EXTERNAL_ID',
      summary: 'remove a link',
      async run(ctx, [name, surface, externalId]) {
        // The external id may hold slashes (owner/repo): they stay part of the path.
        await ctx.api().request('DELETE', `/teams/${seg(name)}/links/${seg(surface)}/${externalId.split('/').map(seg).join('/')}`);
        emit(ctx.out, { unlinked: { surface, external_id: externalId } }, () => `unlinked ${surface} ${externalId} from team ${name}\n`);
      },
    },
    {
      name: 'egress',
      args: 'NAME ROLE',
      summary: 'a role\'s egress override (none: the agent definition\'s applies)',
      async run(ctx, [name, role]) {
        const body = await ctx.api().get(`/teams/${seg(name)}/roles/${seg(role)}/egress`);
        emit(ctx.out, body, () => (body.override ? block(body.override) : `role ${role} of team ${name} has no override: its agent's egress applies\n`));
      },
    },
    {
      name: 'egress-set',
      args: 'NAME ROLE',
      summary: 'override a role\'s egress (mode, destinations, upstream_deny_cidrs)',
      options: { ...FILE_OPTION, mode: { type: 'string' }, destinations: { type: 'string' } },
      help: [FILE_HELP + ' (an Egress)', '--mode M            the egress mode', '--destinations A,B  destination names'],
      async run(ctx, [name, role], flags) {
        const body = flags.file ? await readObject(ctx, flags.file) : {};
        if (flags.mode) body.mode = flags.mode;
        if (flags.destinations !== undefined) body.destinations = String(flags.destinations).split(',').map((s) => s.trim()).filter(Boolean);
        const res = await ctx.api().write('PUT', `/teams/${seg(name)}/roles/${seg(role)}/egress`, body);
        written(ctx, res.body, `egress of role ${role} of team`, name);
      },
    },
    {
      name: 'egress-reset',
      args: 'NAME ROLE',
      summary: 'remove a role\'s egress override',
      async run(ctx, [name, role]) {
        await ctx.api().write('DELETE', `/teams/${seg(name)}/roles/${seg(role)}/egress`);
        emit(ctx.out, { team: name, role, override: null }, () => `role ${role} of team ${name} follows its agent's egress again\n`);
      },
    },
    {
      name: 'skills',
      args: 'NAME',
      summary: 'a team\'s own stored skills',
      async run(ctx, [name]) {
        const items = await ctx.api().list(`/teams/${seg(name)}/skills`);
        emit(ctx.out, items, () => table(items, [['NAME', (s: any) => s.name], ['VERSION', (s) => s.version], ['STATUS', (s) => s.status], ['SOURCE', (s) => s.source], ['UPDATED', (s) => s.updated_at]]));
      },
    },
    ...documentCommands('teams', 'a team'),
  ],
};

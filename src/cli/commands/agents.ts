import { intArg } from '../client.ts';
import { bodyOf, FILE_HELP, FILE_OPTION, flagsOf, type Group } from '../command.ts';
import { CliError } from '../errors.ts';
import { block, emit, table } from '../output.ts';
import { documentCommands } from './documents.ts';
import { deleteCommand, listCommand, seg, showCommand, written } from './shared.ts';

const META = { display_name: 'nullable', kind: 'nullable', description: 'nullable' } as const;
const VERSION = { system_prompt: 'string', model: 'string', environment: 'string', note: 'string', tools: 'list', skills: 'list' } as const;
const SHOWN = ['name', 'display_name', 'kind', 'description', 'current_version', 'model', 'environment', 'tool_count', 'used_by', 'updated_at'];
const versionHelp = ['--system-prompt T   the agent\'s system prompt', '--model ALIAS       model alias', '--environment E     environment name', '--tools A,B         built-in tools', '--skills A,B        platform skills', '--note T            what changed'];

/** The version fields of flags and --file, without the agent's own fields. */
async function versionOf(ctx: Parameters<typeof bodyOf>[0], flags: Record<string, any>, base: Record<string, unknown>) {
  const fromFlags = await bodyOf(ctx, { ...flags, file: undefined }, VERSION);
  return { ...base, ...fromFlags };
}

export const agents: Group = {
  name: 'agents',
  summary: 'Agents: a system prompt, tools, skills and egress, kept in versions',
  commands: [
    listCommand({
      path: '/agents',
      summary: 'list agents',
      columns: [['NAME', (a: any) => a.name], ['VERSION', (a) => a.current_version], ['MODEL', (a) => a.model], ['ENVIRONMENT', (a) => a.environment], ['USED BY', (a) => a.used_by], ['DESCRIPTION', (a) => a.description]],
    }),
    showCommand({ path: (n) => `/agents/${seg(n)}`, summary: 'show an agent and its current version', fields: [...SHOWN, 'current'] }),
    {
      name: 'create',
      args: 'NAME',
      summary: 'create an agent with its first version',
      options: { ...FILE_OPTION, ...flagsOf(META), ...flagsOf(VERSION) },
      help: [FILE_HELP + ' (the AgentCreate body, or the version alone)', '--display-name T    shown name', '--kind K            a free label', '--description T     what it is for', ...versionHelp],
      async run(ctx, [name], flags) {
        const file = flags.file ? await bodyOf(ctx, { file: flags.file }, {}) : {};
        // A file holds either the whole create body or just the version.
        const base = 'version' in file ? file : { version: file };
        const meta = await bodyOf(ctx, { ...flags, file: undefined }, META);
        const version = await versionOf(ctx, flags, (base.version as Record<string, unknown>) ?? {});
        if (!version.system_prompt) throw new CliError('an agent needs a system prompt: --system-prompt T or a --file with version.system_prompt');
        const res = await ctx.api().request('POST', '/agents', { body: { ...base, ...meta, name, version } });
        written(ctx, res.body, 'created agent', name, SHOWN);
      },
    },
    {
      name: 'update',
      args: 'NAME',
      summary: 'change an agent\'s display name, kind or description',
      options: { ...FILE_OPTION, ...flagsOf(META) },
      help: [FILE_HELP, '--display-name T    shown name ("" clears)', '--kind K            a free label ("" clears)', '--description T     what it is for ("" clears)'],
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, META);
        if (Object.keys(body).length === 0) throw new CliError('nothing to change: give --display-name, --kind, --description or --file');
        const res = await ctx.api().write('PATCH', `/agents/${seg(name)}`, body);
        written(ctx, res.body, 'updated agent', name, SHOWN);
      },
    },
    deleteCommand({ path: (n) => `/agents/${seg(n)}`, summary: 'delete an agent (refused while a template or team uses it)' }),
    {
      name: 'versions',
      args: 'NAME',
      summary: 'list an agent\'s versions, newest first',
      async run(ctx, [name]) {
        const items = await ctx.api().list(`/agents/${seg(name)}/versions`);
        emit(ctx.out, items, () => table(items, [['VERSION', (v: any) => v.version], ['CREATED', (v) => v.created_at], ['BY', (v) => v.created_by], ['NOTE', (v) => v.note]]));
      },
    },
    {
      name: 'version',
      args: 'NAME VERSION',
      summary: 'show one version of an agent',
      async run(ctx, [name, version]) {
        const v = intArg('VERSION', version);
        const body = await ctx.api().get(`/agents/${seg(name)}/versions/${v}`);
        emit(ctx.out, body, () => block(body));
      },
    },
    {
      name: 'add-version',
      args: 'NAME',
      summary: 'add a version (it becomes current); unset fields are copied from the current one',
      options: { ...FILE_OPTION, ...flagsOf(VERSION) },
      help: [FILE_HELP + ' (an AgentVersionInput)', ...versionHelp],
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, VERSION);
        const api = ctx.api();
        const { body: agent, etag } = await api.read(`/agents/${seg(name)}`);
        // A whole version needs every field; starting from the current one changes only those given.
        if (!('from_version' in body)) body.from_version = agent.current_version;
        const res = await api.request('POST', `/agents/${seg(name)}/versions`, { body, ifMatch: etag });
        written(ctx, res.body, `added version ${res.body.version} of agent`, name);
      },
    },
    {
      name: 'make-current',
      args: 'NAME VERSION',
      summary: 'make an earlier version current again (as a new version copied from it)',
      options: { note: { type: 'string' } },
      help: ['--note T            what changed (default: "back to version N")'],
      async run(ctx, [name, version], flags) {
        const from = intArg('VERSION', version)!;
        const res = await ctx.api().write('POST', `/agents/${seg(name)}/versions`, { from_version: from, note: flags.note ?? `back to version ${from}` }, `/agents/${seg(name)}`);
        written(ctx, res.body, `version ${res.body.version} of agent ${name} is current, copied from version`, String(from));
      },
    },
    ...documentCommands('agents', 'an agent'),
  ],
};

import { intArg } from '../client.ts';
import { bodyOf, FILE_HELP, FILE_OPTION, readObject, type Group } from '../command.ts';
import { CliError } from '../errors.ts';
import { block, emit, table } from '../output.ts';
import { deleteCommand, listCommand, seg, showCommand, written } from './shared.ts';

const SHOWN = ['name', 'description', 'current_version', 'used_by', 'updated_at'];

/** The pipeline as people draw it: lead -> dev -> review. */
const chain = (pipeline: Record<string, string> | undefined, lead: string) => {
  const seen = new Set<string>();
  const steps = [lead];
  let at = lead;
  while (pipeline?.[at] && !seen.has(at)) {
    seen.add(at);
    at = pipeline[at];
    steps.push(at);
  }
  return steps.join(' -> ');
};

function renderTemplate(t: any): string {
  const v = t.current ?? {};
  return (
    block(t, SHOWN) +
    `lead:            ${v.lead}\npipeline:        ${chain(v.pipeline, v.lead)}\nbudget per day:  ${v.budget_usd_per_day} USD\n\nroles:\n` +
    table(Object.entries(v.roles ?? {}).map(([role, r]: [string, any]) => ({ role, ...r })), [['ROLE', (r: any) => r.role], ['AGENT', (r) => r.agent], ['MODEL', (r) => r.model], ['VM', (r) => r.vm], ['REPLICAS', (r) => r.replicas?.max]])
  );
}

export const templates: Group = {
  name: 'templates',
  summary: 'Team templates: roles (an agent each), a lead, a hand-off pipeline and budgets, kept in versions',
  commands: [
    listCommand({
      path: '/team-templates',
      summary: 'list team templates',
      columns: [['NAME', (t: any) => t.name], ['VERSION', (t) => t.current_version], ['LEAD', (t) => t.lead], ['ROLES', (t) => t.roles], ['USED BY', (t) => t.used_by?.length ?? t.used_by], ['DESCRIPTION', (t) => t.description]],
    }),
    showCommand({ path: (n) => `/team-templates/${seg(n)}`, summary: 'show a template, its roles and pipeline', render: renderTemplate }),
    {
      name: 'create',
      args: '[NAME]',
      summary: 'create a template from a file (roles, lead, pipeline, budgets)',
      options: { ...FILE_OPTION, description: { type: 'string' } },
      help: [FILE_HELP + ' (a TemplateCreate body; required)', '--description T     what the team does', 'NAME                overrides the file\'s name'],
      async run(ctx, [name], flags) {
        if (!flags.file) throw new CliError('a template is created from --file (JSON or YAML with name, lead, roles, pipeline, budgets); see GET /api/v1/openapi.json TemplateCreate');
        const body = await bodyOf(ctx, flags, { description: 'string' });
        if (name) body.name = name;
        const res = await ctx.api().request('POST', '/team-templates', { body });
        written(ctx, res.body, 'created template', String(res.body.name));
      },
    },
    {
      name: 'update',
      args: 'NAME',
      summary: 'change a template\'s description',
      options: { description: { type: 'string' } },
      help: ['--description T     the new description'],
      async run(ctx, [name], flags) {
        if (flags.description === undefined) throw new CliError('nothing to change: give --description');
        const res = await ctx.api().write('PATCH', `/team-templates/${seg(name)}`, { description: flags.description });
        written(ctx, res.body, 'updated template', name, SHOWN);
      },
    },
    deleteCommand({ path: (n) => `/team-templates/${seg(n)}`, summary: 'delete a template (refused while an active team uses it)' }),
    {
      name: 'versions',
      args: 'NAME',
      summary: 'list a template\'s versions, newest first',
      async run(ctx, [name]) {
        const items = await ctx.api().list(`/team-templates/${seg(name)}/versions`);
        emit(ctx.out, items, () => table(items, [['VERSION', (v: any) => v.version], ['CREATED', (v) => v.created_at], ['BY', (v) => v.created_by], ['NOTE', (v) => v.note]]));
      },
    },
    {
      name: 'version',
      args: 'NAME VERSION',
      summary: 'show one version of a template',
      async run(ctx, [name, version]) {
        const body = await ctx.api().get(`/team-templates/${seg(name)}/versions/${intArg('VERSION', version)}`);
        emit(ctx.out, body, () => block(body));
      },
    },
    {
      name: 'add-version',
      args: 'NAME',
      summary: 'add a version from a file (it becomes current)',
      options: { ...FILE_OPTION, note: { type: 'string' } },
      help: [FILE_HELP + ' (a TemplateVersionInput; required)', '--note T            what changed'],
      async run(ctx, [name], flags) {
        if (!flags.file) throw new CliError('a template version is given with --file');
        const body = await readObject(ctx, flags.file);
        if (flags.note !== undefined) body.note = flags.note;
        const res = await ctx.api().write('POST', `/team-templates/${seg(name)}/versions`, body, `/team-templates/${seg(name)}`);
        written(ctx, res.body, `added version ${res.body.version} of template`, name);
      },
    },
  ],
};

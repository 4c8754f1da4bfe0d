import fs from 'node:fs';
import path from 'node:path';
import type { Group } from '../command.ts';
import { CliError } from '../errors.ts';
import { emit } from '../output.ts';
import { agentFile, DIR_OF, documentEntry, policyFile, templateFile, toYaml } from '../../console/import/layout.ts';
import { seg } from './shared.ts';

/** The plan as a person reads it: one line per entry, its reason and diff indented, then what is left alone and the problems. */
function renderPlan(plan: any): string {
  const lines: string[] = [];
  const where = plan.commit ? `commit ${plan.commit}` : 'the configuration directory';
  lines.push(plan.applied ? `Imported from ${where}.` : `Plan for ${where}${plan.dry_run ? ' (dry run: nothing written; --apply to write it)' : ''}.`);
  for (const e of plan.entries) {
    lines.push(`  ${e.action.padEnd(9)} ${e.kind} ${e.name}${e.version ? ` (version ${e.version})` : ''}${e.reason ? `: ${e.reason}` : ''}`);
    if (e.diff && e.action !== 'unchanged') for (const l of String(e.diff).split('\n')) lines.push(`      ${l}`);
  }
  if (plan.left_alone.length) lines.push(`Left alone (not in the repository; --prune deletes them): ${plan.left_alone.map((l: any) => `${l.kind} ${l.name}`).join(', ')}`);
  if (plan.problems.length) {
    lines.push(`${plan.problems.length} problem(s); an apply writes nothing until they are fixed:`);
    for (const p of plan.problems) lines.push(`  ${p.file}${p.line ? `:${p.line}` : ''}${p.field ? ` ${p.field}` : ''}: ${p.message}`);
  }
  return lines.join('\n') + '\n';
}

export const importGroup: Group = {
  name: 'import',
  summary: 'Import agents, templates, policies and skills from the configuration repository',
  commands: [
    {
      name: '',
      summary: 'print the plan of an import from the configuration repository; --apply writes it',
      options: { apply: { type: 'boolean' }, force: { type: 'boolean' }, prune: { type: 'boolean' } },
      help: ['--apply             write the plan (one transaction, all or nothing)', '--force             overwrite skills edited through the API', '--prune             delete what the repository does not name'],
      async run(ctx, _args, flags) {
        const res = await ctx.api().request('POST', '/import', { body: { dry_run: !flags.apply, force: Boolean(flags.force), prune: Boolean(flags.prune) } });
        emit(ctx.out, res.body, () => renderPlan(res.body));
        return res.body.problems?.length ? 1 : 0;
      },
    },
  ],
};

export const exportGroup: Group = {
  name: 'export',
  summary: 'Write the current definitions in the configuration repository layout',
  commands: [
    {
      name: '',
      args: 'DIR',
      summary: 'write agents/, templates/, policies/ and skills/ under DIR, as the import reads them',
      help: ['DIR                 a new or empty folder (or one holding only an earlier export)'],
      async run(ctx, [dir]) {
        const api = ctx.api();
        const written: string[] = [];
        const write = (file: string, text: string) => {
          const p = path.join(dir, file);
          fs.mkdirSync(path.dirname(p), { recursive: true });
          fs.writeFileSync(p, text);
          written.push(file);
        };
        for (const d of Object.values(DIR_OF)) {
          const p = path.join(dir, d);
          if (fs.existsSync(p) && fs.readdirSync(p).length) throw new CliError(`${p} is not empty: export into a new folder, so nothing stale stays beside the definitions`);
        }
        for (const a of await api.list('/agents')) {
          const file = agentFile((await api.read(`/agents/${seg(a.name)}`)).body);
          const described: Record<string, Record<string, string>> = {};
          for (const d of await api.list(`/agents/${seg(a.name)}/documents`)) {
            const doc = (await api.read(`/agents/${seg(a.name)}/documents/${seg(d.name)}`)).body;
            write(`${DIR_OF.agent}/${a.name}/${d.name}`, doc.content);
            const entry = documentEntry(doc);
            if (entry) described[d.name] = entry;
          }
          write(`${DIR_OF.agent}/${a.name}.yaml`, toYaml(Object.keys(described).length ? { ...file, documents: described } : file));
        }
        for (const tpl of await api.list('/team-templates')) write(`${DIR_OF.template}/${tpl.name}.yaml`, toYaml(templateFile((await api.read(`/team-templates/${seg(tpl.name)}`)).body)));
        for (const d of await api.list('/destinations')) if (!d.builtin) write(`${DIR_OF.policy}/${d.name}.yaml`, toYaml(policyFile(d)));
        for (const s of await api.list('/skills')) {
          const skill = (await api.read(`/skills/${seg(s.name)}`)).body;
          write(`${DIR_OF.skill}/${s.name}/SKILL.md`, skill.body);
          for (const [file, text] of Object.entries(skill.resources as Record<string, string>)) write(`${DIR_OF.skill}/${s.name}/${file}`, text);
        }
        emit(ctx.out, { dir, files: written }, () => `Wrote ${written.length} file(s) under ${dir}.\n`);
      },
    },
  ],
};

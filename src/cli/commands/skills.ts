import { readObject, readText, type Group } from '../command.ts';
import { ApiError, CliError } from '../errors.ts';
import { deleteCommand, listCommand, seg, showCommand, written } from './shared.ts';

export const skills: Group = {
  name: 'skills',
  summary: 'Platform skills: SKILL.md and its files, offered to agents',
  commands: [
    listCommand({ path: '/skills', summary: 'list platform skills', columns: [['NAME', (s: any) => s.name], ['REVISION', (s) => s.revision], ['FILES', (s) => s.files?.length ?? s.files], ['BYTES', (s) => s.size_bytes], ['DESCRIPTION', (s) => s.description]] }),
    showCommand({ path: (n) => `/skills/${seg(n)}`, summary: 'show a skill with its SKILL.md', fields: ['name', 'description', 'revision', 'size_bytes', 'updated_at', 'body'] }),
    {
      name: 'set',
      args: 'NAME',
      summary: 'create or replace a skill from SKILL.md (--body F) or a whole SkillPut (--file F)',
      options: { body: { type: 'string' }, file: { type: 'string', short: 'f' }, resource: { type: 'string', multiple: true } },
      help: ['--body F            the SKILL.md file (- for stdin)', '--file F, -f F      a SkillPut {body, resources} as JSON or YAML', '--resource PATH=F   a file of the skill (repeatable): its relative path and where to read it'],
      async run(ctx, [name], flags) {
        const body: Record<string, unknown> = flags.file ? await readObject(ctx, flags.file) : {};
        if (flags.body) body.body = await readText(ctx, flags.body);
        if (flags.resource) {
          const resources: Record<string, string> = { ...(body.resources as Record<string, string>) };
          for (const r of flags.resource as string[]) {
            const eq = r.indexOf('=');
            if (eq < 1) throw new CliError(`--resource must be PATH=FILE, not "${r}"`);
            resources[r.slice(0, eq)] = await readText(ctx, r.slice(eq + 1));
          }
          body.resources = resources;
        }
        if (typeof body.body !== 'string') throw new CliError('a skill needs its SKILL.md: --body FILE or --file with body');
        const api = ctx.api();
        const path = `/skills/${seg(name)}`;
        let ifMatch: string | null = null;
        try {
          ifMatch = (await api.read(path)).etag;
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        }
        const res = await api.request('PUT', path, { body, ifMatch });
        written(ctx, res.body, ifMatch ? 'replaced skill' : 'created skill', name, ['name', 'description', 'revision', 'size_bytes']);
      },
    },
    deleteCommand({ path: (n) => `/skills/${seg(n)}`, summary: 'delete a platform skill' }),
  ],
};

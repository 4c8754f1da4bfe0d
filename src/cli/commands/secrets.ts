import { readStdin, readText, type Group } from '../command.ts';
import { ApiError, CliError } from '../errors.ts';
import { deleteCommand, listCommand, pathOf, showCommand, written } from './shared.ts';

export const secrets: Group = {
  name: 'secrets',
  summary: 'Secrets: values the gateway injects for agents; written here, never shown again',
  commands: [
    listCommand({ path: '/secrets', summary: 'list secret references (never a value)', filters: { prefix: 'names starting with this' }, columns: [['NAME', (s: any) => s.name], ['KIND', (s) => s.kind], ['SET', (s) => (s.set ? 'yes' : 'no')], ['USED BY', (s) => s.used_by], ['VALUE SET', (s) => s.value_set_at], ['BY', (s) => s.updated_by]] }),
    showCommand({ path: (n) => `/secrets/${pathOf(n)}`, summary: 'show one secret reference (never its value)' }),
    {
      name: 'set',
      args: 'NAME',
      summary: 'set a secret\'s value from stdin or a file, so it never lands in shell history',
      options: { 'from-file': { type: 'string' } },
      help: ['--from-file F       read the value from F (default: stdin; one trailing newline is dropped)'],
      async run(ctx, [name], flags) {
        if (!flags['from-file'] && ctx.stdin.isTTY) ctx.out.progress(`value of ${name} (end with Ctrl-D):\n`);
        const raw = flags['from-file'] ? await readText(ctx, flags['from-file']) : await readStdin(ctx.stdin);
        const value = raw.replace(/\r?\n$/, '');
        if (!value) throw new CliError('the value is empty: pipe it in (crewhouse secrets set NAME < file) or use --from-file');
        const api = ctx.api();
        const path = `/secrets/${pathOf(name)}`;
        // A replace needs the current ETag; a new secret has none.
        let ifMatch: string | null = null;
        try {
          ifMatch = (await api.read(path)).etag;
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        }
        const res = await api.request('PUT', path, { body: { value }, ifMatch });
        written(ctx, res.body, ifMatch ? 'replaced secret' : 'set secret', name);
      },
    },
    deleteCommand({ path: (n) => `/secrets/${pathOf(n)}`, summary: 'remove a secret\'s value' }),
  ],
};

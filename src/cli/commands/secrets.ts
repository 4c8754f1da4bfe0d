import { readStdin, readText, type Group } from '../command.ts';
import { ApiError, CliError } from '../errors.ts';
import { deleteCommand, listCommand, pathOf, showCommand, written } from './shared.ts';

/**
 * One line typed on the terminal without echoing it (a secret must not stay on the screen
 * either). The echo is off before the prompt is shown, so nothing typed at once is echoed.
 */
function readHidden(stdin: NodeJS.ReadStream, prompt: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let value = '';
    const done = () => {
      stdin.off('data', onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
    };
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString('utf8')) {
        if (ch === '\r' || ch === '\n' || ch === '\u0004') {
          done();
          return resolve(value);
        }
        if (ch === '\u0003') {
          done();
          return reject(new CliError('interrupted; nothing was set'));
        }
        value = ch === '\u007f' ? value.slice(0, -1) : value + ch;
      }
    };
    stdin.setRawMode(true);
    process.stderr.write(prompt);
    stdin.resume();
    stdin.on('data', onData);
  });
}

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
      help: ['--from-file F       read the value from F (default: stdin, typed unseen on a terminal; one trailing newline is dropped)'],
      async run(ctx, [name], flags) {
        let raw: string;
        if (flags['from-file']) raw = await readText(ctx, flags['from-file']);
        else if (ctx.stdin.isTTY) {
          raw = await readHidden(ctx.stdin as NodeJS.ReadStream, `value of ${name} (not shown): `);
        } else raw = await readStdin(ctx.stdin);
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

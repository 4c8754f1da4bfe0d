import path from 'node:path';
import { readText, type Command } from '../command.ts';
import { ApiError } from '../errors.ts';
import { emit, table } from '../output.ts';
import { seg, written } from './shared.ts';

const MEDIA: Record<string, string> = { '.md': 'text/markdown', '.csv': 'text/csv', '.json': 'application/json', '.yaml': 'application/yaml', '.yml': 'application/yaml' };

/**
 * The context-document commands of an owner (an agent or a team): `docs`, `doc`, `doc-set`,
 * `doc-delete`, over `/<owners>/{name}/documents`.
 */
export function documentCommands(owners: 'agents' | 'teams', owner: string): Command[] {
  const base = (name: string) => `/${owners}/${seg(name)}/documents`;
  return [
    {
      name: 'docs',
      args: 'NAME',
      summary: `list ${owner}'s context documents`,
      async run(ctx, [name]) {
        const items = await ctx.api().list(base(name));
        emit(ctx.out, items, () => table(items, [['NAME', (d: any) => d.name], ['TYPE', (d) => d.media_type], ['BYTES', (d) => d.size_bytes], ['UPDATED', (d) => d.updated_at], ['DESCRIPTION', (d) => d.description]]));
      },
    },
    {
      name: 'doc',
      args: 'NAME DOC',
      summary: `print one of ${owner}'s context documents`,
      async run(ctx, [name, doc]) {
        const body = await ctx.api().get(`${base(name)}/${seg(doc)}`);
        emit(ctx.out, body, () => (body.content.endsWith('\n') ? body.content : `${body.content}\n`));
      },
    },
    {
      name: 'doc-set',
      args: 'NAME DOC',
      summary: `create or replace a context document of ${owner} from a file`,
      options: { 'from-file': { type: 'string' }, 'media-type': { type: 'string' }, description: { type: 'string' } },
      help: ['--from-file F       the content (- for stdin; default: a file named DOC)', '--media-type T      text/markdown, text/plain, text/csv, application/json or application/yaml (default: by extension)', '--description T     shown to the model in an index'],
      async run(ctx, [name, doc], flags) {
        const file = flags['from-file'] ?? doc;
        const content = await readText(ctx, file);
        const body: Record<string, unknown> = { media_type: flags['media-type'] ?? MEDIA[path.extname(file === '-' ? doc : file).toLowerCase()] ?? 'text/plain', content };
        if (flags.description !== undefined) body.description = flags.description;
        const api = ctx.api();
        const url = `${base(name)}/${seg(doc)}`;
        let ifMatch: string | null = null;
        try {
          ifMatch = (await api.read(url)).etag;
        } catch (err) {
          if (!(err instanceof ApiError && err.status === 404)) throw err;
        }
        const res = await api.request('PUT', url, { body, ifMatch });
        written(ctx, res.body, ifMatch ? 'replaced document' : 'created document', `${doc} of ${name}`, ['name', 'media_type', 'size_bytes', 'sha256']);
      },
    },
    {
      name: 'doc-delete',
      args: 'NAME DOC',
      summary: `delete a context document of ${owner}`,
      async run(ctx, [name, doc]) {
        await ctx.api().write('DELETE', `${base(name)}/${seg(doc)}`);
        emit(ctx.out, { deleted: doc }, () => `deleted document ${doc} of ${name}\n`);
      },
    },
  ];
}

import { bodyOf, FILE_HELP, FILE_OPTION, flagsOf, type Group } from '../command.ts';
import { deleteCommand, listCommand, seg, showCommand, written } from './shared.ts';

const FIELDS = { host: 'nullable', methods: 'list', paths: 'list', header_allowlist: 'list', inject_secret: 'nullable', git_push_ref_globs: 'list', what: 'string', dev_only: 'bool', policy_name: 'nullable' } as const;
/** The fields a destination is written with (the answer adds read-only ones). */
const WRITABLE = ['name', 'host', 'methods', 'paths', 'header_allowlist', 'inject_secret', 'git_push_ref_globs', 'what', 'builtin', 'github_scope', 'dev_only', 'policy_name'];
const HELP = [FILE_HELP, '--host H            DNS name (or *.name), address, optional :port', '--methods A,B       HTTP methods (none: any)', '--paths /a,/b/*     path prefixes or globs', '--header-allowlist A,B', '--inject-secret S   secret:<name> the gateway injects', '--git-push-ref-globs A,B', '--what T            what it is for', '--dev-only          a loopback or private host (development)', '--policy-name N'];

export const destinations: Group = {
  name: 'destinations',
  summary: 'Egress destinations: the hosts and paths agents may reach, and the secret injected for each',
  commands: [
    listCommand({ path: '/destinations', summary: 'list destinations', columns: [['NAME', (d: any) => d.name], ['HOST', (d) => d.host], ['METHODS', (d) => d.methods], ['PATHS', (d) => d.paths], ['SECRET', (d) => d.inject_secret], ['BUILT-IN', (d) => (d.builtin ? 'yes' : '')], ['WHAT', (d) => d.what]] }),
    showCommand({ path: (n) => `/destinations/${seg(n)}`, summary: 'show a destination' }),
    {
      name: 'create',
      args: 'NAME',
      summary: 'create a destination',
      options: { ...FILE_OPTION, ...flagsOf(FIELDS) },
      help: HELP,
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, FIELDS);
        const res = await ctx.api().request('POST', '/destinations', { body: { ...body, name } });
        written(ctx, res.body, 'created destination', name, ['name', 'host', 'methods', 'paths', 'inject_secret']);
      },
    },
    {
      name: 'update',
      args: 'NAME',
      summary: 'change a destination: the fields given replace those it has (not a built-in one)',
      options: { ...FILE_OPTION, ...flagsOf(FIELDS) },
      help: HELP,
      async run(ctx, [name], flags) {
        const api = ctx.api();
        const path = `/destinations/${seg(name)}`;
        const { body: current, etag } = await api.read(path);
        const changes = await bodyOf(ctx, flags, FIELDS);
        const body = Object.fromEntries(WRITABLE.filter((k) => k in current).map((k) => [k, current[k]]));
        const res = await api.request('PUT', path, { body: { ...body, ...changes }, ifMatch: etag });
        written(ctx, res.body, 'updated destination', name, ['name', 'host', 'methods', 'paths', 'inject_secret']);
      },
    },
    deleteCommand({ path: (n) => `/destinations/${seg(n)}`, summary: 'delete a destination (refused while an agent or a role override names it)' }),
  ],
};

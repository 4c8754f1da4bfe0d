import { bodyOf, FILE_HELP, FILE_OPTION, flagsOf, type Group } from '../command.ts';
import { emit } from '../output.ts';
import { listCommand, seg, showCommand, written } from './shared.ts';

const FIELDS = { team: 'nullable', url: 'string', destination: 'string', auth: 'string', header: 'nullable', secret: 'nullable', roles: 'list' } as const;
const SHOWN = ['id', 'scope', 'team', 'name', 'url', 'destination', 'auth', 'roles', 'secret', 'status', 'warnings'];
/** A team server is `<team>/<name>`; a platform server `platform:<name>`. */
const teamPath = (id: string) => id.split('/').map(seg).join('/');

export const mcpServers: Group = {
  name: 'mcp-servers',
  summary: 'MCP servers: tools reached through a destination, for the whole platform or one team',
  commands: [
    listCommand({ path: '/mcp-servers', summary: 'list MCP servers: platform ones first, then each team\'s', columns: [['ID', (m: any) => m.id], ['URL', (m) => m.url], ['DESTINATION', (m) => m.destination], ['AUTH', (m) => m.auth], ['ROLES', (m) => m.roles], ['STATUS', (m) => m.status]] }),
    showCommand({ path: (id) => `/mcp-servers/${seg(id)}`, arg: 'ID', summary: 'show a server (ID: platform:<name> or <team>/<name>)', fields: SHOWN }),
    {
      name: 'create',
      args: 'NAME',
      summary: 'create a server: a team\'s with --team, else a platform one (admin)',
      options: { ...FILE_OPTION, ...flagsOf(FIELDS) },
      help: [FILE_HELP, '--team T            the team (none: a platform server)', '--url URL           the server, without credentials', '--destination D     the destination it is reached through', '--auth A            none, bearer or header', '--header H          the header for auth header', '--secret secret:N   the credential\'s secret', '--roles A,B         the roles that get it'],
      async run(ctx, [name], flags) {
        const body = await bodyOf(ctx, flags, FIELDS);
        const res = await ctx.api().request('POST', '/mcp-servers', { body: { auth: 'none', roles: [], ...body, name } });
        for (const w of res.body.warnings ?? []) ctx.out.progress(`warning: ${typeof w === 'string' ? w : JSON.stringify(w)}\n`);
        written(ctx, res.body, 'created MCP server', String(res.body.id), SHOWN);
      },
    },
    {
      name: 'delete',
      args: 'TEAM/NAME',
      summary: 'remove a team\'s server',
      async run(ctx, [id]) {
        await ctx.api().write('DELETE', `/mcp-servers/${teamPath(id)}`);
        emit(ctx.out, { deleted: id }, () => `deleted ${id}\n`);
      },
    },
    {
      name: 'accept',
      args: 'TEAM/NAME',
      summary: 'accept a server an agent proposed (it becomes curated)',
      async run(ctx, [id]) {
        const res = await ctx.api().write('POST', `/mcp-servers/${teamPath(id)}/accept`, undefined, `/mcp-servers/${teamPath(id)}`);
        written(ctx, res.body, 'accepted', id, SHOWN);
      },
    },
  ],
};

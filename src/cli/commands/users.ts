import { bodyOf, flagsOf, type Group } from '../command.ts';
import { CliError } from '../errors.ts';
import { emit } from '../output.ts';
import { listCommand, seg, showCommand, written } from './shared.ts';

const SHOWN = ['id', 'name', 'email', 'role', 'disabled', 'password_set', 'last_login_at', 'created_at'];
const PATCH = { name: 'string', email: 'nullable', role: 'string' } as const;

/** A created user or a fresh setup token: the one-time link is the way in. */
const withSetup = (verb: string) => (u: any) => `${verb} ${u.name} (id ${u.id}, ${u.role})\nsetup link (once, until ${u.setup_expires_at}):\n  ${u.setup_url}\n`;

export const users: Group = {
  name: 'users',
  summary: 'Users of the console (admin): roles, disabling, setup links',
  commands: [
    listCommand({ path: '/users', summary: 'list users', columns: [['ID', (u: any) => u.id], ['NAME', (u) => u.name], ['EMAIL', (u) => u.email], ['ROLE', (u) => u.role], ['DISABLED', (u) => (u.disabled ? 'yes' : '')], ['PASSWORD', (u) => (u.password_set ? 'set' : 'not set')], ['LAST LOGIN', (u) => u.last_login_at]] }),
    showCommand({ path: (id) => `/users/${seg(id)}`, arg: 'ID', summary: 'show a user', fields: SHOWN }),
    {
      name: 'create',
      args: 'NAME',
      summary: 'create a user without a password; prints the one-time setup link to pass on',
      options: { email: { type: 'string' }, role: { type: 'string' } },
      help: ['--role R            viewer, operator or admin (required)', '--email E'],
      async run(ctx, [name], flags) {
        if (!flags.role) throw new CliError('a user needs --role viewer, operator or admin');
        const res = await ctx.api().request('POST', '/users', { body: { name, role: flags.role, ...(flags.email ? { email: flags.email } : {}) } });
        emit(ctx.out, res.body, () => withSetup('created user')(res.body));
      },
    },
    {
      name: 'update',
      args: 'ID',
      summary: 'change a user\'s name, e-mail or role, or disable or enable the account',
      options: { ...flagsOf(PATCH), disable: { type: 'boolean' }, enable: { type: 'boolean' } },
      help: ['--name N', '--email E           ("" clears)', '--role R            viewer, operator or admin', '--disable / --enable  disabling ends the user\'s sessions'],
      async run(ctx, [id], flags) {
        if (flags.enable && flags.disable) throw new CliError('--enable and --disable exclude each other');
        const body = await bodyOf(ctx, flags, PATCH);
        if (flags.disable) body.disabled = true;
        if (flags.enable) body.disabled = false;
        if (Object.keys(body).length === 0) throw new CliError('nothing to change: give --name, --email, --role, --disable or --enable');
        const res = await ctx.api().write('PATCH', `/users/${seg(id)}`, body);
        written(ctx, res.body, 'updated user', String(res.body.name), SHOWN);
      },
    },
    {
      name: 'setup-token',
      args: 'ID',
      summary: 'issue a fresh one-time setup link (earlier unused ones stop working)',
      async run(ctx, [id]) {
        const res = await ctx.api().request('POST', `/users/${seg(id)}/setup-token`);
        emit(ctx.out, res.body, () => withSetup('new setup link for')(res.body));
      },
    },
  ],
};

import { ApiClient } from '../client.ts';
import type { Group } from '../command.ts';
import { CliError } from '../errors.ts';
import { block, emit } from '../output.ts';
import { normaliseUrl, profilePath, removeProfile, saveProfile } from '../profile.ts';

export const login: Group = {
  name: 'login',
  summary: 'Store where the API is and the token to use',
  commands: [
    {
      name: '',
      summary: 'check a token against the API and store {url, token} (mode 0600) for the other commands',
      options: { url: { type: 'string' }, token: { type: 'string' }, 'token-stdin': { type: 'boolean' } },
      help: ['--url URL           the console, like http://localhost:8080', '--token T           an API token (Account in the web console, or crewhouse admin token)', '--token-stdin       read the token from stdin instead (keeps it out of shell history)'],
      async run(ctx, _args, flags) {
        if (!flags.url) throw new CliError('crewhouse login needs --url URL');
        let token: string | undefined = flags.token;
        if (flags['token-stdin']) {
          const chunks: Buffer[] = [];
          for await (const c of ctx.stdin) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(String(c)));
          token = Buffer.concat(chunks).toString('utf8').trim();
        }
        if (!token) throw new CliError('crewhouse login needs --token T or --token-stdin');
        const profile = { url: normaliseUrl(flags.url), token };
        const me = await new ApiClient(profile).get('/me');
        const file = saveProfile(ctx.env, profile);
        emit(ctx.out, { url: profile.url, user: me, config: file }, () => `logged in to ${profile.url} as ${me.name} (${me.role}); saved to ${file}\n`);
      },
    },
  ],
};

export const logout: Group = {
  name: 'logout',
  summary: 'Forget the stored login',
  commands: [
    {
      name: '',
      summary: 'remove the stored {url, token} (the token itself stays valid: revoke it in the console)',
      async run(ctx) {
        const removed = removeProfile(ctx.env);
        emit(ctx.out, { removed, config: profilePath(ctx.env) }, () => (removed ? `removed ${profilePath(ctx.env)}\n` : 'not logged in\n'));
      },
    },
  ],
};

export const whoami: Group = {
  name: 'whoami',
  summary: 'Who the CLI acts as',
  commands: [
    {
      name: '',
      summary: 'the user and role of the token in use, and the API it talks to',
      async run(ctx) {
        const api = ctx.api();
        const me = await api.get('/me');
        emit(ctx.out, me, () => block({ url: api.base, ...me }, ['url', 'name', 'role', 'email', 'via']));
      },
    },
  ],
};

import { ApiClient } from '../client.ts';
import { readStdin, type Ctx, type Group } from '../command.ts';
import { ApiError, CliError } from '../errors.ts';
import { block, emit } from '../output.ts';
import { normaliseUrl, profilePath, removeProfile, saveProfile } from '../profile.ts';

/** A setup link's one-time token (`<console>/#setup?token=...`), or null when the text is not one. */
export function setupTokenOf(text: string): string | null {
  const m = /#setup\?(?:.*&)?token=([^&\s]+)/.exec(text.trim());
  return m ? decodeURIComponent(m[1]) : null;
}

/** One line typed on the terminal; hidden (no echo) for a password. */
async function ask(ctx: Ctx, question: string, hidden: boolean): Promise<string> {
  const stdin = ctx.stdin as NodeJS.ReadStream;
  process.stderr.write(question);
  return new Promise((resolve, reject) => {
    let text = '';
    const raw = hidden && typeof stdin.setRawMode === 'function';
    if (raw) stdin.setRawMode(true);
    stdin.resume();
    stdin.setEncoding('utf8');
    const done = (err: Error | null) => {
      stdin.off('data', onData);
      if (raw) stdin.setRawMode(false);
      stdin.pause();
      if (hidden) process.stderr.write('\n');
      if (err) reject(err);
      else resolve(text.trim());
    };
    const onData = (chunk: string) => {
      for (const ch of chunk) {
        if (ch === '\r' || ch === '\n') return done(null);
        if (ch === '\u0003') return done(new CliError('interrupted'));
        if (ch === '\u007f' || ch === '\b') text = text.slice(0, -1);
        else text += ch;
      }
    };
    stdin.on('data', onData);
  });
}

/**
 * Logs in through a setup link (the one `npm start` prints on a first start, or `crewhouse users
 * setup-token`): chooses the account's password, then mints an API token for this CLI with the
 * session that opened. The password is asked twice on a terminal, or read from stdin.
 */
async function tokenFromSetupLink(ctx: Ctx, url: string, setupToken: string, passwordStdin: boolean): Promise<string> {
  let password: string;
  if (passwordStdin) password = (await readStdin(ctx.stdin)).replace(/\r?\n$/, '');
  else if (ctx.stdin.isTTY) {
    password = await ask(ctx, 'Choose your password (at least 12 characters; you sign in to the web console with it): ', true);
    if ((await ask(ctx, 'Repeat it: ', true)) !== password) throw new CliError('the two passwords differ; run crewhouse login again');
  } else throw new CliError('a setup link needs a password: run crewhouse login on a terminal, or pass --password-stdin and the password on stdin');
  const api = `${url}/api/v1`;
  const post = async (path: string, body: unknown, headers: Record<string, string> = {}) => {
    let res: Response;
    try {
      res = await fetch(api + path, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json', ...headers }, body: JSON.stringify(body) });
    } catch (err) {
      throw new ApiError(0, { detail: `cannot reach ${url}: ${(err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message}` });
    }
    const answer = (await res.json().catch(() => ({}))) as Record<string, any>;
    if (!res.ok) throw new ApiError(res.status, answer);
    return { answer, cookie: (res.headers.get('set-cookie') ?? '').split(';')[0] };
  };
  const session = await post('/session/setup', { token: setupToken, password }).catch((err: unknown) => {
    const fields = err instanceof ApiError ? (err.problem.errors ?? []).map((e) => e.field) : [];
    if (fields.includes('token')) throw new CliError('that setup link is used, expired or unknown: an admin issues a fresh one (crewhouse users setup-token NAME, or Users in the web console)');
    if (fields.includes('password')) throw new CliError('that password is too short: choose one of at least 12 characters');
    throw err;
  });
  const minted = await post('/session/tokens', { name: 'crewhouse CLI' }, { cookie: session.cookie, 'x-console-csrf': String(session.answer.csrf_token) });
  return String(minted.answer.token);
}

export const login: Group = {
  name: 'login',
  summary: 'Store where the API is and the token to use',
  commands: [
    {
      name: '',
      summary: 'check a token against the API and store {url, token} (mode 0600) for the other commands; without a token, paste the setup link npm start printed',
      options: { url: { type: 'string' }, token: { type: 'string' }, 'token-stdin': { type: 'boolean' }, 'password-stdin': { type: 'boolean' } },
      help: [
        '--url URL           the console, like http://localhost:8080',
        '--token T           an API token (Account in the web console, or crewhouse admin token), or a setup link',
        '--token-stdin       read the token from stdin instead (keeps it out of shell history)',
        '--password-stdin    with a setup link: read the password to choose from stdin',
        'Without a token, on a terminal, it asks for one: paste the setup link the first start printed',
        '(you choose the admin\'s password) or an API token.',
      ],
      async run(ctx, _args, flags) {
        if (!flags.url) throw new CliError('crewhouse login needs --url URL (the console, like http://localhost:8080)');
        const url = normaliseUrl(flags.url);
        let token: string | undefined = flags.token?.trim();
        if (flags['token-stdin']) token = (await readStdin(ctx.stdin)).trim();
        if (!token && ctx.stdin.isTTY) token = await ask(ctx, 'No token given. Paste the setup link the first start printed (http://…/#setup?token=…), or an API token from Account in the web console: ', false);
        if (!token) {
          throw new CliError(
            'crewhouse login needs a token, and none was given (is $SERVICE_ADMIN_TOKEN empty? it is set only if you set it before the first start). Run it on a terminal to paste the setup link the first start printed, or pass --token with an API token (Account in the web console), or --token SETUP_LINK --password-stdin',
          );
        }
        const setup = setupTokenOf(token);
        if (setup) token = await tokenFromSetupLink(ctx, url, setup, flags['password-stdin'] === true);
        const profile = { url, token };
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

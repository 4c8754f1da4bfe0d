import crypto from 'node:crypto';
import { App } from '@octokit/app';
import { Octokit } from '@octokit/rest';
import type { Coverage } from '../../hooks.ts';
import type { SaidForPeople } from '../../errors/problems.ts';

/**
 * The code host as a GitHub App: the app authenticates with a JWT signed by its private key
 * (Octokit's app packages do the signing and correct for clock skew against the host's `Date`),
 * mints installation tokens, and acts on the installation's repositories with them.
 *
 * A private CA (GitHub Enterprise) is trusted through Node's NODE_EXTRA_CA_CERTS.
 */

export interface CodeHostAppConfig {
  /** REST base URL: https://api.github.com, or https://<host>/api/v3 for GitHub Enterprise. */
  apiUrl: string;
  appId: string | number;
  installationId: string | number;
  /** The app's private key (PEM; GitHub hands out PKCS#1). */
  privateKey: string;
}

export interface CodeHostAppOptions {
  /** The clock token expiry is judged by (tests move it past an hour). */
  now?: () => number;
  /** Where Octokit's own warnings go (a clock-skew retry); silent by default. */
  log?: { warn(msg: string): void };
}

export interface InstallationToken {
  token: string;
  /** ISO time the code host says the token stops working. */
  expiresAt: string;
}

export interface CodeHostRepository {
  fullName: string;
  defaultBranch: string;
  cloneUrl: string;
  htmlUrl: string;
  private: boolean;
}

export interface CodeHostIssue {
  number: number;
  title: string;
  body: string | null;
  state: 'open' | 'closed';
  labels: string[];
  author: string;
  url: string;
  /** The issue is a pull request (they share numbering on the code host). */
  isPullRequest: boolean;
}

export interface CodeHostPullRequest {
  number: number;
  url: string;
  state: 'open' | 'closed';
  merged: boolean;
  head: string;
  base: string;
  title: string;
}

export interface CodeHostComment {
  id: number;
  body: string;
  author: string;
  url: string;
}

export interface CodeHostApp {
  readonly apiUrl: string;
  readonly appId: string;
  readonly installationId: number;
  /** An installation token, narrowed to `repositories` (`<owner>/<repo>`) when given; cached and refreshed 5 minutes before expiry. */
  installationToken(opts?: { repositories?: string[] }): Promise<InstallationToken>;
  /** One line on whether the app, its installation and a token work. Never throws. */
  check(): Promise<{ state: 'ok' | 'error'; detail: string }>;
  /** Whether the installation covers `<owner>/<repo>`; a failure to ask throws CodeHostError. */
  coversRepository(fullName: string): Promise<Coverage>;
  /** The app's bot account (`<slug>[bot]`), to tell its own comments from people's. */
  botLogin(): Promise<string>;
  repository(fullName: string): Promise<CodeHostRepository>;
  issue(input: { repo: string; number: number }): Promise<CodeHostIssue>;
  issueComments(input: { repo: string; number: number }): Promise<CodeHostComment[]>;
  comment(input: { repo: string; issue: number; body: string }): Promise<{ id: number; url: string }>;
  pullRequest(input: { repo: string; number: number }): Promise<CodeHostPullRequest>;
  /** Opens a pull request from `head` (a branch of the same repository) into `base` (default: the default branch); the open one for the same head when there is one. */
  openPullRequest(input: { repo: string; head: string; base?: string; title: string; body: string }): Promise<{ number: number; url: string; created: boolean }>;
}

/**
 * A code-host call that failed; `message` is one line without secrets. `status` is the code
 * host's HTTP status, 0 when it could not be reached, null when no call was made (a setting or
 * the key is not usable).
 */
export class CodeHostError extends Error implements SaidForPeople {
  readonly status: number | null;
  readonly forPeople = true;
  constructor(message: string, status: number | null = null) {
    super(message);
    this.name = 'CodeHostError';
    this.status = status;
  }
  /** Worth trying again later: unreachable, rate-limited or a server error. */
  get transient(): boolean {
    return this.status !== null && (this.status === 0 || this.status === 429 || this.status >= 500);
  }
}

/** Refresh this long before the code host's expiry, so a token handed out still has minutes to live. */
const REFRESH_EARLY_MS = 5 * 60 * 1000;

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, 300);

/** A one-line reason for a failed call: the code host's own message and status, or why it could not be reached. */
export function reasonOf(err: unknown, what: string): CodeHostError {
  if (err instanceof CodeHostError) return err;
  const e = err as { status?: number; response?: { data?: unknown; headers?: Record<string, unknown> }; message?: string; cause?: unknown };
  if (typeof e?.status === 'number' && e.status > 0 && e.response) {
    const data = e.response.data as { message?: unknown; errors?: { message?: string; code?: string; field?: string }[] } | undefined;
    let msg = typeof data?.message === 'string' ? data.message : `status ${e.status}`;
    const extra = (data?.errors ?? []).map((x) => x.message ?? [x.field, x.code].filter(Boolean).join(' ')).filter(Boolean);
    if (extra.length) msg += ` (${extra.join('; ')})`;
    // The code host answers a spent rate limit with 403 as well as 429: it is a wait, not a refused credential.
    const rateLimited = e.status === 403 && (String(e.response.headers?.['x-ratelimit-remaining']) === '0' || /rate limit/i.test(msg));
    return new CodeHostError(oneLine(`${what}: the code host answered ${e.status} ${msg}`), rateLimited ? 429 : e.status);
  }
  // Octokit wraps a failed fetch (no response) as a 500 whose causes hold the socket's error code.
  let cause: unknown = err;
  let why = e?.message ?? String(err);
  for (let depth = 0; cause && depth < 5; depth++) {
    const c = cause as { code?: unknown; message?: unknown; cause?: unknown };
    if (typeof c.code === 'string') {
      why = c.code;
      break;
    }
    if (typeof c.message === 'string' && c.message) why = c.message;
    cause = c.cause;
  }
  return new CodeHostError(oneLine(`${what}: cannot reach the code host (${why})`), 0);
}

function splitRepo(fullName: string): { owner: string; repo: string } {
  const m = /^([A-Za-z0-9_.-]+)\/([A-Za-z0-9_.-]+)$/.exec(fullName);
  if (!m) throw new CodeHostError(`"${fullName}" is not <owner>/<repo>`);
  return { owner: m[1]!, repo: m[2]! };
}

/** Validates the key before Octokit sees it, so a bad key is a clear reason and its text never reaches a message. */
function checkPrivateKey(pem: string): void {
  try {
    const key = crypto.createPrivateKey(pem);
    if (key.asymmetricKeyType !== 'rsa') throw new Error('not RSA');
  } catch {
    throw new CodeHostError('app_key is not a PEM RSA private key');
  }
}

export function createCodeHostApp(config: CodeHostAppConfig, opts: CodeHostAppOptions = {}): CodeHostApp {
  const now = opts.now ?? Date.now;
  const apiUrl = config.apiUrl.replace(/\/+$/, '');
  const installationId = Number(config.installationId);
  const appId = String(config.appId);
  const warn = opts.log?.warn.bind(opts.log) ?? (() => {});
  const log = { debug: () => {}, info: () => {}, warn, error: warn };
  const RestOctokit = Octokit.defaults({ baseUrl: apiUrl, log });
  let app: App | null = null;
  const appClient = (): App => {
    if (app) return app;
    checkPrivateKey(config.privateKey);
    app = new App({ appId, privateKey: config.privateKey, Octokit: RestOctokit as never, log });
    return app;
  };

  // The installation's account: a narrowed token names repositories within it.
  let account: Promise<string> | null = null;
  const accountLogin = (): Promise<string> => {
    account ??= (async () => {
      try {
        const { data } = await appClient().octokit.request('GET /app/installations/{installation_id}', { installation_id: installationId });
        return (data.account as { login?: string } | null)?.login ?? '';
      } catch (err) {
        throw reasonOf(err, `installation ${installationId}`);
      }
    })();
    account.catch(() => (account = null));
    return account;
  };

  const tokens = new Map<string, { expiresAt: number; value: Promise<InstallationToken> }>();

  async function mint(repositories: string[] | null): Promise<InstallationToken> {
    let names: string[] | undefined;
    if (repositories) {
      const login = (await accountLogin()).toLowerCase();
      names = repositories.map((full) => {
        const { owner, repo } = splitRepo(full);
        if (owner.toLowerCase() !== login) throw new CodeHostError(`installation ${installationId} belongs to ${login || 'another account'}, not ${owner}`);
        return repo;
      });
    }
    try {
      const { data } = await appClient().octokit.request('POST /app/installations/{installation_id}/access_tokens', {
        installation_id: installationId,
        ...(names ? { repositories: names } : {}),
      });
      return { token: data.token, expiresAt: data.expires_at };
    } catch (err) {
      throw reasonOf(err, `an installation token for installation ${installationId}${names ? ` narrowed to ${repositories!.join(', ')}` : ''}`);
    }
  }

  function installationToken(o: { repositories?: string[] } = {}): Promise<InstallationToken> {
    const repositories = o.repositories ? [...new Set(o.repositories.map((r) => r.toLowerCase()))].sort() : null;
    const key = repositories ? repositories.join(',') : '*';
    const cached = tokens.get(key);
    if (cached && now() < cached.expiresAt - REFRESH_EARLY_MS) return cached.value;
    // Concurrent callers share this one mint: the entry is in the map before the request leaves.
    const entry = { expiresAt: Number.POSITIVE_INFINITY, value: mint(repositories) };
    tokens.set(key, entry);
    entry.value.then(
      (t) => (entry.expiresAt = Date.parse(t.expiresAt)),
      () => tokens.get(key) === entry && tokens.delete(key),
    );
    return entry.value;
  }

  /** A REST client acting as the installation, narrowed to one repository. */
  async function as(fullName: string): Promise<{ octokit: Octokit; owner: string; repo: string }> {
    const { owner, repo } = splitRepo(fullName);
    const { token } = await installationToken({ repositories: [`${owner}/${repo}`] });
    return { octokit: new RestOctokit({ auth: token }), owner, repo };
  }

  async function call<T>(what: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (err) {
      throw reasonOf(err, what);
    }
  }

  const pullOf = (p: { number: number; html_url: string; state: string; merged?: boolean | null; merged_at?: string | null; head: { ref: string }; base: { ref: string }; title: string }): CodeHostPullRequest => ({
    number: p.number,
    url: p.html_url,
    state: p.state === 'closed' ? 'closed' : 'open',
    merged: Boolean(p.merged ?? p.merged_at),
    head: p.head.ref,
    base: p.base.ref,
    title: p.title,
  });

  async function openPullFor(octokit: Octokit, owner: string, repo: string, head: string) {
    const { data } = await octokit.rest.pulls.list({ owner, repo, state: 'open', head: `${owner}:${head}`, per_page: 1 });
    return data[0];
  }

  return {
    apiUrl,
    appId,
    installationId,
    installationToken,

    async check() {
      try {
        if (!Number.isSafeInteger(installationId) || installationId <= 0) throw new CodeHostError(`installation_id "${config.installationId}" is not a number`);
        const { data: me } = await call('the app', () => appClient().octokit.request('GET /app'));
        const login = await accountLogin();
        const { token } = await installationToken();
        const { data } = await call('the installation repositories', () =>
          new RestOctokit({ auth: token }).rest.apps.listReposAccessibleToInstallation({ per_page: 1 }),
        );
        const n = data.total_count;
        return { state: 'ok', detail: oneLine(`app ${me?.slug ?? appId} installed on ${login} (installation ${installationId}), ${n} ${n === 1 ? 'repository' : 'repositories'}`) };
      } catch (err) {
        return { state: 'error', detail: reasonOf(err, 'the code host').message };
      }
    },

    async coversRepository(fullName) {
      const { owner, repo } = splitRepo(fullName);
      const login = await accountLogin();
      if (login.toLowerCase() !== owner.toLowerCase())
        return { covered: false, reason: `the code-host app's installation ${installationId} is on ${login}, not on ${owner}` };
      const { token } = await installationToken();
      // Listing is the only honest answer: an installation token can also read public repositories it does not cover.
      const octokit = new RestOctokit({ auth: token });
      const found = await call('the installation repositories', () =>
        octokit.paginate(octokit.rest.apps.listReposAccessibleToInstallation, { per_page: 100 }, (res, done) => {
          const hit = res.data.some((r) => r.full_name.toLowerCase() === `${owner}/${repo}`.toLowerCase());
          if (hit) done();
          return hit ? [true] : [];
        }),
      );
      return found.length ? { covered: true } : { covered: false, reason: `the code-host app is not installed on ${owner}/${repo} (installation ${installationId} on ${login} does not include it)` };
    },

    async botLogin() {
      const { data } = await call('the app', () => appClient().octokit.request('GET /app'));
      return `${data?.slug ?? appId}[bot]`;
    },

    async repository(fullName) {
      return call(`repository ${fullName}`, async () => {
        const { octokit, owner, repo } = await as(fullName);
        const { data } = await octokit.rest.repos.get({ owner, repo });
        return { fullName: data.full_name, defaultBranch: data.default_branch, cloneUrl: data.clone_url, htmlUrl: data.html_url, private: data.private };
      });
    },

    async issue({ repo: fullName, number }) {
      return call(`issue ${fullName}#${number}`, async () => {
        const { octokit, owner, repo } = await as(fullName);
        const { data } = await octokit.rest.issues.get({ owner, repo, issue_number: number });
        return {
          number: data.number,
          title: data.title,
          body: data.body ?? null,
          state: data.state === 'closed' ? 'closed' : 'open',
          labels: data.labels.map((l) => (typeof l === 'string' ? l : (l.name ?? ''))).filter(Boolean),
          author: data.user?.login ?? '',
          url: data.html_url,
          isPullRequest: Boolean(data.pull_request),
        };
      });
    },

    async issueComments({ repo: fullName, number }) {
      return call(`comments of ${fullName}#${number}`, async () => {
        const { octokit, owner, repo } = await as(fullName);
        const all = await octokit.paginate(octokit.rest.issues.listComments, { owner, repo, issue_number: number, per_page: 100 });
        return all.map((c) => ({ id: c.id, body: c.body ?? '', author: c.user?.login ?? '', url: c.html_url }));
      });
    },

    async comment({ repo: fullName, issue, body }) {
      return call(`a comment on ${fullName}#${issue}`, async () => {
        const { octokit, owner, repo } = await as(fullName);
        const { data } = await octokit.rest.issues.createComment({ owner, repo, issue_number: issue, body });
        return { id: data.id, url: data.html_url };
      });
    },

    async pullRequest({ repo: fullName, number }) {
      return call(`pull request ${fullName}#${number}`, async () => {
        const { octokit, owner, repo } = await as(fullName);
        const { data } = await octokit.rest.pulls.get({ owner, repo, pull_number: number });
        return pullOf(data);
      });
    },

    async openPullRequest({ repo: fullName, head, base, title, body }) {
      return call(`a pull request from ${head} on ${fullName}`, async () => {
        const { octokit, owner, repo } = await as(fullName);
        const existing = await openPullFor(octokit, owner, repo, head);
        if (existing) return { number: existing.number, url: existing.html_url, created: false };
        const into = base ?? (await octokit.rest.repos.get({ owner, repo })).data.default_branch;
        try {
          const { data } = await octokit.rest.pulls.create({ owner, repo, head, base: into, title, body });
          return { number: data.number, url: data.html_url, created: true };
        } catch (err) {
          // Another caller opened it between our look and our create: that one is the answer.
          if ((err as { status?: number }).status === 422) {
            const raced = await openPullFor(octokit, owner, repo, head);
            if (raced) return { number: raced.number, url: raced.html_url, created: false };
          }
          throw err;
        }
      });
    },
  };
}

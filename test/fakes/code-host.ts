import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { sign } from '@octokit/webhooks-methods';
import type { KeyPair } from '../../src/gateway/certificates.ts';
import { gitHttpBackend, makeBareRepo, refsOf } from './git-server.ts';

/**
 * A fake GitHub: the REST routes a GitHub App uses (the app, its installations, installation
 * tokens, the installation's repositories, issues and their comments, pull requests), git smart
 * HTTP through `git http-backend`, and webhook deliveries signed like GitHub's. It answers in
 * GitHub's wire format so Octokit talks to it unchanged (`baseUrl` = `apiUrl`).
 *
 * The same handler listens twice: plain HTTP (`apiUrl`, for the console's client, which trusts
 * only the system store) and HTTPS with the given key pair (`httpsUrl`, for the gateway, which
 * trusts SERVICE_GATEWAY_UPSTREAM_CA_FILE). Clone URLs use the HTTPS side, as on GitHub.
 *
 * Its clock (`now`, `advance`) governs token expiry, JWT checks and the `Date` header, so a test
 * can pass an installation token's hour without waiting for it.
 */

export interface FakeUser {
  login: string;
  id: number;
  type: 'User' | 'Bot';
}

export interface FakeRepo {
  id: number;
  owner: string;
  name: string;
  fullName: string;
  defaultBranch: string;
  private: boolean;
  installationId: number | null;
}

export interface FakeIssue {
  number: number;
  title: string;
  body: string | null;
  state: 'open' | 'closed';
  labels: string[];
  user: FakeUser;
  createdAt: string;
  /** Present when the issue is a pull request (they share GitHub's numbering). */
  pull: { head: string; base: string; merged: boolean } | null;
}

export interface FakeComment {
  id: number;
  repo: string;
  issue: number;
  body: string;
  user: FakeUser;
  createdAt: string;
}

export interface MintedToken {
  token: string;
  installationId: number;
  /** Full names the token is narrowed to; null when it covers the whole installation. */
  repositories: string[] | null;
  permissions: Record<string, string> | null;
  expiresAt: number;
}

export interface Delivery {
  id: string;
  event: string;
  payload: unknown;
  url: string;
  /** The target's status, or 0 when it could not be reached. */
  status: number;
  response: string;
}

export interface FakeCodeHost {
  /** Plain HTTP base URL of the REST API (Octokit's `baseUrl`). */
  apiUrl: string;
  /** HTTPS base URL of the same server: REST and git, through the gateway. */
  httpsUrl: string;
  httpsPort: number;
  app: { id: number; slug: string; name: string; privateKeyPem: string; publicKeyPem: string; bot: FakeUser };
  now(): number;
  advance(ms: number): void;
  addInstallation(account: string, id?: number): number;
  /** A repository (private, with one commit on its default branch), installed when `installation` is given. */
  addRepo(fullName: string, opts?: { installation?: number; defaultBranch?: string; private?: boolean }): FakeRepo;
  install(installationId: number, fullName: string): void;
  uninstall(fullName: string): void;
  /** Refs of a repository's bare git store, by full ref name. */
  refs(fullName: string): Record<string, string>;
  /** A branch with one more commit, as a person pushing to it. */
  pushBranch(fullName: string, branch: string, files: Record<string, string>): string;
  /** A person opens an issue (delivers `issues` `opened`). */
  openIssue(fullName: string, input: { title: string; body?: string; labels?: string[]; user?: string }): FakeIssue;
  /** A person labels an issue (delivers `issues` `labeled`). */
  labelIssue(fullName: string, number: number, label: string, user?: string): void;
  /** A person comments on an issue or pull request (delivers `issue_comment` `created`). */
  commentOnIssue(fullName: string, number: number, body: string, user?: string): FakeComment;
  /** A person closes or merges a pull request (delivers `pull_request` `closed`). */
  closePull(fullName: string, number: number, opts?: { merged?: boolean; user?: string }): void;
  issue(fullName: string, number: number): FakeIssue | undefined;
  /** Where GitHub sends the app's webhooks, and the secret it signs them with; null stops deliveries. */
  setWebhook(target: { url: string; secret: string } | null): void;
  /** Sends one delivery now; `signWith` overrides the secret (a bad signature), `id` reuses a delivery id. */
  deliver(event: string, payload: unknown, opts?: { id?: string; signWith?: string; url?: string }): Promise<Delivery>;
  /** Sends a recorded delivery again with the same `X-GitHub-Delivery`, as GitHub's "Redeliver". */
  redeliver(id: string): Promise<Delivery>;
  /** Waits for the deliveries in flight. */
  settled(): Promise<void>;
  readonly deliveries: Delivery[];
  readonly tokens: MintedToken[];
  readonly pulls: { repo: string; number: number; head: string; base: string; title: string; body: string | null; state: 'open' | 'closed' }[];
  readonly comments: FakeComment[];
  readonly requests: { method: string; path: string; auth: 'jwt' | 'token' | 'basic' | 'none' }[];
  /** Makes every REST request answer this status (an outage); null restores. */
  failWith(status: number | null, answer?: { message: string; headers?: Record<string, string> }): void;
  close(): Promise<void>;
}

const DOCS = 'https://docs.github.com/rest';
const TOKEN_LIFETIME_MS = 60 * 60 * 1000;

class HttpError extends Error {
  status: number;
  extra: Record<string, unknown>;
  headers: Record<string, string>;
  constructor(status: number, message: string, extra: Record<string, unknown> = {}, headers: Record<string, string> = {}) {
    super(message);
    this.status = status;
    this.extra = extra;
    this.headers = headers;
  }
}

const b64urlJson = (s: string) => JSON.parse(Buffer.from(s, 'base64url').toString('utf8')) as Record<string, unknown>;

export async function startFakeCodeHost(opts: { tls: KeyPair; host?: string; appId?: number; appSlug?: string }): Promise<FakeCodeHost> {
  const host = opts.host ?? '127.0.0.1';
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-codehost-'));
  // GitHub hands out PKCS#1 keys ("BEGIN RSA PRIVATE KEY"); the client must take them as they come.
  const keys = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const appId = opts.appId ?? 4242;
  const slug = opts.appSlug ?? 'crewhouse-test';
  const app = {
    id: appId,
    slug,
    name: 'Crewhouse (test)',
    privateKeyPem: keys.privateKey.export({ type: 'pkcs1', format: 'pem' }) as string,
    publicKeyPem: keys.publicKey.export({ type: 'spki', format: 'pem' }) as string,
    bot: { login: `${slug}[bot]`, id: 90000 + appId, type: 'Bot' as const },
  };

  let offset = 0;
  const now = () => Date.now() + offset;
  let nextId = 1000;
  const id = () => ++nextId;
  const users = new Map<string, FakeUser>();
  const user = (login: string): FakeUser => {
    if (!users.has(login)) users.set(login, { login, id: id(), type: 'User' });
    return users.get(login)!;
  };
  const installations = new Map<number, { id: number; account: FakeUser }>();
  const repos = new Map<string, FakeRepo>();
  const issues = new Map<string, FakeIssue[]>();
  const tokens: MintedToken[] = [];
  const byToken = new Map<string, MintedToken>();
  const pulls: FakeCodeHost['pulls'] = [];
  const comments: FakeComment[] = [];
  const requests: FakeCodeHost['requests'] = [];
  const deliveries: Delivery[] = [];
  const inFlight = new Set<Promise<unknown>>();
  let webhook: { url: string; secret: string } | null = null;
  let failing: number | null = null;
  let failingAnswer: { message: string; headers?: Record<string, string> } | undefined;
  let httpsPort = 0;

  const repoKey = (fullName: string) => fullName.toLowerCase();
  const repoOf = (fullName: string) => repos.get(repoKey(fullName));
  const gitDir = (r: FakeRepo) => `${r.owner}/${r.name}.git`;
  const iso = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

  // ---- JSON shapes, as GitHub's REST API answers them ----
  const userJson = (u: FakeUser) => ({ login: u.login, id: u.id, type: u.type, html_url: `${httpsBase()}/${u.login}` });
  const httpsBase = () => `https://${host}:${httpsPort}`;
  const repoJson = (r: FakeRepo) => ({
    id: r.id,
    name: r.name,
    full_name: r.fullName,
    private: r.private,
    owner: userJson(user(r.owner)),
    html_url: `${httpsBase()}/${r.fullName}`,
    url: `${apiUrl}/repos/${r.fullName}`,
    clone_url: `${httpsBase()}/${r.fullName}.git`,
    default_branch: r.defaultBranch,
  });
  const issueJson = (r: FakeRepo, i: FakeIssue) => ({
    id: i.number + r.id * 10000,
    number: i.number,
    title: i.title,
    body: i.body,
    state: i.state,
    labels: i.labels.map((name) => ({ name })),
    user: userJson(i.user),
    comments: comments.filter((c) => c.repo === r.fullName && c.issue === i.number).length,
    created_at: i.createdAt,
    html_url: `${httpsBase()}/${r.fullName}/${i.pull ? 'pull' : 'issues'}/${i.number}`,
    url: `${apiUrl}/repos/${r.fullName}/issues/${i.number}`,
    ...(i.pull ? { pull_request: { url: `${apiUrl}/repos/${r.fullName}/pulls/${i.number}`, html_url: `${httpsBase()}/${r.fullName}/pull/${i.number}` } } : {}),
  });
  const pullJson = (r: FakeRepo, i: FakeIssue) => {
    const refs = refsOf(root, gitDir(r));
    return {
      id: i.number + r.id * 10000,
      number: i.number,
      title: i.title,
      body: i.body,
      state: i.state,
      merged: i.pull!.merged,
      user: userJson(i.user),
      created_at: i.createdAt,
      html_url: `${httpsBase()}/${r.fullName}/pull/${i.number}`,
      url: `${apiUrl}/repos/${r.fullName}/pulls/${i.number}`,
      head: { ref: i.pull!.head, label: `${r.owner}:${i.pull!.head}`, sha: refs[`refs/heads/${i.pull!.head}`] ?? null, repo: repoJson(r) },
      base: { ref: i.pull!.base, label: `${r.owner}:${i.pull!.base}`, sha: refs[`refs/heads/${i.pull!.base}`] ?? null, repo: repoJson(r) },
    };
  };
  const commentJson = (c: FakeComment) => ({
    id: c.id,
    body: c.body,
    user: userJson(c.user),
    created_at: c.createdAt,
    html_url: `${httpsBase()}/${c.repo}/issues/${c.issue}#issuecomment-${c.id}`,
    issue_url: `${apiUrl}/repos/${c.repo}/issues/${c.issue}`,
  });

  // ---- authentication, as GitHub does it ----
  function verifyJwt(jwt: string): void {
    const parts = jwt.split('.');
    if (parts.length !== 3) throw new HttpError(401, 'A JSON web token could not be decoded');
    let header: Record<string, unknown>;
    let claims: Record<string, unknown>;
    try {
      header = b64urlJson(parts[0]!);
      claims = b64urlJson(parts[1]!);
    } catch {
      throw new HttpError(401, 'A JSON web token could not be decoded');
    }
    const signed = header.alg === 'RS256' && crypto.verify('RSA-SHA256', Buffer.from(`${parts[0]}.${parts[1]}`), keys.publicKey, Buffer.from(parts[2]!, 'base64url'));
    if (!signed || String(claims.iss) !== String(appId)) throw new HttpError(401, 'A JSON web token could not be decoded');
    const t = Math.floor(now() / 1000);
    if (typeof claims.iat !== 'number' || claims.iat > t + 60) throw new HttpError(401, "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued");
    if (typeof claims.exp !== 'number' || claims.exp <= t) throw new HttpError(401, "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires");
    if (claims.exp > t + 600 + 60) throw new HttpError(401, "'Expiration time' claim ('exp') is too far in the future");
  }

  function bearer(req: http.IncomingMessage): { kind: 'jwt' | 'token' | 'basic' | 'none'; value: string } {
    const h = req.headers.authorization ?? '';
    const m = /^(bearer|token)\s+(\S+)$/i.exec(h);
    if (m) return { kind: m[2]!.split('.').length === 3 ? 'jwt' : 'token', value: m[2]! };
    const b = /^basic\s+(\S+)$/i.exec(h);
    if (b) return { kind: 'basic', value: Buffer.from(b[1]!, 'base64').toString('utf8') };
    return { kind: 'none', value: '' };
  }

  function validToken(value: string): MintedToken {
    const t = byToken.get(value);
    if (!t || t.expiresAt <= now() || !installations.has(t.installationId)) throw new HttpError(401, 'Bad credentials');
    return t;
  }

  const tokenCovers = (t: MintedToken, r: FakeRepo) =>
    r.installationId === t.installationId && (t.repositories === null || t.repositories.some((n) => repoKey(n) === repoKey(r.fullName)));

  function repoFor(req: http.IncomingMessage, owner: string, name: string): FakeRepo {
    const auth = bearer(req);
    if (auth.kind !== 'token') throw new HttpError(auth.kind === 'jwt' ? 403 : 401, auth.kind === 'jwt' ? 'Resource not accessible by integration' : 'Requires authentication');
    const t = validToken(auth.value);
    const r = repoOf(`${owner}/${name}`);
    // GitHub hides what a token may not see behind 404.
    if (!r || !tokenCovers(t, r)) throw new HttpError(404, 'Not Found');
    return r;
  }

  function requireJwt(req: http.IncomingMessage): void {
    const auth = bearer(req);
    if (auth.kind !== 'jwt') throw new HttpError(401, 'A JSON web token could not be decoded');
    verifyJwt(auth.value);
  }

  function installationJson(i: { id: number; account: FakeUser }) {
    return {
      id: i.id,
      app_id: appId,
      app_slug: slug,
      account: userJson(i.account),
      target_type: 'Organization',
      repository_selection: 'selected',
      permissions: { contents: 'write', issues: 'write', pull_requests: 'write', metadata: 'read' },
      access_tokens_url: `${apiUrl}/app/installations/${i.id}/access_tokens`,
    };
  }

  // ---- webhooks ----
  function deliverNow(event: string, payload: unknown, o: { id?: string; signWith?: string; url?: string } = {}): Promise<Delivery> {
    const target = o.url ?? webhook?.url;
    const secret = o.signWith ?? webhook?.secret;
    if (!target || secret === undefined) return Promise.reject(new Error('no webhook target: call setWebhook first'));
    const deliveryId = o.id ?? crypto.randomUUID();
    const body = JSON.stringify(payload);
    const p = (async (): Promise<Delivery> => {
      const d: Delivery = { id: deliveryId, event, payload, url: target, status: 0, response: '' };
      try {
        const res = await fetch(target, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': 'GitHub-Hookshot/fake',
            'x-github-event': event,
            'x-github-delivery': deliveryId,
            'x-github-hook-installation-target-type': 'integration',
            'x-github-hook-installation-target-id': String(appId),
            'x-hub-signature-256': await sign(secret, body),
          },
          body,
        });
        d.status = res.status;
        d.response = await res.text();
      } catch (err) {
        d.response = (err as Error).message;
      }
      deliveries.push(d);
      return d;
    })();
    inFlight.add(p);
    void p.finally(() => inFlight.delete(p));
    return p;
  }

  function emit(event: string, r: FakeRepo, fields: Record<string, unknown>, sender: FakeUser): void {
    if (!webhook || r.installationId === null) return;
    void deliverNow(event, { ...fields, repository: repoJson(r), sender: userJson(sender), installation: { id: r.installationId } }).catch(() => {});
  }

  // ---- the REST routes ----
  async function readJson(req: http.IncomingMessage): Promise<Record<string, unknown>> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (!chunks.length) return {};
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
    } catch {
      throw new HttpError(400, 'Problems parsing JSON');
    }
  }

  function newIssue(r: FakeRepo, fields: Omit<FakeIssue, 'number' | 'createdAt' | 'state'>): FakeIssue {
    const list = issues.get(r.fullName) ?? [];
    issues.set(r.fullName, list);
    const i: FakeIssue = { ...fields, number: list.length + 1, state: 'open', createdAt: iso(now()) };
    list.push(i);
    return i;
  }
  const findIssue = (r: FakeRepo, n: number) => {
    const i = issues.get(r.fullName)?.[n - 1];
    if (!i) throw new HttpError(404, 'Not Found');
    return i;
  };

  function addComment(r: FakeRepo, i: FakeIssue, body: string, by: FakeUser): FakeComment {
    const c: FakeComment = { id: id(), repo: r.fullName, issue: i.number, body, user: by, createdAt: iso(now()) };
    comments.push(c);
    emit('issue_comment', r, { action: 'created', issue: issueJson(r, i), comment: commentJson(c) }, by);
    return c;
  }

  function page<T>(url: URL, items: T[]): { items: T[]; link: string | null } {
    const per = Math.min(100, Math.max(1, Number(url.searchParams.get('per_page') ?? 30) || 30));
    const p = Math.max(1, Number(url.searchParams.get('page') ?? 1) || 1);
    const slice = items.slice((p - 1) * per, p * per);
    if (p * per >= items.length) return { items: slice, link: null };
    const next = new URL(url.toString());
    next.searchParams.set('page', String(p + 1));
    next.searchParams.set('per_page', String(per));
    return { items: slice, link: `<${apiUrl}${next.pathname}${next.search}>; rel="next"` };
  }

  async function api(req: http.IncomingMessage, url: URL): Promise<{ status: number; body: unknown; headers?: Record<string, string> }> {
    const m = (re: RegExp) => re.exec(url.pathname);
    const method = req.method ?? 'GET';
    let g: RegExpExecArray | null;

    if (method === 'GET' && url.pathname === '/app') {
      requireJwt(req);
      return { status: 200, body: { id: appId, slug, name: app.name, owner: userJson(user('crewhouse-org')), html_url: `${httpsBase()}/apps/${slug}` } };
    }
    if (method === 'GET' && url.pathname === '/app/installations') {
      requireJwt(req);
      return { status: 200, body: [...installations.values()].map(installationJson) };
    }
    if ((g = m(/^\/app\/installations\/(\d+)$/)) && method === 'GET') {
      requireJwt(req);
      const i = installations.get(Number(g[1]));
      if (!i) throw new HttpError(404, 'Not Found');
      return { status: 200, body: installationJson(i) };
    }
    if ((g = m(/^\/app\/installations\/(\d+)\/access_tokens$/)) && method === 'POST') {
      requireJwt(req);
      const i = installations.get(Number(g[1]));
      if (!i) throw new HttpError(404, 'Not Found');
      const body = await readJson(req);
      const mine = [...repos.values()].filter((r) => r.installationId === i.id);
      let narrowed: FakeRepo[] | null = null;
      if (Array.isArray(body.repositories) || Array.isArray(body.repository_ids)) {
        const names = (Array.isArray(body.repositories) ? body.repositories : []).map(String);
        const ids = (Array.isArray(body.repository_ids) ? body.repository_ids : []).map(Number);
        narrowed = [];
        for (const n of names) {
          const r = mine.find((x) => x.name.toLowerCase() === n.toLowerCase());
          if (!r) throw new HttpError(422, 'There is at least one repository that does not exist or is not accessible to the parent installation.');
          narrowed.push(r);
        }
        for (const n of ids) {
          const r = mine.find((x) => x.id === n);
          if (!r) throw new HttpError(422, 'There is at least one repository that does not exist or is not accessible to the parent installation.');
          narrowed.push(r);
        }
      }
      const t: MintedToken = {
        token: `ghs_${crypto.randomBytes(18).toString('base64url')}`,
        installationId: i.id,
        repositories: narrowed ? narrowed.map((r) => r.fullName) : null,
        permissions: (body.permissions as Record<string, string> | undefined) ?? null,
        expiresAt: Math.floor((now() + TOKEN_LIFETIME_MS) / 1000) * 1000,
      };
      tokens.push(t);
      byToken.set(t.token, t);
      return {
        status: 201,
        body: {
          token: t.token,
          expires_at: iso(t.expiresAt),
          permissions: t.permissions ?? installationJson(i).permissions,
          repository_selection: narrowed ? 'selected' : 'all',
          ...(narrowed ? { repositories: narrowed.map(repoJson) } : {}),
        },
      };
    }
    if (method === 'GET' && url.pathname === '/installation/repositories') {
      const auth = bearer(req);
      if (auth.kind !== 'token') throw new HttpError(401, 'Requires authentication');
      const t = validToken(auth.value);
      const visible = [...repos.values()].filter((r) => tokenCovers(t, r)).sort((a, b) => a.id - b.id);
      const p = page(url, visible);
      return { status: 200, body: { total_count: visible.length, repository_selection: t.repositories ? 'selected' : 'all', repositories: p.items.map(repoJson) }, headers: p.link ? { link: p.link } : {} };
    }
    if ((g = m(/^\/repos\/([^/]+)\/([^/]+)$/)) && method === 'GET') {
      return { status: 200, body: repoJson(repoFor(req, g[1]!, g[2]!)) };
    }
    if ((g = m(/^\/repos\/([^/]+)\/([^/]+)\/issues$/)) && method === 'POST') {
      const r = repoFor(req, g[1]!, g[2]!);
      const body = await readJson(req);
      if (typeof body.title !== 'string' || !body.title) throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'Issue', field: 'title', code: 'missing_field' }] });
      const i = newIssue(r, { title: body.title, body: typeof body.body === 'string' ? body.body : null, labels: [], user: app.bot, pull: null });
      emit('issues', r, { action: 'opened', issue: issueJson(r, i) }, app.bot);
      return { status: 201, body: issueJson(r, i) };
    }
    if ((g = m(/^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)$/)) && method === 'GET') {
      const r = repoFor(req, g[1]!, g[2]!);
      return { status: 200, body: issueJson(r, findIssue(r, Number(g[3]))) };
    }
    if ((g = m(/^\/repos\/([^/]+)\/([^/]+)\/issues\/(\d+)\/comments$/))) {
      const r = repoFor(req, g[1]!, g[2]!);
      const i = findIssue(r, Number(g[3]));
      if (method === 'GET') {
        const p = page(url, comments.filter((c) => c.repo === r.fullName && c.issue === i.number));
        return { status: 200, body: p.items.map(commentJson), headers: p.link ? { link: p.link } : {} };
      }
      if (method === 'POST') {
        const body = await readJson(req);
        if (typeof body.body !== 'string' || !body.body) throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'IssueComment', field: 'body', code: 'missing_field' }] });
        return { status: 201, body: commentJson(addComment(r, i, body.body, app.bot)) };
      }
    }
    if ((g = m(/^\/repos\/([^/]+)\/([^/]+)\/pulls$/))) {
      const r = repoFor(req, g[1]!, g[2]!);
      const all = (issues.get(r.fullName) ?? []).filter((i) => i.pull);
      if (method === 'GET') {
        const state = url.searchParams.get('state') ?? 'open';
        const head = url.searchParams.get('head');
        const base = url.searchParams.get('base');
        const list = all.filter(
          (i) => (state === 'all' || i.state === state) && (!head || `${r.owner}:${i.pull!.head}`.toLowerCase() === head.toLowerCase()) && (!base || i.pull!.base === base),
        );
        const p = page(url, list);
        return { status: 200, body: p.items.map((i) => pullJson(r, i)), headers: p.link ? { link: p.link } : {} };
      }
      if (method === 'POST') {
        const body = await readJson(req);
        const missing = ['title', 'head', 'base'].filter((f) => typeof body[f] !== 'string' || !body[f]);
        if (missing.length) throw new HttpError(422, 'Validation Failed', { errors: missing.map((field) => ({ resource: 'PullRequest', field, code: 'missing_field' })) });
        const head = String(body.head).replace(new RegExp(`^${r.owner}:`, 'i'), '');
        const base = String(body.base);
        const refs = refsOf(root, gitDir(r));
        if (!refs[`refs/heads/${head}`]) throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'PullRequest', field: 'head', code: 'invalid' }] });
        if (!refs[`refs/heads/${base}`]) throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'PullRequest', field: 'base', code: 'invalid' }] });
        if (all.some((i) => i.state === 'open' && i.pull!.head === head))
          throw new HttpError(422, 'Validation Failed', { errors: [{ resource: 'PullRequest', code: 'custom', message: `A pull request already exists for ${r.owner}:${head}.` }] });
        const i = newIssue(r, { title: String(body.title), body: typeof body.body === 'string' ? body.body : null, labels: [], user: app.bot, pull: { head, base, merged: false } });
        pulls.push({ repo: r.fullName, number: i.number, head, base, title: i.title, body: i.body, state: 'open' });
        emit('pull_request', r, { action: 'opened', number: i.number, pull_request: pullJson(r, i) }, app.bot);
        return { status: 201, body: pullJson(r, i) };
      }
    }
    if ((g = m(/^\/repos\/([^/]+)\/([^/]+)\/pulls\/(\d+)$/))) {
      const r = repoFor(req, g[1]!, g[2]!);
      const i = findIssue(r, Number(g[3]));
      if (!i.pull) throw new HttpError(404, 'Not Found');
      if (method === 'GET') return { status: 200, body: pullJson(r, i) };
      if (method === 'PATCH') {
        const body = await readJson(req);
        if (typeof body.title === 'string') i.title = body.title;
        if (typeof body.body === 'string') i.body = body.body;
        if (body.state === 'closed' || body.state === 'open') setPullState(r, i, body.state, false, app.bot);
        return { status: 200, body: pullJson(r, i) };
      }
    }
    throw new HttpError(404, 'Not Found');
  }

  function setPullState(r: FakeRepo, i: FakeIssue, state: 'open' | 'closed', merged: boolean, by: FakeUser): void {
    if (i.state === state) return;
    i.state = state;
    i.pull!.merged = merged;
    const rec = pulls.find((p) => p.repo === r.fullName && p.number === i.number);
    if (rec) rec.state = state;
    emit('pull_request', r, { action: state === 'closed' ? 'closed' : 'reopened', number: i.number, pull_request: pullJson(r, i) }, by);
  }

  // ---- git smart HTTP: only `x-access-token:<installation token covering the repo>` ----
  function git(req: http.IncomingMessage, res: http.ServerResponse, owner: string, name: string): void {
    const deny = () => res.writeHead(401, { 'www-authenticate': 'Basic realm="GitHub"', 'content-type': 'text/plain' }).end('remote: Invalid username or password.\n');
    const auth = bearer(req);
    if (auth.kind !== 'basic') return void deny();
    const colon = auth.value.indexOf(':');
    const [login, password] = [auth.value.slice(0, colon), auth.value.slice(colon + 1)];
    const t = byToken.get(password);
    const r = repoOf(`${owner}/${name}`);
    if (colon < 0 || login !== 'x-access-token' || !t || t.expiresAt <= now()) return void deny();
    if (!r || !tokenCovers(t, r)) return void res.writeHead(404, { 'content-type': 'text/plain' }).end('remote: Repository not found.\n');
    // git http-backend takes the path as it is on disk: the owner and name as the repository spells them.
    req.url = (req.url ?? '/').replace(/^\/[^/]+\/[^/]+?\.git/, `/${gitDir(r)}`);
    gitHttpBackend(root, req, res, 'x-access-token');
  }

  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const gm = /^\/([^/]+)\/([^/]+?)\.git(\/.*)?$/.exec(url.pathname);
    if (gm) {
      requests.push({ method: req.method ?? 'GET', path: url.pathname, auth: bearer(req).kind });
      return git(req, res, gm[1]!, gm[2]!);
    }
    requests.push({ method: req.method ?? 'GET', path: url.pathname, auth: bearer(req).kind });
    const headers = { date: new Date(now()).toUTCString(), 'content-type': 'application/json; charset=utf-8', 'x-github-media-type': 'github.v3; format=json' };
    const answer = failing !== null ? Promise.reject(new HttpError(failing, failingAnswer?.message ?? (failing >= 500 ? 'Server Error' : 'Error'), {}, failingAnswer?.headers)) : api(req, url);
    answer.then(
      (out) => res.writeHead(out.status, { ...headers, ...out.headers }).end(JSON.stringify(out.body)),
      (err: unknown) => {
        const e = err instanceof HttpError ? err : new HttpError(500, (err as Error).message);
        res.writeHead(e.status, { ...headers, ...e.headers }).end(JSON.stringify({ message: e.message, documentation_url: DOCS, ...e.extra }));
      },
    );
  };

  const plain = http.createServer(handler);
  const secure = https.createServer({ cert: opts.tls.certPem, key: opts.tls.keyPem }, handler);
  await new Promise<void>((resolve) => plain.listen(0, '127.0.0.1', () => resolve()));
  await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', () => resolve()));
  httpsPort = (secure.address() as AddressInfo).port;
  const apiUrl = `http://127.0.0.1:${(plain.address() as AddressInfo).port}`;

  const gitEnv = { ...process.env, GIT_AUTHOR_NAME: 'Octo Cat', GIT_AUTHOR_EMAIL: 'octocat@example.test', GIT_COMMITTER_NAME: 'Octo Cat', GIT_COMMITTER_EMAIL: 'octocat@example.test' };
  function commitTo(r: FakeRepo, branch: string, files: Record<string, string>): string {
    const work = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-codehost-work-'));
    try {
      const bare = path.join(root, gitDir(r));
      const run = (...args: string[]) => execFileSync('git', args, { cwd: work, env: gitEnv, encoding: 'utf8' }).trim();
      run('init', '-q', '-b', branch);
      const has = refsOf(root, gitDir(r))[`refs/heads/${branch}`] ?? refsOf(root, gitDir(r))[`refs/heads/${r.defaultBranch}`];
      if (has) {
        run('fetch', '-q', bare, has);
        run('reset', '-q', '--hard', 'FETCH_HEAD');
      }
      for (const [f, content] of Object.entries(files)) {
        fs.mkdirSync(path.dirname(path.join(work, f)), { recursive: true });
        fs.writeFileSync(path.join(work, f), content);
      }
      run('add', '-A');
      run('commit', '-q', '-m', `Update ${Object.keys(files).join(', ')}`);
      run('push', '-q', bare, `HEAD:refs/heads/${branch}`);
      return run('rev-parse', 'HEAD');
    } finally {
      fs.rmSync(work, { recursive: true, force: true });
    }
  }

  const mustRepo = (fullName: string) => {
    const r = repoOf(fullName);
    if (!r) throw new Error(`fake code host: no repository ${fullName}`);
    return r;
  };

  const fake: FakeCodeHost = {
    apiUrl,
    get httpsUrl() {
      return httpsBase();
    },
    httpsPort,
    app,
    now,
    advance(ms) {
      offset += ms;
    },
    addInstallation(account, wanted) {
      const iid = wanted ?? id();
      installations.set(iid, { id: iid, account: user(account) });
      return iid;
    },
    addRepo(fullName, o = {}) {
      const [owner, name] = fullName.split('/');
      if (!owner || !name) throw new Error(`fake code host: a repository is <owner>/<name>, got ${fullName}`);
      const r: FakeRepo = { id: id(), owner, name, fullName, defaultBranch: o.defaultBranch ?? 'main', private: o.private ?? true, installationId: null };
      repos.set(repoKey(fullName), r);
      makeBareRepo(root, gitDir(r), r.defaultBranch);
      commitTo(r, r.defaultBranch, { 'README.md': `# ${name}\n` });
      if (o.installation !== undefined) fake.install(o.installation, fullName);
      return r;
    },
    install(installationId, fullName) {
      const i = installations.get(installationId);
      const r = mustRepo(fullName);
      if (!i) throw new Error(`fake code host: no installation ${installationId}`);
      if (i.account.login.toLowerCase() !== r.owner.toLowerCase()) throw new Error(`fake code host: installation ${installationId} belongs to ${i.account.login}, not ${r.owner}`);
      r.installationId = installationId;
    },
    uninstall(fullName) {
      mustRepo(fullName).installationId = null;
    },
    refs: (fullName) => refsOf(root, gitDir(mustRepo(fullName))),
    pushBranch: (fullName, branch, files) => commitTo(mustRepo(fullName), branch, files),
    openIssue(fullName, input) {
      const r = mustRepo(fullName);
      const by = user(input.user ?? 'octocat');
      const i = newIssue(r, { title: input.title, body: input.body ?? null, labels: input.labels ?? [], user: by, pull: null });
      emit('issues', r, { action: 'opened', issue: issueJson(r, i) }, by);
      return i;
    },
    labelIssue(fullName, number, label, login) {
      const r = mustRepo(fullName);
      const i = findIssue(r, number);
      if (!i.labels.includes(label)) i.labels.push(label);
      emit('issues', r, { action: 'labeled', label: { name: label }, issue: issueJson(r, i) }, user(login ?? 'octocat'));
    },
    commentOnIssue(fullName, number, body, login) {
      const r = mustRepo(fullName);
      return addComment(r, findIssue(r, number), body, user(login ?? 'octocat'));
    },
    closePull(fullName, number, o = {}) {
      const r = mustRepo(fullName);
      const i = findIssue(r, number);
      if (!i.pull) throw new Error(`fake code host: ${fullName}#${number} is not a pull request`);
      setPullState(r, i, 'closed', o.merged ?? false, user(o.user ?? 'octocat'));
    },
    issue(fullName, number) {
      return issues.get(mustRepo(fullName).fullName)?.[number - 1];
    },
    setWebhook(target) {
      webhook = target;
    },
    deliver: (event, payload, o) => deliverNow(event, payload, o),
    redeliver(deliveryId) {
      const d = deliveries.find((x) => x.id === deliveryId);
      if (!d) return Promise.reject(new Error(`fake code host: no delivery ${deliveryId}`));
      return deliverNow(d.event, d.payload, { id: d.id, url: d.url });
    },
    async settled() {
      while (inFlight.size) await Promise.allSettled([...inFlight]);
    },
    deliveries,
    tokens,
    pulls,
    comments,
    requests,
    failWith(status, answer) {
      failing = status;
      failingAnswer = answer;
    },
    close: async () => {
      await Promise.allSettled([...inFlight]);
      await Promise.all(
        [plain, secure].map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
      fs.rmSync(root, { recursive: true, force: true });
    },
  };
  return fake;
}

import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { textOfAdf } from '../../src/integrations/tracker_b/adf.ts';
import { webhookSender, type SentDelivery } from './webhook-sender.ts';

export { textOfAdf };

/**
 * A fake Jira Cloud site behind Atlassian's API gateway, one server for both hosts:
 * - the OAuth 2.0 token endpoint (`POST /oauth/token`, grant `client_credentials`, JSON or
 *   form body), whose tokens expire on the fake's clock (`advance`);
 * - REST v3 under `/ex/jira/<cloudId>` with `Authorization: Bearer <token>`: `myself`, a
 *   project, an issue, its comments (bodies in Atlassian Document Format, with entity
 *   properties), and its transitions;
 * - webhook deliveries as Jira sends them for a webhook with a secret: `X-Hub-Signature:
 *   sha256=<hex HMAC of the body>` and `X-Atlassian-Webhook-Identifier` (the same on a retry);
 *   comment bodies in webhooks are wiki text, mentions `[~accountid:<id>]`.
 * `jira.js` talks to it unchanged with `host` = `<apiUrl>/ex/jira/<cloudId>`.
 */

export interface JiraUser {
  accountId: string;
  displayName: string;
  accountType: 'atlassian' | 'app';
}

export interface JiraProject {
  id: string;
  key: string;
  name: string;
  /** Whether the agent's account may browse it. */
  agentAccess: boolean;
}

export interface JiraIssue {
  id: string;
  key: string;
  projectId: string;
  summary: string;
  /** ADF document, or null. */
  description: unknown;
  status: string;
  assignee: string | null;
  reporter: string;
}

export interface JiraComment {
  id: string;
  issueId: string;
  author: string;
  /** ADF document as posted (REST v3). */
  body: unknown;
  properties: Array<{ key: string; value: unknown }>;
  created: string;
}

export type JiraDelivery = SentDelivery;

export interface FakeJira {
  /** The API gateway's base (`https://api.atlassian.com` for the real one). */
  apiUrl: string;
  /** The OAuth host's base (`https://auth.atlassian.com`). */
  authUrl: string;
  cloudId: string;
  /** The site's REST base for jira.js (`host`). */
  host: string;
  clientId: string;
  clientSecret: string;
  /** The service account the agent acts as. */
  agent: JiraUser;
  addUser(name: string): JiraUser;
  addProject(input: { key: string; name?: string; agentAccess?: boolean }): JiraProject;
  addIssue(input: { projectKey: string; summary: string; description?: string; reporter: string }): JiraIssue;
  /** The workflow's transitions offered from every status: name → target status. */
  transitions: Array<{ id: string; name: string; to: string }>;
  setWebhook(target: { url: string; secret: string } | null): void;
  /** A person assigns the issue (delivers `jira:issue_updated`, `issue_assigned`). */
  assign(issueKey: string, accountId: string | null, byAccountId: string): Promise<JiraDelivery>;
  /** A person comments (wiki text; delivers `comment_created`). */
  comment(issueKey: string, byAccountId: string, text: string): Promise<JiraDelivery>;
  deliver(event: string, payload: Record<string, unknown>, opts?: { id?: string; signWith?: string | null }): Promise<JiraDelivery>;
  redeliver(id: string): Promise<JiraDelivery>;
  readonly deliveries: ReadonlyArray<JiraDelivery>;
  readonly issues: Map<string, JiraIssue>;
  readonly comments: JiraComment[];
  /** Tokens minted: the test sees reuse and refresh. */
  readonly tokens: Array<{ token: string; expiresAt: number }>;
  readonly requests: Array<{ method: string; path: string; auth: string | null }>;
  /** The fake's clock (ms): token expiry is judged by it. */
  now(): number;
  advance(ms: number): void;
  stop(): Promise<void>;
}

const TOKEN_SECONDS = 3600;

/** Plain text as an ADF document (one paragraph per line). */
export function adfOf(text: string) {
  return { type: 'doc', version: 1, content: text.split('\n').map((line) => ({ type: 'paragraph', content: line ? [{ type: 'text', text: line }] : [] })) };
}

export async function startFakeJira(): Promise<FakeJira> {
  const cloudId = crypto.randomUUID();
  const clientId = `cid-${crypto.randomBytes(8).toString('hex')}`;
  const clientSecret = `ATOA${crypto.randomBytes(24).toString('hex')}`;
  const users = new Map<string, JiraUser>();
  const projects = new Map<string, JiraProject>();
  const issues = new Map<string, JiraIssue>();
  const comments: JiraComment[] = [];
  const tokens: FakeJira['tokens'] = [];
  const requests: FakeJira['requests'] = [];
  const sender = webhookSender();
  let webhook: { url: string; secret: string } | null = null;
  let clock = Date.now();
  let nextId = 10000;
  const agent: JiraUser = { accountId: `712020:${crypto.randomUUID()}`, displayName: 'Crewhouse', accountType: 'app' };
  users.set(agent.accountId, agent);
  let base = '';
  const site = () => `${base}/ex/jira/${cloudId}`;

  const userJson = (id: string) => {
    const u = users.get(id)!;
    return { accountId: u.accountId, displayName: u.displayName, accountType: u.accountType, active: true, self: `${site()}/rest/api/3/user?accountId=${u.accountId}` };
  };
  const projectJson = (p: JiraProject) => ({ id: p.id, key: p.key, name: p.name, self: `${site()}/rest/api/3/project/${p.id}`, projectTypeKey: 'software', simplified: false });
  const issueJson = (i: JiraIssue) => {
    const p = projects.get(i.projectId)!;
    return {
      id: i.id,
      key: i.key,
      self: `${site()}/rest/api/3/issue/${i.id}`,
      fields: {
        summary: i.summary,
        description: i.description,
        status: { name: i.status },
        assignee: i.assignee ? userJson(i.assignee) : null,
        reporter: userJson(i.reporter),
        project: projectJson(p),
      },
    };
  };
  const commentJson = (c: JiraComment, withProperties: boolean) => ({
    id: c.id,
    self: `${site()}/rest/api/3/issue/${c.issueId}/comment/${c.id}`,
    author: userJson(c.author),
    body: c.body,
    created: c.created,
    updated: c.created,
    ...(withProperties ? { properties: c.properties } : {}),
  });
  const findIssue = (idOrKey: string) => issues.get(idOrKey) ?? [...issues.values()].find((i) => i.key === idOrKey);
  const findProject = (idOrKey: string) => projects.get(idOrKey) ?? [...projects.values()].find((p) => p.key === idOrKey);
  const isAdf = (b: unknown) => !!b && typeof b === 'object' && (b as { type?: unknown }).type === 'doc' && (b as { version?: unknown }).version === 1 && Array.isArray((b as { content?: unknown }).content);

  function api(method: string, path: string, query: URLSearchParams, body: unknown): [number, unknown] {
    const errors = (status: number, ...messages: string[]): [number, unknown] => [status, { errorMessages: messages, errors: {} }];
    let m: RegExpExecArray | null;
    if (method === 'GET' && path === '/rest/api/3/myself') return [200, userJson(agent.accountId)];
    if (method === 'GET' && (m = /^\/rest\/api\/3\/project\/([^/]+)$/.exec(path))) {
      const p = findProject(decodeURIComponent(m[1]!));
      if (!p || !p.agentAccess) return errors(404, `No project could be found with key '${decodeURIComponent(m[1]!)}'.`);
      return [200, projectJson(p)];
    }
    if ((m = /^\/rest\/api\/3\/issue\/([^/]+)(\/.*)?$/.exec(path))) {
      const i = findIssue(decodeURIComponent(m[1]!));
      if (!i || !projects.get(i.projectId)!.agentAccess) return errors(404, 'Issue does not exist or you do not have permission to see it.');
      const rest = m[2] ?? '';
      if (method === 'GET' && rest === '') return [200, issueJson(i)];
      if (method === 'GET' && rest === '/comment') {
        const withProps = (query.get('expand') ?? '').split(',').includes('properties');
        const list = comments.filter((c) => c.issueId === i.id);
        return [200, { startAt: 0, maxResults: 5000, total: list.length, comments: list.map((c) => commentJson(c, withProps)) }];
      }
      if (method === 'POST' && rest === '/comment') {
        const b = (body ?? {}) as { body?: unknown; properties?: JiraComment['properties'] };
        if (!isAdf(b.body)) return [400, { errorMessages: [], errors: { comment: 'Comment body is not valid Atlassian Document Format.' } }];
        const c: JiraComment = { id: String(nextId++), issueId: i.id, author: agent.accountId, body: b.body, properties: b.properties ?? [], created: new Date(clock).toISOString() };
        comments.push(c);
        return [201, commentJson(c, false)];
      }
      if (method === 'GET' && rest === '/transitions') return [200, { transitions: fake.transitions.map((t) => ({ id: t.id, name: t.name, to: { name: t.to }, isAvailable: true })) }];
      if (method === 'POST' && rest === '/transitions') {
        const id = (body as { transition?: { id?: string } })?.transition?.id;
        const t = fake.transitions.find((x) => x.id === id);
        if (!t) return errors(400, `Transition id '${id}' is not valid for this issue.`);
        i.status = t.to;
        return [204, null];
      }
    }
    return errors(404, 'Not found');
  }

  function tokenGrant(body: Record<string, unknown>): [number, unknown] {
    if (body.grant_type !== 'client_credentials') return [400, { error: 'unsupported_grant_type', error_description: 'grant_type must be client_credentials' }];
    if (body.client_id !== clientId || body.client_secret !== clientSecret) return [401, { error: 'access_denied', error_description: 'Unauthorized' }];
    const token = `eyJfake.${crypto.randomBytes(24).toString('base64url')}`;
    tokens.push({ token, expiresAt: clock + TOKEN_SECONDS * 1000 });
    return [200, { access_token: token, expires_in: TOKEN_SECONDS, token_type: 'Bearer', scope: 'read:jira-work write:jira-work read:jira-user' }];
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const url = new URL(req.url ?? '/', 'http://x');
      const raw = Buffer.concat(chunks).toString('utf8');
      const auth = req.headers.authorization ?? null;
      requests.push({ method: req.method ?? '', path: url.pathname, auth: auth ? auth.split(' ')[0]! : null });
      const send = ([status, body]: [number, unknown]) => {
        if (status === 204) {
          res.writeHead(204);
          return res.end();
        }
        res.writeHead(status, { 'content-type': 'application/json;charset=UTF-8' });
        res.end(JSON.stringify(body));
      };
      if (req.method === 'POST' && url.pathname === '/oauth/token') {
        let body: Record<string, unknown>;
        try {
          body = (req.headers['content-type'] ?? '').includes('application/x-www-form-urlencoded') ? Object.fromEntries(new URLSearchParams(raw)) : JSON.parse(raw);
        } catch {
          return send([400, { error: 'invalid_request', error_description: 'the body is not JSON or a form' }]);
        }
        return send(tokenGrant(body));
      }
      const prefix = `/ex/jira/${cloudId}`;
      if (!url.pathname.startsWith(`${prefix}/`)) return send([404, { errorMessages: ['Site not found'], errors: {} }]);
      const bearer = auth?.startsWith('Bearer ') ? auth.slice(7) : null;
      const t = bearer ? tokens.find((x) => x.token === bearer) : undefined;
      if (!t || t.expiresAt <= clock) return send([401, { code: 401, message: 'Unauthorized; scope does not match' }]);
      let body: unknown = null;
      if (raw) {
        try {
          body = JSON.parse(raw);
        } catch {
          return send([400, { errorMessages: ['Unexpected character: the body is not JSON'], errors: {} }]);
        }
      }
      send(api(req.method ?? 'GET', url.pathname.slice(prefix.length), url.searchParams, body));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function deliverNow(event: string, payload: Record<string, unknown>, o: { id?: string; signWith?: string | null } = {}) {
    if (!webhook) throw new Error('no webhook target: call setWebhook first');
    const body = { timestamp: clock, webhookEvent: event, ...payload };
    const raw = JSON.stringify(body);
    const id = o.id ?? String(Math.floor(Math.random() * 1e12));
    const secret = o.signWith === undefined ? webhook.secret : o.signWith;
    const headers: Record<string, string> = { 'x-atlassian-webhook-identifier': id, 'user-agent': 'Atlassian Webhook HTTP Client' };
    if (secret !== null) headers['x-hub-signature'] = `sha256=${crypto.createHmac('sha256', secret).update(raw).digest('hex')}`;
    return sender.send(webhook.url, { id, event, payload: body, raw, headers });
  }

  /** The issue as webhooks carry it (REST v2 shape: description as wiki text). */
  const webhookIssue = (i: JiraIssue) => {
    const j = issueJson(i);
    return { ...j, fields: { ...j.fields, description: i.description ? textOfAdf(i.description) : null } };
  };

  const fake: FakeJira = {
    apiUrl: base,
    authUrl: base,
    cloudId,
    host: `${base}/ex/jira/${cloudId}`,
    clientId,
    clientSecret,
    agent,
    addUser(name) {
      const u: JiraUser = { accountId: `5b10${crypto.randomBytes(10).toString('hex')}`, displayName: name, accountType: 'atlassian' };
      users.set(u.accountId, u);
      return u;
    },
    addProject(input) {
      const p: JiraProject = { id: String(nextId++), key: input.key, name: input.name ?? input.key, agentAccess: input.agentAccess ?? true };
      projects.set(p.id, p);
      return p;
    },
    addIssue(input) {
      const p = findProject(input.projectKey);
      if (!p) throw new Error(`no project ${input.projectKey}`);
      const n = [...issues.values()].filter((i) => i.projectId === p.id).length + 1;
      const i: JiraIssue = { id: String(nextId++), key: `${p.key}-${n}`, projectId: p.id, summary: input.summary, description: input.description ? adfOf(input.description) : null, status: 'To Do', assignee: null, reporter: input.reporter };
      issues.set(i.id, i);
      return i;
    },
    transitions: [
      { id: '11', name: 'To Do', to: 'To Do' },
      { id: '21', name: 'In Progress', to: 'In Progress' },
      { id: '31', name: 'Done', to: 'Done' },
    ],
    setWebhook(target) {
      webhook = target;
    },
    assign(issueKey, accountId, by) {
      const i = findIssue(issueKey);
      if (!i) throw new Error(`no issue ${issueKey}`);
      const from = i.assignee;
      i.assignee = accountId;
      return deliverNow('jira:issue_updated', {
        issue_event_type_name: 'issue_assigned',
        user: userJson(by),
        issue: webhookIssue(i),
        changelog: { id: String(nextId++), items: [{ field: 'assignee', fieldtype: 'jira', fieldId: 'assignee', from, fromString: from ? users.get(from)!.displayName : null, to: accountId, toString: accountId ? users.get(accountId)!.displayName : null }] },
      });
    },
    comment(issueKey, by, text) {
      const i = findIssue(issueKey);
      if (!i) throw new Error(`no issue ${issueKey}`);
      const c: JiraComment = { id: String(nextId++), issueId: i.id, author: by, body: adfOf(text), properties: [], created: new Date(clock).toISOString() };
      comments.push(c);
      return deliverNow('comment_created', { comment: { id: c.id, self: `${site()}/rest/api/2/issue/${i.id}/comment/${c.id}`, author: userJson(by), body: text, created: c.created, updated: c.created }, issue: webhookIssue(i) });
    },
    deliver: (event, payload, o) => deliverNow(event, payload, o),
    redeliver: (id) => sender.redeliver(id),
    deliveries: sender.deliveries,
    issues,
    comments,
    tokens,
    requests,
    now: () => clock,
    advance(ms) {
      clock += ms;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  return fake;
}

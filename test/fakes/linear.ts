import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { webhookSender, type SentDelivery } from './webhook-sender.ts';

/**
 * A fake Linear workspace with an installed agent app: the GraphQL endpoint (`POST /graphql`)
 * answering the operations `@linear/sdk` sends for what Crewhouse uses (`viewer`, `team`,
 * `project`, `issue`, `comment`, `agentActivity`, `agentSession`, `createComment`,
 * `createAgentActivity`), with Linear's error shapes, and the webhook deliveries an agent app
 * receives, signed like Linear's: `Linear-Signature` is the hex HMAC-SHA256 of the raw body
 * with the webhook secret, `Linear-Delivery` the delivery id, `Linear-Event` the entity type, and
 * the body carries `webhookTimestamp` (ms). `@linear/sdk` talks to it unchanged with
 * `apiUrl` = `url`.
 *
 * People act through it as in Linear: assigning an issue to the app (or mentioning it) opens an
 * agent session and delivers `AgentSessionEvent` `created`; writing in the session delivers
 * `prompted`. The app's writes (activities, comments) are kept for the test to read.
 */

export interface LinearUser {
  id: string;
  name: string;
  displayName: string;
  email: string;
  /** The agent app's own user. */
  app: boolean;
}

export interface LinearTeam {
  id: string;
  key: string;
  name: string;
  /** Whether the app was given access to the team (else it cannot see it or its issues). */
  appAccess: boolean;
}

export interface LinearProject {
  id: string;
  name: string;
  teamIds: string[];
}

export interface LinearIssue {
  id: string;
  identifier: string;
  number: number;
  title: string;
  description: string | null;
  teamId: string;
  projectId: string | null;
  assigneeId: string | null;
  delegateId: string | null;
  creatorId: string;
  createdAt: string;
}

export interface LinearComment {
  id: string;
  issueId: string;
  userId: string;
  body: string;
  createdAt: string;
}

export interface LinearSession {
  id: string;
  issueId: string;
  creatorId: string;
  commentId: string | null;
  status: 'pending' | 'active' | 'awaitingInput' | 'complete' | 'error';
  createdAt: string;
}

export interface LinearActivity {
  id: string;
  sessionId: string;
  userId: string;
  content: { type: string; body?: string; action?: string; parameter?: string; result?: string };
  /** A person's signal on a prompt (`stop`), as Linear sends it beside the content. */
  signal?: string;
  createdAt: string;
}

export type LinearDelivery = SentDelivery;

export interface FakeLinear {
  /** The GraphQL endpoint (`apiUrl` of `LinearClient`). */
  url: string;
  /** The organization's id, as in every webhook payload. */
  organizationId: string;
  /** The app's user and its OAuth access token. */
  app: LinearUser;
  appToken: string;
  addUser(input: { name: string }): LinearUser;
  addTeam(input: { key: string; name?: string; appAccess?: boolean }): LinearTeam;
  addProject(input: { name: string; teamIds: string[] }): LinearProject;
  addIssue(input: { teamId: string; title: string; description?: string; projectId?: string; creatorId: string }): LinearIssue;
  /** Where the app's webhooks go and the secret they are signed with (null stops deliveries). */
  setWebhook(target: { url: string; secret: string } | null): void;
  /** A person assigns the issue to the app: a session opens (`AgentSessionEvent` `created`). */
  assignToApp(issueId: string, byUserId: string): Promise<{ session: LinearSession; delivery: LinearDelivery }>;
  /** A person mentions the app in a comment on the issue: a session opens on the comment (`AgentSessionEvent` `created`). */
  mentionApp(issueId: string, byUserId: string, body: string): Promise<{ session: LinearSession; delivery: LinearDelivery }>;
  /** A person writes in a session (`AgentSessionEvent` `prompted`). */
  prompt(sessionId: string, byUserId: string, body: string): Promise<LinearDelivery>;
  /** A person asks the agent to stop ("Send stop request"): a prompt with the `stop` signal (`AgentSessionEvent` `prompted`). */
  stopSession(sessionId: string, byUserId: string): Promise<LinearDelivery>;
  /** Sends one delivery; `signWith` overrides the secret, `timestamp` the signed webhookTimestamp, `id` reuses a delivery id. */
  deliver(event: string, payload: Record<string, unknown>, opts?: { id?: string; signWith?: string; timestamp?: number }): Promise<LinearDelivery>;
  /** Sends a recorded delivery again, byte for byte (same id, same timestamp). */
  redeliver(id: string): Promise<LinearDelivery>;
  readonly deliveries: ReadonlyArray<LinearDelivery>;
  readonly issues: Map<string, LinearIssue>;
  readonly comments: LinearComment[];
  readonly sessions: Map<string, LinearSession>;
  readonly activities: LinearActivity[];
  /** Every GraphQL operation asked, with the Authorization header's scheme. */
  readonly requests: Array<{ operation: string; variables: Record<string, unknown>; auth: string | null }>;
  /** The next `n` GraphQL requests answer 429 RATELIMITED. */
  throttleNext: number;
  stop(): Promise<void>;
}

const uuid = () => crypto.randomUUID();

/** Linear's GraphQL errors: HTTP 200 (400 for authentication) with `errors[].extensions`. */
function gqlError(message: string, type: string, code: string, userPresentableMessage: string) {
  return { errors: [{ message, extensions: { type, code, statusCode: code === 'AUTHENTICATION_ERROR' ? 401 : 400, userError: true, userPresentableMessage } }] };
}

export async function startFakeLinear(opts: { appName?: string } = {}): Promise<FakeLinear> {
  const organizationId = uuid();
  const users = new Map<string, LinearUser>();
  const teams = new Map<string, LinearTeam>();
  const projects = new Map<string, LinearProject>();
  const issues = new Map<string, LinearIssue>();
  const comments: LinearComment[] = [];
  const sessions = new Map<string, LinearSession>();
  const activities: LinearActivity[] = [];
  const sender = webhookSender();
  const requests: FakeLinear['requests'] = [];
  let webhook: { url: string; secret: string } | null = null;
  const appName = opts.appName ?? 'Crewhouse';
  const app: LinearUser = { id: uuid(), name: appName, displayName: appName.toLowerCase(), email: `${uuid()}@oauthapp.linear.app`, app: true };
  users.set(app.id, app);
  const appToken = `lin_oauth_${crypto.randomBytes(16).toString('hex')}`;
  const counters = new Map<string, number>();
  const now = () => new Date().toISOString();
  let base = '';

  const userJson = (u: LinearUser) => ({
    __typename: 'User',
    id: u.id,
    name: u.name,
    displayName: u.displayName,
    email: u.email,
    active: true,
    admin: false,
    app: u.app,
    guest: false,
    isMe: u.id === app.id,
    url: `${base}/profiles/${u.displayName}`,
    createdAt: now(),
    updatedAt: now(),
    createdIssueCount: 0,
    avatarBackgroundColor: '#888',
    initials: u.name.slice(0, 2).toUpperCase(),
  });
  const teamJson = (t: LinearTeam) => ({ __typename: 'Team', id: t.id, key: t.key, name: t.name, displayName: t.name, private: false, createdAt: now(), updatedAt: now() });
  const issueUrl = (i: LinearIssue) => `${base}/issue/${i.identifier}`;
  const issueJson = (i: LinearIssue) => ({
    __typename: 'Issue',
    id: i.id,
    identifier: i.identifier,
    number: i.number,
    title: i.title,
    description: i.description,
    url: issueUrl(i),
    branchName: `${i.identifier.toLowerCase()}-${i.title.toLowerCase().replace(/[^a-z0-9]+/g, '-').slice(0, 40)}`,
    priority: 0,
    priorityLabel: 'No priority',
    sortOrder: 0,
    boardOrder: 0,
    estimate: null,
    labelIds: [],
    previousIdentifiers: [],
    reactionData: [],
    reactions: [],
    customerTicketCount: 0,
    sharedAccess: { __typename: 'IssueSharedAccess', isShared: false, viewerHasOnlySharedAccess: false, sharedWithCount: 0, sharedWithUsers: [], disallowedIssueFields: [] },
    team: { id: i.teamId },
    project: i.projectId ? { id: i.projectId } : null,
    assignee: i.assigneeId ? { id: i.assigneeId } : null,
    delegate: i.delegateId ? { id: i.delegateId } : null,
    creator: { id: i.creatorId },
    createdAt: i.createdAt,
    updatedAt: i.createdAt,
  });
  const commentJson = (c: LinearComment) => ({
    __typename: 'Comment',
    id: c.id,
    body: c.body,
    url: `${issueUrl(issues.get(c.issueId)!)}#comment-${c.id.slice(0, 8)}`,
    reactionData: [],
    reactions: [],
    issue: { id: c.issueId },
    issueId: c.issueId,
    user: { id: c.userId },
    createdAt: c.createdAt,
    updatedAt: c.createdAt,
  });
  const sessionJson = (s: LinearSession) => ({
    __typename: 'AgentSession',
    id: s.id,
    status: s.status,
    type: 'commentThread',
    issue: { id: s.issueId },
    appUser: { id: app.id },
    creator: { id: s.creatorId },
    comment: s.commentId ? { id: s.commentId } : null,
    createdAt: s.createdAt,
    updatedAt: s.createdAt,
  });
  const activityJson = (a: LinearActivity) => ({ __typename: 'AgentActivity', id: a.id, content: { __typename: `AgentActivity${a.content.type[0]!.toUpperCase()}${a.content.type.slice(1)}Content`, ...a.content }, agentSession: { id: a.sessionId }, user: { id: a.userId }, ephemeral: false, createdAt: a.createdAt, updatedAt: a.createdAt });

  /** What the app may see: issues and projects of teams it was given access to. */
  const teamVisible = (teamId: string) => teams.get(teamId)?.appAccess === true;
  const notFound = (what: string) => gqlError(`Entity not found: ${what}`, 'invalid input', 'INPUT_ERROR', `Could not find referenced ${what}.`);
  const invalid = (message: string) => gqlError(`Argument Validation Error`, 'invalid input', 'INVALID_INPUT', message);

  function findTeam(idOrKey: string) {
    return teams.get(idOrKey) ?? [...teams.values()].find((t) => t.key === idOrKey);
  }
  function findIssue(idOrIdentifier: string) {
    return issues.get(idOrIdentifier) ?? [...issues.values()].find((i) => i.identifier === idOrIdentifier);
  }

  /** The GraphQL operations, by the name `@linear/sdk` gives them. */
  function operation(name: string, v: Record<string, unknown>): { data: Record<string, unknown> } | ReturnType<typeof gqlError> {
    switch (name) {
      case 'viewer':
        return { data: { viewer: userJson(app) } };
      case 'team': {
        const t = findTeam(String(v.id));
        if (!t || !t.appAccess) return notFound('Team');
        return { data: { team: teamJson(t) } };
      }
      case 'project': {
        const p = projects.get(String(v.id));
        if (!p || !p.teamIds.some(teamVisible)) return notFound('Project');
        return { data: { project: { __typename: 'Project', id: p.id, name: p.name, slugId: p.id.slice(0, 12), url: `${base}/project/${p.id}`, progress: 0, scope: 0, color: '#888', icon: null, priority: 0, sortOrder: 0, syncedWith: null, createdAt: now(), updatedAt: now() } } };
      }
      case 'issue': {
        const i = findIssue(String(v.id));
        if (!i || !teamVisible(i.teamId)) return notFound('Issue');
        return { data: { issue: issueJson(i) } };
      }
      case 'comment': {
        const c = comments.find((x) => x.id === v.id);
        if (!c) return notFound('Comment');
        return { data: { comment: commentJson(c) } };
      }
      case 'agentSession': {
        const s = sessions.get(String(v.id));
        if (!s) return notFound('AgentSession');
        return { data: { agentSession: sessionJson(s) } };
      }
      case 'agentActivity': {
        const a = activities.find((x) => x.id === v.id);
        if (!a) return notFound('AgentActivity');
        return { data: { agentActivity: activityJson(a) } };
      }
      case 'createComment': {
        const input = (v.input ?? {}) as { id?: string; issueId?: string; body?: string };
        const i = input.issueId ? findIssue(input.issueId) : undefined;
        if (!i || !teamVisible(i.teamId)) return notFound('Issue');
        if (!input.body) return invalid('body must not be empty');
        if (input.id && comments.some((c) => c.id === input.id)) return invalid('A comment with this id already exists');
        const c: LinearComment = { id: input.id ?? uuid(), issueId: i.id, userId: app.id, body: input.body, createdAt: now() };
        comments.push(c);
        return { data: { commentCreate: { __typename: 'CommentPayload', comment: { id: c.id }, lastSyncId: comments.length, success: true } } };
      }
      case 'createAgentActivity': {
        const input = (v.input ?? {}) as { id?: string; agentSessionId?: string; content?: LinearActivity['content'] };
        const s = input.agentSessionId ? sessions.get(input.agentSessionId) : undefined;
        if (!s) return notFound('AgentSession');
        const type = input.content?.type;
        if (!type || !['thought', 'action', 'elicitation', 'response', 'error'].includes(type)) return invalid('content.type must be thought, action, elicitation, response or error');
        if (type === 'action' ? !input.content?.action : !input.content?.body) return invalid(type === 'action' ? 'an action has an action' : `a ${type} has a body`);
        if (input.id && activities.some((a) => a.id === input.id)) return invalid('An agent activity with this id already exists');
        const a: LinearActivity = { id: input.id ?? uuid(), sessionId: s.id, userId: app.id, content: input.content!, createdAt: now() };
        activities.push(a);
        // As in Linear: a session waits on an elicitation, completes on a response, fails on an error.
        s.status = type === 'elicitation' ? 'awaitingInput' : type === 'response' ? 'complete' : type === 'error' ? 'error' : 'active';
        return { data: { agentActivityCreate: { __typename: 'AgentActivityPayload', agentActivity: { id: a.id }, lastSyncId: activities.length, success: true } } };
      }
      default:
        return gqlError(`Cannot query operation "${name}" on this fake`, 'graphql error', 'GRAPHQL_VALIDATION_FAILED', 'Unknown operation');
    }
  }

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const send = (status: number, body: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json; charset=utf-8' });
        res.end(JSON.stringify(body));
      };
      if (req.method !== 'POST' || req.url !== '/graphql') return send(404, { errors: [{ message: 'Not found' }] });
      let body: { query?: string; variables?: Record<string, unknown> };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return send(400, gqlError('Invalid JSON', 'graphql error', 'BAD_REQUEST', 'The request is not JSON'));
      }
      const m = /^\s*(query|mutation)\s+(\w+)/.exec(body.query ?? '');
      const auth = req.headers.authorization ?? null;
      requests.push({ operation: m?.[2] ?? '(none)', variables: body.variables ?? {}, auth: auth ? auth.split(' ')[0]! : null });
      if (fake.throttleNext > 0) {
        fake.throttleNext -= 1;
        res.setHeader('retry-after', '1');
        return send(400, gqlError('Rate limit exceeded', 'ratelimited', 'RATELIMITED', 'Too many requests: try again later'));
      }
      if (auth !== `Bearer ${appToken}`) return send(400, gqlError('Authentication required, not authenticated', 'authentication error', 'AUTHENTICATION_ERROR', 'You need to authenticate to access this operation.'));
      if (!m) return send(400, gqlError('Syntax Error: the document has no named operation', 'graphql error', 'GRAPHQL_PARSE_FAILED', 'Invalid query'));
      send(200, operation(m[2]!, body.variables ?? {}));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  function deliverNow(event: string, payload: Record<string, unknown>, o: { id?: string; signWith?: string; timestamp?: number } = {}) {
    if (!webhook) throw new Error('no webhook target: call setWebhook first');
    const body = { ...payload, organizationId, webhookId: uuid(), webhookTimestamp: o.timestamp ?? Date.now() };
    const raw = JSON.stringify(body);
    const id = o.id ?? uuid();
    const signature = crypto.createHmac('sha256', o.signWith ?? webhook.secret).update(raw).digest('hex');
    return sender.send(webhook.url, { id, event, payload: body, raw, headers: { 'linear-delivery': id, 'linear-event': event, 'linear-signature': signature, 'linear-timestamp': String(body.webhookTimestamp), 'user-agent': 'Linear-Webhook' } });
  }

  const issueChild = (i: LinearIssue) => {
    const t = teams.get(i.teamId)!;
    return { id: i.id, identifier: i.identifier, title: i.title, description: i.description, url: issueUrl(i), teamId: t.id, team: { id: t.id, key: t.key, name: t.name } };
  };
  const userChild = (u: LinearUser) => ({ id: u.id, name: u.name, email: u.email, url: `${base}/profiles/${u.displayName}` });
  const sessionChild = (s: LinearSession) => {
    const i = issues.get(s.issueId)!;
    return {
      id: s.id,
      appUserId: app.id,
      organizationId,
      status: s.status,
      type: 'commentThread',
      issueId: i.id,
      issue: issueChild(i),
      creatorId: s.creatorId,
      creator: userChild(users.get(s.creatorId)!),
      commentId: s.commentId,
      createdAt: s.createdAt,
      updatedAt: s.createdAt,
      url: `${issueUrl(i)}#agent-session-${s.id.slice(0, 8)}`,
    };
  };

  /** A person writes in a session (with a signal: "Send stop request" is a prompt with `stop`). */
  async function prompted(sessionId: string, byUserId: string, body: string, signal: string | null): Promise<LinearDelivery> {
    const s = sessions.get(sessionId);
    if (!s) throw new Error(`no session ${sessionId}`);
    const a: LinearActivity = { id: uuid(), sessionId, userId: byUserId, content: { type: 'prompt', body }, ...(signal ? { signal } : {}), createdAt: now() };
    activities.push(a);
    s.status = 'pending';
    const u = users.get(byUserId)!;
    return deliverNow('AgentSessionEvent', {
      type: 'AgentSessionEvent',
      action: 'prompted',
      createdAt: now(),
      appUserId: app.id,
      oauthClientId: 'fake-client',
      agentSession: sessionChild(s),
      agentActivity: { id: a.id, agentSessionId: s.id, content: a.content, ...(signal ? { signal } : {}), createdAt: a.createdAt, updatedAt: a.createdAt, userId: u.id, user: userChild(u) },
    });
  }

  const fake: FakeLinear = {
    url: '',
    organizationId,
    app,
    appToken,
    addUser(input) {
      const u: LinearUser = { id: uuid(), name: input.name, displayName: input.name.toLowerCase().replace(/\s+/g, ''), email: `${input.name.toLowerCase().replace(/\s+/g, '.')}@example.com`, app: false };
      users.set(u.id, u);
      return u;
    },
    addTeam(input) {
      const t: LinearTeam = { id: uuid(), key: input.key, name: input.name ?? input.key, appAccess: input.appAccess ?? true };
      teams.set(t.id, t);
      return t;
    },
    addProject(input) {
      const p: LinearProject = { id: uuid(), name: input.name, teamIds: input.teamIds };
      projects.set(p.id, p);
      return p;
    },
    addIssue(input) {
      const t = teams.get(input.teamId);
      if (!t) throw new Error(`no team ${input.teamId}`);
      const n = (counters.get(t.id) ?? 0) + 1;
      counters.set(t.id, n);
      const i: LinearIssue = { id: uuid(), identifier: `${t.key}-${n}`, number: n, title: input.title, description: input.description ?? null, teamId: t.id, projectId: input.projectId ?? null, assigneeId: null, delegateId: null, creatorId: input.creatorId, createdAt: now() };
      issues.set(i.id, i);
      return i;
    },
    setWebhook(target) {
      webhook = target;
    },
    async assignToApp(issueId, byUserId) {
      const i = issues.get(issueId);
      if (!i) throw new Error(`no issue ${issueId}`);
      // Assigning an agent delegates the issue to it; the session is created for the app.
      i.delegateId = app.id;
      const s: LinearSession = { id: uuid(), issueId, creatorId: byUserId, commentId: null, status: 'pending', createdAt: now() };
      sessions.set(s.id, s);
      const promptContext = `<issue identifier="${i.identifier}">\n<title>${i.title}</title>\n<description>${i.description ?? ''}</description>\n</issue>`;
      const delivery = await deliverNow('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created', createdAt: now(), appUserId: app.id, oauthClientId: 'fake-client', agentSession: sessionChild(s), promptContext, previousComments: [], guidance: [] });
      return { session: s, delivery };
    },
    async mentionApp(issueId, byUserId, body) {
      const i = issues.get(issueId);
      if (!i) throw new Error(`no issue ${issueId}`);
      const c: LinearComment = { id: uuid(), issueId, userId: byUserId, body: `@${app.displayName} ${body}`, createdAt: now() };
      comments.push(c);
      const s: LinearSession = { id: uuid(), issueId, creatorId: byUserId, commentId: c.id, status: 'pending', createdAt: now() };
      sessions.set(s.id, s);
      const agentSession = { ...sessionChild(s), comment: { id: c.id, body: c.body, userId: byUserId, issueId } };
      const delivery = await deliverNow('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created', createdAt: now(), appUserId: app.id, oauthClientId: 'fake-client', agentSession, promptContext: c.body, previousComments: [], guidance: [] });
      return { session: s, delivery };
    },
    prompt: (sessionId, byUserId, body) => prompted(sessionId, byUserId, body, null),
    stopSession: (sessionId, byUserId) => prompted(sessionId, byUserId, 'Stop', 'stop'),
    deliver: (event, payload, o) => deliverNow(event, payload, o),
    redeliver: (id) => sender.redeliver(id),
    deliveries: sender.deliveries,
    issues,
    comments,
    sessions,
    activities,
    requests,
    throttleNext: 0,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  fake.url = `${base}/graphql`;
  return fake;
}

import { HttpException, Version3Client } from 'jira.js';
import { saidLine, TrackerError, transportReason } from '../tracker/errors.ts';
import { textOfAdf, type AdfDoc } from './adf.ts';

/**
 * tracker_b (Jira Cloud) as this project calls it: the agent's service account authenticates
 * with the OAuth 2.0 client credentials of its app (`client_id`, `client_secret`) at the token
 * endpoint (`auth_url`), and calls the site `cloud_id` through Atlassian's API gateway
 * (`api_url` + `/ex/jira/<cloud_id>`) with REST v3 through `jira.js`, given a bearer token and
 * that host: jira.js's own OAuth 2.0 support always calls Atlassian's cloud hosts, so the token
 * is fetched here (cached, refreshed five minutes before it expires, one fetch shared by
 * concurrent callers). Failures become a `TrackerError` with one line for people, no secret.
 */

/** Refresh this long before the token's expiry, so a token handed out still has minutes to live. */
const REFRESH_EARLY_MS = 5 * 60 * 1000;
/** The entity property a comment of ours carries: its post key, so a post repeated after a crash is found. */
export const POST_PROPERTY = 'crewhouse.post';

export interface JiraConfig {
  apiUrl: string;
  authUrl: string;
  cloudId: string;
  clientId: string;
  clientSecret: string;
  /** The account the agent acts as. */
  accountId: string;
}

export interface JiraIssueInfo {
  id: string;
  key: string;
  summary: string;
  /** The description as plain text. */
  description: string;
  projectKey: string;
  reporter: { accountId: string; displayName: string } | null;
  assignee: string | null;
}

export interface JiraAgent {
  /** Signs in and reads who the token is; ok when it is `account_id`. */
  check(): Promise<{ state: 'ok' | 'error'; detail: string }>;
  findProject(key: string): Promise<{ found: true; label: string } | { found: false; reason: string }>;
  issue(key: string): Promise<JiraIssueInfo>;
  /** Posts an ADF comment once per `key` (kept as the comment's entity property). */
  comment(issueKey: string, key: string, body: AdfDoc): Promise<{ id: string; created: boolean }>;
  /** Moves the issue through the transition of that name (any case); false when the workflow offers none. */
  transition(issueKey: string, name: string): Promise<boolean>;
}

const oneLine = (s: string) => s.replace(/\s+/g, ' ').trim().slice(0, 200);

/** What Jira (or Atlassian's token endpoint) said in its error body's fields; a body that is not JSON (a proxy's page) is not quoted. */
function saidOf(data: unknown): string {
  if (!data || typeof data !== 'object') return '';
  const d = data as { errorMessages?: unknown; errors?: unknown; message?: unknown; error_description?: unknown };
  const parts: string[] = [];
  if (Array.isArray(d.errorMessages)) parts.push(...d.errorMessages.filter((x): x is string => typeof x === 'string'));
  if (d.errors && typeof d.errors === 'object') parts.push(...Object.entries(d.errors).map(([k, v]) => `${k}: ${String(v)}`));
  if (typeof d.message === 'string') parts.push(d.message);
  if (typeof d.error_description === 'string') parts.push(d.error_description);
  return saidLine(parts.join('; '));
}

/** A one-line reason for a failed Jira call. */
export function jiraReason(err: unknown, what: string): TrackerError {
  if (err instanceof TrackerError) return err;
  const status = err instanceof HttpException ? err.status : typeof (err as { status?: unknown })?.status === 'number' ? (err as { status: number }).status : 0;
  const data = err instanceof HttpException ? (err.response as { data?: unknown })?.data ?? err.response : undefined;
  const said = saidOf(data);
  if (!status) return transportReason(err, 'Jira', what);
  if (status === 401) return new TrackerError(`Jira refused the agent's token while ${what}: check the settings client_id and cloud_id and the secret integrations/tracker_b/client_secret`, 401);
  if (status === 403) return new TrackerError(`the agent's account may not do this in Jira (${what})${said ? `: ${said}` : ''}: give the account the project permission`, 403);
  if (status === 404) return new TrackerError(`Jira has no such thing, or the agent's account cannot see it (${what})${said ? `: ${said}` : ''}`, 404);
  // What happened only: whether it is tried again is the caller's to say (a job is, a link check or a connection test is not).
  if (status === 429) return new TrackerError(`Jira is rate-limiting the agent (${what})`, 429);
  if (status >= 500) return new TrackerError(`Jira failed (HTTP ${status}) while ${what}; try again later`, status);
  return new TrackerError(`Jira refused the request (HTTP ${status}) while ${what}${said ? `: ${said}` : ''}`, status);
}

export function createJiraAgent(config: JiraConfig, opts: { now?: () => number } = {}): JiraAgent {
  const now = opts.now ?? Date.now;
  let token: { value: string; expiresAt: number } | null = null;
  let minting: Promise<string> | null = null;
  let client: { token: string; rest: Version3Client } | null = null;

  async function mint(): Promise<string> {
    let res: Response;
    try {
      res = await fetch(`${config.authUrl}/oauth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: config.clientId, client_secret: config.clientSecret }),
      });
    } catch (err) {
      throw transportReason(err, 'the Atlassian token endpoint (auth_url)', 'fetching a token');
    }
    let body: { access_token?: unknown; expires_in?: unknown } | null;
    try {
      body = (await res.json()) as typeof body;
    } catch (err) {
      // Not JSON, or the connection closed while the body came.
      if (res.ok) throw transportReason(err, 'the Atlassian token endpoint (auth_url)', 'fetching a token');
      body = null;
    }
    if (res.status === 401 || res.status === 403 || (res.status === 400 && saidOf(body).includes('access_denied'))) {
      throw new TrackerError('Atlassian refused the client credentials: check the setting client_id and the secret integrations/tracker_b/client_secret', 401);
    }
    if (!res.ok || typeof body?.access_token !== 'string') throw new TrackerError(`the Atlassian token endpoint answered HTTP ${res.status}${saidOf(body) ? `: ${saidOf(body)}` : ''}`, res.status >= 500 ? res.status : res.ok ? 502 : res.status);
    const seconds = typeof body.expires_in === 'number' && body.expires_in > 0 ? body.expires_in : 3600;
    token = { value: body.access_token, expiresAt: now() + seconds * 1000 };
    return token.value;
  }

  /** The cached token while it has more than five minutes left; concurrent callers share one fetch. */
  async function accessToken(): Promise<string> {
    if (token && token.expiresAt - REFRESH_EARLY_MS > now()) return token.value;
    minting ??= mint().finally(() => {
      minting = null;
    });
    return minting;
  }

  async function rest(): Promise<Version3Client> {
    const value = await accessToken();
    if (client?.token !== value) client = { token: value, rest: new Version3Client({ host: `${config.apiUrl}/ex/jira/${config.cloudId}`, authentication: { oauth2: { accessToken: value } } }) };
    return client.rest;
  }

  const call = async <T>(what: string, fn: (c: Version3Client) => Promise<T>): Promise<T> => {
    try {
      return await fn(await rest());
    } catch (err) {
      throw jiraReason(err, what);
    }
  };
  /** A read: an answer that is not a JSON object (axios hands a body that is not JSON on as a string) is a failure, not a thing with no fields. */
  const read = async <T>(what: string, fn: (c: Version3Client) => Promise<T>): Promise<T> => {
    const got = await call(what, fn);
    if (!got || typeof got !== 'object') throw new TrackerError(`Jira answered something that is not JSON while ${what}: is api_url Atlassian's API gateway (https://api.atlassian.com)?`, 502);
    return got;
  };

  return {
    async check() {
      try {
        const me = await read('reading who the agent is', (c) => c.myself.getCurrentUser());
        if (me.accountId !== config.accountId) {
          return { state: 'error', detail: `the client credentials act as ${me.displayName ?? '?'} (${me.accountId}), not account_id ${config.accountId}: set account_id to the service account of these credentials` };
        }
        return { state: 'ok', detail: oneLine(`acting as ${me.displayName ?? me.accountId} (${me.accountId}) on site ${config.cloudId}`) };
      } catch (err) {
        return { state: 'error', detail: jiraReason(err, 'signing in').message };
      }
    },

    async findProject(key) {
      try {
        const p = await read(`reading the project ${key}`, (c) => c.projects.getProject({ projectIdOrKey: key }));
        return { found: true, label: `${p.key} ${p.name}` };
      } catch (err) {
        const reason = jiraReason(err, `reading the project ${key}`);
        if (reason.status !== 404) throw reason;
        return { found: false, reason: `the agent's account cannot see a Jira project ${key}: give it the Browse projects permission, or check the key` };
      }
    },

    async issue(key) {
      const i = await read(`reading the issue ${key}`, (c) => c.issues.getIssue({ issueIdOrKey: key, fields: ['summary', 'description', 'project', 'reporter', 'assignee'] }));
      const f = i.fields as unknown as { summary?: string; description?: unknown; project?: { key?: string }; reporter?: { accountId?: string; displayName?: string } | null; assignee?: { accountId?: string } | null };
      return {
        id: i.id,
        key: i.key,
        summary: f.summary ?? '',
        description: f.description ? textOfAdf(f.description) : '',
        projectKey: f.project?.key ?? key.split('-')[0]!,
        reporter: f.reporter?.accountId ? { accountId: f.reporter.accountId, displayName: f.reporter.displayName ?? f.reporter.accountId } : null,
        assignee: f.assignee?.accountId ?? null,
      };
    },

    async comment(issueKey, key, body) {
      const what = `commenting on ${issueKey}`;
      const existing = await read(what, (c) => c.issueComments.getComments({ issueIdOrKey: issueKey, expand: 'properties', maxResults: 5000 }));
      const mine = (existing.comments ?? []).find((c) => (c as { properties?: Array<{ key?: string; value?: unknown }> }).properties?.some((p) => p.key === POST_PROPERTY && (p.value as { key?: unknown })?.key === key));
      if (mine?.id) return { id: mine.id, created: false };
      const made = await call(what, (c) => c.issueComments.addComment({ issueIdOrKey: issueKey, comment: body as never, properties: [{ key: POST_PROPERTY, value: { key } }] }));
      return { id: made.id ?? '', created: true };
    },

    async transition(issueKey, name) {
      const { transitions } = await read(`reading the transitions of ${issueKey}`, (c) => c.issues.getTransitions({ issueIdOrKey: issueKey }));
      const t = (transitions ?? []).find((x) => x.name?.toLowerCase() === name.toLowerCase());
      if (!t?.id) return false;
      await call(`moving ${issueKey} to ${name}`, (c) => c.issues.doTransition({ issueIdOrKey: issueKey, transition: { id: t.id } }));
      return true;
    },
  };
}

import crypto from 'node:crypto';
import { LinearClient, LinearError, LinearErrorType } from '@linear/sdk';
import { saidLine, TrackerError, transportReason } from '../tracker/errors.ts';

/**
 * tracker_a (Linear, as an agent app) as this project calls it: one `LinearClient` per GraphQL
 * endpoint and app token, every call through the SDK's own operations. Failures become a
 * `TrackerError` with one line written for people, never the token.
 */

export interface LinearIssueInfo {
  id: string;
  identifier: string;
  title: string;
  description: string | null;
  url: string;
  teamId: string;
  teamKey: string;
  projectId: string | null;
}

/** The content of an agent activity (Linear's types; `elicitation` asks the person, `response` ends the session). */
export type ActivityContent = { type: 'thought' | 'elicitation' | 'response' | 'error'; body: string } | { type: 'action'; action: string; parameter: string; result?: string };

export interface LinearApp {
  /** Who the token is (the app's user): the connection test. */
  viewer(): Promise<{ id: string; name: string }>;
  /** A team (by key or id) or a project (by id) the app can see, with its label; a reason otherwise. */
  findTeamOrProject(externalId: string): Promise<{ found: true; label: string; kind: 'team' | 'project' } | { found: false; reason: string }>;
  issue(idOrIdentifier: string): Promise<LinearIssueInfo>;
  /**
   * Posts an agent activity into a session; `key` makes it once: the activity's id is derived
   * from it, so a post repeated after a crash finds the first one and does not post again.
   */
  activity(sessionId: string, key: string, content: ActivityContent): Promise<{ id: string; created: boolean }>;
  /** Posts a comment on an issue, once per `key` (as for activities). */
  comment(issueId: string, key: string, body: string): Promise<{ id: string; created: boolean }>;
}

/** A stable UUID for an idempotency key: the id Linear accepts for a created entity. */
export function idOfKey(key: string): string {
  const h = crypto.createHash('sha256').update(`crewhouse:${key}`).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20, 32)}`;
}

/** A one-line reason for a failed call, for people; the status says whether trying again may help. */
export function linearReason(err: unknown, what: string): TrackerError {
  if (err instanceof TrackerError) return err;
  if (err instanceof LinearError) {
    // What Linear said (its GraphQL error's message), never the SDK's own message: that one quotes the raw response.
    const said = saidLine(err.errors?.[0]?.message ?? '');
    switch (err.type) {
      case LinearErrorType.AuthenticationError:
        return new TrackerError(`Linear refused the app's token while ${what}: check the secret integrations/tracker_a/access_token (the agent app's OAuth access token)`, 401);
      case LinearErrorType.Forbidden:
        return new TrackerError(`the app is not allowed to do this in Linear (${what})${said ? `: ${said}` : ''}`, 403);
      case LinearErrorType.Ratelimited:
        // What happened only: whether it is tried again is the caller's to say (a job is, a link check or a connection test is not).
        return new TrackerError(`Linear is rate-limiting the app (${what})`, 429);
      case LinearErrorType.InvalidInput:
        return new TrackerError(`Linear refused the request while ${what}${said ? `: ${said}` : ''}`, /not found|could not find/i.test(said) ? 404 : 400);
      case LinearErrorType.NetworkError:
      case LinearErrorType.InternalError:
        return new TrackerError(`Linear failed while ${what}${said ? `: ${said}` : ''}; try again later`, 502);
      default:
        if (err.status === undefined) return transportReason(err, 'Linear', what);
        // An answer that is not Linear's (a proxy's page, a body that is not GraphQL): its status, not its text.
        if (!said) return new TrackerError(`Linear answered something that is not a GraphQL answer (HTTP ${err.status}) while ${what}: is api_url Linear's GraphQL endpoint?`, err.status === 200 ? 502 : err.status);
        return new TrackerError(`Linear answered an error while ${what}: ${said}`, err.status === 200 ? 502 : err.status);
    }
  }
  return transportReason(err, 'Linear', what);
}

const TEAM_KEY = /^[A-Za-z0-9]{1,10}$/;

export function createLinearApp(config: { apiUrl: string; accessToken: string }): LinearApp {
  const client = new LinearClient({ accessToken: config.accessToken, apiUrl: config.apiUrl });
  const call = async <T>(what: string, fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      throw linearReason(err, what);
    }
  };

  /** Creates once per id: when the create fails, the entity may already be there from an earlier try. */
  async function once(what: string, id: string, create: () => Promise<unknown>, exists: () => Promise<unknown>) {
    try {
      await create();
      return { id, created: true };
    } catch (err) {
      const reason = linearReason(err, what);
      if (reason.status !== 400) throw reason;
      const there = await exists().then(
        () => true,
        () => false,
      );
      if (there) return { id, created: false };
      throw reason;
    }
  }

  return {
    async viewer() {
      const me = await call('reading who the app is', () => client.viewer);
      return { id: me.id, name: me.name };
    },

    async findTeamOrProject(externalId) {
      const asTeam = TEAM_KEY.test(externalId) || /^[0-9a-f-]{36}$/i.test(externalId);
      if (asTeam) {
        try {
          const team = await client.team(externalId);
          return { found: true, label: `${team.key} ${team.name}`, kind: 'team' };
        } catch (err) {
          const reason = linearReason(err, `looking up the team ${externalId}`);
          if (reason.status !== 404 && reason.status !== 400) throw reason;
          if (TEAM_KEY.test(externalId)) return { found: false, reason: `the Linear app cannot see a team with the key ${externalId}: give the app access to the team in Linear, or link a project by its id` };
        }
      }
      try {
        const project = await client.project(externalId);
        return { found: true, label: project.name, kind: 'project' };
      } catch (err) {
        const reason = linearReason(err, `looking up the project ${externalId}`);
        if (reason.status !== 404 && reason.status !== 400) throw reason;
        return { found: false, reason: `the Linear app cannot see a team or project ${externalId}: link a team by its key (ENG) or a project by its id, one the app has access to` };
      }
    },

    async issue(idOrIdentifier) {
      return call(`reading the issue ${idOrIdentifier}`, async () => {
        const issue = await client.issue(idOrIdentifier);
        const team = await issue.team;
        if (!team) throw new TrackerError(`the issue ${idOrIdentifier} has no team`, 404);
        return { id: issue.id, identifier: issue.identifier, title: issue.title, description: issue.description ?? null, url: issue.url, teamId: team.id, teamKey: team.key, projectId: issue.projectId ?? null };
      });
    },

    activity(sessionId, key, content) {
      const id = idOfKey(key);
      return once(
        'posting an agent activity',
        id,
        () => client.createAgentActivity({ id, agentSessionId: sessionId, content }),
        () => client.agentActivity(id),
      );
    },

    comment(issueId, key, body) {
      const id = idOfKey(key);
      return once(
        'commenting on the issue',
        id,
        () => client.createComment({ id, issueId, body }),
        () => client.comment({ id }),
      );
    },
  };
}

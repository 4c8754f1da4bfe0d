import type { FailureCause } from '../surface.ts';
import type { TrackerSurface, TrackerWork } from './tracker.store.ts';

/**
 * What differs between the two issue trackers (tracker_a: Linear's agent app, tracker_b: Jira
 * Cloud), behind one shape; what they share (which team, one run per issue, answering the open
 * question, progress jobs, idempotent posts) is tracker.service.ts.
 */

export interface TrackerIssue {
  /** The tracker's id of the issue, and the key people know (ENG-12). */
  id: string;
  key: string;
  url: string | null;
  title: string;
  /** The task given to the team: the issue's text, and the comment that asked when one did. */
  text: string;
}

export interface TrackerPerson {
  id: string;
  name: string;
}

/** Work on an issue; `ask` is what a mention said, when one started it (on an issue that has a run already, it is a reply there). */
export type TaskIntent = { kind: 'task'; issue: TrackerIssue; session: string | null; by: TrackerPerson; ask?: string | null };

/** What a verified delivery means. */
export type TrackerIntent =
  | TaskIntent
  /**
   * A person wrote on an issue (or in its agent session): the answer to the run's open question;
   * else, when it is addressed to the agent (a mention, a prompt in the session), a follow-up;
   * `orTask` when the issue has no run yet.
   */
  | { kind: 'reply'; issueId: string; session: string | null; text: string; by: TrackerPerson; addressed: boolean; orTask: TaskIntent | null }
  /**
   * A person told the agent to stop working on the issue (Linear's stop request in the session,
   * the agent unassigned from it): the issue's open run is cancelled, and its last note says so.
   */
  | { kind: 'stop'; issueId: string; session: string | null; by: TrackerPerson; how: string }
  | { kind: 'ignore'; reason: string };

/** What a run tells the issue it came from. */
export type ProgressNote =
  | { kind: 'started' }
  /** `by`: the tracker's person who wrote the follow-up there; else `where` says where it was given (the console, the team's chat room). */
  | { kind: 'resumed'; text: string; by: string | null; where: string }
  | { kind: 'question'; role: string; text: string; confirmation: boolean }
  | { kind: 'delivered'; summary: string | null; pullUrl: string | null; branch: string | null }
  /** `cause`: why trying again cannot help as things are (a spent budget, an archived team, a model that refuses), or null. */
  | { kind: 'failed'; reason: string; cause: FailureCause | null }
  | { kind: 'cancelled' };

/**
 * What the issue is told about a person's message that was not taken as it came: `refused` (a
 * run that takes no more replies, a team that cannot take work: `reason` says why, in words), or
 * `deferred` (the team's daily budget is spent: it is taken at `at`, in words: `00:00 UTC`). `what`
 * is what the message was.
 */
export type MessageNote =
  | { kind: 'refused'; what: 'task' | 'follow-up' | 'answer'; by: TrackerPerson; reason: string }
  | { kind: 'deferred'; what: 'task' | 'follow-up'; by: TrackerPerson; team: string; at: string };

/** Where a person wrote on a tracker: the issue, and Linear's agent session when it was there. */
export interface TrackerPlace {
  issue_id: string;
  issue_key: string;
  session_id: string | null;
}

export interface ProgressContext {
  team: string;
  runId: string;
  runUrl: string;
}

/** One tracker as configured now: its client and how it reads and writes. */
export interface TrackerConnection {
  /** What a delivery means (it may ask the tracker: a project, who the app is); the action is the payload's own. */
  intentOf(delivery: { event: string; payload: unknown }): Promise<TrackerIntent>;
  /** The link ids an issue belongs to (team key or id, project), for the team linked to it. */
  scopesOf(issue: TrackerIssue, payload: unknown): Promise<string[]>;
  /** Posts a note on the work's issue, once per `key` (a job run twice posts once). */
  post(work: TrackerWork, key: string, note: ProgressNote, ctx: ProgressContext): Promise<void>;
  /** Answers a person's message on the issue (or in the session) where it was written, once per `key`. */
  answer(place: TrackerPlace, key: string, note: MessageNote): Promise<void>;
  /** Once the run has succeeded and said so (a transition, when configured). */
  succeeded?(work: TrackerWork): Promise<void>;
  /** The connection test: a real call. */
  check(): Promise<{ state: 'ok' | 'error'; detail: string }>;
  /** Whether a link's external id is something the tracker shows the agent, with its label. */
  findLink(externalId: string): Promise<{ found: true; label: string } | { found: false; reason: string }>;
}

export interface TrackerKind {
  surface: TrackerSurface;
  /** Who the tracker is, for people ("Linear", "Jira"). */
  title: string;
  /**
   * The connection with the stored settings and secrets: the enabled, complete integration's;
   * with `evenDisabled` (the connection test, a link's check) whenever it is complete. A string
   * says why there is none.
   */
  connect(opts?: { evenDisabled?: boolean }): Promise<TrackerConnection | string>;
}

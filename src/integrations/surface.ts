/**
 * What every surface adapter offers (the code host, the chats, the trackers): work taken in
 * from the place a person works, a run's progress posted back there, a question asked there and
 * its answer taken from there, cancelling from there, and the link back to the place. Each
 * integration kind's folder (src/integrations/<kind>/) implements it; the composition root
 * hands each adapter the services it needs, and the webhooks' bookkeeping and the jobs reach
 * adapters only through it.
 */

export { actorForPeople, serviceName, SERVICE_NAMES } from '../console/integrations/kinds.ts';

/** The spec's integration kinds that are surfaces (where work comes from and answers go). */
export type SurfaceKind = 'code_host' | 'chat_a' | 'chat_b' | 'tracker_a' | 'tracker_b';

/** What a run tells the place its work came from. `waiting` asks the run's open question there. */
export type RunProgress = 'started' | 'resumed' | 'waiting' | 'finished';

/** Where a run's work came from on a surface: the place posts go into, and the link back to it. */
export interface Origin {
  surface: SurfaceKind;
  /** The surface's name of the place: an issue (`acme/app#7`), a thread (`<channel>/<root post>`), a tracker issue (`ENG-12`). */
  place: string;
  /** Where a person opens it; null when the surface gives the place no address. */
  url: string | null;
}

/**
 * Where a follow-up that reopened a run was given, in words for the place its work came from,
 * from the follow-up's author (`by` of its post): a chat actor (`chat_a:@alice`) wrote in the
 * team's chat room (the home-room thread a chat-homed team's run from elsewhere gets), anyone
 * else in the Crewhouse console. (One written on the place itself is quoted with its author
 * instead, by the adapter.)
 */
export function followUpGivenIn(by: string | null): string {
  return /^chat_[ab]:@/.test(by ?? '') ? "the team's chat room" : 'the Crewhouse console';
}

/**
 * Why a run failed, when trying again cannot help as things are (the `cause` its failed post
 * carries): the team's daily budget is spent, the team was archived, or the model refuses the
 * role's calls. Null for a failure a retry may mend.
 */
export type FailureCause = 'budget' | 'archived' | 'model_refused';

export function failureCauseOf(data: Record<string, unknown> | null | undefined): FailureCause | null {
  const c = data?.cause;
  return c === 'budget' || c === 'archived' || c === 'model_refused' ? c : null;
}

/** What to do after a failure a retry cannot mend as things are, in words; `write` says how a person replies there ("reply in this thread"). */
export function retryAdvice(cause: FailureCause, write: string): string {
  switch (cause) {
    case 'budget':
      return `The team's daily budget is spent until 00:00 UTC: to have it try again, ${write} after then (or once an admin raises the budget).`;
    case 'archived':
      return 'The team was archived, so the run takes no more replies: give a live team a new task.';
    case 'model_refused':
      return `Trying again fails the same way until an admin mends the role's model settings (its model or key) in the Crewhouse console; then ${write} to have the team try again.`;
  }
}

/** The key of one post into a run's origin: stable, so a job performed twice posts once (the adapter keeps it with the post). */
export const postKey = (runId: string, progress: RunProgress, seq: number) => `${runId}:${progress}:${seq}`;

export interface Surface {
  readonly kind: SurfaceKind;
  /**
   * Takes work in: one verified inbound event (a webhook delivery, a chat command or message),
   * recorded beforehand by the caller, becomes a task, an answer to the run's open question (a
   * confirmation's approve or refuse too) or a follow-up, a cancel, or a record on the run;
   * performed once per event however often it is called, settling the event's record.
   */
  takeIn(eventRow: string, event: { event: string; payload: unknown }): Promise<void>;
  /**
   * Posts a run's progress into its origin, once per `postKey(runId, progress, seq)`: started
   * (with the link to the run), resumed by a follow-up, waiting (the question, addressed to the
   * person who gave the work, saying how to answer: a reply, or approve/refuse for a
   * confirmation), finished (what it delivered, why it failed, or that it was cancelled).
   * Nothing is posted for a run that did not come from this surface.
   */
  progress(runId: string, progress: RunProgress, seq: number): Promise<void>;
  /** The link back: where the run's work came from on this surface, or null when it came from elsewhere. */
  originOf(runId: string): Promise<Origin | null>;
}

/**
 * Which messages seen on a chat surface are a person's, and so may become work: the one rule,
 * the same for every chat surface. An adapter reads the facts off its surface's message
 * (`InboundFacts`) and asks `isPersonsMessage`; the rule itself is here.
 */

/** What a surface's message says about who wrote it and what it is, read by its adapter. */
export interface InboundFacts {
  /** The author's user id; null or empty when the surface names none. */
  author: string | null | undefined;
  /** The bot's own user id on the surface, once known. */
  self: string | null;
  /** Written by another bot, an app or an integration (a webhook), not a person. */
  fromBot: boolean;
  /** An edit of a message seen before, not a new message. */
  edited: boolean;
  /** A deletion, or a message already deleted. */
  deleted: boolean;
  /** A message the surface wrote itself (a join, a topic change, a pin). */
  system: boolean;
}

/**
 * A person's new message: not the bot's own, not another bot's, not an edit or a deletion, not
 * a system message. An edit is not read again: the first text was the request, and a thread's
 * later message is how a person adds to it.
 */
export function isPersonsMessage(f: InboundFacts): boolean {
  if (!f.author) return false;
  if (f.self !== null && f.author === f.self) return false;
  return !(f.fromBot || f.edited || f.deleted || f.system);
}

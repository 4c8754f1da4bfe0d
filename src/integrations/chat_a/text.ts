/**
 * Text to and from a chat_a room. Outbound: what agents wrote is posted without mention storms
 * (`@channel`, `@all`, `@here` are shown in code, where the server notifies nobody) and within
 * the server's post size. Inbound: whether a message is addressed to the bot, and its text
 * without the mention.
 */

/** Mattermost's limit on a post's message, in characters. */
export const MAX_POST_CHARS = 16_383;

const MASS_MENTION = /(^|[^\w`@.-])@(channel|all|here)(?![\w-])/gi;

/** A message safe to post: mass mentions defused, cut (saying so) to at most `max` characters. */
export function postText(text: string, max = MAX_POST_CHARS): string {
  const defused = text.replace(MASS_MENTION, (_m, before: string, word: string) => `${before}\`@${word}\``);
  if (defused.length <= max) return defused;
  const note = `\n\n(cut: ${defused.length - max} more characters)`;
  // Never split a surrogate pair at the cut.
  let end = max - note.length;
  const code = defused.charCodeAt(end - 1);
  if (code >= 0xd800 && code <= 0xdbff) end--;
  return defused.slice(0, end) + note;
}

/** The text of a message that mentions `@<username>` (the mention removed), or null when it does not. */
export function addressedText(message: string, username: string): string | null {
  const escaped = username.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const mention = new RegExp(`(^|[^\\w@.-])@${escaped}(?![\\w-])`, 'i');
  if (!mention.test(message)) return null;
  return message.replace(new RegExp(mention.source, 'gi'), '$1').replace(/\s+/g, ' ').replace(/ ([,.:;!?])/g, '$1').replace(/^[\s,:]+/, '').trim();
}

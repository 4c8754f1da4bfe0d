import { postText } from '../chat_a/text.ts';

/**
 * Text to and from a chat_b channel. Outbound: what agents wrote is escaped as Slack asks
 * (`&`, `<`, `>`), so it can hold no `<!channel>`, `<!here>` or `<@user>` of its own, mass
 * mentions written as words are shown in code (the rule chat_a follows), and it is cut, saying
 * so, to Slack's 40,000 characters. Inbound: whether a message mentions the bot (`<@U...>`), and
 * its text without the mention.
 */

/** Slack's limit on a message's text, in characters. */
export const MAX_MESSAGE_CHARS = 40_000;

/** Slack's three control characters, escaped as its formatting rules ask. */
export const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A message safe to post: escaped, mass mentions defused, within Slack's size. */
export function messageText(text: string, max = MAX_MESSAGE_CHARS): string {
  return postText(escapeText(text), max);
}

/** The text of a message that mentions the bot user `botUserId` (the mention removed), or null when it does not. */
export function addressedText(text: string, botUserId: string): string | null {
  const mention = new RegExp(`<@${botUserId.replace(/[^A-Z0-9]/g, '')}(?:\\|[^>]*)?>`, 'g');
  if (!mention.test(text)) return null;
  return text.replace(mention, ' ').replace(/\s+/g, ' ').replace(/ ([,.:;!?])/g, '$1').replace(/^[\s,:]+/, '').trim();
}

/** A message's text as people wrote it: Slack's escapes undone, links shown as their label or URL. */
export function plainText(text: string): string {
  return text
    .replace(/<(https?:[^|>]+)\|([^>]+)>/g, '$2 ($1)')
    .replace(/<(https?:[^>]+)>/g, '$1')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

import { escapeMrkdwn } from '../chat/format.ts';
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
export const escapeText = escapeMrkdwn;

/**
 * Text already in Slack's mrkdwn (the chat core's, written through its format, or a message's
 * text as Slack gave it), safe to post: every `<!...>` command (`<!channel>`, `<!here>`,
 * `<!everyone>`, ...) defused, since none is ever ours, mass mentions written as words shown in
 * code, within Slack's size.
 */
export function mrkdwnText(text: string, max = MAX_MESSAGE_CHARS): string {
  return postText(text.replace(/<!([^<>]*)>/g, '&lt;!$1&gt;').replace(/<!/g, '&lt;!'), max);
}

/** Plain words (not mrkdwn) as a message safe to post: escaped, mass mentions defused, within Slack's size. */
export function messageText(text: string, max = MAX_MESSAGE_CHARS): string {
  return mrkdwnText(escapeText(text), max);
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

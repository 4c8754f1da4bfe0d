/**
 * How the chat core writes for a surface: each surface's adapter names its dialect
 * (`ChatSurface.dialect`), and every line the core says (render.ts, commands.ts, core.ts) is
 * written through the matching `ChatFormat`, so the core's own markup is the surface's and the
 * words of agents and people (`text`) can never be markup of the surface's own.
 *
 * - `markdown` (chat_a, Mattermost): `**bold**`, `` `code` ``, `[label](url)`; agents' words
 *   are Markdown already and pass as they are (the adapter defuses mass mentions and cuts).
 * - `mrkdwn` (chat_b, Slack): `*bold*`, `` `code` ``, `<url|label>`; in agents' and people's words
 *   `&`, `<` and `>` are escaped as Slack asks, so they hold no `<!channel>`, `<!here>`,
 *   `<@user>` or link of their own, and the Markdown agents write (`**bold**`, `~~gone~~`,
 *   `[label](https://...)`) is written as Slack's, outside code.
 *
 * The dialect lives here, once, rather than in each adapter converting the core's Markdown: only
 * the writer knows which parts of a line are its markup and which are someone else's words, and an
 * adapter converting afterwards would have to tell them apart again (and could not escape one
 * without breaking the other).
 */

export type ChatDialect = 'markdown' | 'mrkdwn';

export interface ChatFormat {
  readonly dialect: ChatDialect;
  /** Words of agents and people (a task, a question, a summary, a name they chose), safe in the dialect. */
  text(words: string): string;
  /** Bold: a name, a team. */
  bold(words: string): string;
  /** Inline code: an id, a command, a branch. */
  code(words: string): string;
  link(label: string, url: string): string;
}

/** Inline code cannot hold its own delimiter: a backtick is shown as a quote. */
const unticked = (s: string) => s.replace(/`/g, "'");

const markdown: ChatFormat = {
  dialect: 'markdown',
  text: (words) => words,
  bold: (words) => `**${words}**`,
  code: (words) => `\`${unticked(words)}\``,
  link: (label, url) => `[${label.replace(/[[\]]/g, '')}](${url.replace(/[()\s]/g, encodeURIComponent)})`,
};

/** Slack's three control characters, escaped as its formatting rules ask. */
export const escapeMrkdwn = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** Code spans and fences of Markdown (left as they are), and the text between them. */
const CODE = /(```[\s\S]*?```|`[^`\n]+`)/;

/** Markdown an agent wrote, already escaped, as mrkdwn: bold, strike-through and links, outside code. */
function markdownToMrkdwn(escaped: string): string {
  return escaped
    .split(CODE)
    .map((part, i) =>
      i % 2 === 1
        ? part
        : part
            .replace(/\*\*(?=\S)([^*\n]+?)\*\*/g, '*$1*')
            .replace(/~~(?=\S)([^~\n]+?)~~/g, '~$1~')
            .replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s()|]+)\)/g, (_m, label: string, url: string) => `<${url}|${label.replace(/\|/g, '/')}>`),
    )
    .join('');
}

const mrkdwn: ChatFormat = {
  dialect: 'mrkdwn',
  text: (words) => markdownToMrkdwn(escapeMrkdwn(words)),
  bold: (words) => `*${escapeMrkdwn(words)}*`,
  code: (words) => `\`${unticked(escapeMrkdwn(words))}\``,
  link: (label, url) => `<${url.replace(/[<>|\s]/g, encodeURIComponent).replace(/&/g, '&amp;')}|${escapeMrkdwn(label).replace(/\|/g, '/')}>`,
};

export const formatOf = (dialect: ChatDialect): ChatFormat => (dialect === 'mrkdwn' ? mrkdwn : markdown);

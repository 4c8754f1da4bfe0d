import MarkdownIt from 'markdown-it';
import type { StateInline } from 'markdown-it';

/** A user a mention may name. */
export interface MentionTarget {
  id: number;
  full_name: string;
}

/** What rendering found: mentioned user ids and wildcard mentions. */
export interface Rendered {
  html: string;
  mentionedUserIds: Set<number>;
  streamWildcard: boolean;
  topicWildcard: boolean;
}

interface Env {
  resolve(name: string, id: number | null): MentionTarget | null;
  mentioned: Set<number>;
  streamWildcard: boolean;
  topicWildcard: boolean;
}

const STREAM_WILDCARDS = new Set(['all', 'everyone', 'stream', 'channel']);

/**
 * Zulip's user mentions: `@**Full Name**`, `@**Full Name|id**`, silent `@_**Full Name**`, and
 * the wildcards `@**all**` (everyone, channel, stream) and `@**topic**`.
 */
function mentionRule(state: StateInline, silent: boolean): boolean {
  const src = state.src;
  let pos = state.pos;
  if (src.charCodeAt(pos) !== 0x40 /* @ */) return false;
  let isSilent = false;
  if (src.startsWith('_**', pos + 1)) {
    isSilent = true;
    pos += 4;
  } else if (src.startsWith('**', pos + 1)) {
    pos += 3;
  } else return false;
  const end = src.indexOf('**', pos);
  if (end < 0 || end === pos || src.slice(pos, end).includes('\n')) return false;
  const inner = src.slice(pos, end);
  const env = state.env as unknown as Env;
  const bar = /^(.*)\|(\d{1,10})$/.exec(inner);
  const name = bar ? bar[1] : inner;
  const wildcard = !bar && !isSilent && (STREAM_WILDCARDS.has(name) || name === 'topic');
  const target = wildcard ? null : env.resolve(name, bar ? Number(bar[2]) : null);
  if (!wildcard && !target) return false;
  if (!silent) {
    const token = state.push('chat_mention', '', 0);
    token.meta = { target, wildcard: wildcard ? name : null, silent: isSilent };
    if (wildcard) {
      if (name === 'topic') env.topicWildcard = true;
      else env.streamWildcard = true;
    } else if (!isSilent) env.mentioned.add(target!.id);
  }
  state.pos = end + 2;
  return true;
}

function makeRenderer() {
  // No raw HTML from users; bare links become links; line breaks are kept, as in Zulip.
  const md = new MarkdownIt({ html: false, linkify: true, breaks: true, typographer: false });
  md.inline.ruler.before('emphasis', 'chat_mention', mentionRule);
  const escape = md.utils.escapeHtml;
  md.renderer.rules.chat_mention = (tokens, idx) => {
    const { target, wildcard, silent } = tokens[idx].meta as { target: MentionTarget | null; wildcard: string | null; silent: boolean };
    if (wildcard) return `<span class="${wildcard === 'topic' ? 'topic-mention' : 'user-mention'}" data-user-id="*">@${escape(wildcard)}</span>`;
    return `<span class="user-mention${silent ? ' silent' : ''}" data-user-id="${target!.id}">${silent ? '' : '@'}${escape(target!.full_name)}</span>`;
  };
  // Links open elsewhere and carry no referrer, as Zulip renders them.
  const linkOpen = md.renderer.rules.link_open ?? ((tokens, idx, options, _env, self) => self.renderToken(tokens, idx, options));
  md.renderer.rules.link_open = (tokens, idx, options, env, self) => {
    tokens[idx].attrSet('target', '_blank');
    tokens[idx].attrSet('rel', 'noopener noreferrer');
    return linkOpen(tokens, idx, options, env, self);
  };
  // Code blocks in Zulip's wrapper, the language kept as a class.
  md.renderer.rules.fence = (tokens, idx) => {
    const t = tokens[idx];
    const lang = t.info.trim().split(/\s+/)[0];
    return `<div class="codehilite"${lang ? ` data-code-language="${escape(lang)}"` : ''}><pre><span></span><code>${escape(t.content)}</code></pre></div>\n`;
  };
  md.renderer.rules.code_block = md.renderer.rules.fence;
  return md;
}

const md = makeRenderer();

/** Renders a message's Markdown to safe HTML, finding its mentions. */
export function renderMessage(content: string, resolve: (name: string, id: number | null) => MentionTarget | null): Rendered {
  const env: Env = { resolve, mentioned: new Set(), streamWildcard: false, topicWildcard: false };
  const html = md.render(content, env as unknown as Record<string, unknown>).trimEnd();
  return { html, mentionedUserIds: env.mentioned, streamWildcard: env.streamWildcard, topicWildcard: env.topicWildcard };
}

/**
 * Atlassian Document Format, as much as the agent's comments need: paragraphs of text, a
 * mention of an account, links. Jira's REST v3 takes comment bodies only as ADF: markdown
 * pasted as text would show its asterisks.
 */

export interface AdfNode {
  type: string;
  text?: string;
  attrs?: Record<string, unknown>;
  marks?: Array<{ type: string; attrs?: Record<string, unknown> }>;
  content?: AdfNode[];
}
export interface AdfDoc {
  type: 'doc';
  version: 1;
  content: AdfNode[];
}

/** An inline piece of a paragraph: text, strong text, a link, or a mention of an account. */
export type Inline = string | { strong: string } | { link: string; text?: string } | { mention: string; name: string };

function inline(piece: Inline): AdfNode {
  if (typeof piece === 'string') return { type: 'text', text: piece };
  if ('strong' in piece) return { type: 'text', text: piece.strong, marks: [{ type: 'strong' }] };
  if ('link' in piece) return { type: 'text', text: piece.text ?? piece.link, marks: [{ type: 'link', attrs: { href: piece.link } }] };
  return { type: 'mention', attrs: { id: piece.mention, text: `@${piece.name}`, accessLevel: '' } };
}

/** A document of paragraphs; each paragraph a list of inline pieces (empty pieces dropped; text lines split into hard breaks). */
export function adf(...paragraphs: Inline[][]): AdfDoc {
  return {
    type: 'doc',
    version: 1,
    content: paragraphs.map((pieces) => ({
      type: 'paragraph',
      content: pieces
        .filter((p) => (typeof p === 'string' ? p.length > 0 : true))
        .flatMap((p) => {
          if (typeof p !== 'string' || !p.includes('\n')) return [inline(p)];
          return p.split('\n').flatMap((line, i) => [...(i > 0 ? [{ type: 'hardBreak' }] : []), ...(line ? [{ type: 'text', text: line }] : [])]);
        }),
    })),
  };
}

/** The text of an ADF document: text nodes, mentions as their text, paragraphs on lines. */
export function textOfAdf(doc: unknown): string {
  const walk = (n: unknown): string => {
    if (!n || typeof n !== 'object') return '';
    const node = n as AdfNode;
    if (node.type === 'text') return node.text ?? '';
    if (node.type === 'mention') return String(node.attrs?.text ?? '');
    if (node.type === 'hardBreak') return '\n';
    const inner = (node.content ?? []).map(walk).join('');
    return ['paragraph', 'heading', 'listItem', 'codeBlock', 'blockquote'].includes(node.type) ? `${inner}\n` : inner;
  };
  return walk(doc).replace(/\n{3,}/g, '\n\n').trim();
}

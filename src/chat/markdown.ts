/**
 * The small Markdown subset a profile field renders (as Zulip's rendered_value): paragraphs
 * and line breaks, **bold**, *italic*, `code`, [links](https://…) and bare http(s) links.
 * Everything else is text, HTML-escaped, so a value can never inject markup.
 */
export function renderMarkdown(source: string): string {
  const paragraphs = source.replace(/\r\n?/g, '\n').trim().split(/\n{2,}/).filter(Boolean);
  return paragraphs.map((p) => `<p>${inline(p).replace(/\n/g, '<br>\n')}</p>`).join('\n');
}

const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;').replace(/'/g, '&#39;');

function inline(text: string): string {
  // Code spans first, so their content is not formatted; placeholders keep them aside.
  const codes: string[] = [];
  let s = text.replace(/`([^`\n]+)`/g, (_m, code: string) => `\uE000${codes.push(`<code>${escape(code)}</code>`) - 1}\uE000`);
  s = escape(s);
  const links: string[] = [];
  s = s.replace(/\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g, (_m, label: string, url: string) => `\uE001${links.push(`<a href="${url}">${label}</a>`) - 1}\uE001`);
  s = s.replace(/(^|[\s(])(https?:\/\/[^\s<]+[^\s<.,;:!?)'"])/g, (_m, pre: string, url: string) => `${pre}\uE001${links.push(`<a href="${url}">${url}</a>`) - 1}\uE001`);
  s = s.replace(/\*\*([^*\n]+)\*\*/g, '<strong>$1</strong>').replace(/(^|[^*])\*([^*\n]+)\*/g, '$1<em>$2</em>');
  s = s.replace(/\uE001(\d+)\uE001/g, (_m, i: string) => links[Number(i)]);
  return s.replace(/\uE000(\d+)\uE000/g, (_m, i: string) => codes[Number(i)]);
}

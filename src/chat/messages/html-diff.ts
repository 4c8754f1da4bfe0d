/** Beyond this many token pairs the diff is not worked out word by word: the whole text counts as replaced. */
const MAX_CELLS = 4_000_000;

const tokenize = (html: string) => html.match(/<[^>]*>|[^<\s]+|\s+/g) ?? [];
const isTag = (t: string) => t.startsWith('<');

/**
 * Zulip's content_html_diff: the new rendering with the words an edit added wrapped in
 * `highlight_text_inserted` and the words it removed kept in `highlight_text_deleted`. Tags come
 * from the new rendering (removed ones are dropped), so the answer is the new structure.
 */
export function htmlDiff(before: string, after: string): string {
  const a = tokenize(before);
  const b = tokenize(after);
  const ins = (t: string) => (isTag(t) || !t.trim() ? t : `<span class="highlight_text_inserted">${t}</span>`);
  const del = (t: string) => (isTag(t) || !t.trim() ? '' : `<span class="highlight_text_deleted">${t}</span>`);
  if (a.length * b.length > MAX_CELLS) return [...a.map(del), ...b.map(ins)].join('');
  // Longest common subsequence, filled from the ends so the walk below goes forwards.
  const w = b.length + 1;
  const lcs = new Uint32Array((a.length + 1) * w);
  for (let i = a.length - 1; i >= 0; i--) {
    for (let j = b.length - 1; j >= 0; j--) {
      lcs[i * w + j] = a[i] === b[j] ? lcs[(i + 1) * w + j + 1] + 1 : Math.max(lcs[(i + 1) * w + j], lcs[i * w + j + 1]);
    }
  }
  const out: string[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length || j < b.length) {
    if (i < a.length && j < b.length && a[i] === b[j]) {
      out.push(b[j]);
      i++;
      j++;
    } else if (j < b.length && (i === a.length || lcs[i * w + j + 1] >= lcs[(i + 1) * w + j])) {
      out.push(ins(b[j++]));
    } else {
      out.push(del(a[i++]));
    }
  }
  return out.join('');
}

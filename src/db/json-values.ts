/** JSON nested deeper than this is refused: nothing we store nests so deep, and recursive code downstream must not overflow. */
export const MAX_JSON_DEPTH = 100;

/** What inspectJson finds wrong, each with the field path ('' for the value itself). */
export type JsonFinding = { nul: string } | { tooDeep: string };
/** With `finite` and `wellFormed`, also a number JSON cannot hold and text that is not Unicode. */
export type StoredValueFinding = JsonFinding | { notFinite: string } | { illFormed: string };

/**
 * What is wrong with a parsed request part, if anything: it nests deeper than MAX_JSON_DEPTH
 * (`tooDeep`), or (unless `nul: false`) a string or key in it holds a NUL character (`nul`: the
 * field path, '' for the part itself), which PostgreSQL cannot store in text or jsonb. Walks iteratively, so no
 * input can overflow the stack; the first problem in document order is named.
 *
 * A value parsed from something other than a JSON body (a YAML file of the configuration
 * repository) can hold more that would not be stored as read: with `finite`, a number that is
 * NaN or infinite (JSON has neither: it would be stored as null) is `notFinite`; with
 * `wellFormed`, a string or key holding half of a surrogate pair (an escape such as "\ud800"
 * alone) is `illFormed` (jsonb refuses it, a text column stores a replacement character).
 */
export function inspectJson(value: unknown, opts?: { maxDepth?: number; nul?: boolean }): JsonFinding | null;
export function inspectJson(value: unknown, opts: { maxDepth?: number; nul?: boolean; finite?: boolean; wellFormed?: boolean }): StoredValueFinding | null;
export function inspectJson(value: unknown, opts: { maxDepth?: number; nul?: boolean; finite?: boolean; wellFormed?: boolean } = {}): StoredValueFinding | null {
  const maxDepth = opts.maxDepth ?? MAX_JSON_DEPTH;
  const nul = opts.nul ?? true;
  const finite = opts.finite ?? false;
  const wellFormed = opts.wellFormed ?? false;
  const strings = nul || wellFormed;
  // A leaf is looked at only when some check reads it.
  const leaf = (child: unknown) => (strings && typeof child === 'string') || (finite && typeof child === 'number');
  // Paths are built only for the value that is named: each entry keeps its key and its parent.
  interface Entry {
    value: unknown;
    key: string;
    parent: Entry | null;
    depth: number;
  }
  const pathOf = (e: Entry | null): string => {
    const keys: string[] = [];
    for (let at = e; at !== null && at.parent !== null; at = at.parent) keys.push(at.key);
    return keys.reverse().join('.');
  };
  const stack: Entry[] = [{ value, key: '', parent: null, depth: 0 }];
  while (stack.length > 0) {
    const e = stack.pop()!;
    const v = e.value;
    if (typeof v === 'string') {
      if (nul && v.includes('\u0000')) return { nul: pathOf(e) };
      if (wellFormed && !v.isWellFormed()) return { illFormed: pathOf(e) };
      continue;
    }
    if (typeof v === 'number') {
      if (finite && !Number.isFinite(v)) return { notFinite: pathOf(e) };
      continue;
    }
    if (v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) continue;
    if (e.depth >= maxDepth) return { tooDeep: pathOf(e) };
    const depth = e.depth + 1;
    // Pushed last to first, so they come off the stack in document order.
    if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) {
        const child = v[i];
        if (child !== null && (typeof child === 'object' || leaf(child))) stack.push({ value: child, key: String(i), parent: e, depth });
      }
      continue;
    }
    const keys = Object.keys(v);
    for (let i = keys.length - 1; i >= 0; i--) {
      const k = keys[i];
      if (nul && k.includes('\u0000')) return { nul: pathOf({ value: null, key: k, parent: e, depth }) };
      if (wellFormed && !k.isWellFormed()) return { illFormed: pathOf({ value: null, key: k, parent: e, depth }) };
      const child = (v as Record<string, unknown>)[k];
      if (child !== null && (typeof child === 'object' || leaf(child))) stack.push({ value: child, key: k, parent: e, depth });
    }
  }
  return null;
}

/**
 * Text from outside made storable as it is taken in: NUL characters (PostgreSQL's text and jsonb
 * cannot hold them) removed, half of a surrogate pair replaced by U+FFFD. For text a person or a
 * service sent that is kept anyway (a chat message, an upstream's error), where refusing it would
 * lose it or have it sent again and again.
 */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '').toWellFormed();
}

/**
 * A finding of inspectJson in words: the field (its path, '' for the value itself) and what is
 * wrong with it, phrased to follow the field's name ("name must not contain a NUL character").
 * Every surface that refuses a value the database would not keep as sent says it with these.
 */
export function unstorableWords(found: StoredValueFinding): { field: string; message: string } {
  if ('nul' in found) return { field: found.nul, message: 'must not contain a NUL character' };
  if ('tooDeep' in found) return { field: found.tooDeep, message: `nests deeper than ${MAX_JSON_DEPTH} levels` };
  if ('notFinite' in found) return { field: found.notFinite, message: 'must be a finite number' };
  return { field: found.illFormed, message: 'must be Unicode text: it holds half of a surrogate pair (an escape such as "\\ud800" alone)' };
}

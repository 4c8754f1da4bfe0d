import { isMap, isScalar, LineCounter, parseDocument, stringify, visit, type Document } from 'yaml';
import { roleInput, type StoredRole } from '../templates/role-input.ts';

/**
 * The layout of the configuration repository (docs/import.md), shared by the import and by
 * `crewhouse export`: which file holds what, the file form of each definition, a YAML reader
 * that keeps line numbers, and a line diff. Nothing here touches the database.
 *
 *   agents/<name>.yaml            an agent: display_name, kind, description, version (the API's create body, name from the file),
 *                                 and `documents`: per context document, its description and media type where needed
 *   agents/<name>/<document>      the agent's context documents, one file each, named as in the sandbox
 *   templates/<name>.yaml         a team template: the API's create body, name from the file
 *   policies/<name>.yaml          a gateway policy (an egress destination): the API's create body, name from the file
 *   skills/<name>/SKILL.md        a platform skill; every other file under skills/<name>/ is one of its resources
 */

export type Kind = 'skill' | 'policy' | 'agent' | 'template';

/** A context document's media type from its file name's extension (an agent's `documents` map may name another). */
export const MEDIA_TYPE_OF_EXTENSION: Record<string, string> = { md: 'text/markdown', markdown: 'text/markdown', txt: 'text/plain', csv: 'text/csv', json: 'application/json', yaml: 'application/yaml', yml: 'application/yaml' };
export const mediaTypeOf = (file: string): string | null => MEDIA_TYPE_OF_EXTENSION[/\.([A-Za-z0-9]+)$/.exec(file)?.[1].toLowerCase() ?? ''] ?? null;

/** The `documents` entry of an agent's file for one document: its description and a media type its extension does not tell; null when neither is needed. */
export function documentEntry(d: { name: string; media_type: string; description: string }): Record<string, string> | null {
  const entry = compact({ description: d.description || null, media_type: mediaTypeOf(d.name) === d.media_type ? null : d.media_type }) as Record<string, string>;
  return Object.keys(entry).length ? entry : null;
}
/** Written in this order (what a later kind names exists first); pruned in the reverse. */
export const KINDS: Kind[] = ['skill', 'policy', 'agent', 'template'];
export const DIR_OF: Record<Kind, string> = { skill: 'skills', policy: 'policies', agent: 'agents', template: 'templates' };

/** A YAML file read with its positions: the value, and the line of a field path. */
export interface YamlFile {
  value: unknown;
  /** The 1-based line of `field` (`a.b.0.c`, or the keys as a list when one holds a dot), else of its nearest parent present, else null. */
  lineOf(field: string | Array<string | number> | null): number | null;
  /** Syntax errors, each with its line. */
  errors: Array<{ line: number | null; message: string }>;
}

/** The parser's messages that name its own functions or internals, in words for the person who wrote the file. */
const YAML_ERROR_WORDS: Record<string, string> = {
  MULTIPLE_DOCS: 'holds more than one YAML document (a --- line between them); a file holds one definition',
  RESOURCE_EXHAUSTION: 'nests too deep to be read; a definition nests a few levels',
};

export function readYaml(text: string): YamlFile {
  const lineCounter = new LineCounter();
  const doc: Document = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  const errors: YamlFile['errors'] = doc.errors.map((e) => ({ line: lineCounter.linePos(e.pos[0]).line, message: YAML_ERROR_WORDS[e.code] ?? e.message.split('\n')[0] }));
  // An alias naming no anchor above it is no syntax error to the parser, only when the value is read: said with its line here.
  if (!errors.length) {
    visit(doc, {
      Alias(_, node) {
        if (node.resolve(doc)) return;
        errors.push({ line: node.range ? lineCounter.linePos(node.range[0]).line : null, message: `*${node.source} names no anchor set above it: set &${node.source} on a value before it, or write the value out` });
      },
    });
  }
  const lineOf = (field: string | Array<string | number> | null): number | null => {
    if (!doc.contents) return null;
    const parts: Array<string | number> = Array.isArray(field) ? field : field ? field.split('.').map((p) => (/^\d+$/.test(p) ? Number(p) : p)) : [];
    for (let n = parts.length; n >= 0; n--) {
      const node = n === 0 ? doc.contents : doc.getIn(parts.slice(0, n), true);
      const range = (node as { range?: [number, number, number] } | undefined)?.range;
      if (range) {
        // A key's line rather than its value's: a block value starts on the line after its key.
        if (n > 0) {
          const parent = n === 1 ? doc.contents : doc.getIn(parts.slice(0, n - 1), true);
          if (isMap(parent)) {
            const pair = parent.items.find((p) => isScalar(p.key) && String(p.key.value) === String(parts[n - 1]));
            const keyRange = pair && isScalar(pair.key) ? pair.key.range : undefined;
            if (keyRange) return lineCounter.linePos(keyRange[0]).line;
          }
        }
        return lineCounter.linePos(range[0]).line;
      }
    }
    return null;
  };
  let value: unknown;
  if (!errors.length) {
    try {
      value = doc.toJS();
    } catch (e) {
      // The one failure of a document that parsed: aliases that expand past the library's guard
      // (a few lines that would become millions of values).
      errors.push({ line: null, message: `its aliases expand too far (${(e as Error).message.toLowerCase()}); write the values out instead` });
    }
  }
  return { value, lineOf, errors };
}

/** YAML text of a definition with keys in a stable order (sorted), as export writes and diffs show it. */
export function toYaml(value: unknown): string {
  return stringify(value, { sortMapEntries: true, lineWidth: 0 });
}

/** Drops null and undefined fields of an object (the file form leaves out what is unset). */
export function compact<T extends Record<string, unknown>>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== null && v !== undefined)) as Partial<T>;
}

interface AgentLike {
  display_name: string | null;
  kind: string | null;
  description: string;
  current: null | {
    system_prompt: string;
    tools: string[];
    confirmation_policy: string;
    produces_branch: boolean;
    works_on_branch: boolean | null;
    skills: string[];
    mcp_servers: string[];
    egress: unknown;
    context: unknown[];
    model: string | null;
    environment: string | null;
  };
}

/** The file form of an agent (GET /agents/{name}): the create body less its name. */
export function agentFile(a: AgentLike): Record<string, unknown> {
  const v = a.current;
  return compact({
    display_name: a.display_name,
    kind: a.kind,
    description: a.description,
    version: v
      ? {
          system_prompt: v.system_prompt,
          tools: v.tools,
          confirmation_policy: v.confirmation_policy,
          produces_branch: v.produces_branch,
          works_on_branch: v.works_on_branch,
          skills: v.skills,
          mcp_servers: v.mcp_servers,
          egress: v.egress,
          context: v.context,
          model: v.model,
          environment: v.environment,
        }
      : undefined,
  });
}

interface TemplateLike {
  description: string;
  current: null | {
    lead?: string | null;
    roles: Record<string, StoredRole>;
    idle_after_seconds: number;
    deep_sleep_after_seconds: number;
    budget_usd_per_day?: number | null;
    isolation: string;
    requires_repo: boolean;
    rework_rounds?: number | null;
    pipeline?: Record<string, string>;
  };
}

/** The file form of a team template (GET /team-templates/{name}): the create body less its name; a role's copied environment values are left out. */
export function templateFile(t: TemplateLike): Record<string, unknown> {
  const c = t.current;
  if (!c) return { description: t.description };
  const roles: Record<string, unknown> = {};
  for (const [name, r] of Object.entries(c.roles)) {
    roles[name] = compact({ ...roleInput(r), memory: Object.keys(r.memory).length ? r.memory : undefined, budget_duration: r.max_budget === null ? null : r.budget_duration });
  }
  return compact({
    description: t.description,
    lead: c.lead ?? undefined,
    roles,
    sleep: {},
    idle_after_seconds: c.idle_after_seconds,
    deep_sleep_after_seconds: c.deep_sleep_after_seconds,
    budget_usd_per_day: c.budget_usd_per_day,
    isolation: c.isolation,
    requires_repo: c.requires_repo,
    rework_rounds: c.rework_rounds,
    pipeline: c.pipeline,
  });
}

/** The file form of a stored destination (GET /destinations/{name}): every field but name, builtin and updated_at. */
export function policyFile(d: Record<string, unknown>): Record<string, unknown> {
  const { name: _n, builtin: _b, updated_at: _u, ...rest } = d;
  return rest;
}

/** A line diff in the unified style (`-` old, `+` new, two lines of context, `…` between hunks); empty when equal. */
export function lineDiff(before: string, after: string, label?: string): string {
  if (before === after) return '';
  const a = before === '' ? [] : before.replace(/\n$/, '').split('\n');
  const b = after === '' ? [] : after.replace(/\n$/, '').split('\n');
  // Common head and tail first; the longest common subsequence of what is left.
  let head = 0;
  while (head < a.length && head < b.length && a[head] === b[head]) head++;
  let tail = 0;
  while (tail < a.length - head && tail < b.length - head && a[a.length - 1 - tail] === b[b.length - 1 - tail]) tail++;
  const x = a.slice(head, a.length - tail);
  const y = b.slice(head, b.length - tail);
  const ops: Array<[' ' | '-' | '+', string]> = a.slice(0, head).map((l) => [' ', l] as [' ', string]);
  if (x.length * y.length > 4_000_000) {
    ops.push(...x.map((l) => ['-', l] as ['-', string]), ...y.map((l) => ['+', l] as ['+', string]));
  } else {
    const lcs: Uint32Array[] = Array.from({ length: x.length + 1 }, () => new Uint32Array(y.length + 1));
    for (let i = x.length - 1; i >= 0; i--) for (let j = y.length - 1; j >= 0; j--) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
    let i = 0;
    let j = 0;
    while (i < x.length || j < y.length) {
      if (i < x.length && j < y.length && x[i] === y[j]) {
        ops.push([' ', x[i++]]);
        j++;
      } else if (j < y.length && (i >= x.length || lcs[i][j + 1] >= lcs[i + 1][j])) ops.push(['+', y[j++]]);
      else ops.push(['-', x[i++]]);
    }
  }
  ops.push(...a.slice(a.length - tail).map((l) => [' ', l] as [' ', string]));
  const keep = ops.map((_, k) => ops.slice(Math.max(0, k - 2), k + 3).some(([op]) => op !== ' '));
  const out: string[] = label ? [`--- ${label}`] : [];
  let skipped = false;
  ops.forEach(([op, line], k) => {
    if (!keep[k]) {
      skipped = true;
      return;
    }
    if (skipped && out.length > (label ? 1 : 0)) out.push('…');
    skipped = false;
    out.push(`${op} ${line}`);
  });
  return out.join('\n');
}

/**
 * crewhouse/layers: the direction of imports between the top-level parts of src/. Each part (a
 * folder under src/, or a file directly in it) sits in one layer; a file may import its own part
 * and the parts of lower layers, never a part of its own layer or a higher one. So no two parts
 * import each other, and there is no cycle between them. docs/development.md explains the layers;
 * change both together.
 */
import fs from 'node:fs';
import path from 'node:path';
import { eachFile } from './own-tables-only.js';

/** Lowest first. */
export const LAYERS = [
  // Leaves: the program inside a sandbox, the errors every layer throws, the log and metrics, the short-lived cache.
  ['agent', 'errors', 'logger.ts', 'metrics.ts', 'ttl-cache.ts', 'bounded-memo.ts'],
  ['egress'],
  ['config.ts'],
  ['db', 'models'],
  // The kernel: who may do what, the job queue, the audit log, the hooks between modules.
  ['auth', 'queue'],
  ['audit'],
  ['hooks.ts'],
  ['references.ts', 'telemetry'],
  ['secrets'],
  ['http'],
  // The components' domains.
  ['modelproxy'],
  ['console', 'chat'],
  ['integrations'],
  ['runtime'],
  ['gateway'],
  ['cli'],
  // The composition root: what builds the services and starts the components.
  ['services.ts'],
  // Every kind of job, with the parts of the worker each is performed with.
  ['jobs.ts'],
  ['components.ts'],
  ['component'],
  ['supervisor.ts'],
  ['local-commands.ts'],
  ['main.ts'],
];

/**
 * Files that wire a component together (its entry, which the supervisor starts, and the console's
 * app builder) stand with the composition root: they are the part "component".
 */
const COMPONENT_FILE = /(^|\/)(component|[\w-]+\.component)\.ts$|^console\/app\.ts$/;

/**
 * The few imports allowed against the layers, each with why. `from` is a file or a folder (ending
 * in /) under src/, `to` the part it may import. A test checks each is still needed.
 */
export const EXCEPTIONS = [
  { from: 'db/schema.ts', to: '*', why: "the database's type gathers every module's *.tables.ts (types only)" },
  // Until the code host's client and events move into integrations/code-host behind the surface adapter interface.
  { from: 'console/integrations/integrations.service.ts', to: 'integrations', why: 'checks the code-host app and enqueues the chat_a job itself' },
  { from: 'console/import/repository.ts', to: 'integrations', why: "reads a repository through the code-host app's client" },
  { from: 'console/shapes.ts', to: 'integrations', why: "the OpenAPI document's shapes include the webhook deliveries" },
  { from: 'console/examples.ts', to: 'integrations', why: "the OpenAPI document's examples include a webhook delivery's" },
  // Until the worker's wiring moves into the composition root (src/services.ts).
  { from: 'gateway/sources.ts', to: 'services.ts', why: "the gateway's sources are read from the services the composition root built" },
];

/** The part a file belongs to: its top folder under src/, the file itself directly in src/, or "component"; null outside src/. */
export function partOf(src, file) {
  const rel = path.relative(src, file).split(path.sep).join('/');
  if (rel.startsWith('..') || path.isAbsolute(rel)) return null;
  if (COMPONENT_FILE.test(rel)) return 'component';
  return rel.split('/')[0];
}

const RANK = new Map(LAYERS.flatMap((parts, i) => parts.map((p) => [p, i])));

/** The exception that allows `file` (relative to src/, with /) to import `part`, if one does. */
export function exceptionFor(rel, part) {
  return EXCEPTIONS.find((e) => (e.to === '*' || e.to === part) && (e.from.endsWith('/') ? rel.startsWith(e.from) : rel === e.from)) ?? null;
}

/**
 * Why `file` may not import `target` (absolute paths), or null when it may: an unknown part, or
 * a part of the same or a higher layer without an exception.
 */
export function refusal(src, file, target) {
  const from = partOf(src, file);
  const to = partOf(src, target);
  if (from === null || to === null || from === to) return null;
  const rel = path.relative(src, file).split(path.sep).join('/');
  if (!RANK.has(from)) return { messageId: 'unknownPart', data: { part: from } };
  if (!RANK.has(to)) return { messageId: 'unknownPart', data: { part: to } };
  if (RANK.get(to) < RANK.get(from) || exceptionFor(rel, to)) return null;
  return { messageId: RANK.get(to) === RANK.get(from) ? 'sameLayer' : 'upward', data: { from, to } };
}

/** Whether a file is linted by the layers (tests and test kits may reach anywhere to set a scene). */
export const layered = (file) => /\.tsx?$/.test(file) && !/\.(test|testkit)\.tsx?$/.test(file);

const IMPORT = /(?:^|[\s;])(?:import|export)\s*(?:type\s+)?(?:[\w*{}\s,$]+\s+from\s+)?['"](\.[^'"]+)['"]|\bimport\(\s*['"](\.[^'"]+)['"]\s*\)/g;

/**
 * Every import between parts in the tree at `src` (relative imports of the files the layers
 * lint): `from part -> to part -> [file: target]`. For computing cycles without ESLint.
 */
export function partGraph(src) {
  const graph = new Map();
  eachFile(src, (p) => {
    if (!layered(p)) return;
    const text = fs.readFileSync(p, 'utf8');
    for (const m of text.matchAll(IMPORT)) {
      const target = path.resolve(path.dirname(p), m[1] ?? m[2]);
      const from = partOf(src, p);
      const to = partOf(src, target);
      if (to === null || from === to) continue;
      if (!graph.has(from)) graph.set(from, new Map());
      const edges = graph.get(from);
      if (!edges.has(to)) edges.set(to, []);
      edges.get(to).push(`${path.relative(src, p)}: ${path.relative(src, target)}`);
    }
  });
  return graph;
}

/** The cycles of a part graph (each once, as the list of parts around it), by depth-first search. */
export function cyclesOf(graph) {
  const cycles = [];
  const seen = new Set();
  const state = new Map();
  const stack = [];
  const visit = (n) => {
    state.set(n, 'open');
    stack.push(n);
    for (const m of graph.get(n)?.keys() ?? []) {
      if (state.get(m) === 'open') {
        const cycle = stack.slice(stack.indexOf(m));
        const key = [...cycle].sort().join(' ');
        if (!seen.has(key)) {
          seen.add(key);
          cycles.push(cycle);
        }
      } else if (!state.has(m)) visit(m);
    }
    stack.pop();
    state.set(n, 'done');
  };
  for (const n of [...graph.keys()].sort()) if (!state.has(n)) visit(n);
  return cycles;
}

/** The rule, for the source tree at `src`. */
export function layers(src) {
  return {
    meta: {
      type: 'problem',
      schema: [],
      messages: {
        upward: 'src/{{from}} may not import src/{{to}}: {{to}} is in a higher layer (docs/development.md, "Layers"). Move what both need down to the lower part, or pass it in from the composition root',
        sameLayer: 'src/{{from}} may not import src/{{to}}: they are in the same layer (docs/development.md, "Layers"). Move what both need into a lower part, or pass it in from the composition root',
        unknownPart: 'src/{{part}} is in no layer: add it to LAYERS in eslint-rules/layers.js and to the list in docs/development.md',
      },
    },
    create(context) {
      const file = context.filename;
      if (partOf(src, file) === null || !layered(file)) return {};
      const check = (node) => {
        const spec = node.source?.value;
        if (typeof spec !== 'string' || !spec.startsWith('.')) return;
        const why = refusal(src, file, path.resolve(path.dirname(file), spec));
        if (why) context.report({ node, ...why });
      };
      return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check, ImportExpression: check };
    },
  };
}

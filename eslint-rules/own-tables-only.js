/**
 * crewhouse/own-tables-only: a module's store and tables are its own; other modules go through
 * its service. It catches two ways in: importing another module's `*.store.ts`/`*.tables.ts`,
 * and naming another module's table in a query (a Kysely builder call such as
 * `selectFrom('teams as t')`, a `sql` template's `from teams`, or the `{ table: 'teams' }` of the
 * shared conditional writes). Which module owns a table is
 * read from the `*.tables.ts` files that declare it.
 */
import fs from 'node:fs';
import path from 'node:path';

/**
 * The module a file belongs to: a resource folder under src/console/ or src/runtime/, else the
 * top folder under src/ (src/chat is one module: its folders share src/chat/chat.tables.ts).
 */
export function moduleOf(src, file) {
  const parts = path.relative(src, file).split(path.sep);
  if (parts[0] === '..') return null;
  if (parts.length < 2) return '.';
  if ((parts[0] === 'console' || parts[0] === 'runtime') && parts.length > 2) return `${parts[0]}/${parts[1]}`;
  return parts[0];
}

/** The table names an `interface ...Tables { name: {...}; other: ... }` declares (its top-level members). */
export function tablesDeclaredIn(text) {
  const names = [];
  const open = /\binterface\s+\w*Tables\b[^{]*\{/g;
  while (open.exec(text) !== null) {
    let depth = 1;
    let i = open.lastIndex;
    let start = i;
    for (; i < text.length && depth > 0; i++) {
      const c = text[i];
      if (c === '{' || c === '(' || c === '[' || c === '<') {
        if (depth === 1 && c === '{') {
          const member = /^\s*(?:\/\*[\s\S]*?\*\/\s*|\/\/[^\n]*\n\s*)*(?:readonly\s+)?['"]?([A-Za-z_]\w*)['"]?\??\s*:\s*$/.exec(text.slice(start, i));
          if (member) names.push(member[1]);
        }
        depth++;
      } else if (c === '}' || c === ')' || c === ']' || (c === '>' && text[i - 1] !== '=')) {
        depth--;
        if (depth === 1) start = i + 1;
      } else if (c === ';' && depth === 1) {
        const member = /^\s*(?:\/\*[\s\S]*?\*\/\s*|\/\/[^\n]*\n\s*)*(?:readonly\s+)?['"]?([A-Za-z_]\w*)['"]?\??\s*:/.exec(text.slice(start, i));
        if (member) names.push(member[1]);
        start = i + 1;
      }
    }
    open.lastIndex = i;
  }
  return names;
}

/** Calls `visit` with the path of every file under `dir`, depth first. */
export function eachFile(dir, visit) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) eachFile(p, visit);
    else visit(p);
  }
}

/** table name -> owning module, from every `*.tables.ts` under src. */
export function tableOwners(src) {
  const owners = new Map();
  eachFile(src, (p) => {
    if (p.endsWith('.tables.ts')) for (const t of tablesDeclaredIn(fs.readFileSync(p, 'utf8'))) owners.set(t, moduleOf(src, p));
  });
  return owners;
}

/** Kysely builder methods whose first argument names a table (or, for `with`, a CTE: a CTE named like a table is confusing anyway). */
const TABLE_METHODS = new Set([
  'selectFrom', 'updateTable', 'insertInto', 'replaceInto', 'deleteFrom', 'mergeInto', 'using', 'with', 'withRecursive',
  'innerJoin', 'leftJoin', 'rightJoin', 'fullJoin', 'crossJoin', 'innerJoinLateral', 'leftJoinLateral', 'crossJoinLateral',
]);
/** SQL words a table name follows. */
const SQL_TABLE = /\b(?:from|join|into|update|table|references|using)\s+(?:only\s+)?(?:"?public"?\.)?"?([A-Za-z_]\w*)"?/gi;

const tableOfArg = (value) => /^\s*"?([A-Za-z_]\w*)"?(?:\.|\s|$)/.exec(value)?.[1].replace(/^public$/, '') || null;

const ownersBySrc = new Map();

/** The rule, for the source tree at `src`. */
export function ownTablesOnly(src) {
  const owners = () => {
    if (!ownersBySrc.has(src)) ownersBySrc.set(src, tableOwners(src));
    return ownersBySrc.get(src);
  };
  return {
    meta: {
      type: 'problem',
      schema: [],
      messages: {
        foreign: '{{target}} belongs to module "{{owner}}": call its service instead of reading its store or tables',
        foreignTable: 'table "{{table}}" belongs to module "{{owner}}": call its service instead of querying it here',
      },
    },
    create(context) {
      const file = context.filename;
      const mine = moduleOf(src, file);
      if (mine === null || path.relative(src, file).split(path.sep).slice(0, 2).join('/') === 'db/migrations') return {};
      const checkImport = (node) => {
        const spec = node.source?.value;
        if (typeof spec !== 'string' || !/\.(store|tables)\.ts$/.test(spec) || !spec.startsWith('.')) return;
        const target = path.resolve(path.dirname(file), spec);
        const owner = moduleOf(src, target);
        if (owner !== null && owner !== mine) context.report({ node, messageId: 'foreign', data: { target: path.relative(src, target), owner } });
      };
      const checkTable = (node, table) => {
        const owner = table ? owners().get(table) : undefined;
        if (owner !== undefined && owner !== mine) context.report({ node, messageId: 'foreignTable', data: { table, owner } });
      };
      const checkArg = (arg) => {
        if (!arg) return;
        if (arg.type === 'Literal' && typeof arg.value === 'string') checkTable(arg, tableOfArg(arg.value));
        else if (arg.type === 'TemplateLiteral' && arg.quasis.length === 1) checkTable(arg, tableOfArg(arg.quasis[0].value.cooked ?? ''));
        else if (arg.type === 'ArrayExpression') arg.elements.forEach(checkArg);
      };
      return {
        ImportDeclaration: checkImport,
        ExportNamedDeclaration: checkImport,
        ExportAllDeclaration: checkImport,
        ImportExpression: checkImport,
        CallExpression(node) {
          const callee = node.callee;
          if (callee.type === 'MemberExpression' && !callee.computed && callee.property.type === 'Identifier' && TABLE_METHODS.has(callee.property.name)) checkArg(node.arguments[0]);
        },
        // The shared conditional writes (src/db/conditional.ts) take the table as `{ table: 'teams', ... }`.
        Property(node) {
          if (!node.computed && ((node.key.type === 'Identifier' && node.key.name === 'table') || (node.key.type === 'Literal' && node.key.value === 'table'))) checkArg(node.value);
        },
        TaggedTemplateExpression(node) {
          const tag = node.tag;
          const isSql = (tag.type === 'Identifier' && tag.name === 'sql') || (tag.type === 'MemberExpression' && tag.object.type === 'Identifier' && tag.object.name === 'sql');
          if (!isSql) return;
          const text = node.quasi.quasis.map((q) => q.value.cooked ?? q.value.raw).join(' ${} ');
          for (const m of text.matchAll(SQL_TABLE)) checkTable(node, m[1]);
        },
      };
    },
  };
}

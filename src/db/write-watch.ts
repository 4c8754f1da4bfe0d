import type { KyselyPlugin, OperationNode, PluginTransformQueryArgs, PluginTransformResultArgs, QueryId, QueryResult, RootOperationNode, UnknownRow } from 'kysely';

type Watcher = { tables: Set<string>; onWrite: () => void };

/** The tables a statement names: table nodes anywhere in it, and every word of raw SQL text (over-inclusive on purpose). */
function namesIn(node: unknown, out: Set<string>): Set<string> {
  if (node === null || typeof node !== 'object') return out;
  if (Array.isArray(node)) {
    for (const n of node) namesIn(n, out);
    return out;
  }
  const kind = (node as OperationNode).kind;
  if (kind === 'TableNode') {
    const table = (node as { table: { identifier: { name: string } } }).table;
    out.add(table.identifier.name);
    return out;
  }
  if (kind === 'RawNode') {
    for (const fragment of (node as { sqlFragments: readonly string[] }).sqlFragments) for (const word of fragment.toLowerCase().match(/[a-z_][a-z0-9_]*/g) ?? []) out.add(word);
  }
  for (const value of Object.values(node)) if (value !== null && typeof value === 'object') namesIn(value, out);
  return out;
}

/**
 * Tells in-process caches that a statement wrote to the tables they hold rows of: a Kysely
 * plugin, installed on the embedded database only (its one process is the only writer; on
 * PostgreSQL other processes write and nothing here could see them). Every statement that is
 * not a plain SELECT and names a watched table (raw SQL that mentions it counts) calls the
 * watcher twice: before it runs and after it has run. A reader that remembers a generation
 * before reading and keeps what it read only if no write came since (see `generation`) can
 * therefore never keep a row older than a write that finished before it read: later reads on
 * the embedded database's one connection wait for an open transaction to end.
 */
export function createWriteWatch() {
  const watchers: Watcher[] = [];
  const pending = new WeakMap<QueryId, Watcher[]>();
  const plugin: KyselyPlugin = {
    transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
      if (watchers.length === 0 || args.node.kind === 'SelectQueryNode') return args.node;
      const names = namesIn(args.node, new Set());
      const hit = watchers.filter((w) => [...w.tables].some((t) => names.has(t)));
      if (hit.length > 0) {
        for (const w of hit) w.onWrite();
        pending.set(args.queryId, hit);
      }
      return args.node;
    },
    async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
      for (const w of pending.get(args.queryId) ?? []) w.onWrite();
      return args.result;
    },
  };
  return {
    plugin,
    /** Calls `onWrite` around every write to one of the tables. */
    watch(tables: string[], onWrite: () => void): void {
      watchers.push({ tables: new Set(tables), onWrite });
    },
  };
}

export type WriteWatch = ReturnType<typeof createWriteWatch>;

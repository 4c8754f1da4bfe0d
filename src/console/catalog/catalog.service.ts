import net from 'node:net';
import type { Static } from 'typebox';
import { decodeCursor, encodeCursor } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import type { ModelAlias, ModelCatalog } from '../../models/catalog.ts';
import { TOOL_CATALOG, type ToolDefinition } from '../../agent/tools/catalog.ts';
import type { ModelEntry, ToolEntry } from './catalog.schemas.ts';

/** A page of a fixed, ordered list; the cursor is the key of the last item given out. */
function pageOf<T, I>(all: readonly T[], keyOf: (item: T) => string, present: (item: T) => I, query: { limit: number; cursor?: string }) {
  const cursor = decodeCursor(query.cursor, 1);
  let start = 0;
  if (cursor) {
    const at = all.findIndex((item) => keyOf(item) === cursor[0]);
    if (at < 0) throw problems.badRequest('cursor is not a cursor this list gave out', [{ field: 'cursor', message: 'not a valid cursor' }]);
    start = at + 1;
  }
  const kept = all.slice(start, start + query.limit);
  const more = start + query.limit < all.length;
  return { items: kept.map(present), next_cursor: more ? encodeCursor([keyOf(kept[kept.length - 1])]) : null };
}

function isLocalHost(hostname: string): boolean {
  const h = hostname.replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h.endsWith('.localhost') || h.endsWith('.local') || h.endsWith('.internal')) return true;
  if (net.isIPv4(h)) return /^(127\.|10\.|192\.168\.|169\.254\.|0\.)/.test(h) || /^172\.(1[6-9]|2\d|3[01])\./.test(h);
  if (net.isIPv6(h)) return h === '::1' || /^f[cd]/i.test(h) || /^fe80:/i.test(h);
  return false;
}

/** What leaves the server about a model alias: never the key's secret name or credentials in base_url. */
export function presentModel(a: ModelAlias): Static<typeof ModelEntry> {
  let host = '';
  let local = false;
  try {
    const url = new URL(a.base_url);
    host = url.host;
    local = isLocalHost(url.hostname);
  } catch {
    host = '(not a URL)';
  }
  return {
    alias: a.alias,
    model: a.model,
    api: a.api,
    upstream_host: host,
    local,
    context_window: a.context_window,
    max_output_tokens: a.max_output_tokens,
    input_usd_per_mtok: a.input_usd_per_mtok,
    output_usd_per_mtok: a.output_usd_per_mtok,
    description: a.description,
  };
}

export function presentTool(t: ToolDefinition): Static<typeof ToolEntry> {
  return { name: t.name, description: t.description, risky: t.risky, parameters: t.parameters as Record<string, unknown> };
}

/** The two read-only catalogues: built-in tools and the deployment's model aliases. */
export function createCatalogService(deps: { models: ModelCatalog }) {
  return {
    tools: (query: { limit: number; cursor?: string }) => pageOf(TOOL_CATALOG, (t) => t.name, presentTool, query),
    models: (query: { limit: number; cursor?: string }) => pageOf(deps.models.aliases, (a) => a.alias, presentModel, query),
  };
}

export type CatalogService = ReturnType<typeof createCatalogService>;

import net from 'node:net';
import type { Static } from 'typebox';
import { pageOfList } from '../../db/pagination.ts';
import type { ModelAlias, ModelCatalog } from '../../models/catalog.ts';
import { TOOL_CATALOG, type ToolDefinition } from '../../agent/tools/catalog.ts';
import type { ModelEntry, ToolEntry } from './catalog.schemas.ts';

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
    tools: (query: { limit: number; cursor?: string }) => pageOfList(TOOL_CATALOG, (t) => [t.name], presentTool, query),
    models: (query: { limit: number; cursor?: string }) => pageOfList(deps.models.aliases, (a) => [a.alias], presentModel, query),
  };
}

export type CatalogService = ReturnType<typeof createCatalogService>;

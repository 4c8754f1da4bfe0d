import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { ModelEntry, ToolEntry } from './catalog.schemas.ts';
import type { CatalogService } from './catalog.service.ts';

export function catalogRoutes(app: App, deps: { catalog: CatalogService }) {
  const { catalog } = deps;

  app.get('/tools', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listTools',
      summary: 'List the built-in tools',
      tags: ['tools'],
      description: 'The built-in tool catalogue the agent runtime offers; agent versions name tools from it.',
      querystring: ListQuery,
      response: { 200: Page(ToolEntry) },
    },
    handler: (req) => catalog.tools({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.get('/models', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listModels',
      summary: 'List the model aliases',
      tags: ['tools'],
      description: 'The model aliases of this deployment (SERVICE_MODELS, or the default set) and the model each points at.',
      querystring: ListQuery,
      response: { 200: Page(ModelEntry) },
    },
    handler: (req) => catalog.models({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });
}

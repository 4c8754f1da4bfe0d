import { actorOf } from '../../http/auth.ts';
import { requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, NoContent } from '../../http/schemas.ts';
import { Destination, DestinationCreate, DestinationParams, DestinationPut } from './destinations.schemas.ts';
import { presentDestination, type DestinationsService } from './destinations.service.ts';

export function destinationsRoutes(app: App, deps: { destinations: DestinationsService }) {
  const { destinations } = deps;
  const tags = ['destinations'];

  app.get('/destinations', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listDestinations', summary: 'List egress destinations', tags, description: 'Every destination by name, the built-ins llm, mcp and otel included.', querystring: ListQuery, response: { 200: Page(Destination) } },
    handler: (req) => destinations.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/destinations', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createDestination',
      summary: 'Create an egress destination',
      etag: true,
      location: true,
      problems: { 409: 'a destination of that name exists, or the name is a built-in' },
      tags,
      description:
        'Creates a destination. A loopback or private host (any spelling: 127.1, 0x7f.0.0.1, [::ffff:127.0.0.1], localhost names, link-local, CGNAT, unique-local) needs dev_only (422). inject_secret must be a gateway key, mcp:<name> or secret:<name> of an existing reference (422). 409 for a taken or built-in name.',
      body: DestinationCreate,
      response: { 201: Destination },
    },
    handler: async (req, reply) => {
      const row = await destinations.create(actorOf(req), req.body);
      setEtag(reply, row.row_version);
      return reply.status(201).header('location', `/api/v1/destinations/${row.name}`).send(presentDestination(row));
    },
  });

  app.get('/destinations/:name', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getDestination', summary: 'Get an egress destination', etag: true, tags, params: DestinationParams, response: { 200: Destination } },
    handler: async (req, reply) => {
      const { destination, version } = await destinations.get(req.params.name);
      setEtag(reply, version);
      return destination;
    },
  });

  app.put('/destinations/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'replaceDestination',
      summary: 'Replace an egress destination',
      etag: true,
      problems: { 409: 'the destination is a built-in' },
      tags,
      description: 'Replaces every field of a destination (fields left out take their defaults); needs If-Match. Built-in destinations answer 409.',
      params: DestinationParams,
      headers: IfMatchHeader,
      body: DestinationPut,
      response: { 200: Destination },
    },
    handler: async (req, reply) => {
      const row = await destinations.replace(actorOf(req), req.params.name, await requireIfMatch(req, () => destinations.get(req.params.name)), req.body);
      setEtag(reply, row.row_version);
      return presentDestination(row);
    },
  });

  app.delete('/destinations/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'deleteDestination',
      summary: 'Delete an egress destination',
      problems: { 409: 'the destination is a built-in, or an agent version or a team role override names it' },
      tags,
      description: 'Deletes a destination; 409 while a current agent version or a team role override names it, and for the built-ins.',
      params: DestinationParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await destinations.remove(actorOf(req), req.params.name, await requireIfMatch(req, () => destinations.get(req.params.name)));
      return reply.status(204).send(null);
    },
  });
}

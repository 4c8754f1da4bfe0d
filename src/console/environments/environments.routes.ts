import { actorOf } from '../../http/auth.ts';
import { requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, NoContent } from '../../http/schemas.ts';
import type { CheckpointsService } from './checkpoints.service.ts';
import { Checkpoint, Environment, EnvironmentCreate, EnvironmentParams, EnvironmentPut, Image } from './environments.schemas.ts';
import type { EnvironmentsService } from './environments.service.ts';
import type { ImagesService } from './images.service.ts';

export function environmentsRoutes(app: App, deps: { environments: EnvironmentsService; images: ImagesService; checkpoints: CheckpointsService }) {
  const { environments } = deps;
  const tags = ['environments'];

  app.get('/environments', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listEnvironments', summary: 'List environments', tags, querystring: ListQuery, response: { 200: Page(Environment) } },
    handler: (req) => environments.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/environments', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createEnvironment',
      summary: 'Create an environment',
      etag: true,
      location: true,
      problems: { 409: 'an environment of that name exists' },
      tags,
      description: 'Creates a sandbox profile. checkpoint_id is required for hosted and refused for microvm (422); deep_sleep_after_seconds must be at least idle_after_seconds (422). image is read-only.',
      body: EnvironmentCreate,
      response: { 201: Environment },
    },
    handler: async (req, reply) => {
      const { environment, version } = await environments.create(actorOf(req), req.body);
      setEtag(reply, version, environment);
      return reply.status(201).header('location', `/api/v1/environments/${environment.name}`).send(environment);
    },
  });

  app.get('/environments/:name', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getEnvironment', summary: 'Get an environment', etag: true, tags, params: EnvironmentParams, response: { 200: Environment } },
    handler: async (req, reply) => {
      const { environment, version } = await environments.get(req.params.name);
      setEtag(reply, version, environment);
      return environment;
    },
  });

  app.put('/environments/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'replaceEnvironment',
      summary: 'Replace an environment',
      etag: true,
      tags,
      description: 'Replaces an environment (fields left out take their defaults); needs If-Match.',
      params: EnvironmentParams,
      headers: IfMatchHeader,
      body: EnvironmentPut,
      response: { 200: Environment },
    },
    handler: async (req, reply) => {
      const { environment, version } = await environments.replace(actorOf(req), req.params.name, await requireIfMatch(req, () => environments.get(req.params.name)), req.body);
      setEtag(reply, version, environment);
      return environment;
    },
  });

  app.delete('/environments/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'deleteEnvironment',
      summary: 'Delete an environment',
      problems: { 409: 'an agent or template version names the environment' },
      tags,
      description: 'Deletes an environment; 409 while a current agent version or template version names it.',
      params: EnvironmentParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await environments.remove(actorOf(req), req.params.name, await requireIfMatch(req, () => environments.get(req.params.name)));
      return reply.status(204).send(null);
    },
  });

  app.get('/images', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listImages',
      summary: 'List agent image builds',
      tags,
      description: 'Agent image builds from the manifests in SERVICE_IMAGES_DIR, newest first; the newest is current (what a microVM boots).',
      querystring: ListQuery,
      response: { 200: Page(Image) },
    },
    handler: (req) => deps.images.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.get('/checkpoints', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listCheckpoints', summary: 'List the checkpoints in use', tags, description: 'The checkpoint ids in use, by id, with what uses each.', querystring: ListQuery, response: { 200: Page(Checkpoint) } },
    handler: (req) => deps.checkpoints.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });
}

import { actorOf } from '../../http/auth.ts';
import { optionalIfMatch, requireIfMatch, setEtag, etagOf } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, IfMatchToReplace, NoContent } from '../../http/schemas.ts';
import { documentRoutes } from '../documents/documents.routes.ts';
import type { DocumentsService } from '../documents/documents.service.ts';
import { Agent, AgentCreate, AgentParams, AgentPatch, AgentSummary, AgentVersion, AgentVersionInput, AgentVersionParams, AVATAR_MAX_BYTES, VersionMeta } from './agents.schemas.ts';
import type { AgentsService } from './agents.service.ts';
import { Type } from 'typebox';

const AvatarBytes = { type: 'string', format: 'binary' };

export function agentsRoutes(app: App, deps: { agents: AgentsService; documents: DocumentsService }) {
  const { agents } = deps;
  const tags = ['agents'];

  app.get('/agents', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listAgents', summary: 'List agents', tags, querystring: ListQuery, response: { 200: Page(AgentSummary) } },
    handler: (req) => agents.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/agents', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createAgent',
      summary: 'Create an agent',
      etag: true,
      location: true,
      problems: { 409: 'an agent of that name exists' },
      tags,
      description: 'Creates an agent with its first version (version 1, current). Names the version refers to must exist (422 naming the field).',
      body: AgentCreate,
      response: { 201: Agent },
    },
    handler: async (req, reply) => {
      const row = await agents.create(actorOf(req), req.body);
      const body = await agents.present(row);
      setEtag(reply, row.row_version, body);
      return reply.status(201).header('location', `/api/v1/agents/${encodeURIComponent(row.name)}`).send(body);
    },
  });

  app.get('/agents/:name', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getAgent', summary: 'Get an agent', etag: true, tags, params: AgentParams, response: { 200: Agent } },
    handler: async (req, reply) => {
      const row = await agents.get(req.params.name);
      const body = await agents.present(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.patch('/agents/:name', {
    config: { auth: { role: 'admin' } },
    schema: { operationId: 'updateAgent', summary: 'Update an agent\'s name, kind or description', etag: true, problems: { 422: false }, tags, params: AgentParams, headers: IfMatchHeader, body: AgentPatch, response: { 200: Agent } },
    handler: async (req, reply) => {
      const row = await agents.patch(actorOf(req), req.params.name, await requireIfMatch(req, () => agents.get(req.params.name)), req.body);
      const body = await agents.present(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.delete('/agents/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'deleteAgent',
      summary: 'Delete an agent',
      problems: { 409: 'a template or team uses the agent' },
      tags,
      description: 'Deletes the agent with its versions, avatar and context documents; 409 while a template or team uses it.',
      params: AgentParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await agents.remove(actorOf(req), req.params.name, await requireIfMatch(req, () => agents.get(req.params.name)));
      return reply.status(204).send(null);
    },
  });

  app.get('/agents/:name/versions', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listAgentVersions', summary: 'List an agent\'s versions', tags, description: 'Newest first.', params: AgentParams, querystring: ListQuery, response: { 200: Page(VersionMeta) } },
    handler: (req) => agents.listVersions(req.params.name, { limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/agents/:name/versions', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createAgentVersion',
      summary: 'Add an agent version',
      etag: true,
      location: true,
      tags,
      description: "Adds a version and makes it current (If-Match: the agent's ETag). from_version naming an older version makes that content current again; an unknown one is 422. Runs already going keep their version.",
      params: AgentParams,
      headers: IfMatchHeader,
      body: AgentVersionInput,
      response: { 201: AgentVersion },
    },
    handler: async (req, reply) => {
      const { agent, version } = await agents.addVersion(actorOf(req), req.params.name, await requireIfMatch(req, () => agents.get(req.params.name)), req.body);
      // The agent's ETag, as GET /agents/{name} gives it (its body shows derived values: used_by).
      setEtag(reply, agent.row_version, await agents.present(agent));
      return reply.status(201).header('location', `/api/v1/agents/${encodeURIComponent(agent.name)}/versions/${version.version}`).send(version);
    },
  });

  app.get('/agents/:name/versions/:version', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getAgentVersion', summary: 'Get an agent version', tags, params: AgentVersionParams, response: { 200: AgentVersion } },
    handler: (req) => agents.getVersion(req.params.name, req.params.version),
  });

  app.get('/agents/:name/avatar', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getAgentAvatar',
      summary: 'Get an agent\'s avatar',
      etag: true,
      tags,
      description: 'The avatar image bytes with their content type and ETag (If-None-Match answers 304).',
      params: AgentParams,
      querystring: Type.Object({ v: Type.Optional(Type.Integer({ minimum: 0, description: 'cache-buster from avatar_url; ignored' })) }, { additionalProperties: false }),
      response: {
        200: { description: 'the image', content: { 'image/png': { schema: AvatarBytes }, 'image/jpeg': { schema: AvatarBytes }, 'image/gif': { schema: AvatarBytes }, 'image/webp': { schema: AvatarBytes } } },
        304: { description: 'not modified', type: 'null' },
      },
    },
    handler: async (req, reply) => {
      const avatar = await agents.getAvatar(req.params.name);
      setEtag(reply, avatar.row_version);
      reply.header('cache-control', 'private, no-cache').header('x-content-type-options', 'nosniff');
      if (req.headers['if-none-match'] === etagOf(avatar.row_version)) return reply.status(304).send(null);
      return reply.type(avatar.media_type).send(avatar.bytes);
    },
  });

  // The only route that takes a body other than JSON: an image parser and a 512 KiB limit
  // that exist in this scope alone.
  app.register(async (scope: App) => {
    scope.addContentTypeParser(/^image\/[A-Za-z0-9.+-]+$/, { parseAs: 'buffer', bodyLimit: AVATAR_MAX_BYTES }, (_req, body, done) => done(null, body));
    scope.put('/agents/:name/avatar', {
      config: { auth: { role: 'admin' }, accepts: 'an image/* body (PNG, JPEG, GIF or WebP)' },
      bodyLimit: AVATAR_MAX_BYTES,
      schema: {
        operationId: 'putAgentAvatar',
        summary: 'Set an agent\'s avatar',
        etag: true,
        tags,
        description:
          "Sets the avatar: an image/* body of at most 512 KiB (413 beyond). The type is read from the bytes: PNG, JPEG, GIF or WebP, 415 for anything else. " +
          "Replacing an avatar needs If-Match with the avatar's ETag (from GET .../avatar); setting the first one needs none, and takes the agent's ETag (from GET /agents/{name}) when one is sent. Changes the agent's ETag.",
        params: AgentParams,
        headers: IfMatchToReplace,
        // Documents the body only: no content type is literally "image/*", so nothing is validated against it.
        body: { content: { 'image/*': { schema: { ...AvatarBytes, description: 'PNG, JPEG, GIF or WebP bytes, at most 512 KiB' } } } },
        response: { 204: NoContent },
      },
      handler: async (req, reply) => {
        const { row_version } = await agents.putAvatar(actorOf(req), req.params.name, optionalIfMatch(req), req.body);
        setEtag(reply, row_version);
        return reply.status(204).send(null);
      },
    });
  });

  documentRoutes(app, { documents: deps.documents, scope: 'agent', base: '/agents', label: 'Agent', writeRole: 'admin', tags });
}

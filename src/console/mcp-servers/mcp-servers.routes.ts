import { actorOf } from '../../http/auth.ts';
import { optionalIfMatch, requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { problems } from '../../errors/problems.ts';
import { IfMatchHeader, IfMatchToReplace, NoContent } from '../../http/schemas.ts';
import { McpServer, McpServerCreate, McpServerIdParams, McpServerParams, McpServerPut } from './mcp-servers.schemas.ts';
import { addressOf, parseMcpId, type McpServersService } from './mcp-servers.service.ts';

const ADDRESSING =
  'A server is addressed as `/mcp-servers/{team}/{name}`; `{team}` = `platform` addresses a platform server (admins only: operators get 403), so no team can be named `platform`.';

/** Platform and team MCP servers. */
export function mcpServersRoutes(app: App, deps: { mcpServers: McpServersService }) {
  const { mcpServers } = deps;
  const tags = ['mcp-servers'];
  const location = (id: string) => `/api/v1/mcp-servers/${id.replace(/^platform:/, 'platform/')}`;

  app.get('/mcp-servers', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listMcpServers',
      summary: 'List MCP servers',
      tags,
      description:
        'Platform servers first (scope platform, team null) by name, then each team\'s servers by team and name; keyset pagination over (team, name). Proposed servers are listed with status proposed.',
      querystring: ListQuery,
      response: { 200: Page(McpServer) },
    },
    handler: (req) => mcpServers.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/mcp-servers', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'createMcpServer',
      summary: 'Create an MCP server',
      etag: true,
      location: true,
      problems: { 409: 'a server of that name exists (platform, or in the team)' },
      tags,
      description:
        '`team` null or absent creates a platform server (admin; an operator gets 403), a live team\'s name a team server (operator). The server is curated. 422 for: an unknown or archived team, an unknown destination, a url that does not parse or carries credentials, bearer or header auth without an existing `secret:<name>` (or a secret with auth none), header auth without `header`, roles the team does not have, or roles on a platform server. 409 when the team (or the platform) already has a server of the name. The answer\'s `warnings` lists the roles whose egress lacks the destination.',
      body: McpServerCreate,
      response: { 201: McpServer },
    },
    handler: async (req, reply) => {
      const row = await mcpServers.create(actorOf(req), req.body);
      const server = await mcpServers.present(row);
      setEtag(reply, row.row_version, server);
      return reply.status(201).header('location', location(server.id)).send(server);
    },
  });

  app.get('/mcp-servers/:id', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getMcpServer',
      summary: 'Get an MCP server by id',
      etag: true,
      tags,
      description: '`{id}` is `platform:<name>`, or `<team>/<name>` (sent as two segments, or with the slash as %2F). 404 for an unknown server, team or id form.',
      params: McpServerIdParams,
      response: { 200: McpServer },
    },
    handler: async (req, reply) => {
      const address = parseMcpId(req.params.id);
      if (!address) throw problems.notFound('MCP server', req.params.id);
      const row = await mcpServers.get(address);
      const server = await mcpServers.present(row);
      setEtag(reply, row.row_version, server);
      return server;
    },
  });

  app.get('/mcp-servers/:team/:name', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'getTeamMcpServer',
      summary: 'Get a team\'s MCP server',
      etag: true,
      tags,
      description: `The server with id \`<team>/<name>\` (the two-segment form of GET /mcp-servers/{id}). ${ADDRESSING}`,
      params: McpServerParams,
      response: { 200: McpServer },
    },
    handler: async (req, reply) => {
      const row = await mcpServers.get(addressOf(req.params.team, req.params.name));
      const server = await mcpServers.present(row);
      setEtag(reply, row.row_version, server);
      return server;
    },
  });

  app.put('/mcp-servers/:team/:name', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'replaceMcpServer',
      summary: 'Create or replace a team\'s MCP server',
      etag: true,
      location: true,
      problems: { 409: 'the team has a curated server of that name, which a person changes' },
      tags,
      description: `Replaces every field of a server (If-Match; 428 without it, 412 when stale); a proposed server becomes curated. Without If-Match it creates the server (201). \`team\` and \`name\` in the body, when sent, must match the path (servers are not moved or renamed). The 422 rules of POST apply. ${ADDRESSING}`,
      params: McpServerParams,
      headers: IfMatchToReplace,
      body: McpServerPut,
      response: { 200: McpServer, 201: McpServer },
    },
    handler: async (req, reply) => {
      const { row, created } = await mcpServers.replace(actorOf(req), addressOf(req.params.team, req.params.name), optionalIfMatch(req), req.body);
      const server = await mcpServers.present(row);
      setEtag(reply, row.row_version, server);
      if (created) reply.header('location', location(server.id));
      return reply.status(created ? 201 : 200).send(server);
    },
  });

  app.delete('/mcp-servers/:team/:name', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'deleteMcpServer',
      summary: 'Delete an MCP server',
      problems: { 409: 'an agent or template version names the platform server' },
      tags,
      description: `Removes a team server (If-Match). A platform server can be removed too (admin), except while a current agent or template version names it (409). ${ADDRESSING}`,
      params: McpServerParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await mcpServers.remove(actorOf(req), addressOf(req.params.team, req.params.name), await requireIfMatch(req, () => mcpServers.get(addressOf(req.params.team, req.params.name))));
      return reply.status(204).send(null);
    },
  });

  app.post('/mcp-servers/:team/:name/accept', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'acceptMcpServer',
      summary: 'Accept a proposed MCP server',
      etag: true,
      tags,
      description: `Promotes a proposed server to curated, as it was when read: needs If-Match (428, 412 when the proposal changed since). Idempotent: a server that is already curated is answered unchanged (200). ${ADDRESSING}`,
      params: McpServerParams,
      headers: IfMatchHeader,
      response: { 200: McpServer },
    },
    handler: async (req, reply) => {
      const row = await mcpServers.accept(actorOf(req), addressOf(req.params.team, req.params.name), await requireIfMatch(req, () => mcpServers.get(addressOf(req.params.team, req.params.name))));
      const server = await mcpServers.present(row);
      setEtag(reply, row.row_version, server);
      return server;
    },
  });
}

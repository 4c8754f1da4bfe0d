import { Type } from 'typebox';
import { Egress, EgressInput } from '../../egress/setting.ts';
import { actorOf } from '../../http/auth.ts';
import { requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, NoContent } from '../../http/schemas.ts';
import { documentRoutes } from '../documents/documents.routes.ts';
import type { DocumentsService } from '../documents/documents.service.ts';
import type { EgressOverridesService } from './egress-overrides.service.ts';
import { LINK_SURFACES, type LinksService } from './links.service.ts';
import { Link, RoleParams, Team, TeamCreate, TeamListQuery, TeamParams, TeamPatch, TeamSummary, TeamUpgrade } from './teams.schemas.ts';
import type { TeamsService } from './teams.service.ts';

const EgressOverride = Type.Object({
  team: Type.String(),
  role: Type.String(),
  override: Type.Union([Egress, Type.Null()], { description: 'null when the agent definition\'s egress applies' }),
});
const LinkPut = Type.Object(
  {
    surface: Type.Union(LINK_SURFACES.map((s) => Type.Literal(s))),
    external_id: Type.String({ minLength: 1, maxLength: 300, description: 'a room or channel id, `<owner>/<repo>` for code_host, a tracker team or project id' }),
    label: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);
const TeamSkill = Type.Object({ name: Type.String(), version: Type.Integer(), status: Type.Union([Type.Literal('curated'), Type.Literal('proposed')]), source: Type.String(), updated_at: Type.String() });

export function teamsRoutes(app: App, deps: { teams: TeamsService; links: LinksService; egress: EgressOverridesService; documents: DocumentsService }) {
  const { teams, links, egress } = deps;
  const tags = ['teams'];

  app.get('/teams', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listTeams',
      summary: 'List teams',
      tags,
      description: 'Teams by name. `state` filters by the derived state; archived teams are listed only with state=archived. `q` is a substring of the name.',
      querystring: TeamListQuery,
      response: { 200: Page(TeamSummary) },
    },
    handler: (req) => teams.list({ limit: limitOf(req.query), cursor: req.query.cursor, state: req.query.state, q: req.query.q }),
  });

  app.post('/teams', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'createTeam',
      summary: 'Create a team',
      etag: true,
      location: true,
      problems: {
        409: 'a live team of that name exists',
        502: 'the model proxy failed while minting keys or setting the budget, or the code host or the chat server failed or could not be reached while repo_url or the home room was checked',
        503: "the model proxy is not configured or not answering, or the home room's chat surface is not enabled or configured, or the code host or the chat server refused the integration's credentials while repo_url or the home room was checked (an admin mends the integration)",
      },
      tags,
      description:
        'Creates a team from a template version and answers when it is ready (status active): one model-proxy key per role, the team budget, the creator as first member. 409 when the name is taken; 422 when the template needs a repository and repo_url is absent, or when repo_url is a repository on the enabled code host that the code-host app is not installed on (it counts as a code_host link); 502/503 when the model proxy fails or is missing (nothing is left behind); 502 also when the code host or the chat server cannot be asked about repo_url or the home room, and 503 when either refuses the integration\'s credentials; nothing is created either way.',
      body: TeamCreate,
      response: { 201: Team },
    },
    handler: async (req, reply) => {
      const row = await teams.create(actorOf(req), req.body);
      const body = await teams.detail(row);
      setEtag(reply, row.row_version, body);
      return reply.status(201).header('location', `/api/v1/teams/${row.name}`).send(body);
    },
  });

  app.get('/teams/:name', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getTeam', summary: 'Get a team', etag: true, tags, description: 'The live team of the name, else the last archived one. Its ETag covers the whole body, derived values included (state, active_runs, spend today): it changes whenever the body would, so a cache revalidating with If-None-Match never keeps a stale one. If-Match on the team\'s writes compares only the team\'s own version within it: a write is refused as stale (412) when the team was changed, not because a run started or money was spent since the read.', params: TeamParams, response: { 200: Team } },
    handler: async (req, reply) => {
      const row = await teams.get(req.params.name);
      const body = await teams.detail(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.patch('/teams/:name', {
    config: { auth: { role: 'operator' } },
    schema: { operationId: 'updateTeam', summary: 'Update a team', etag: true, description: 'Changes the fields given. If-Match is an ETag of the team from a fresh GET: only the team\'s own version within it is compared (412 when the team changed since), not its derived values (state, active runs, spend).', problems: { 409: 'the team is being archived', 502: 'the model proxy failed to take the new budget or model', 503: 'the model proxy is not configured or not answering' }, tags, params: TeamParams, headers: IfMatchHeader, body: TeamPatch, response: { 200: Team } },
    handler: async (req, reply) => {
      const row = await teams.patch(actorOf(req), req.params.name, await requireIfMatch(req, () => teams.get(req.params.name)), req.body);
      const body = await teams.detail(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.delete('/teams/:name', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'archiveTeam',
      summary: 'Archive a team',
      problems: { 409: 'the team is still being provisioned', 502: 'the model proxy failed to revoke the keys', 503: 'the model proxy is not configured or not answering' },
      tags,
      description:
        'Archives the team and answers when done: cancels open runs, destroys its sandboxes, revokes its model-proxy keys, removes roles, links, members and documents, frees the name. Runs, spend history and team memory stay.',
      params: TeamParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await teams.archive(actorOf(req), req.params.name, await requireIfMatch(req, () => teams.get(req.params.name)));
      return reply.status(204).send(null);
    },
  });

  app.post('/teams/:name/upgrade', {
    // No body at all means "the current version".
    config: { auth: { role: 'operator' }, optionalBody: true },
    schema: {
      operationId: 'upgradeTeam',
      summary: 'Move a team to another template version',
      etag: true,
      problems: { 409: 'the team is being archived', 502: 'the model proxy failed while minting keys', 503: 'the model proxy is not configured or not answering' },
      tags,
      description: 'Moves the team to another version of its template (default: the current one). Fields set by hand (PATCH) are kept; new roles get keys, removed roles lose theirs. If-Match is the team\'s ETag.',
      params: TeamParams,
      headers: IfMatchHeader,
      body: TeamUpgrade,
      response: { 200: Team },
    },
    handler: async (req, reply) => {
      const row = await teams.upgrade(actorOf(req), req.params.name, await requireIfMatch(req, () => teams.get(req.params.name)), req.body?.version);
      const body = await teams.detail(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.get('/teams/:name/links', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listTeamLinks', summary: 'List a team\'s links', tags, params: TeamParams, querystring: ListQuery, response: { 200: Page(Link) } },
    handler: async (req) => links.page(req.params.name, req.query),
  });

  app.put('/teams/:name/links', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'putTeamLink',
      summary: 'Link a surface to a team',
      problems: {
        409: 'the surface is linked to another team, or it is a room of the other chat surface than the team\'s home',
        502: 'the code host, the issue tracker or the chat server failed, rate-limited or could not be reached while the link was checked: nothing was linked; send it again once it answers',
        503: "the room's chat surface is not enabled or configured, or the code host, the issue tracker or the chat server refused the integration's credentials while the link was checked: nothing was linked; an admin mends the integration (its connection test says what fails), then send it again",
      },
      tags,
      description:
        'Links a surface to the team; idempotent (201 when new, 200 when it was there). A repository or tracker id is compared without case, as work arriving on it is matched: the same id in other case is the link already there (200), and held by another live team is 409. A code_host link is <owner>/<repo> and is 422 while the code-host app is not installed on it. A chat room (chat_a, chat_b) is 422 unless the surface\'s bot can read and post in it. A code host, tracker or chat server that fails, rate-limits or cannot be reached while the link is checked is 502; one that refuses the integration\'s credentials is 503 (not the link\'s fault: an admin mends the integration); nothing is linked either way. ' +
        'A team homed in a chat room takes work from its home room, from other rooms of the same chat surface linked to it, and from its linked tracker and repository (their runs also get a thread in the home room). A room of the other chat surface is 409: a run has one chat thread, and a chat-homed team\'s runs are told in its home room; give that room a team of its own (homed there). A team without a chat home may link rooms of both chat surfaces.',
      params: TeamParams,
      body: LinkPut,
      response: { 200: Link, 201: Link },
    },
    handler: async (req, reply) => {
      const { link, created } = await links.put(actorOf(req), req.params.name, req.body);
      // The link is made below the team's links, not at this path: its own path is where it is removed.
      if (created) reply.header('location', `/api/v1/teams/${req.params.name}/links/${link.surface}/${link.external_id.split('/').map(encodeURIComponent).join('/')}`);
      return reply.status(created ? 201 : 200).send(link);
    },
  });

  app.delete('/teams/:name/links/:surface/*', {
    config: { auth: { role: 'operator' }, openapiWildcard: 'external_id' },
    schema: {
      operationId: 'deleteTeamLink',
      summary: 'Unlink a surface from a team',
      tags,
      description: 'The external id may contain slashes.',
      params: Type.Object({ name: Type.String({ maxLength: 63 }), surface: Type.String({ maxLength: 32 }), '*': Type.String({ minLength: 1, maxLength: 300 }) }),
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await links.remove(actorOf(req), req.params.name, req.params.surface, req.params['*']);
      return reply.status(204).send(null);
    },
  });

  app.get('/teams/:name/roles/:role/egress', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getTeamRoleEgress', summary: 'Get a team role\'s egress', etag: true, tags, params: RoleParams, response: { 200: EgressOverride } },
    handler: async (req, reply) => {
      const r = await egress.get(req.params.name, req.params.role);
      setEtag(reply, r.row_version);
      return { team: req.params.name, role: req.params.role, override: r.override };
    },
  });

  app.put('/teams/:name/roles/:role/egress', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'putTeamRoleEgress',
      summary: 'Override a team role\'s egress',
      etag: true,
      tags,
      description: 'Replaces the agent definition\'s egress for this role. If-Match is the ETag of GET …/egress.',
      params: RoleParams,
      headers: IfMatchHeader,
      body: EgressInput,
      response: { 200: EgressOverride },
    },
    handler: async (req, reply) => {
      const r = await egress.put(actorOf(req), req.params.name, req.params.role, await requireIfMatch(req, () => egress.get(req.params.name, req.params.role)), req.body);
      setEtag(reply, r.row_version);
      return { team: req.params.name, role: req.params.role, override: r.override };
    },
  });

  app.delete('/teams/:name/roles/:role/egress', {
    config: { auth: { role: 'admin' } },
    schema: { operationId: 'deleteTeamRoleEgress', summary: 'Remove a team role\'s egress override', tags, description: 'Removes the override; the agent definition\'s egress applies. If-Match is the ETag of GET …/egress.', params: RoleParams, headers: IfMatchHeader, response: { 204: NoContent } },
    handler: async (req, reply) => {
      await egress.remove(actorOf(req), req.params.name, req.params.role, await requireIfMatch(req, () => egress.get(req.params.name, req.params.role)));
      return reply.status(204).send(null);
    },
  });

  app.get('/teams/:name/skills', {
    config: { auth: { role: 'viewer' } },
    schema: {
      operationId: 'listTeamSkills',
      summary: 'List a team\'s own skills',
      tags,
      description: 'The team\'s own stored skills, read-only (managed by chat commands and agent proposals); no bodies.',
      params: TeamParams,
      querystring: ListQuery,
      response: { 200: Page(TeamSkill) },
    },
    handler: (req) => teams.listSkills(req.params.name, { limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  documentRoutes(app, { documents: deps.documents, scope: 'team', base: '/teams', label: 'Team', writeRole: 'operator', tags });
}

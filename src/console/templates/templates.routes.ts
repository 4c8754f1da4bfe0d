import { Type } from 'typebox';
import { actorOf } from '../../http/auth.ts';
import { requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, matching, NoContent } from '../../http/schemas.ts';
import { DASH_NAME_WORDS, TEMPLATE_NAME, TeamTemplate, TeamTemplateSummary, TeamTemplateVersion, TemplateCreate, TemplateNewVersion, TemplatePatch, VersionMeta } from './templates.schemas.ts';
import { presentVersion, type TemplatesService } from './templates.service.ts';

const NameParams = Type.Object({ name: Type.String({ ...matching(TEMPLATE_NAME, DASH_NAME_WORDS), maxLength: 63 }) });
const VersionParams = Type.Object({ name: Type.String({ ...matching(TEMPLATE_NAME, DASH_NAME_WORDS), maxLength: 63 }), version: Type.Integer({ minimum: 1, maximum: 2147483647 }) });

export function templatesRoutes(app: App, deps: { templates: TemplatesService }) {
  const { templates } = deps;
  const tags = ['team-templates'];

  app.get('/team-templates', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listTeamTemplates', summary: 'List team templates', tags, querystring: ListQuery, response: { 200: Page(TeamTemplateSummary) } },
    handler: (req) => templates.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/team-templates', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createTeamTemplate',
      summary: 'Create a team template',
      etag: true,
      location: true,
      problems: { 409: 'a team template of that name exists' },
      tags,
      description:
        'Creates a template and its version 1. Each role names an agent, a model alias and an environment (`vm`), whose provider, profile, size and checkpoint are copied into the version.',
      body: TemplateCreate,
      response: { 201: TeamTemplate },
    },
    handler: async (req, reply) => {
      const row = await templates.create(actorOf(req), req.body);
      const body = await templates.detail(row);
      setEtag(reply, row.row_version, body);
      return reply.status(201).header('location', `/api/v1/team-templates/${row.name}`).send(body);
    },
  });

  app.get('/team-templates/:name', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getTeamTemplate', summary: 'Get a team template', etag: true, tags, params: NameParams, response: { 200: TeamTemplate } },
    handler: async (req, reply) => {
      const row = await templates.get(req.params.name);
      const body = await templates.detail(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.patch('/team-templates/:name', {
    config: { auth: { role: 'admin' } },
    schema: { operationId: 'updateTeamTemplate', summary: 'Update a team template\'s description', etag: true, problems: { 422: false }, tags, params: NameParams, headers: IfMatchHeader, body: TemplatePatch, response: { 200: TeamTemplate } },
    handler: async (req, reply) => {
      const row = await templates.patch(actorOf(req), req.params.name, await requireIfMatch(req, () => templates.get(req.params.name)), req.body.description);
      const body = await templates.detail(row);
      setEtag(reply, row.row_version, body);
      return body;
    },
  });

  app.delete('/team-templates/:name', {
    config: { auth: { role: 'admin' } },
    schema: { operationId: 'deleteTeamTemplate', summary: 'Delete a team template', problems: { 409: 'an active team uses the template' }, tags, description: '409 while an active team uses it.', params: NameParams, headers: IfMatchHeader, response: { 204: NoContent } },
    handler: async (req, reply) => {
      await templates.remove(actorOf(req), req.params.name, await requireIfMatch(req, () => templates.get(req.params.name)));
      return reply.status(204).send(null);
    },
  });

  app.get('/team-templates/:name/versions', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listTeamTemplateVersions', summary: 'List a team template\'s versions', tags, description: 'Newest first.', params: NameParams, querystring: ListQuery, response: { 200: Page(VersionMeta) } },
    handler: (req) => templates.listVersions(req.params.name, { limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.post('/team-templates/:name/versions', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'createTeamTemplateVersion',
      summary: 'Add a team template version',
      location: true,
      tags,
      description:
        'Adds a version and makes it current. If-Match is the template\'s ETag. The body is a whole version (the create body less name and description), ' +
        'or with `from_version` a stored version with only the fields present changed: `{"from_version": 1}` alone makes version 1\'s content current again.',
      params: NameParams,
      headers: IfMatchHeader,
      body: TemplateNewVersion,
      response: { 201: TeamTemplateVersion },
    },
    handler: async (req, reply) => {
      const row = await templates.createVersion(actorOf(req), req.params.name, await requireIfMatch(req, () => templates.get(req.params.name)), req.body);
      return reply.status(201).header('location', `/api/v1/team-templates/${req.params.name}/versions/${row.version}`).send(presentVersion(row));
    },
  });

  app.get('/team-templates/:name/versions/:version', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getTeamTemplateVersion', summary: 'Get a team template version', tags, params: VersionParams, response: { 200: TeamTemplateVersion } },
    handler: async (req) => presentVersion(await templates.getVersion(req.params.name, req.params.version)),
  });
}

import { actorOf } from '../../http/auth.ts';
import { optionalIfMatch, requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, IfMatchToReplace, NoContent } from '../../http/schemas.ts';
import { Skill, SkillParams, SkillPut, SkillSummary } from './skills.schemas.ts';
import { presentSkill, type SkillsService } from './skills.service.ts';

export function skillsRoutes(app: App, deps: { skills: SkillsService }) {
  const { skills } = deps;
  const tags = ['skills'];

  app.get('/skills', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'listSkills', summary: 'List platform skills', tags, description: 'The platform skill catalogue by name; no bodies.', querystring: ListQuery, response: { 200: Page(SkillSummary) } },
    handler: (req) => skills.list({ limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.get('/skills/:name', {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: 'getSkill', summary: 'Get a platform skill', etag: true, tags, description: 'One skill with SKILL.md (body) and its files.', params: SkillParams, response: { 200: Skill } },
    handler: async (req, reply) => {
      const row = await skills.get(req.params.name);
      setEtag(reply, row.row_version);
      return presentSkill(row);
    },
  });

  app.put('/skills/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'putSkill',
      summary: 'Create or replace a platform skill',
      etag: true,
      location: true,
      tags,
      description:
        'Creates (201) or replaces (If-Match, 200) a skill; its revision becomes the catalogue\'s highest plus one. Rules (422): the name pattern and 64 characters; SKILL.md at most 64 KiB with front matter name = the path name and a description; files relative (not SKILL.md, no ..), text, at most 64 KiB each, 20 files, 256 KiB with SKILL.md; the catalogue at most 768 KiB.',
      params: SkillParams,
      headers: IfMatchToReplace,
      body: SkillPut,
      response: { 200: Skill, 201: Skill },
    },
    handler: async (req, reply) => {
      const { row, created } = await skills.put(actorOf(req), req.params.name, optionalIfMatch(req), req.body);
      setEtag(reply, row.row_version);
      if (created) reply.header('location', `/api/v1/skills/${row.name}`);
      return reply.status(created ? 201 : 200).send(presentSkill(row));
    },
  });

  app.delete('/skills/:name', {
    config: { auth: { role: 'admin' } },
    schema: {
      operationId: 'deleteSkill',
      summary: 'Delete a platform skill',
      tags,
      description: 'Deletes a skill (If-Match). A file still in the repository\'s skill directory brings it back at the next import.',
      params: SkillParams,
      headers: IfMatchHeader,
      response: { 204: NoContent },
    },
    handler: async (req, reply) => {
      await skills.remove(actorOf(req), req.params.name, await requireIfMatch(req, () => skills.get(req.params.name)));
      return reply.status(204).send(null);
    },
  });
}

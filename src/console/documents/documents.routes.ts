import type { Role } from '../../auth/roles.ts';
import { actorOf } from '../../http/auth.ts';
import { optionalIfMatch, requireIfMatch, setEtag } from '../../http/etag.ts';
import type { App } from '../../http/kernel.ts';
import { ListQuery, Page } from '../../http/pagination.ts';
import { limitOf } from '../../db/pagination.ts';
import { IfMatchHeader, IfMatchToReplace, NoContent } from '../../http/schemas.ts';
import { DOCUMENT_LIMITS, DOCUMENT_MEDIA_TYPES, DOCUMENT_NAME_PATTERN, DocumentParams, DocumentPut, DocumentSchema, DocumentSummary, OwnerParams } from './documents.schemas.ts';
import { presentDocument, type DocumentsService } from './documents.service.ts';
import type { DocumentScope } from './documents.tables.ts';

// JSON-escaped content can be several times its UTF-8 size; the service checks the real limit.
const PUT_BODY_LIMIT = 2 * 1024 * 1024;

/**
 * The context-document routes of one owner kind, under `<base>/{name}/documents`: agents
 * (`/agents`, admin writes) and teams (`/teams`, operator writes) share this one definition.
 * `label` makes the operationIds (`listAgentDocuments`, `putTeamDocument`, ...).
 */
export function documentRoutes(app: App, deps: { documents: DocumentsService; scope: DocumentScope; base: string; label: string; writeRole: Role; tags: string[] }) {
  const { documents, scope, label, tags } = deps;
  const path = `${deps.base}/:name/documents`;
  const rules =
    `media_type one of ${DOCUMENT_MEDIA_TYPES.join(', ')} and description at most ${DOCUMENT_LIMITS.descriptionChars} characters (400 naming the field otherwise); ` +
    `name ${DOCUMENT_NAME_PATTERN}; content UTF-8 without NUL, 1 byte to 256 KiB; an owner holds at most ${DOCUMENT_LIMITS.perOwner} documents and 384 KiB in total (422 naming the field otherwise).`;

  app.get(path, {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: `list${label}Documents`, summary: `List the ${scope}'s context documents`, tags, description: `The ${scope}'s context documents, by name, without content.`, params: OwnerParams, querystring: ListQuery, response: { 200: Page(DocumentSummary) } },
    handler: (req) => documents.list(scope, req.params.name, { limit: limitOf(req.query), cursor: req.query.cursor }),
  });

  app.get(`${path}/:doc`, {
    config: { auth: { role: 'viewer' } },
    schema: { operationId: `get${label}Document`, summary: `Get a ${scope}'s context document`, etag: true, tags, params: DocumentParams, response: { 200: DocumentSchema } },
    handler: async (req, reply) => {
      const row = await documents.get(scope, req.params.name, req.params.doc);
      setEtag(reply, row.row_version);
      return presentDocument(row);
    },
  });

  app.put(`${path}/:doc`, {
    config: { auth: { role: deps.writeRole } },
    bodyLimit: PUT_BODY_LIMIT,
    schema: {
      operationId: `put${label}Document`,
      summary: `Create or replace a ${scope}'s context document`,
      etag: true,
      tags,
      description: `Creates (201, no If-Match) or replaces (200, If-Match required) a context document. ${rules}`,
      params: DocumentParams,
      headers: IfMatchToReplace,
      body: DocumentPut,
      response: { 200: DocumentSchema, 201: DocumentSchema },
    },
    handler: async (req, reply) => {
      const { row, created } = await documents.put(actorOf(req), scope, req.params.name, req.params.doc, optionalIfMatch(req), req.body);
      setEtag(reply, row.row_version);
      return reply.status(created ? 201 : 200).send(presentDocument(row));
    },
  });

  app.delete(`${path}/:doc`, {
    config: { auth: { role: deps.writeRole } },
    schema: { operationId: `delete${label}Document`, summary: `Delete a ${scope}'s context document`, tags, params: DocumentParams, headers: IfMatchHeader, response: { 204: NoContent } },
    handler: async (req, reply) => {
      await documents.remove(actorOf(req), scope, req.params.name, req.params.doc, await requireIfMatch(req, () => documents.get(scope, req.params.name, req.params.doc)));
      return reply.status(204).send(null);
    },
  });
}

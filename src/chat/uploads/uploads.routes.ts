import type { FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { ChatError } from '../http/errors.ts';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import type { ChatUploadsService } from './uploads.service.ts';

const tags = ['chat-uploads'];
// Room around the file for the multipart framing and the other fields of the form.
const FORM_OVERHEAD = 1024 * 1024;

const Attachment = Type.Object({
  id: Type.Integer(),
  name: Type.String(),
  path_id: Type.String(),
  size: Type.Integer(),
  create_time: Type.Integer(),
  messages: Type.Array(Type.Object({ id: Type.Integer(), date_sent: Type.Integer() })),
});

/** The one byte range a download asks for, if any. */
const rangeOf = (req: FastifyRequest) => req.headers.range;

/** The upload's path after `/user_uploads/`: the realm id segment and the rest. */
const uploadPath = (p: Record<string, string>, realmParam: string) => `${pathId(p[realmParam])}/${p['*']}`;

/** The API's upload routes, under /api/v1. */
export function chatUploadsRoutes(r: ChatRouter, deps: { uploads: ChatUploadsService }) {
  const { uploads } = deps;

  r.authed(
    {
      method: 'POST',
      url: '/user_uploads',
      operationId: 'uploadFile',
      tags,
      description:
        "Uploads one file (a multipart form's file part) and answers its url (also as uri) and filename; only its owner can read it until a message links it. " +
        'The largest file is max_file_upload_size_mib in POST /register: a larger file is refused (400) as it arrives, and a body declared or sent larger than that and 1 MiB for the form is 413.',
      response: Envelope({ uri: Type.String(), url: Type.String(), filename: Type.String() }),
      // The file is stored as it arrives, never held whole (uploads.service.ts, storeFile).
      streamed: {
        limit: uploads.maxFileUploadMib * 1024 * 1024 + FORM_OVERHEAD,
        fieldBytes: FORM_OVERHEAD,
        tooLarge: () => new ChatError(`Request body too large: this server takes files of at most ${uploads.maxFileUploadMib} MiB (and 1 MiB for the rest of the form)`, { status: 413 }),
      },
    },
    async ({ form, caller }) => uploads.upload(caller, form),
  );

  r.authed(
    {
      method: 'GET',
      url: '/user_uploads/:realm_id_str/*',
      operationId: 'getFileTemporaryUrl',
      tags,
      description: 'A URL that serves the file without credentials for 60 seconds.',
      response: Envelope({ url: Type.String() }),
    },
    async ({ req, caller }) => uploads.temporaryUrl(caller, uploadPath(req.params as Record<string, string>, 'realm_id_str')),
  );

  r.authed(
    { method: 'GET', url: '/attachments', operationId: 'getAttachments', tags, response: Envelope({ attachments: Type.Array(Attachment), upload_space_used: Type.Integer() }) },
    async ({ caller }) => uploads.list(caller),
  );

  r.authed({ method: 'DELETE', url: '/attachments/:attachment_id', operationId: 'removeAttachment', tags, response: Envelope() }, async ({ req, caller }) => {
    await uploads.remove(caller, pathId((req.params as { attachment_id: string }).attachment_id));
    return {};
  });
}

/** The uploaded files themselves, at the addresses uploads answer (outside /api/v1, as Zulip's). */
export function chatUploadFileRoutes(r: ChatRouter, deps: { uploads: ChatUploadsService }) {
  const { uploads } = deps;
  r.openFile(
    { method: 'GET', url: '/user_uploads/temporary/:token/:filename', operationId: 'getUploadedFileByToken', tags, description: 'The file a temporary URL names, without credentials, while the URL lasts (one byte range may be asked for: Range).' },
    async ({ req }) => {
      const p = req.params as { token: string; filename: string };
      return uploads.serveTemporary(p.token, p.filename, rangeOf(req));
    },
  );
  r.authedFile(
    { method: 'GET', url: '/user_uploads/:realm_id/*', operationId: 'getUploadedFile', tags, description: 'An uploaded file, to its owner and to whoever can read a message linking it (HTTP Basic auth, as the API); one byte range may be asked for (Range, answered 206).' },
    async ({ req, caller }) => uploads.serve(caller, uploadPath(req.params as Record<string, string>, 'realm_id'), { download: false, range: rangeOf(req) }),
  );
  r.authedFile(
    { method: 'GET', url: '/user_uploads/download/:realm_id/*', operationId: 'downloadUploadedFile', tags, description: 'An uploaded file as a download (Content-Disposition: attachment), to who may read it; one byte range may be asked for (Range).' },
    async ({ req, caller }) => uploads.serve(caller, uploadPath(req.params as Record<string, string>, 'realm_id'), { download: true, range: rangeOf(req) }),
  );
}

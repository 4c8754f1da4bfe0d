import crypto from 'node:crypto';
import { Readable } from 'node:stream';
import { sql, type Transaction } from 'kysely';
import type { Db } from '../../db/database.ts';
import type { Database } from '../../db/schema.ts';
import type { Cipher } from '../../secrets/cipher.ts';
import { writeEvents, type ChatEventRecord } from '../events/events.bus.ts';
import { ChatError, chatErrors } from '../http/errors.ts';
import type { FileSink, PartHead, StreamedForm } from '../http/multipart.ts';
import { dbId } from '../http/params.ts';
import { accessSql } from '../messages/messages.store.ts';
import { isGuest } from '../users/users.present.ts';
import { recordAudit, systemActor } from '../../audit/audit.ts';
import { chatActor, isControl, type Caller } from '../users/users.service.ts';

/** Zulip's default MAX_FILE_UPLOAD_SIZE (MiB) since Zulip 10. */
export const DEFAULT_MAX_FILE_UPLOAD_MIB = 100;
/** How long a temporary URL (GET /user_uploads/{realm_id}/{path} through the API) serves the file, as Zulip's. */
export const TEMPORARY_URL_SECONDS = 60;
const TEMPORARY_AAD = 'chat.user_upload.temporary';
/** A stored file's bytes are rows of this many (its last may hold fewer): what an upload or a download holds in memory at once. */
export const CHUNK_BYTES = 1024 * 1024;
/** Zulip's default for deleting uploads no message links (delete_old_unclaimed_attachments: 5 weeks). */
export const DEFAULT_DELETE_UNCLAIMED_DAYS = 35;
/** A stored file no attachment points at after this long (an upload cut off, an owner deleted) is deleted: far longer than any upload takes. */
const ORPHAN_FILE_MS = 86_400_000;

/** Types a browser may show in place (as Zulip's INLINE_MIME_TYPES); everything else is served as a download. */
const INLINE_TYPES = new Set([
  'application/pdf', 'audio/aac', 'audio/flac', 'audio/mp4', 'audio/mpeg', 'audio/ogg', 'audio/wav', 'audio/webm',
  'image/apng', 'image/avif', 'image/gif', 'image/jpeg', 'image/png', 'image/webp', 'text/plain', 'video/mp4', 'video/ogg', 'video/quicktime', 'video/webm',
]);

/** The upload links a message's content holds: `/user_uploads/{path_id}`, relative or absolute. */
const UPLOAD_LINK = /\/user_uploads\/(\d+\/[0-9a-f]{2}\/[A-Za-z0-9_-]{24}\/[^\s)\]"'<>?#]+)/g;

/**
 * Zulip's sanitize_name: the name as the last part of the file's address (letters, digits,
 * `_`, `.`, `-`; spaces and runs of dashes become one dash).
 */
export function sanitizeName(name: string): string {
  const v = name.normalize('NFKC').replace(/[^\p{L}\p{N}_\s.-]/gu, '').trim().replace(/[-\s]+/g, '-');
  return v === '' || v === '.' || v === '..' ? 'uploaded-file' : v;
}

/** The address an upload is served at (relative to the organization's URL). */
export const uploadUrl = (pathId: string) => `/user_uploads/${pathId.split('/').map(encodeURIComponent).join('/')}`;

/** A content type as sent, when it is a plain `type/subtype` (parameters kept); else a download of bytes. */
function contentTypeOf(sent: string): string {
  const t = sent.trim();
  return /^[a-z0-9][a-z0-9.+-]*\/[a-z0-9][a-z0-9.+-]*(\s*;\s*[a-z0-9-]+=("[^"\r\n]*"|[a-z0-9._-]+))*$/i.test(t) ? t : 'application/octet-stream';
}

/**
 * The bytes a Range header asks for (one range of bytes, RFC 9110): null for the whole file
 * (no header, several ranges, another unit, or one that does not parse, which a server may
 * ignore); 416 for a range that starts past the end.
 */
function byteRange(header: string | undefined, size: number): { start: number; end: number } | null {
  const m = header === undefined ? null : /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return null;
  const unsatisfiable = () => new ChatError('Requested range not satisfiable', { status: 416, headers: { 'Content-Range': `bytes */${size}` } });
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0 || size === 0) throw unsatisfiable();
    return { start: Math.max(size - suffix, 0), end: size - 1 };
  }
  const start = Number(m[1]);
  if (m[2] !== '' && Number(m[2]) < start) return null;
  if (start >= size) throw unsatisfiable();
  return { start, end: m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1) };
}

type Emit = (e: ChatEventRecord) => void;

export type ChatUploadsService = ReturnType<typeof createChatUploadsService>;

export function createChatUploadsService(deps: { db: Db; cipher: Cipher; maxFileUploadMib: number; deleteUnclaimedDays?: number; afterCommit: () => void }) {
  const { db, cipher, maxFileUploadMib, afterCommit } = deps;
  const maxBytes = maxFileUploadMib * 1024 * 1024;
  const deleteUnclaimedDays = deps.deleteUnclaimedDays ?? DEFAULT_DELETE_UNCLAIMED_DAYS;
  const tooLarge = () => chatErrors.bad(`File is larger than this server's configured maximum upload size (${maxFileUploadMib} MiB).`);

  /**
   * A stored file for an upload's bytes, made before they arrive: each 1 MiB is written as a
   * chunk once it has arrived (a statement of its own, so no transaction is held open while the
   * client sends), the rest at the end. More than the limit is refused as it arrives.
   */
  async function storeFile(realmId: number): Promise<{ id: number; sink: FileSink; size: () => number }> {
    const { id } = await db.insertInto('chat_upload_files').values({ realm_id: realmId }).returning('id').executeTakeFirstOrThrow();
    const chunk = Buffer.allocUnsafe(CHUNK_BYTES);
    let filled = 0;
    let seq = 0;
    let size = 0;
    const flush = async () => {
      await db.insertInto('chat_upload_chunks').values({ file_id: id, seq: seq++, data: chunk.subarray(0, filled) }).execute();
      filled = 0;
    };
    const sink: FileSink = {
      async write(data) {
        size += data.length;
        if (size > maxBytes) throw tooLarge();
        for (let at = 0; at < data.length; ) {
          const n = data.copy(chunk, filled, at);
          [filled, at] = [filled + n, at + n];
          if (filled === CHUNK_BYTES) await flush();
        }
      },
      async end() {
        if (filled > 0) await flush();
      },
    };
    return { id, sink, size: () => size };
  }

  /** The bytes of a stored file from `start` to `end` (inclusive), read a chunk at a time as the answer is sent. */
  function fileBytes(fileId: number, start: number, end: number): Readable {
    const first = Math.floor(start / CHUNK_BYTES);
    const last = Math.floor(end / CHUNK_BYTES);
    async function* chunks() {
      for (let seq = first; seq <= last && end >= start; seq++) {
        const row = await db.selectFrom('chat_upload_chunks').select('data').where('file_id', '=', fileId).where('seq', '=', seq).executeTakeFirst();
        // Deleted while it was being sent: the answer ends short of its Content-Length.
        if (!row) throw new Error('the uploaded file was deleted while it was being sent');
        yield Buffer.from(row.data.buffer, row.data.byteOffset, row.data.byteLength).subarray(seq === first ? start - seq * CHUNK_BYTES : 0, seq === last ? end - seq * CHUNK_BYTES + 1 : undefined);
      }
    }
    // Bytes, not objects: the stream reads the next chunk only once the last has gone out.
    return Readable.from(chunks(), { objectMode: false });
  }

  /** Deletes stored files with their chunks and the attachments that point at them (and those attachments' links). */
  const deleteFiles = async (ids: number[], q: Db | Transaction<Database> = db) => {
    if (ids.length) await q.deleteFrom('chat_upload_files').where('id', 'in', ids).execute();
  };

  const spaceUsed = async (q: Db | Transaction<Database>, realmId: number) => {
    const r = await q.selectFrom('chat_attachments').select(sql<string | number>`coalesce(sum(size), 0)`.as('used')).where('realm_id', '=', realmId).executeTakeFirst();
    return Number(r?.used ?? 0);
  };

  /** Zulip's Attachment objects (times in milliseconds), with the messages that link each. */
  async function attachmentObjects(q: Db | Transaction<Database>, ids: number[]) {
    if (!ids.length) return [];
    const rows = await q.selectFrom('chat_attachments').select(['id', 'file_name', 'path_id', 'size', 'create_time']).where('id', 'in', ids).orderBy('id').execute();
    const links = await q
      .selectFrom('chat_attachment_messages as am')
      .innerJoin('chat_messages as m', 'm.id', 'am.message_id')
      .select(['am.attachment_id', 'm.id', 'm.date_sent'])
      .where('am.attachment_id', 'in', ids)
      .orderBy('m.id')
      .execute();
    return rows.map((r) => ({
      id: r.id,
      name: r.file_name,
      path_id: r.path_id,
      size: Number(r.size),
      create_time: new Date(r.create_time).getTime(),
      messages: links.filter((l) => l.attachment_id === r.id).map((l) => ({ id: l.id, date_sent: new Date(l.date_sent).getTime() })),
    }));
  }

  /** Tells each owner of these attachments of their new state (`attachment update`). */
  async function tellUpdated(trx: Transaction<Database>, realmId: number, ids: number[], emit: Emit) {
    const objects = await attachmentObjects(trx, ids);
    const owners = await trx.selectFrom('chat_attachments').select(['id', 'owner_id']).where('id', 'in', ids.length ? ids : [0]).execute();
    const used = await spaceUsed(trx, realmId);
    for (const a of objects) emit({ realmId, users: [owners.find((o) => o.id === a.id)!.owner_id], payload: { type: 'attachment', op: 'update', attachment: a, upload_space_used: used } });
  }

  /** Whether the caller may read an upload: its owner, or someone who can read a message linking it. */
  async function canRead(caller: Caller, a: { id: number; owner_id: number; realm_id: number }) {
    if (a.realm_id !== caller.realm.id) return false;
    if (a.owner_id === caller.user.id) return true;
    const linked = await db
      .selectFrom('chat_attachment_messages as am')
      .innerJoin('chat_messages as m', 'm.id', 'am.message_id')
      .leftJoin('chat_user_messages as um', (j) => j.onRef('um.message_id', '=', 'm.id').on('um.user_id', '=', caller.user.id))
      .select('m.id')
      .where('am.attachment_id', '=', a.id)
      .where(accessSql(caller.realm.id, caller.user.id, isGuest(caller.user)))
      .limit(1)
      .executeTakeFirst();
    return linked !== undefined;
  }

  /** An upload the caller may read; else 404 (none of the organization's) or 403 (not theirs to read), as Zulip's serve_file answers. */
  async function readable(caller: Caller, pathId: string) {
    const a = await db.selectFrom('chat_attachments').select(['id', 'owner_id', 'realm_id', 'path_id', 'file_name', 'content_type', 'file_id', 'size']).where('path_id', '=', pathId).executeTakeFirst();
    if (!a || a.realm_id !== caller.realm.id) throw new ChatError('File not found.', { status: 404 });
    if (!(await canRead(caller, a))) throw new ChatError('You are not authorized to view this file.', { status: 403 });
    return a;
  }

  /** The file as an answer: all of it, or the one range of bytes asked for (206). */
  const fileResponse = (a: { file_name: string; content_type: string; file_id: number; size: number | string }, opts: { download?: boolean; range?: string }) => {
    const type = a.content_type.split(';')[0].trim().toLowerCase();
    const disposition = INLINE_TYPES.has(type) && !opts.download ? 'inline' : 'attachment';
    const size = Number(a.size);
    const range = byteRange(opts.range, size);
    const [start, end] = range ? [range.start, range.end] : [0, size - 1];
    return {
      body: fileBytes(a.file_id, start, end),
      ...(range ? { status: 206 } : {}),
      headers: {
        'content-length': String(end - start + 1),
        'accept-ranges': 'bytes',
        ...(range ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
        'content-type': a.content_type,
        'content-disposition': `${disposition}; filename*=UTF-8''${encodeURIComponent(a.file_name)}`,
        'x-content-type-options': 'nosniff',
        'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; sandbox",
        'cache-control': 'private, max-age=86400',
      },
    };
  };

  return {
    maxFileUploadMib,

    /**
     * POST /user_uploads: one file, stored in the database as it arrives (chunks of 1 MiB, see
     * storeFile); only its owner can read it until a message links it. Its attachment is made
     * once all of it has arrived; a refused or cut-off upload leaves nothing behind.
     */
    async upload(caller: Caller, form: StreamedForm | null) {
      const stored: Array<{ id: number; sent: PartHead & { filename: string }; size: () => number }> = [];
      try {
        await form?.read(async (head) => {
          if (stored.length) throw chatErrors.bad('You may only upload one file at a time');
          const file = await storeFile(caller.realm.id);
          stored.push({ id: file.id, sent: head, size: file.size });
          return file.sink;
        });
        const [file] = stored;
        if (!file) throw chatErrors.bad('You must specify a file to upload');
        const name = [...file.sent.filename].filter((c) => !isControl(c)).slice(0, 255).join('').trim() || 'uploaded-file';
        const pathId = [caller.realm.id, crypto.randomBytes(1).toString('hex'), crypto.randomBytes(18).toString('base64url'), sanitizeName(name)].join('/');
        await db.transaction().execute(async (trx) => {
          const { id } = await trx
            .insertInto('chat_attachments')
            .values({ realm_id: caller.realm.id, owner_id: caller.user.id, path_id: pathId, file_name: name, content_type: contentTypeOf(file.sent.contentType), size: file.size(), file_id: file.id })
            .returning('id')
            .executeTakeFirstOrThrow();
          await recordAudit(trx, chatActor(caller), 'chat.attachment.create', { type: 'chat_attachment', id }, { size: file.size() });
          const [attachment] = await attachmentObjects(trx, [id]);
          await writeEvents(trx, [{ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'attachment', op: 'add', attachment, upload_space_used: await spaceUsed(trx, caller.realm.id) } }]);
        });
        afterCommit();
        const url = uploadUrl(pathId);
        return { uri: url, url, filename: name };
      } catch (err) {
        // A refused, cut-off or failed upload leaves no bytes behind (the housekeeping's day is for a process that died).
        await deleteFiles(stored.map((f) => f.id)).catch(() => {});
        throw err;
      }
    },

    /** GET /attachments: the caller's uploads, newest last, and the organization's space used. */
    async list(caller: Caller) {
      const ids = (await db.selectFrom('chat_attachments').select('id').where('owner_id', '=', caller.user.id).orderBy('id').execute()).map((r) => r.id);
      return { attachments: await attachmentObjects(db, ids), upload_space_used: await spaceUsed(db, caller.realm.id) };
    },

    /** DELETE /attachments/{attachment_id}: the owner removes an upload (links to it stop working). */
    async remove(caller: Caller, id: number) {
      await db.transaction().execute(async (trx) => {
        const gone = await trx.deleteFrom('chat_attachments').where('id', '=', dbId(id)).where('owner_id', '=', caller.user.id).returning(['id', 'file_id']).executeTakeFirst();
        if (!gone) throw chatErrors.bad('Invalid attachment');
        await deleteFiles([gone.file_id], trx);
        await recordAudit(trx, chatActor(caller), 'chat.attachment.delete', { type: 'chat_attachment', id: gone.id });
        await writeEvents(trx, [{ realmId: caller.realm.id, users: [caller.user.id], payload: { type: 'attachment', op: 'remove', attachment: { id: gone.id }, upload_space_used: await spaceUsed(trx, caller.realm.id) } }]);
      });
      afterCommit();
    },

    /** GET /user_uploads/{realm_id}/{path} (and /user_uploads/download/…, always as a download): the file, to someone who may read it. */
    async serve(caller: Caller, pathId: string, opts: { download: boolean; range?: string }) {
      return fileResponse(await readable(caller, pathId), opts);
    },

    /** GET /api/v1/user_uploads/{realm_id}/{path}: a URL that serves the file without credentials for a minute. */
    async temporaryUrl(caller: Caller, pathId: string) {
      const a = await readable(caller, pathId);
      const sealed = cipher.seal(JSON.stringify({ p: a.path_id, e: Math.floor(Date.now() / 1000) + TEMPORARY_URL_SECONDS }), TEMPORARY_AAD);
      const token = Buffer.from(JSON.stringify(sealed)).toString('base64url');
      return { url: `/user_uploads/temporary/${token}/${encodeURIComponent(a.path_id.split('/').pop()!)}` };
    },

    /** GET /user_uploads/temporary/{token}/{filename}: the file a temporary URL names, while it lasts. */
    async serveTemporary(token: string, filename: string, range?: string) {
      const expired = () => new ChatError('Invalid token', { status: 403 });
      let claim: { p: string; e: number };
      try {
        claim = JSON.parse(cipher.open(JSON.parse(Buffer.from(token, 'base64url').toString('utf8')), TEMPORARY_AAD));
      } catch {
        throw expired();
      }
      if (typeof claim.p !== 'string' || typeof claim.e !== 'number' || claim.e < Date.now() / 1000 || claim.p.split('/').pop() !== filename) throw expired();
      const a = await db.selectFrom('chat_attachments').select(['file_name', 'content_type', 'file_id', 'size']).where('path_id', '=', claim.p).executeTakeFirst();
      if (!a) throw new ChatError('File not found.', { status: 404 });
      return fileResponse(a, { range });
    },

    /**
     * The chat's housekeeping (the worker's hourly prune, src/runtime/worker.component.ts), at
     * `now`: deletes the uploads no message links that were made more than
     * SERVICE_CHAT_DELETE_UNCLAIMED_UPLOADS_DAYS ago (0 keeps them), as Zulip's
     * delete_old_unclaimed_attachments does (their owners hear `attachment remove`), and stored
     * files no attachment points at after a day (an upload cut off, an owner deleted). Answers
     * how many uploads and files went.
     */
    async deleteUnclaimed(now = Date.now()): Promise<number> {
      let gone = 0;
      if (deleteUnclaimedDays > 0) {
        const before = new Date(now - deleteUnclaimedDays * 86_400_000).toISOString();
        await db.transaction().execute(async (trx) => {
          const old = await trx
            .selectFrom('chat_attachments as a')
            .select(['a.id', 'a.realm_id', 'a.owner_id', 'a.file_id'])
            .where('a.create_time', '<', before)
            .where(({ not, exists, selectFrom }) => not(exists(selectFrom('chat_attachment_messages as am').select('am.message_id').whereRef('am.attachment_id', '=', 'a.id'))))
            .forUpdate()
            .execute();
          if (!old.length) return;
          await deleteFiles(old.map((a) => a.file_id), trx);
          for (const a of old) await recordAudit(trx, systemActor('chat-housekeeping'), 'chat.attachment.delete', { type: 'chat_attachment', id: a.id }, { unclaimed_days: deleteUnclaimedDays });
          const events: ChatEventRecord[] = [];
          for (const realmId of new Set(old.map((a) => a.realm_id))) {
            const used = await spaceUsed(trx, realmId);
            for (const a of old.filter((o) => o.realm_id === realmId)) events.push({ realmId, users: [a.owner_id], payload: { type: 'attachment', op: 'remove', attachment: { id: a.id }, upload_space_used: used } });
          }
          await writeEvents(trx, events);
          gone += old.length;
        });
        if (gone) afterCommit();
      }
      const orphans = await db
        .deleteFrom('chat_upload_files as f')
        .where('f.created_at', '<', new Date(now - ORPHAN_FILE_MS).toISOString())
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('chat_attachments as a').select('a.id').whereRef('a.file_id', '=', 'f.id'))))
        .executeTakeFirst();
      return gone + Number(orphans.numDeletedRows);
    },

    /**
     * Records which uploads a message links, as Zulip's claim_attachment: links to files its
     * sender owns or can already read; on an edit, links no longer in it are let go. Each owner
     * hears of the change (`attachment update`).
     */
    async claim(trx: Transaction<Database>, caller: Caller, messageId: number, content: string, emit: Emit, opts: { edit: boolean }) {
      const paths = new Set<string>();
      for (const m of content.matchAll(UPLOAD_LINK)) {
        try {
          paths.add(decodeURIComponent(m[1]));
        } catch {
          paths.add(m[1]);
        }
      }
      const before = opts.edit ? (await trx.selectFrom('chat_attachment_messages').select('attachment_id').where('message_id', '=', messageId).execute()).map((r) => r.attachment_id) : [];
      if (!paths.size && !before.length) return;
      const found = paths.size
        ? await trx.selectFrom('chat_attachments').select(['id', 'owner_id', 'realm_id']).where('realm_id', '=', caller.realm.id).where('path_id', 'in', [...paths]).execute()
        : [];
      const linked: number[] = [];
      for (const a of found) if (a.owner_id === caller.user.id || before.includes(a.id) || (await canRead(caller, a))) linked.push(a.id);
      const added = linked.filter((id) => !before.includes(id));
      const dropped = before.filter((id) => !linked.includes(id));
      if (added.length) await trx.insertInto('chat_attachment_messages').values(added.map((id) => ({ attachment_id: id, message_id: messageId }))).onConflict((oc) => oc.doNothing()).execute();
      if (dropped.length) await trx.deleteFrom('chat_attachment_messages').where('message_id', '=', messageId).where('attachment_id', 'in', dropped).execute();
      if (added.length || dropped.length) await tellUpdated(trx, caller.realm.id, [...added, ...dropped], emit);
    },

    /**
     * Before a message is deleted: the uploads only it links are deleted with it, as Zulip
     * deletes a file once the last message linking it is gone; their owners hear of it.
     */
    async releaseMessage(trx: Transaction<Database>, realmId: number, messageId: number, emit: Emit) {
      const only = await trx
        .selectFrom('chat_attachment_messages as am')
        .innerJoin('chat_attachments as a', 'a.id', 'am.attachment_id')
        .select(['a.id', 'a.owner_id', 'a.file_id'])
        .where('am.message_id', '=', messageId)
        .where(({ not, exists, selectFrom }) => not(exists(selectFrom('chat_attachment_messages as o').select('o.message_id').whereRef('o.attachment_id', '=', 'am.attachment_id').where('o.message_id', '<>', messageId))))
        .execute();
      if (!only.length) return;
      await deleteFiles(only.map((a) => a.file_id), trx);
      const used = await spaceUsed(trx, realmId);
      for (const a of only) emit({ realmId, users: [a.owner_id], payload: { type: 'attachment', op: 'remove', attachment: { id: a.id }, upload_space_used: used } });
    },
  };
}

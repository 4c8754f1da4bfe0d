import crypto from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import { recordAudit, type Actor } from '../../audit/audit.ts';
import type { Db } from '../../db/database.ts';
import { deleteIfVersion, lockKey, updateIfVersion } from '../../db/conditional.ts';
import { within } from '../../db/within.ts';
import type { Database } from '../../db/schema.ts';
import type { HookCaller } from '../../hooks.ts';
import { decodeCursor, toPage } from '../../db/pagination.ts';
import { problems, type FieldProblem } from '../../errors/problems.ts';
import { DOCUMENT_LIMITS, DOCUMENT_MEDIA_TYPES, DOCUMENT_NAME_PATTERN, DOCUMENT_NAME_WORDS, type DocumentOut, type DocumentPut, type DocumentSummary } from './documents.schemas.ts';
import type { DocumentScope } from './documents.tables.ts';
import * as store from './documents.store.ts';

type Q = Kysely<Database> | Transaction<Database>;
type DocumentRow = NonNullable<Awaited<ReturnType<typeof store.getDocument>>>;
type SummaryRow = Omit<DocumentRow, 'content'>;

/** A document as the worker places it for a role: read-only at `path` in the sandbox. */
export interface RoleDocument {
  path: string;
  name: string;
  scope: DocumentScope;
  description: string;
  media_type: string;
  size_bytes: number;
  sha256: string;
  content: string;
}

export const CONTEXT_DIR = '/workspace/context';
const NAME = new RegExp(DOCUMENT_NAME_PATTERN);
const KIB = (n: number) => `${n / 1024} KiB`;

/** The whitelist of what leaves the server about a document (without its content). */
export function presentDocumentSummary(row: SummaryRow): DocumentSummary {
  return {
    scope: row.scope,
    owner: row.owner,
    name: row.name,
    media_type: row.media_type,
    description: row.description,
    size_bytes: row.size_bytes,
    sha256: row.sha256,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export function presentDocument(row: DocumentRow): DocumentOut {
  return { ...presentDocumentSummary(row), content: row.content };
}

/** The spec's rules for one document, each violation naming its field and the limit. */
function checkDocument(name: string, input: DocumentPut): { size: number } {
  const errors: FieldProblem[] = [];
  if (!NAME.test(name)) errors.push({ field: 'name', message: `must be ${DOCUMENT_NAME_WORDS}` });
  if (!(DOCUMENT_MEDIA_TYPES as readonly string[]).includes(input.media_type)) {
    errors.push({ field: 'media_type', message: `must be one of ${DOCUMENT_MEDIA_TYPES.join(', ')}; binary files are unsupported` });
  }
  const description = input.description ?? '';
  // Characters as the schema counts them (code points): an emoji is one, not two UTF-16 units.
  if ([...description].length > DOCUMENT_LIMITS.descriptionChars) errors.push({ field: 'description', message: `must be at most ${DOCUMENT_LIMITS.descriptionChars} characters` });
  const size = Buffer.byteLength(input.content, 'utf8');
  if (size < 1) errors.push({ field: 'content', message: 'must hold at least 1 byte' });
  else if (size > DOCUMENT_LIMITS.contentBytes) errors.push({ field: 'content', message: `must be at most ${KIB(DOCUMENT_LIMITS.contentBytes)} of UTF-8 (it is ${size} bytes)` });
  if (input.content.includes('\u0000')) errors.push({ field: 'content', message: 'must not contain NUL; binary files are unsupported' });
  else if (!input.content.isWellFormed()) errors.push({ field: 'content', message: 'must be valid UTF-8 text (it holds an unpaired surrogate)' });
  if (errors.length) throw problems.validation(errors);
  return { size };
}

/**
 * Context documents of any owner kind: agents own scope 'agent', teams scope 'team'. The
 * owner is looked up (and, in a write's transaction, locked FOR SHARE so it cannot go beside
 * the write) through the owning module's `lock:<scope>` hook; the composition root has an
 * owner's documents removed (`deleteAllOf`) in the transaction that deletes or archives it.
 */
export function createDocumentsService(deps: { db: Db; hooks: HookCaller }) {
  const { db } = deps;

  async function assertOwner(q: Q, scope: DocumentScope, owner: string) {
    const found = await deps.hooks.ask(`lock:${scope}`, q, owner);
    if (!found.some(Boolean)) throw problems.notFound(scope, owner);
  }

  return {
    async list(scope: DocumentScope, owner: string, query: { limit: number; cursor?: string }) {
      const cursor = decodeCursor(query.cursor, ['string']);
      await assertOwner(db, scope, owner);
      const rows = await store.listDocuments(db, scope, owner, cursor, query.limit);
      return toPage(rows, query.limit, (r) => [r.name], presentDocumentSummary);
    },

    async get(scope: DocumentScope, owner: string, name: string, q?: Q): Promise<DocumentRow> {
      await assertOwner(q ?? db, scope, owner);
      const row = await store.getDocument(q ?? db, scope, owner, name);
      if (!row) throw problems.notFound('document', name);
      return row;
    },

    /**
     * Creates or replaces a document. Create needs no If-Match (201); replace needs it (200).
     * Per-owner limits are checked under a per-owner lock, so concurrent writes cannot pass
     * them together.
     */
    /** Every document of an owner with its content, by name (asked on `q`): what the repository import compares. */
    async allOf(scope: DocumentScope, owner: string, q?: Q): Promise<DocumentRow[]> {
      const names = (await store.listDocuments(q ?? db, scope, owner, null, DOCUMENT_LIMITS.perOwner + 1)).map((r) => r.name);
      const rows: DocumentRow[] = [];
      for (const name of names) {
        const row = await store.getDocument(q ?? db, scope, owner, name);
        if (row) rows.push(row);
      }
      return rows;
    },

    /** Given `trx`, one step of the caller's transaction, which records the audit itself. */
    async put(actor: Actor, scope: DocumentScope, owner: string, name: string, expected: number | null, input: DocumentPut, trx?: Transaction<Database>) {
      const outer = trx;
      const { size } = checkDocument(name, input);
      const sha256 = crypto.createHash('sha256').update(input.content, 'utf8').digest('hex');
      const description = input.description ?? '';
      return within(db, trx, async (trx) => {
        // Owner row first, then the owner's lock: the order deleting an owner takes them in.
        await assertOwner(trx, scope, owner);
        await lockKey(trx, `documents:${scope}:${owner}`);
        const existing = await store.getDocument(trx, scope, owner, name);
        if (existing && expected === null) throw problems.preconditionRequired();
        if (!existing && expected !== null) throw problems.preconditionFailed();
        const others = await store.ownerTotals(trx, scope, owner, name);
        if (!existing && others.count >= DOCUMENT_LIMITS.perOwner) {
          throw problems.validation([{ field: 'name', message: `this ${scope} already holds ${others.count} documents, the most an owner may hold is ${DOCUMENT_LIMITS.perOwner}` }]);
        }
        if (others.bytes + size > DOCUMENT_LIMITS.totalBytes) {
          throw problems.validation([
            { field: 'content', message: `the ${scope}'s documents would total ${others.bytes + size} bytes; an owner may hold at most ${KIB(DOCUMENT_LIMITS.totalBytes)} in total` },
          ]);
        }
        const fields = { media_type: input.media_type, description, content: input.content, size_bytes: size, sha256 };
        const target = { type: 'document', id: `${scope}:${owner}/${name}` };
        const details = { scope, owner, name, media_type: input.media_type, size_bytes: size, sha256 };
        if (!existing) {
          const row = await store.insertDocument(trx, { scope, owner, name, created_by: actor.name, ...fields });
          if (!outer) await recordAudit(trx, actor, 'document.create', target, details);
          return { row, created: true };
        }
        const row = await updateIfVersion<DocumentRow>(trx, { table: 'context_documents', where: { scope, owner, name }, expected: expected as number, set: fields, what: 'document', label: name });
        if (!outer) await recordAudit(trx, actor, 'document.update', target, details);
        return { row, created: false };
      });
    },

    async remove(actor: Actor, scope: DocumentScope, owner: string, name: string, expected: number, trx?: Transaction<Database>) {
      const outer = trx;
      await assertOwner(trx ?? db, scope, owner);
      await within(db, trx, async (trx) => {
        await lockKey(trx, `documents:${scope}:${owner}`);
        await deleteIfVersion(trx, { table: 'context_documents', where: { scope, owner, name }, expected, what: 'document', label: name });
        if (!outer) await recordAudit(trx, actor, 'document.delete', { type: 'document', id: `${scope}:${owner}/${name}` }, { scope, owner, name });
      });
    },

    /** Removes every document of an owner, in the caller's transaction (deleting an agent, archiving a team). */
    async deleteAllOf(trx: Transaction<Database>, scope: DocumentScope, owner: string): Promise<number> {
      await lockKey(trx, `documents:${scope}:${owner}`);
      return store.deleteDocumentsOf(trx, scope, owner);
    },

    /** The documents a role sees; see `documentsForRole`. */
    forRole: (role: { agent: string; team: string | null }) => documentsForRole(db, role),
  };
}

export type DocumentsService = ReturnType<typeof createDocumentsService>;

/**
 * What the worker places, read-only, under /workspace/context/<name> for a role at the start
 * of a run, and lists to the model: the agent's documents first, then the team's, each by
 * name; a team document with the name of an agent document replaces it.
 */
export async function documentsForRole(db: Q, role: { agent: string; team: string | null }): Promise<RoleDocument[]> {
  const rows = await store.documentsOfRole(db, role.agent, role.team);
  const teamNames = new Set(rows.filter((r) => r.scope === 'team').map((r) => r.name));
  return rows
    .filter((r) => r.scope === 'team' || !teamNames.has(r.name))
    .map((r) => ({
      path: `${CONTEXT_DIR}/${r.name}`,
      name: r.name,
      scope: r.scope,
      description: r.description,
      media_type: r.media_type,
      size_bytes: r.size_bytes,
      sha256: r.sha256,
      content: r.content,
    }));
}

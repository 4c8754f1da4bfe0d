import { sql, type Transaction } from 'kysely';
import { Type, type TSchema } from 'typebox';
import { auditTargetsSince, latestAuditId, recordAudit, type Actor } from '../../audit/audit.ts';
import type { ImportRepository } from '../../config.ts';
import type { Db } from '../../db/database.ts';
import { lockKey } from '../../db/conditional.ts';
import { inspectJson, unstorableWords, type StoredValueFinding } from '../../db/json-values.ts';
import type { Database } from '../../db/schema.ts';
import { isBuiltinDestination } from '../../egress/builtins.ts';
import { Problem, problems, type FieldProblem } from '../../errors/problems.ts';
import { fieldProblems, validatorCompiler } from '../../http/validation.ts';
import { AgentCreate } from '../agents/agents.schemas.ts';
import { agentVersionForRun, type AgentsService } from '../agents/agents.service.ts';
import { DestinationCreate } from '../destinations/destinations.schemas.ts';
import type { DestinationsService } from '../destinations/destinations.service.ts';
import { checkSkill, isSkillName } from '../skills/skills.rules.ts';
import type { SkillsService } from '../skills/skills.service.ts';
import { TemplateCreate } from '../templates/templates.schemas.ts';
import { DOCUMENT_NAME_PATTERN, DOCUMENT_NAME_WORDS, DocumentPut } from '../documents/documents.schemas.ts';
import type { DocumentsService } from '../documents/documents.service.ts';
import type { TemplatesService } from '../templates/templates.service.ts';
import { presentVersion as presentTemplateVersion } from '../templates/templates.service.ts';
import { compact, DIR_OF, KINDS, lineDiff, mediaTypeOf, readYaml, toYaml, type Kind, type YamlFile } from './layout.ts';
import type { ImportPlan, PlanEntry, PlanProblem } from './import.schemas.ts';
import { readRepository, type RepositoryDeps, type Snapshot } from './repository.ts';

const IMPORT_LOCK = 'import:configuration-repository';

/** One definition read from the repository, before it is checked against the database. */
interface Definition {
  kind: Kind;
  name: string;
  file: string;
  yaml: YamlFile | null;
  /** The API body (name included), or for a skill its SKILL.md and resources. */
  body: Record<string, unknown>;
  /** An agent's context documents, by name: the API's document body and the file it came from. */
  docs?: Record<string, DocumentPut & { file: string }>;
}

/** Problems found while writing one definition that belong to other files (an agent's documents). */
class FileProblems extends Error {
  readonly problems: PlanProblem[];
  constructor(found: PlanProblem[]) {
    super('problems of files');
    this.problems = found;
  }
}

/** An agent file's `documents` map: per document, its description and (when the extension does not tell) its media type. */
const DocumentsMap = Type.Record(
  Type.String({ pattern: DOCUMENT_NAME_PATTERN }),
  Type.Object({ description: Type.Optional(DocumentPut.properties.description), media_type: Type.Optional(DocumentPut.properties.media_type) }, { additionalProperties: false }),
);

/** Thrown to roll back a dry run (or an apply that found problems) after the plan is made. */
class RollBack extends Error {}

const compile = (schema: TSchema) => validatorCompiler({ schema, httpPart: 'body', method: 'POST', url: '/import' } as never) as unknown as ((v: unknown) => boolean) & { errors?: Parameters<typeof fieldProblems>[0] | null };
const validators: Record<'agent' | 'template' | 'policy', ReturnType<typeof compile>> = { agent: compile(AgentCreate), template: compile(TemplateCreate), policy: compile(DestinationCreate) };
const validateDocuments = compile(DocumentsMap);
const validateDocument = compile(DocumentPut);
const YAML_NAME = /^([^/]+)\.ya?ml$/;
const DOCUMENT_NAME = new RegExp(DOCUMENT_NAME_PATTERN);

/**
 * A value of a YAML file that would not be stored as read, as the field it is in and the rule:
 * the checks of a JSON body (a NUL character, nesting) and what YAML can say but JSON cannot
 * (.nan and .inf, half of a surrogate pair). Without it the database refuses the whole import
 * without naming the file, or stores another value, and every later import sees a change.
 */
function unstorable(found: StoredValueFinding): { field: string; message: string } {
  if ('notFinite' in found) return { field: found.notFinite, message: 'must be a finite number: .nan, .inf and numbers too large for JSON cannot be stored' };
  return unstorableWords(found);
}

/** Splits the repository's files into definitions and problems (YAML syntax, the API's body schemas, the layout). */
export function parseLayout(snap: Snapshot): { definitions: Definition[]; problems: PlanProblem[] } {
  const out: Definition[] = [];
  const found: PlanProblem[] = snap.refused.map((r) => ({ file: r.file, line: null, field: null, message: r.message }));
  const skills = new Map<string, { file: string; body: string | null; resources: Record<string, string> }>();
  const docFiles = new Map<string, Map<string, { file: string; text: string }>>();
  const seen = new Map<string, string>();
  // An agent's documents first: its file is read with them.
  for (const [file, text] of snap.files) {
    const [dir, agent, doc, ...more] = file.split('/');
    if (dir !== 'agents' || doc === undefined || more.length) continue;
    const docs = docFiles.get(agent) ?? new Map<string, { file: string; text: string }>();
    docFiles.set(agent, docs);
    docs.set(doc, { file, text });
  }
  for (const [file, text] of [...snap.files].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const [dir, ...rest] = file.split('/');
    if (dir === 'skills') {
      if (rest.length < 2) {
        found.push({ file, line: null, field: null, message: 'a skill lives in its own folder: skills/<name>/SKILL.md, with its files beside it' });
        continue;
      }
      const [name, ...inner] = rest;
      const skill = skills.get(name) ?? { file: `skills/${name}/SKILL.md`, body: null, resources: {} };
      skills.set(name, skill);
      if (inner.join('/') === 'SKILL.md') skill.body = text;
      else skill.resources[inner.join('/')] = text;
      continue;
    }
    if (dir === 'agents' && rest.length === 2) continue;
    const kind = (KINDS as string[]).find((k) => DIR_OF[k as Kind] === dir) as Exclude<Kind, 'skill'> | undefined;
    const m = rest.length === 1 ? YAML_NAME.exec(rest[0]) : null;
    if (!kind || !m) {
      const holds = dir === 'agents' ? 'agents/ holds one <name>.yaml file per agent and its documents as agents/<name>/<document>' : `${dir}/ holds one <name>.yaml file per definition`;
      found.push({ file, line: null, field: null, message: `is not part of the layout: ${holds}, nothing else` });
      continue;
    }
    const name = m[1];
    const key = `${kind}:${name}`;
    if (seen.has(key)) {
      found.push({ file, line: null, field: null, message: `defines the ${kind} "${name}" a second time (also ${seen.get(key)})` });
      continue;
    }
    seen.set(key, file);
    const yaml = readYaml(text);
    if (yaml.errors.length) {
      for (const e of yaml.errors) found.push({ file, line: e.line, field: null, message: `is not valid YAML: ${e.message}` });
      continue;
    }
    const value = yaml.value ?? {};
    if (typeof value !== 'object' || Array.isArray(value)) {
      found.push({ file, line: 1, field: null, message: 'must be a YAML mapping of the fields of the definition' });
      continue;
    }
    const unstored = inspectJson(value, { finite: true, wellFormed: true });
    if (unstored) {
      const { field, message } = unstorable(unstored);
      found.push({ file, line: yaml.lineOf(field || null), field: field || null, message });
      continue;
    }
    const { documents: docsMap, ...fields } = value as Record<string, unknown>;
    if (kind !== 'agent' && docsMap !== undefined) fields.documents = docsMap;
    let docs: Definition['docs'];
    if (kind === 'agent') {
      const described = (docsMap ?? {}) as Record<string, { description?: string; media_type?: string }>;
      if (!validateDocuments(described)) {
        for (const p of fieldProblems(validateDocuments.errors ?? [], 'body')) {
          // The map itself is the part validated: a problem of the whole of it is the field `documents`.
          const field = p.field === '(body)' ? 'documents' : `documents.${p.field}`;
          found.push({ file, line: yaml.lineOf(field), field, message: p.message });
        }
        continue;
      }
      // The map's keys are document names (its schema's pattern reads only the values of keys that match).
      const misnamed = Object.keys(described).filter((doc) => !DOCUMENT_NAME.test(doc));
      for (const doc of misnamed) found.push({ file, line: yaml.lineOf(['documents', doc]), field: `documents.${doc}`, message: `is not a document name: a name is ${DOCUMENT_NAME_WORDS}` });
      if (misnamed.length) continue;
      const present = docFiles.get(name) ?? new Map<string, { file: string; text: string }>();
      docFiles.delete(name);
      docs = {};
      let bad = false;
      for (const doc of Object.keys(described)) {
        if (!present.has(doc)) {
          found.push({ file, line: yaml.lineOf(['documents', doc]), field: `documents.${doc}`, message: `names a document the repository does not hold: add agents/${name}/${doc}` });
          bad = true;
        }
      }
      for (const [doc, { file: docFile, text: content }] of present) {
        const media_type = described[doc]?.media_type ?? mediaTypeOf(doc);
        if (media_type === null) {
          found.push({ file: docFile, line: null, field: 'media_type', message: `the extension does not tell the media type; name the file .md, .txt, .csv, .json or .yaml, or give documents.${doc}.media_type in ${file}` });
          bad = true;
          continue;
        }
        const input = { media_type, description: described[doc]?.description ?? '', content };
        if (!validateDocument(input)) {
          for (const p of fieldProblems(validateDocument.errors ?? [], 'body')) found.push({ file: docFile, line: null, field: p.field, message: p.message });
          bad = true;
          continue;
        }
        docs[doc] = { ...(input as DocumentPut), file: docFile };
      }
      if (bad) continue;
    }
    if (fields.name !== undefined && fields.name !== name) {
      found.push({ file, line: yaml.lineOf('name'), field: 'name', message: `must be "${name}", the file's name (or be left out)` });
      continue;
    }
    const body = { ...fields, name };
    const validate = validators[kind];
    if (!validate(body)) {
      for (const p of fieldProblems(validate.errors ?? [], 'body')) found.push({ file, line: yaml.lineOf(p.field), field: p.field, message: p.message });
      continue;
    }
    if (kind === 'agent' && (body as unknown as { version: { from_version?: unknown } }).version.from_version != null) {
      found.push({ file, line: yaml.lineOf('version.from_version'), field: 'version.from_version', message: 'has no meaning in the repository: a file holds the whole version' });
      continue;
    }
    out.push({ kind, name, file, yaml, body, docs });
  }
  // Documents of an agent the repository has no file of (or whose file is broken: then its own problem says so).
  for (const [agent, docs] of docFiles) {
    if (snap.files.has(`agents/${agent}.yaml`) || snap.files.has(`agents/${agent}.yml`)) continue;
    for (const { file } of docs.values()) found.push({ file, line: null, field: null, message: `is a document of the agent "${agent}", but there is no agents/${agent}.yaml` });
  }
  for (const [name, s] of skills) {
    if (s.body === null) {
      found.push({ file: s.file, line: null, field: null, message: `is missing: the folder skills/${name}/ needs a SKILL.md` });
      continue;
    }
    const { errors } = checkSkill(name, s.body, s.resources);
    const at = (f: string) => (f.startsWith('resources.') ? `skills/${name}/${f.slice('resources.'.length)}` : s.file);
    for (const e of errors) found.push({ file: at(e.field), line: null, field: e.field, message: e.message });
    if (!errors.length) out.push({ kind: 'skill', name, file: s.file, yaml: null, body: { body: s.body, resources: s.resources } });
  }
  return { definitions: out, problems: found };
}

/** A rule of the API a definition broke (a 4xx of a service), as problems naming file and line. */
function problemsOf(def: Definition, err: Problem): PlanProblem[] {
  const list: FieldProblem[] = err.errors.length ? err.errors : [{ field: '', message: err.detail }];
  return list.map((e) => {
    const field = e.field || null;
    if (def.kind === 'skill') return { file: field?.startsWith('resources.') ? def.file.replace(/SKILL\.md$/, field.slice('resources.'.length)) : def.file, line: null, field, message: e.message };
    return { file: def.file, line: def.yaml?.lineOf(field) ?? null, field, message: e.message };
  });
}

/** Names currently defined, per kind (the built-in destinations left out): what the repository may leave alone or prune. */
async function currentNames(deps: Pick<ImportDeps, 'agents' | 'templates' | 'destinations' | 'skills'>): Promise<Record<Kind, string[]>> {
  const all = async (list: (q: { limit: number; cursor?: string }) => Promise<{ items: Array<{ name: string; builtin?: boolean }>; next_cursor: string | null }>) => {
    const names: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await list({ limit: 200, cursor });
      names.push(...page.items.filter((i) => !i.builtin).map((i) => i.name));
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return names;
  };
  return {
    skill: await all((q) => deps.skills.list(q)),
    policy: await all((q) => deps.destinations.list(q)),
    agent: await all((q) => deps.agents.list(q)),
    template: await all((q) => deps.templates.list(q)),
  };
}

/**
 * Under the import lock: refuses (409) an import when another applied a different commit (or, for
 * a directory that is not a git checkout, anything) after this one began reading the repository.
 * Without it an import that read the older commit and waited for the lock would write it over
 * the newer one, and the newer changes would be lost without a word. The same commit is no
 * conflict: what it writes is already there.
 */
async function refuseIfOvertaken(trx: Transaction<Database>, seen: number, commit: string | null): Promise<void> {
  // Every apply records one `import.apply` entry under the lock, so the entries' ids are in the order the applies committed.
  const other = (await auditTargetsSince(trx, 'import.apply', 'import', seen)).find((target) => commit === null || target !== commit);
  if (other === undefined) return;
  const read = commit ? `commit ${commit}` : 'the configuration directory';
  const applied = other === 'directory' ? 'the configuration directory' : `commit ${other}`;
  throw problems.conflict(
    `another import applied ${applied} while this one was reading ${read}, so its plan could undo what the other wrote; nothing was imported. Import again (a dry run or an apply): it reads the repository anew and plans against what the other import wrote`,
  );
}

export interface ImportDeps {
  db: Db;
  repository: ImportRepository | null;
  source: RepositoryDeps;
  agents: AgentsService;
  templates: TemplatesService;
  destinations: DestinationsService;
  skills: SkillsService;
  documents: DocumentsService;
}

export function createImportService(deps: ImportDeps) {
  const { db, agents, templates, destinations, skills, documents } = deps;

  /**
   * Brings an agent's context documents to the repository's (inside the import's transaction):
   * creates and replaces through the documents service, deletes only with prune. Answers the
   * diff and, without prune, the documents left alone.
   */
  async function syncDocuments(trx: Transaction<Database>, actor: Actor, def: Definition, prune: boolean): Promise<{ diff: string; leftAlone: string[] }> {
    const want = def.docs ?? {};
    const have = new Map((await documents.allOf('agent', def.name, trx)).map((d) => [d.name, d]));
    const form = (d: { media_type: string; description: string; content: string } | undefined) => (d ? `media_type: ${d.media_type}\ndescription: ${d.description}\n---\n${d.content}` : '');
    const diffs: string[] = [];
    const leftAlone: string[] = [];
    const found: PlanProblem[] = [];
    for (const name of [...new Set([...have.keys(), ...Object.keys(want)])].sort()) {
      const now = have.get(name);
      const next = want[name];
      if (!next && !prune) {
        leftAlone.push(name);
        continue;
      }
      const diff = lineDiff(form(now), form(next && { ...next, description: next.description ?? '' }), `documents/${name}`);
      if (!diff) continue;
      try {
        await step(trx, async () => {
          if (!next) await documents.remove(actor, 'agent', def.name, name, now!.row_version, trx);
          else await documents.put(actor, 'agent', def.name, name, now ? now.row_version : null, { media_type: next.media_type, description: next.description, content: next.content }, trx);
        });
        diffs.push(diff);
      } catch (err) {
        if (!(err instanceof Problem) || err.status >= 500) throw err;
        for (const e of err.errors.length ? err.errors : [{ field: '', message: err.detail }]) found.push({ file: next?.file ?? def.file, line: null, field: e.field || null, message: e.message });
      }
    }
    if (found.length) throw new FileProblems(found);
    return { diff: diffs.join('\n'), leftAlone };
  }

  /** Runs `fn` under a savepoint: a refusal undoes that one step and leaves the transaction usable. */
  async function step<T>(trx: Transaction<Database>, fn: () => Promise<T>): Promise<T> {
    await sql`savepoint import_step`.execute(trx);
    try {
      const out = await fn();
      await sql`release savepoint import_step`.execute(trx);
      return out;
    } catch (err) {
      await sql`rollback to savepoint import_step`.execute(trx);
      throw err;
    }
  }

  /** One definition against the database, inside the import's transaction: its plan entry, written unless unchanged or skipped. */
  async function upsert(trx: Transaction<Database>, actor: Actor, def: Definition, ctx: { commit: string | null; force: boolean; prune: boolean; edited: Set<string>; deleted: Set<string> }): Promise<PlanEntry> {
    const entry = (action: PlanEntry['action'], extra: Partial<PlanEntry> = {}): PlanEntry => ({ kind: def.kind, name: def.name, file: def.file, action, reason: null, diff: null, version: null, ...extra });
    const note = `imported from ${ctx.commit ? `commit ${ctx.commit}` : 'the configuration directory'}`;
    const notFound = (err: unknown) => err instanceof Problem && err.status === 404;
    switch (def.kind) {
      case 'skill': {
        const { body, resources } = def.body as { body: string; resources: Record<string, string> };
        const current = await skills.get(def.name, trx).catch((err) => (notFound(err) ? null : Promise.reject(err)));
        const render = (b: string, r: Record<string, string>) =>
          [lineDiff(current?.body ?? '', b, 'SKILL.md'), ...[...new Set([...Object.keys(current?.resources ?? {}), ...Object.keys(r)])].sort().map((p) => lineDiff(current?.resources[p] ?? '', r[p] ?? '', p))].filter(Boolean).join('\n');
        if (current && current.body === body && JSON.stringify(Object.entries(current.resources).sort()) === JSON.stringify(Object.entries(resources).sort())) return entry('unchanged');
        const diff = render(body, resources);
        if (current && ctx.edited.has(def.name) && !ctx.force) return entry('skip', { reason: 'edited through the API since the last import; import with force to overwrite it', diff });
        const row = await skills.importWrite(trx, def.name, body, resources);
        if (!current) return entry('create', { diff, version: row.revision, reason: ctx.deleted.has(def.name) ? 'deleted through the API; its file is still in the repository, so it returns' : null });
        return entry('update', { diff, version: row.revision, reason: ctx.edited.has(def.name) ? 'edited through the API; overwritten because of force' : null });
      }
      case 'policy': {
        if (isBuiltinDestination(def.name)) return entry('skip', { reason: `"${def.name}" is a built-in destination: the service defines it, and it is part of every agent's egress` });
        const body = def.body as never as Parameters<DestinationsService['create']>[1];
        const want = await destinations.resolve(body, trx);
        const current = await destinations.get(def.name, trx).catch((err) => (notFound(err) ? null : Promise.reject(err)));
        const form = (d: Record<string, unknown>) => {
          const { name: _n, builtin: _b, updated_at: _u, ...rest } = d;
          return toYaml(rest);
        };
        const diff = lineDiff(current ? form(current.destination) : '', form(want));
        if (current && !diff) return entry('unchanged');
        if (!current) await destinations.create(actor, body, trx);
        else await destinations.replace(actor, def.name, current.version, body, trx);
        return entry(current ? 'update' : 'create', { diff });
      }
      case 'agent': {
        const body = def.body as never as Parameters<AgentsService['create']>[1];
        const content = await agents.resolveVersion(def.name, body.version, trx, 'version.');
        const row = await agents.get(def.name, trx).catch((err) => (notFound(err) ? null : Promise.reject(err)));
        const meta = { display_name: body.display_name ?? null, kind: body.kind ?? null, description: body.description ?? '' };
        const want = toYaml({ ...compact(meta), version: content });
        if (!row) {
          await agents.create(actor, { ...body, version: { ...body.version, note: body.version.note ?? note } }, trx);
          const docs = await syncDocuments(trx, actor, def, ctx.prune);
          return entry('create', { diff: [lineDiff('', want), docs.diff].filter(Boolean).join('\n'), version: 1 });
        }
        const current = await agentVersionForRun(trx, def.name);
        const { version: _v, note: _n, created_by: _c, created_at: _a, ...had } = current;
        const docs = await syncDocuments(trx, actor, def, ctx.prune);
        const leftAlone = docs.leftAlone.length ? `documents not in the repository, left alone: ${docs.leftAlone.join(', ')}` : null;
        const diff = [lineDiff(toYaml({ ...compact({ display_name: row.display_name, kind: row.kind, description: row.description }), version: had }), want), docs.diff].filter(Boolean).join('\n');
        if (!diff) return entry('unchanged', { reason: leftAlone });
        let version: number | null = null;
        let expected = row.row_version;
        if (toYaml(had) !== toYaml(content)) {
          const added = await agents.addVersion(actor, def.name, expected, { ...body.version, note: body.version.note ? `${note}: ${body.version.note}` : note }, trx);
          version = added.version.version;
          expected = added.agent.row_version;
        }
        if (meta.display_name !== row.display_name || meta.kind !== row.kind || meta.description !== row.description) await agents.patch(actor, def.name, expected, meta, trx);
        return entry('update', { diff, version, reason: leftAlone });
      }
      case 'template': {
        const { name: _name, description, ...input } = def.body as never as Parameters<TemplatesService['create']>[1];
        const want = await templates.resolve(input, trx);
        const row = await templates.get(def.name, trx).catch((err) => (notFound(err) ? null : Promise.reject(err)));
        const form = (d: string, c: unknown) => toYaml({ description: d, ...(c as object) });
        if (!row) {
          await templates.create(actor, { ...(def.body as never as Parameters<TemplatesService['create']>[1]), note: input.note ?? note }, trx);
          return entry('create', { diff: lineDiff('', form(description ?? '', want.content)), version: 1 });
        }
        const current = presentTemplateVersion(await templates.getVersion(def.name, row.current_version, trx));
        const { version: _v, note: _n, created_by: _c, created_at: _a, content_sha256: hash, ...had } = current;
        const diff = lineDiff(form(row.description, had), form(description ?? '', want.content));
        if (hash === want.content_sha256 && row.description === (description ?? '')) return entry('unchanged');
        let version: number | null = null;
        let expected = row.row_version;
        if (hash !== want.content_sha256) {
          const added = await templates.createVersion(actor, def.name, expected, { ...input, note: input.note ? `${note}: ${input.note}` : note }, trx);
          version = added.version;
          expected = (await templates.get(def.name, trx)).row_version;
        }
        if (row.description !== (description ?? '')) await templates.patch(actor, def.name, expected, description ?? null, trx);
        return entry('update', { diff, version });
      }
    }
  }

  /** Deletes (prune) a definition the repository no longer names; a refusal (in use) becomes a skip saying why. */
  async function prune(trx: Transaction<Database>, actor: Actor, kind: Kind, name: string): Promise<PlanEntry | null> {
    const entry = (action: PlanEntry['action'], reason: string): PlanEntry => ({ kind, name, file: null, action, reason, diff: null, version: null });
    try {
      await step(trx, async () => {
        if (kind === 'agent') await agents.remove(actor, name, (await agents.get(name, trx)).row_version, trx);
        if (kind === 'template') await templates.remove(actor, name, (await templates.get(name, trx)).row_version, trx);
        if (kind === 'policy') await destinations.remove(actor, name, (await destinations.get(name, trx)).version, trx);
        if (kind === 'skill') await skills.remove(actor, name, (await skills.get(name, trx)).row_version, trx);
      });
      return entry('delete', 'not in the repository; deleted because of prune');
    } catch (err) {
      if (err instanceof Problem && err.status === 404) return null;
      if (err instanceof Problem && err.status < 500) return entry('skip', `not in the repository, but cannot be deleted: ${err.detail}`);
      throw err;
    }
  }

  return {
    /**
     * Reads the repository and makes the plan inside one transaction under the import lock: every
     * definition is written through its service (the API's rules, on the transaction), then the
     * transaction rolls back for a dry run or when a problem was found, or commits (an apply),
     * audited once with the commit. Two imports wait for each other; one that read the repository
     * before another applied a different commit is refused (409) under the lock, so an older
     * commit is never applied over a newer one.
     */
    async run(actor: Actor, opts: { dryRun: boolean; force: boolean; prune: boolean }): Promise<ImportPlan> {
      // The last apply before the repository is read: one recorded after it, once the lock is held, ran while this import read.
      const seen = await latestAuditId(db, 'import.apply', 'import');
      const snap = await readRepository(deps.repository, deps.source);
      const parsed = parseLayout(snap);
      const named = await currentNames(deps);
      const plan: ImportPlan = { commit: snap.commit, dry_run: opts.dryRun, applied: false, force: opts.force, prune: opts.prune, entries: [], left_alone: [], problems: parsed.problems };
      try {
        await db.transaction().execute(async (trx) => {
          await lockKey(trx, IMPORT_LOCK);
          await refuseIfOvertaken(trx, seen, snap.commit);
          const state = await skills.importState(trx);
          const ctx = { commit: snap.commit, force: opts.force, prune: opts.prune, edited: new Set(state.edited), deleted: new Set(state.deleted.map((d) => d.name)) };
          for (const kind of KINDS) {
            for (const def of parsed.definitions.filter((d) => d.kind === kind).sort((a, b) => (a.name < b.name ? -1 : 1))) {
              try {
                plan.entries.push(await step(trx, () => upsert(trx, actor, def, ctx)));
              } catch (err) {
                if (err instanceof FileProblems) {
                  plan.problems.push(...err.problems);
                  continue;
                }
                if (!(err instanceof Problem) || err.status >= 500) throw err;
                plan.problems.push(...problemsOf(def, err));
              }
            }
          }
          for (const kind of [...KINDS].reverse()) {
            const inRepo = new Set(parsed.definitions.filter((d) => d.kind === kind).map((d) => d.name));
            // A skill with a problem in its folder is still named by the repository: never pruned.
            for (const p of plan.problems) if (kind === 'skill' && p.file.startsWith('skills/')) inRepo.add(p.file.split('/')[1]);
            for (const p of plan.problems) if (kind !== 'skill' && p.file.startsWith(`${DIR_OF[kind]}/`)) inRepo.add(p.file.slice(DIR_OF[kind].length + 1).replace(/\.ya?ml$/, ''));
            for (const name of named[kind].filter((n) => !inRepo.has(n)).sort()) {
              if (kind === 'skill' && !isSkillName(name)) continue;
              if (!opts.prune) plan.left_alone.push({ kind, name });
              else {
                const e = await prune(trx, actor, kind, name);
                if (e) plan.entries.push(e);
              }
            }
          }
          if (opts.dryRun || plan.problems.length) throw new RollBack();
          const count = (a: PlanEntry['action']) => plan.entries.filter((e) => e.action === a).length;
          await recordAudit(trx, actor, 'import.apply', { type: 'import', id: snap.commit ?? 'directory' }, {
            commit: snap.commit,
            force: opts.force,
            prune: opts.prune,
            created: count('create'),
            updated: count('update'),
            deleted: count('delete'),
            skipped: count('skip'),
            unchanged: count('unchanged'),
            changes: plan.entries.filter((e) => e.action !== 'unchanged' && e.action !== 'skip').map((e) => `${e.action} ${e.kind} ${e.name}`),
          });
        });
        plan.applied = true;
      } catch (err) {
        if (!(err instanceof RollBack)) throw err;
      }
      if (!opts.dryRun && plan.problems.length) {
        throw problems.validation(
          plan.problems.map((p) => ({ field: `${p.file}${p.line ? `, line ${p.line}` : ''}${p.field ? `: ${p.field}` : ''}`, message: p.message })),
          `the configuration repository has ${plan.problems.length} problem(s); nothing was imported. Fix them in the repository (a dry run lists them with their files and lines)`,
        );
      }
      return plan;
    },
  };
}

export type ImportService = ReturnType<typeof createImportService>;

import { sql, type Kysely, type QueryCreator, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { PostDraft } from './runs.rules.ts';
import type { Delivery, RunState, RunSurface, TaskState, WaitingFor } from './runs.tables.ts';

type Q = Kysely<Database> | Transaction<Database>;

export type RunRow = NonNullable<Awaited<ReturnType<typeof getRun>>>;
export type TaskRow = Awaited<ReturnType<typeof tasksOf>>[number];
export type PostRow = Awaited<ReturnType<typeof postsAfter>>[number];

export function getRun(db: Q, id: string) {
  return db.selectFrom('runs').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The run, locked for the rest of the transaction: every change of a run goes through this. */
export function lockRun(trx: Transaction<Database>, id: string) {
  return trx.selectFrom('runs').selectAll().where('id', '=', id).forUpdate().executeTakeFirst();
}

/** The run of a task, locked for the rest of the transaction (undefined: no such task or run); one statement. */
export function lockRunOfTask(trx: Transaction<Database>, taskId: string) {
  return trx
    .selectFrom('runs')
    .selectAll()
    .where('id', '=', (eb) => eb.selectFrom('run_tasks').select('run_id').where('run_tasks.id', '=', taskId))
    .forUpdate()
    .executeTakeFirst();
}

export function listRuns(db: Q, filter: { state?: RunState; team?: string; teamId?: number }, cursor: CursorValue[] | null, limit: number) {
  let q = db.selectFrom('runs').selectAll();
  if (filter.state) q = q.where('state', '=', filter.state);
  if (filter.team) q = q.where('team_name', '=', filter.team);
  if (filter.teamId !== undefined) q = q.where('team_id', '=', filter.teamId);
  return keyset(q, ['created_at', 'id'], 'desc', cursor, limit).execute();
}

export function tasksOf(db: Q, runIds: string[]) {
  if (!runIds.length) return Promise.resolve([]);
  return db.selectFrom('run_tasks').selectAll().where('run_id', 'in', runIds).orderBy('created_at').orderBy('id').execute();
}

export function getTask(db: Q, id: string) {
  return db.selectFrom('run_tasks').selectAll().where('id', '=', id).executeTakeFirst();
}

/** The task the engine works on next: the oldest that is queued or running. */
export function nextTask(db: Q, runId: string) {
  return db
    .selectFrom('run_tasks')
    .selectAll()
    .where('run_id', '=', runId)
    .where('state', 'in', ['queued', 'running'])
    .orderBy('created_at')
    .orderBy('id')
    .limit(1)
    .executeTakeFirst();
}

export function postsAfter(db: Q, runId: string, after: number, limit: number) {
  return db.selectFrom('run_posts').selectAll().where('run_id', '=', runId).where('seq', '>', after).orderBy('seq').limit(limit).execute();
}

export function getPost(db: Q, runId: string, seq: number) {
  return db.selectFrom('run_posts').selectAll().where('run_id', '=', runId).where('seq', '=', seq).executeTakeFirst();
}

/**
 * Appends a post to a locked run: the next seq, once per `source` (a second append of the same
 * source returns the first post's seq and adds nothing). One statement (the look-up by source,
 * the run's next seq and the insert), as a run's recording appends a post for most events.
 */
export async function appendPost(trx: Transaction<Database>, runId: string, draft: PostDraft, source: string | null = null): Promise<number> {
  return (await addPost(trx, runId, draft, source, false)).seq;
}

/** A post as it was added, with what a read of it would give (for this process's post streams). */
export type AddedPost = Pick<PostRow, 'seq' | 'kind' | 'role' | 'text' | 'data' | 'created_at'>;

/**
 * `appendPost`, answering with `withPost` the post it added as well (null when its source had
 * one already): the same statement, returning the new row's columns as the database stored them.
 * Only when asked: on the embedded database those columns cost the statement about a tenth.
 */
export async function addPost(trx: Transaction<Database>, runId: string, draft: PostDraft, source: string | null, withPost: boolean): Promise<{ seq: number; added: AddedPost | null }> {
  const { rows } = await sql<AddedPost & { is_new: boolean }>`
    with existing as (
      select seq from run_posts where run_id = ${runId} and source = ${source}
    ), next as (
      update runs set last_seq = last_seq + 1, updated_at = now()
      where id = ${runId} and not exists (select 1 from existing)
      returning last_seq
    ), added as (
      insert into run_posts (run_id, seq, kind, role, text, data, source)
      select ${runId}, last_seq, ${draft.kind}, ${draft.role}, ${draft.text}, ${JSON.stringify(draft.data ?? {})}::jsonb, ${source} from next
      returning ${withPost ? sql`seq, kind, role, text, data, created_at, true as is_new` : sql`seq, true as is_new`}
    )
    select * from added union all select ${withPost ? sql`seq, null, null, null, null, null, false` : sql`seq, false`} from existing`.execute(trx);
  if (!rows.length) throw new Error(`run ${runId} does not exist: no post appended`);
  const { is_new, ...row } = rows[0];
  return { seq: Number(row.seq), added: is_new && withPost ? { ...row, seq: Number(row.seq) } : null };
}

/**
 * The follow-up that reopened an ended run most recently at or before `seq` (null: none, the
 * run's first activation): each reopening is an activation of its own in the run's trace.
 */
export async function reopeningAt(db: Q, runId: string, seq: number): Promise<{ seq: number; created_at: Date | string } | null> {
  const row = await db
    .selectFrom('run_posts')
    .select(['seq', 'created_at'])
    .where('run_id', '=', runId)
    .where('seq', '<=', seq)
    .where('kind', '=', 'reply')
    .where(sql<boolean>`(data->>'reopened')::boolean is true`)
    .orderBy('seq', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row ?? null;
}

export async function insertTask(
  trx: Transaction<Database>,
  t: { id: string; run_id: string; role: string; post_seq: number; input: unknown; agent_version: number | null; conversation: string; events_seen: number },
) {
  await trx.insertInto('run_tasks').values({ ...t, state: 'queued', input: JSON.stringify(t.input) }).execute();
}

export async function setTask(trx: Q, id: string, set: { state?: TaskState; input?: unknown; outcome?: unknown; turn_from?: number | null; started?: boolean; finished?: boolean; sandbox_id?: string | null }) {
  await trx
    .updateTable('run_tasks')
    .set({
      ...(set.state ? { state: set.state } : {}),
      ...(set.input !== undefined ? { input: JSON.stringify(set.input) } : {}),
      ...(set.outcome !== undefined ? { outcome: JSON.stringify(set.outcome) } : {}),
      ...(set.turn_from !== undefined ? { turn_from: set.turn_from } : {}),
      ...(set.sandbox_id !== undefined ? { sandbox_id: set.sandbox_id } : {}),
      ...(set.started ? { started_at: sql`coalesce(started_at, now())` } : {}),
      ...(set.finished ? { finished_at: sql`now()` } : {}),
    })
    .where('id', '=', id)
    .execute();
}

/** Ends every open task of a run in one state. */
export async function endOpenTasks(trx: Transaction<Database>, runId: string, state: TaskState) {
  await trx.updateTable('run_tasks').set({ state, finished_at: sql`now()` }).where('run_id', '=', runId).where('state', 'in', ['queued', 'running', 'waiting']).execute();
}

/** The last journal seq recorded for a role's conversation in a run (a new task of the role goes on from it). */
export async function conversationSeen(db: Q, runId: string, role: string): Promise<number | null> {
  const row = await db.selectFrom('run_tasks').select(sql<number | null>`max(events_seen)`.as('seen')).where('run_id', '=', runId).where('role', '=', role).executeTakeFirst();
  return row?.seen ?? null;
}

export function memoryOf(db: Q, team: string, max: number) {
  return db.selectFrom('team_memory').select(['run_id', 'text', 'created_at']).where('team_name', '=', team).orderBy('id', 'desc').limit(max).execute();
}

export async function writeMemory(trx: Transaction<Database>, team: string, runId: string, text: string) {
  await trx
    .insertInto('team_memory')
    .values({ team_name: team, run_id: runId, text })
    .onConflict((oc) => oc.column('run_id').doUpdateSet({ text, created_at: sql`now()` }))
    .execute();
}

/** Per team: runs in progress, runs waiting, the newest run's start. */
export function activityOf(db: Q, teamIds: number[]) {
  return db
    .selectFrom('runs')
    .select([
      'team_id',
      sql<number>`count(*) filter (where state = 'running')`.as('running'),
      sql<number>`count(*) filter (where state = 'waiting')`.as('waiting'),
      sql<string | null>`max(created_at)`.as('last_run_at'),
    ])
    .where('team_id', 'in', teamIds)
    .groupBy('team_id')
    .execute();
}

/**
 * The query of liveOnSurface. An open run (running, waiting) has no finished_at (finishRun sets
 * it, reopenRun clears it), so "open, or ended within" is one range on
 * coalesce(finished_at, 'infinity'): the indexes runs_surface_live and runs_team_name_live
 * (migration 0760) serve it, where the state's OR read the whole table.
 */
export function liveOnSurfaceQuery(db: Q, surface: RunSurface, endedWithinSeconds: number, limit: number, teams: string[] = []) {
  return db
    .selectFrom('runs')
    .select('id')
    .where((eb) => (teams.length ? eb.or([eb('surface', '=', surface), eb('team_name', 'in', teams)]) : eb('surface', '=', surface)))
    .where(sql<string>`coalesce(finished_at, 'infinity'::timestamptz)`, '>', sql<string>`now() - make_interval(secs => ${endedWithinSeconds})`)
    .orderBy('updated_at', 'desc')
    .orderBy('id', 'desc')
    .limit(limit);
}

/** A surface's runs (and every run of `teams`) still open, or ended within `endedWithinSeconds`, most recently changed first. */
export async function liveOnSurface(db: Q, surface: RunSurface, endedWithinSeconds: number, limit: number, teams: string[] = []): Promise<string[]> {
  const rows = await liveOnSurfaceQuery(db, surface, endedWithinSeconds, limit, teams).execute();
  return rows.map((r) => r.id);
}

export async function openRunsOf(db: Q, teamId: number): Promise<string[]> {
  return (await db.selectFrom('runs').select('id').where('team_id', '=', teamId).where('state', 'in', ['running', 'waiting']).execute()).map((r) => r.id);
}

/**
 * The agent version pinned for a role by the open run (running or waiting) whose task last ran
 * in a sandbox; null when no open run uses it. Several runs may share a sandbox: the newest
 * started task's run is the one its requests belong to.
 */
export async function pinnedVersionInSandbox(db: Q, sandboxId: string, role: string): Promise<number | null> {
  const row = await db
    .selectFrom('run_tasks')
    .innerJoin('runs', 'runs.id', 'run_tasks.run_id')
    .select(['run_tasks.agent_version', 'runs.agent_versions'])
    .where('run_tasks.sandbox_id', '=', sandboxId)
    .where('run_tasks.role', '=', role)
    .where('runs.state', 'in', ['running', 'waiting'])
    .orderBy('run_tasks.started_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  if (!row) return null;
  return row.agent_version ?? row.agent_versions?.[role] ?? null;
}

type OpenCalls = Map<string, { name: string; state: 'open' | 'settled'; proposed: boolean; subject: string | null }>;

/** A task with the calls of its conversation still waiting for their result (what the host saw the model request), in one statement. */
export async function taskWithOpenCalls(db: Q, taskId: string): Promise<{ task: TaskRow; calls: OpenCalls } | null> {
  const row = await db
    .selectFrom('run_tasks as t')
    .selectAll('t')
    .select(
      sql<Array<{ call_id: string; name: string; state: 'open' | 'settled'; proposed: boolean; subject: string | null }>>`coalesce((
        select jsonb_agg(jsonb_build_object('call_id', c.call_id, 'name', c.name, 'state', c.state, 'proposed', c.proposed, 'subject', c.subject))
        from run_calls c where c.conversation = t.conversation and c.state = 'open'), '[]'::jsonb)`.as('open_calls'),
    )
    .where('t.id', '=', taskId)
    .executeTakeFirst();
  if (!row) return null;
  const { open_calls, ...task } = row;
  return { task, calls: new Map(open_calls.map((r) => [r.call_id, { name: r.name, state: r.state, proposed: r.proposed, subject: r.subject }])) };
}

type SavedCalls = Map<string, { name: string; state: 'open' | 'settled'; proposed: boolean; subject?: string | null }>;

/** The insert of what became of a conversation's calls (a model reply that names an id again opens it again). */
function upsertCalls(db: QueryCreator<Database>, conversation: string, calls: SavedCalls) {
  return db
    .insertInto('run_calls')
    .values([...calls].map(([id, c]) => ({ conversation, call_id: id, name: c.name, state: c.state, proposed: c.proposed, subject: c.subject ?? null })))
    .onConflict((oc) =>
      oc.columns(['conversation', 'call_id']).doUpdateSet((eb) => ({ name: eb.ref('excluded.name'), state: eb.ref('excluded.state'), proposed: eb.ref('excluded.proposed'), subject: eb.ref('excluded.subject') })),
    );
}

/** Charges ledger lines to a task, each once ever: the cost of the lines no task had yet. */
export async function chargeSpend(trx: Transaction<Database>, t: { run_id: string; task_id: string; sandbox_id: string }, lines: Array<{ id: string; cost_usd: number }>): Promise<number> {
  if (!lines.length) return 0;
  const rows = await trx
    .insertInto('run_spend')
    .values(lines.map((l) => ({ ledger_id: l.id, run_id: t.run_id, task_id: t.task_id, sandbox_id: t.sandbox_id, cost_usd: l.cost_usd })))
    .onConflict((oc) => oc.column('ledger_id').doNothing())
    .returning('cost_usd')
    .execute();
  return rows.reduce((n, r) => n + Number(r.cost_usd), 0);
}

/** The newest ledger line charged for a sandbox's calls ('0': none). */
export async function spendCursor(db: Q, sandboxId: string): Promise<string> {
  const row = await db.selectFrom('run_spend').select(sql<string | null>`max(ledger_id)`.as('last')).where('sandbox_id', '=', sandboxId).executeTakeFirst();
  return row?.last ? String(row.last) : '0';
}

export async function insertRun(
  trx: Transaction<Database>,
  r: { id: string; team_id: number; team_name: string; surface: RunSurface; external_ref: string | null; text: string; created_by: string; lead: string; agent_versions: Record<string, number>; trace_id: string },
) {
  await trx
    .insertInto('runs')
    .values({ ...r, state: 'running', agent_versions: JSON.stringify(r.agent_versions) })
    .execute();
}

/** Ends a run in a state (its question and wait cleared, its delivery set when given); answers its last seq. */
export async function finishRun(trx: Transaction<Database>, runId: string, state: 'succeeded' | 'failed' | 'cancelled', fields: { failure_reason: string | null; delivery?: Delivery | null }): Promise<number> {
  await trx
    .updateTable('runs')
    .set({
      state,
      finished_at: sql`now()`,
      updated_at: sql`now()`,
      waiting_for: null,
      open_question_seq: null,
      failure_reason: fields.failure_reason,
      ...(fields.delivery !== undefined ? { delivery: fields.delivery ? JSON.stringify(fields.delivery) : null } : {}),
      row_version: sql`nextval('row_version_seq')`,
    })
    .where('id', '=', runId)
    .execute();
  const { last_seq } = await trx.selectFrom('runs').select('last_seq').where('id', '=', runId).executeTakeFirstOrThrow();
  return last_seq;
}

/** Notes that a run was asked to stop (the engine stops its tools and agent loop). */
export async function markCancelRequested(trx: Transaction<Database>, runId: string) {
  await trx.updateTable('runs').set({ cancel_requested_at: sql`now()` }).where('id', '=', runId).execute();
}

/** A waiting run goes on: its question is answered. */
export async function resumeWaiting(trx: Transaction<Database>, runId: string) {
  await trx.updateTable('runs').set({ state: 'running', waiting_for: null, open_question_seq: null, row_version: sql`nextval('row_version_seq')` }).where('id', '=', runId).execute();
}

/** An ended run runs again (a follow-up reopened it). */
export async function reopenRun(trx: Transaction<Database>, runId: string) {
  await trx.updateTable('runs').set({ state: 'running', finished_at: null, failure_reason: null, row_version: sql`nextval('row_version_seq')` }).where('id', '=', runId).execute();
}

/** A run waits for a person: what for, and the question's post. */
export async function waitRun(trx: Transaction<Database>, runId: string, waitingFor: WaitingFor, questionSeq: number) {
  await trx
    .updateTable('runs')
    .set({ state: 'waiting', waiting_for: JSON.stringify(waitingFor), open_question_seq: questionSeq, row_version: sql`nextval('row_version_seq')` })
    .where('id', '=', runId)
    .execute();
}

export async function setReworkUsed(trx: Transaction<Database>, runId: string, used: number) {
  await trx.updateTable('runs').set({ rework_used: used }).where('id', '=', runId).execute();
}

export async function setDelivery(trx: Transaction<Database>, runId: string, delivery: Delivery) {
  await trx.updateTable('runs').set({ delivery: JSON.stringify(delivery), row_version: sql`nextval('row_version_seq')` }).where('id', '=', runId).execute();
}

/** The task of a role that waits (for the lead's or a person's answer), newest first. */
export function waitingTaskOf(db: Q, runId: string, role: string) {
  return db.selectFrom('run_tasks').select('id').where('run_id', '=', runId).where('role', '=', role).where('state', '=', 'waiting').orderBy('created_at', 'desc').executeTakeFirst();
}

/** The seq of a run's post made by `source`, if any. */
export async function postSeqOf(db: Q, runId: string, source: string): Promise<number | null> {
  const row = await db.selectFrom('run_posts').select('seq').where('run_id', '=', runId).where('source', '=', source).executeTakeFirst();
  return row?.seq ?? null;
}

/**
 * Records a task's accepted events: how far its journal was read, the model calls counted, the
 * turn end the host accepted, and what became of its conversation's calls (`calls`);
 * one statement.
 */
export async function recordTaskEvents(
  trx: Transaction<Database>,
  taskId: string,
  seen: number,
  iterations: number,
  turnEnd: { seq: number; outcome: unknown } | null,
  calls: { conversation: string; calls: SavedCalls } | null = null,
) {
  const q = calls && calls.calls.size ? trx.with('saved_calls', (db) => upsertCalls(db, calls.conversation, calls.calls)) : trx;
  await q
    .updateTable('run_tasks')
    .set({
      events_seen: seen,
      iterations: sql`iterations + ${iterations}`,
      ...(turnEnd ? { turn_end_seq: turnEnd.seq, turn_end: JSON.stringify(turnEnd.outcome) } : {}),
    })
    .where('id', '=', taskId)
    .execute();
}

/** Adds a cost to a task and its run. */
export async function addCost(trx: Transaction<Database>, runId: string, taskId: string, cost: number) {
  await trx
    .with('task', (q) => q.updateTable('run_tasks').set({ cost_usd: sql`cost_usd + ${cost}` }).where('id', '=', taskId))
    .updateTable('runs')
    .set({ cost_usd: sql`cost_usd + ${cost}` })
    .where('id', '=', runId)
    .execute();
}

/**
 * Takes (or renews) the lease on driving a run: null while another owner holds an unexpired
 * one. The generation grows with each new owner.
 */
export async function claimRun(db: Q, runId: string, owner: string, leaseSeconds: number): Promise<number | null> {
  const row = await db
    .updateTable('runs')
    .set({
      owner,
      owner_until: sql`now() + make_interval(secs => ${leaseSeconds})`,
      owner_generation: sql`case when owner is distinct from ${owner} then owner_generation + 1 else owner_generation end`,
    })
    .where('id', '=', runId)
    .where((eb) => eb.or([eb('owner', 'is', null), eb('owner', '=', owner), eb('owner_until', '<', sql<string>`now()`)]))
    .returning('owner_generation')
    .executeTakeFirst();
  return row ? Number(row.owner_generation) : null;
}

/** Gives a run's lease up (only the owner of that generation can). */
export async function releaseRun(db: Q, runId: string, owner: string, generation: number) {
  await db.updateTable('runs').set({ owner: null, owner_until: null }).where('id', '=', runId).where('owner', '=', owner).where('owner_generation', '=', generation).execute();
}

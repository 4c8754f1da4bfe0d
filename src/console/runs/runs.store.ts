import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import { keyset, type CursorValue } from '../../db/pagination.ts';
import type { PostDraft } from '../../runtime/engine/rules.ts';
import type { RunState, TaskState } from './runs.tables.ts';

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
 * source returns the first post's seq and adds nothing).
 */
export async function appendPost(trx: Transaction<Database>, runId: string, draft: PostDraft, source: string | null = null): Promise<number> {
  if (source) {
    const existing = await trx.selectFrom('run_posts').select('seq').where('run_id', '=', runId).where('source', '=', source).executeTakeFirst();
    if (existing) return existing.seq;
  }
  const { last_seq } = await trx
    .updateTable('runs')
    .set({ last_seq: sql`last_seq + 1`, updated_at: sql`now()` })
    .where('id', '=', runId)
    .returning('last_seq')
    .executeTakeFirstOrThrow();
  await trx
    .insertInto('run_posts')
    .values({ run_id: runId, seq: last_seq, kind: draft.kind, role: draft.role, text: draft.text, data: JSON.stringify(draft.data ?? {}), source })
    .execute();
  return last_seq;
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

/** The calls of a conversation still waiting for their result (what the host saw the model request). */
export async function openCalls(db: Q, conversation: string): Promise<Map<string, { name: string; state: 'open' | 'settled'; proposed: boolean; subject: string | null }>> {
  const rows = await db.selectFrom('run_calls').select(['call_id', 'name', 'state', 'proposed', 'subject']).where('conversation', '=', conversation).where('state', '=', 'open').execute();
  return new Map(rows.map((r) => [r.call_id, { name: r.name, state: r.state, proposed: r.proposed, subject: r.subject }]));
}

/** Stores what became of a conversation's calls (a model reply that names an id again opens it again). */
export async function saveCalls(trx: Transaction<Database>, conversation: string, calls: Map<string, { name: string; state: 'open' | 'settled'; proposed: boolean; subject?: string | null }>) {
  for (const [id, c] of calls) {
    await trx
      .insertInto('run_calls')
      .values({ conversation, call_id: id, name: c.name, state: c.state, proposed: c.proposed, subject: c.subject ?? null })
      .onConflict((oc) => oc.columns(['conversation', 'call_id']).doUpdateSet({ name: c.name, state: c.state, proposed: c.proposed, subject: c.subject ?? null }))
      .execute();
  }
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

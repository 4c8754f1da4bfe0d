// Contract defects an audit found: the budget 429 of POST /teams/{name}/tasks carries
// Retry-After (the seconds until the UTC day turns), as the served contract declares on every 429;
// and a run belongs to the team that ran it, not to its name: a new team that takes an archived
// team's name lists none of the archived team's runs.
// A reply's in_reply_to past the largest post number is a 400 naming it, not a database error without a field.
// A client that prefers JSON (by its Accept qualities) gets the posts as JSON, not the endless event stream.
// A run and its trace refuse a query parameter they do not take (400 naming it), as the lists do, rather than ignore it.
// From probing runs as an outside client: a cursor edited by hand is a 400 naming `cursor` on every list whose keys are
// not all text (not a database error without a field); a follow-up to a run of an archived team is a 409 (it reopened the
// run only to fail it); `approve` where it decides nothing is a 422 (it was ignored); a run's cost is shown to the
// micro-dollar (a float sum showed 0.00037799999999999997); text holding half of a surrogate pair is a 400 naming its field.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { encodeCursor } from '../../db/pagination.ts';
import { makeRun, makeTeam, makeTemplate } from '../../../test/factories.ts';
import { makeHostRow } from '../../../test/sandboxes.ts';
import { systemActor } from '../../audit/audit.ts';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { prefers } from '../../http/negotiation.ts';

describe('runs: contract defects', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ modelProxy: true });
  });
  after(() => t.close());

  test('a task for a team whose daily budget is spent is a 429 with Retry-After until the UTC day turns', async () => {
    const team = await makeTeam(t, { body: { budget_usd_per_day: 1 } });
    // The model proxy's books say the day's budget is spent (as its settlements write them).
    const { id } = await t.db.selectFrom('teams').select('id').where('name', '=', team.name).where('status', '=', 'active').executeTakeFirstOrThrow();
    await t.db.updateTable('mp_teams').set({ day: sql`(now() at time zone 'utc')::date`, day_spend: 1 }).where('team', '=', `${team.name}.${id}`).execute();
    const before = Date.now();
    const res = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/tasks`, token: t.adminToken, body: { text: 'go' } });
    assert.equal(res.status, 429, res.text);
    assert.match(res.body.detail, /spent its daily budget/);
    const seconds = Number(res.headers['retry-after']);
    const d = new Date(before);
    const midnight = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1);
    assert.ok(Number.isInteger(seconds) && seconds >= 1 && seconds <= 86_400, String(res.headers['retry-after']));
    assert.ok(Math.abs(before + seconds * 1000 - midnight) <= 60_000, 'it points at the next 00:00 UTC');
    const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).body;
    assert.ok(doc.paths['/teams/{name}/tasks'].post.responses['429'].headers['retry-after'], 'the contract declares it');
  });

  test('a follow-up that would reopen a finished run is a 429 while the team\'s budget is spent, saying when it is taken again', async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const team = await makeTeam(t, { body: { budget_usd_per_day: 1 } });
    const { run_id } = await makeRun(t, { team: team.name });
    // The run failed (its budget ran out mid-run, say): a follow-up would start it again at once.
    await t.db.updateTable('runs').set({ state: 'failed', failure_reason: 'the budget is spent' }).where('id', '=', run_id).execute();
    const { id } = await t.db.selectFrom('teams').select('id').where('name', '=', team.name).where('status', '=', 'active').executeTakeFirstOrThrow();
    await t.db.updateTable('mp_teams').set({ day: sql`(now() at time zone 'utc')::date`, day_spend: 1 }).where('team', '=', `${team.name}.${id}`).execute();
    const res = await t.request({ method: 'POST', url: `/api/v1/runs/${run_id}/replies`, token: t.adminToken, body: { text: 'try again with a smaller model' } });
    assert.equal(res.status, 429, res.text);
    assert.match(res.body.detail, /has spent its daily budget; follow-ups are accepted again after 00:00 UTC, or sooner when an admin raises the team's daily budget/);
    assert.ok(Number(res.headers['retry-after']) >= 1);
    assert.equal((await t.services.runs.get(run_id)).run.state, 'failed', 'the run was not reopened');
  });

  test('a new team that takes an archived team\'s name lists only its own runs', async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const task = async (team: string) => {
      const res = await t.request({ method: 'POST', url: `/api/v1/teams/${team}/tasks`, token: t.adminToken, body: { text: 'work' } });
      assert.equal(res.status, 202, res.text);
      return res.body.run_id as string;
    };
    const tpl = await makeTemplate(t);
    const first = await makeTeam(t, { template: tpl.name });
    const old = await task(first.name);
    const { row_version } = await t.services.teams.get(first.name);
    await t.services.teams.archive(systemActor('test'), first.name, row_version);
    const second = await makeTeam(t, { template: tpl.name, body: { name: first.name } });
    assert.equal(second.name, first.name);
    const mine = await task(second.name);
    const listed = await t.request({ method: 'GET', url: `/api/v1/teams/${second.name}/runs`, token: t.adminToken });
    assert.equal(listed.status, 200, listed.text);
    assert.deepEqual(listed.body.items.map((r: { id: string }) => r.id), [mine], `not the archived team's run ${old}`);
  });

  test('a reply whose in_reply_to is past the largest post number is a 400 naming in_reply_to', async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const run = await makeRun(t);
    for (const in_reply_to of [2147483648, 1e30]) {
      const res = await t.request({ method: 'POST', url: `/api/v1/runs/${run.run_id}/replies`, token: t.adminToken, body: { text: 'yes', in_reply_to } });
      assert.equal(res.status, 400, res.text);
      assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), ['in_reply_to']);
      assert.match(res.body.detail, /in_reply_to must be at most 2147483647/);
    }
    const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).body;
    const body = doc.paths['/runs/{id}/replies'].post.requestBody.content['application/json'].schema;
    const schema = body.$ref ? doc.components.schemas[body.$ref.split('/').pop()] : body;
    assert.equal(schema.properties.in_reply_to.anyOf[0].maximum, 2147483647, 'the contract says the bound');
  });

  test('posts are JSON to a client that prefers JSON over the event stream, by its Accept qualities', async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const run = await makeRun(t);
    for (const accept of ['text/event-stream;q=0.1, application/json', 'text/event-stream;q=0', 'application/json, text/event-stream;q=0.9']) {
      const res = await t.request({ method: 'GET', url: `/api/v1/runs/${run.run_id}/posts`, token: t.adminToken, headers: { accept } });
      assert.equal(res.status, 200, accept);
      assert.match(String(res.headers['content-type']), /^application\/json/, accept);
      assert.ok(Array.isArray(res.body.items), accept);
    }
    // Asked for first, or alone, it is the stream (the route's own tests follow one).
    for (const accept of ['text/event-stream', 'application/json;q=0.5, text/event-stream', 'text/event-stream, */*']) assert.equal(prefers(accept, 'text/event-stream'), true, accept);
    for (const accept of [undefined, '', 'application/json', '*/*', 'text/event-stream;q=0.2, */*;q=0.8']) assert.equal(prefers(accept, 'text/event-stream'), false, String(accept));
  });

  test('the served contract describes the team state transitions and its compatibility and deprecation policy', async () => {
    const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).body;
    const text: string = doc.info.description;
    assert.match(text, /## Team state\n/);
    assert.match(text, /A task moves an `idle` or `sleeping` team to `running`; a question moves it to `waiting` and the answer back to `running`/);
    assert.match(text, /## Compatibility and deprecation\n/);
    assert.match(text, /marked `deprecated: true`.*keeps working for at least two minor releases/);
  });

  test('a run and its trace take no query parameter: one sent is a 400 naming it, as on the lists', async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const { run_id } = await makeRun(t);
    for (const path of [`/api/v1/runs/${run_id}`, `/api/v1/runs/${run_id}/trace`]) {
      assert.equal((await t.request({ method: 'GET', url: path, token: t.adminToken })).status, 200, path);
      const res = await t.request({ method: 'GET', url: `${path}?limit=5`, token: t.adminToken });
      assert.equal(res.status, 400, `${path}: ${res.text}`);
      assert.deepEqual(res.body.errors, [{ field: 'limit', message: 'is not a known field' }]);
      assert.match(res.body.detail, /^the query string is not valid: limit is not a known field/);
    }
  });
  /** A run of a fresh team whose lead's turn ended with `outcome`, as the engine applies one. */
  async function runWith(outcome: Parameters<TestApp['services']['runJournal']['applyOutcome']>[1]) {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const run = await makeRun(t);
    const work = (await t.services.runJournal.nextWork(run.run_id))!;
    await t.services.runJournal.beginTurn(work.task.id, 0, null);
    await t.services.runJournal.applyOutcome(work.task.id, outcome);
    return run;
  }

  test('a cursor edited by hand is a 400 naming cursor on lists keyed by time and numbers, not a database error', async () => {
    const tpl = await makeTemplate(t);
    await makeTeam(t, { template: tpl.name });
    const lists = [
      ['/api/v1/runs', encodeCursor(['not a time', 'run_x'])],
      ['/api/v1/runs', encodeCursor(['2026-13-45T99:99:99.000Z', 'run_x'])],
      ['/api/v1/teams', encodeCursor(['a', 'x'])],
      [`/api/v1/team-templates/${tpl.name}/versions`, encodeCursor(['x'])],
      ['/api/v1/integrations/code_host/deliveries', encodeCursor(['2026-11-27T21:56:37.804Z', 'x'])],
    ];
    for (const [path, cursor] of lists) {
      const res = await t.request({ method: 'GET', url: `${path}?cursor=${cursor}`, token: t.adminToken });
      assert.equal(res.status, 400, `${path}: ${res.text}`);
      assert.deepEqual(res.body.errors, [{ field: 'cursor', message: 'not a valid cursor' }], path);
    }
    // The cursors the lists give out still page.
    await makeRun(t);
    await makeRun(t);
    const first = await t.request({ method: 'GET', url: '/api/v1/runs?limit=1', token: t.adminToken });
    assert.ok(first.body.next_cursor);
    const next = await t.request({ method: 'GET', url: `/api/v1/runs?limit=1&cursor=${first.body.next_cursor}`, token: t.adminToken });
    assert.equal(next.status, 200, next.text);
    assert.notEqual(next.body.items[0].id, first.body.items[0].id);
  });

  test('a follow-up to a finished run of an archived team is a 409, and the run keeps its end', async () => {
    const run = await runWith({ kind: 'finished', outcome: 'succeeded', summary: 'done', branch: null, pull_request_url: null });
    assert.equal((await t.services.runs.get(run.run_id)).run.state, 'succeeded');
    const { row_version } = await t.services.teams.get(run.team);
    await t.services.teams.archive(systemActor('test'), run.team, row_version);
    const res = await t.request({ method: 'POST', url: `/api/v1/runs/${run.run_id}/replies`, token: t.adminToken, body: { text: 'one more thing' } });
    assert.equal(res.status, 409, res.text);
    assert.match(res.body.detail, /was archived, so the run takes no more replies: give a live team a new task instead/);
    assert.equal((await t.services.runs.get(run.run_id)).run.state, 'succeeded');
  });

  test('approve is a 422 naming it where it decides nothing: without in_reply_to, or for a question that is not a confirmation', async () => {
    const done = await runWith({ kind: 'finished', outcome: 'succeeded', summary: 'done', branch: null, pull_request_url: null });
    const followUp = await t.request({ method: 'POST', url: `/api/v1/runs/${done.run_id}/replies`, token: t.adminToken, body: { text: 'more', approve: true } });
    assert.equal(followUp.status, 422, followUp.text);
    assert.deepEqual(followUp.body.errors.map((e: { field: string }) => e.field), ['approve']);
    assert.equal((await t.services.runs.get(done.run_id)).run.state, 'succeeded', 'nothing was taken');

    const asking = await runWith({ kind: 'question', question: 'Which database?', options: [] });
    const { run } = await t.services.runs.get(asking.run_id);
    assert.equal(run.state, 'waiting');
    const seq = run.open_question!.seq;
    const res = await t.request({ method: 'POST', url: `/api/v1/runs/${asking.run_id}/replies`, token: t.adminToken, body: { text: 'PostgreSQL', in_reply_to: seq, approve: false } });
    assert.equal(res.status, 422, res.text);
    assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), ['approve']);
    assert.equal((await t.services.runs.get(asking.run_id)).run.state, 'waiting', 'the question is still open');
    const answered = await t.request({ method: 'POST', url: `/api/v1/runs/${asking.run_id}/replies`, token: t.adminToken, body: { text: 'PostgreSQL', in_reply_to: seq } });
    assert.equal(answered.status, 202, answered.text);
  });

  test("a run's cost is shown to the micro-dollar, without the drift of a float sum", async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const { run_id } = await makeRun(t);
    // What the engine's per-call additions leave in the float column (0.000126 + 0.000126 + 0.000126).
    await t.db.updateTable('runs').set({ cost_usd: 0.000126 + 0.000126 + 0.000126 }).where('id', '=', run_id).execute();
    await t.db.updateTable('run_tasks').set({ cost_usd: 0.1 + 0.2 }).where('run_id', '=', run_id).execute();
    const res = await t.request({ method: 'GET', url: `/api/v1/runs/${run_id}`, token: t.adminToken });
    assert.equal(res.body.cost_usd, 0.000378);
    assert.deepEqual(res.body.tasks.map((x: { cost_usd: number }) => x.cost_usd), [0.3]);
    const listed = await t.request({ method: 'GET', url: '/api/v1/runs?limit=1', token: t.adminToken });
    assert.equal(listed.body.items[0].cost_usd, 0.000378);
  });

  test('text holding half of a surrogate pair is a 400 naming its field, not a database error', async () => {
    const team = await makeTeam(t);
    const res = await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/tasks`, token: t.adminToken, raw: '{"text":"fix \\ud800 this"}', headers: { 'content-type': 'application/json' } });
    assert.equal(res.status, 400, res.text);
    assert.deepEqual(res.body.errors, [{ field: 'text', message: 'must be Unicode text: it holds half of a surrogate pair (an escape such as "\\ud800" alone)' }]);
  });

  test('the served example of the post stream is a post the contract allows', async () => {
    const doc = (await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken })).body;
    const example: string = doc.paths['/runs/{id}/posts'].get.responses['200'].content['text/event-stream'].schema.examples[0];
    const event = /\nevent: (\w+)\ndata: (.*)\n/.exec(example)!;
    const post = JSON.parse(event[2]!);
    const kinds = doc.components.schemas.PostKind.anyOf.flatMap((k: { enum: string[] }) => k.enum);
    assert.ok(kinds.includes(post.kind), `${post.kind} is one of ${kinds}`);
    assert.equal(event[1], post.kind);
    assert.equal(typeof post.data, 'object');
    assert.notEqual(post.data, null);
  });
});

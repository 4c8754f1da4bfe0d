import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as runSurface from '../../db/migrations/0643-run-surface.ts';
import { makeRun, makeTeam } from '../../../test/factories.ts';
import { makeHostRow } from '../../../test/sandboxes.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';

// The runs routes' answers that need no sandbox host (the whole flow is test/e2e/run.test.ts).
describe('runs routes', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ modelProxy: true });
  });
  after(() => t.close());

  it('a task for an unknown team is 404, an empty or oversized text 400, and no live host 503 naming why', async () => {
    const unknown = await t.request({ method: 'POST', url: '/api/v1/teams/no-such-team/tasks', token: t.adminToken, body: { text: 'x' } });
    assert.equal(unknown.status, 404);
    const team = await makeTeam(t);
    const url = `/api/v1/teams/${team.name}/tasks`;
    assert.equal((await t.request({ method: 'POST', url, token: t.adminToken, body: { text: '' } })).status, 400);
    const long = await t.request({ method: 'POST', url, token: t.adminToken, body: { text: 'x'.repeat(32_001) } });
    assert.equal(long.status, 400);
    assert.equal(long.body.errors[0].field, 'text', long.text);
    const blank = await t.request({ method: 'POST', url, token: t.adminToken, body: { text: ' \n\t ' } });
    assert.equal(blank.status, 422, blank.text);
    assert.deepEqual(blank.body.errors.map((e: { field: string }) => e.field), ['text']);
    assert.equal((await t.request({ method: 'POST', url, token: t.adminToken, body: {} })).status, 400);
    const noHost = await t.request({ method: 'POST', url, token: t.adminToken, body: { text: 'Write a README' } });
    assert.equal(noHost.status, 503, noHost.text);
    assert.match(noHost.body.detail, /host/);
    // Nothing was started.
    const list = await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/runs`, token: t.adminToken });
    assert.equal(list.status, 200);
    assert.deepEqual(list.body.items, []);
    // The team is the path's: `team` is no filter of this list, neither served nor in the contract.
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/runs?team=other`, token: t.adminToken })).status, 400);
    const doc = await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken });
    const params = (doc.body.paths['/teams/{name}/runs'].get.parameters as { name: string; in: string }[]).filter((p) => p.in === 'query').map((p) => p.name);
    assert.deepEqual(params.sort(), ['cursor', 'limit', 'state']);
    // A viewer may not give tasks.
    const viewer = await t.user('viewer');
    assert.equal((await t.request({ method: 'POST', url, token: viewer.token, body: { text: 'x' } })).status, 403);
  });

  it('the runs of a team that never was are a 404 naming it, as a filter of /runs as under /teams', async () => {
    const under = await t.request({ method: 'GET', url: '/api/v1/teams/no-such-team/runs', token: t.adminToken });
    assert.equal(under.status, 404);
    const filtered = await t.request({ method: 'GET', url: '/api/v1/runs?team=no-such-team', token: t.adminToken });
    assert.equal(filtered.status, 404, filtered.text);
    assert.match(filtered.body.detail, /no team named "no-such-team"/);
    const team = await makeTeam(t);
    const known = await t.request({ method: 'GET', url: `/api/v1/runs?team=${team.name}`, token: t.adminToken });
    assert.equal(known.status, 200);
    assert.deepEqual(known.body.items, []);
    const doc = await t.request({ method: 'GET', url: '/api/v1/openapi.json', token: t.adminToken });
    assert.ok(doc.body.paths['/runs'].get.responses['404'], 'the contract lists the 404');
  });

  it('a run\'s ETag changes with what its body shows (a task\'s progress, kept beside the run), not only with the run row', async () => {
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
    const { run_id: id } = await makeRun(t);
    const url = `/api/v1/runs/${id}`;
    const before = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(before.status, 200, before.text);
    assert.ok(before.body.tasks.length > 0);
    // The engine counts a task's iterations in its own row; the run's row stays as it was.
    await t.db.updateTable('run_tasks').set({ iterations: 7 }).where('run_id', '=', id).execute();
    const after = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(after.body.tasks[0].iterations, 7);
    assert.notEqual(after.headers.etag, before.headers.etag, 'a body that differs has another ETag');
  });

  it('an archived team takes no task (409); unknown runs are 404 on every route', async () => {
    const team = await makeTeam(t);
    const del = await t.request({ method: 'DELETE', url: `/api/v1/teams/${team.name}`, token: t.adminToken, headers: { 'if-match': team.etag } });
    assert.equal(del.status, 204, del.text);
    assert.equal((await t.request({ method: 'POST', url: `/api/v1/teams/${team.name}/tasks`, token: t.adminToken, body: { text: 'x' } })).status, 409);
    for (const [method, path, body] of [
      ['GET', '/api/v1/runs/run_nope', undefined],
      ['GET', '/api/v1/runs/run_nope/posts', undefined],
      ['GET', '/api/v1/runs/run_nope/trace', undefined],
      ['POST', '/api/v1/runs/run_nope/replies', { text: 'hi' }],
      ['POST', '/api/v1/runs/run_nope/cancel', undefined],
    ] as const) {
      const res = await t.request({ method, url: path, token: t.adminToken, body });
      assert.equal(res.status, 404, `${method} ${path}: ${res.text}`);
    }
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/runs?state=waiting', token: t.adminToken })).status, 200);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/runs?state=sleepy', token: t.adminToken })).status, 400);
    assert.equal((await t.request({ method: 'GET', url: '/api/v1/runs/run_nope/posts?cursor=abc', token: t.adminToken })).status, 400);
  });

  // Last: it takes the migration down and up again on this file's database.
  it('the surface migration says where the runs made before it came from: a code-host webhook\'s (its creator code_host:<author>), else the console', async () => {
    const team = await t.services.teams.mustGetLive((await makeTeam(t)).name);
    const fromIssue = uniq('run');
    const fromConsole = uniq('run');
    await runSurface.down(t.db);
    await t.db.insertInto('runs').values({ id: fromIssue, team_id: team.id, team_name: team.name, state: 'succeeded', text: 'fix the issue', created_by: 'code_host:alice' }).execute();
    await t.db.insertInto('runs').values({ id: fromConsole, team_id: team.id, team_name: team.name, state: 'succeeded', text: 'x', created_by: 'admin@example.com' }).execute();
    await runSurface.up(t.db);
    const rows = await t.db.selectFrom('runs').select(['id', 'surface']).where('id', 'in', [fromIssue, fromConsole]).execute();
    assert.deepEqual(Object.fromEntries(rows.map((r) => [r.id, r.surface])), { [fromIssue]: 'code_host', [fromConsole]: 'console' });
    // Only the six surfaces are stored.
    await assert.rejects(t.db.updateTable('runs').set({ surface: 'fax' as never }).where('id', '=', fromConsole).execute());
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { Problem } from '../../errors/problems.ts';
import { serviceName } from '../integrations/kinds.ts';
import { makeRun, makeTeam } from '../../../test/factories.ts';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { makeHostRow } from '../../../test/sandboxes.ts';

// Where a run's work came from decides where it is answered: a run on a chat surface is created
// through the service's entry as the chat adapter creates it, and the routes refuse to answer or
// cancel it (409 saying where to); runs from the console and the code host take both.
describe('runs by surface', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ modelProxy: true });
    await makeHostRow(t.db, { providers: ['local', 'microvm'] });
  });
  after(() => t.close());

  const chatRun = (surface: 'chat_a' | 'chat_b') => makeRun(t, { surface, actor: surface, external_ref: 'room-1/thread-9', requested_by: 'alice' });
  const conflict = (pattern: RegExp) => (err: unknown) => err instanceof Problem && err.status === 409 && pattern.test(err.detail);

  it('a chat run records its surface, its thread and who asked', async () => {
    const { run_id } = await chatRun('chat_a');
    const { run } = await t.services.runs.get(run_id);
    assert.equal(run.surface, 'chat_a');
    assert.equal(run.created_by, 'alice');
    const row = await t.db.selectFrom('runs').select(['surface', 'external_ref']).where('id', '=', run_id).executeTakeFirstOrThrow();
    assert.deepEqual(row, { surface: 'chat_a', external_ref: 'room-1/thread-9' });
  });

  it('work from a chat or tracker without its thread or issue is 422 naming external_ref, and starts nothing', async () => {
    const team = await makeTeam(t);
    for (const surface of ['chat_b', 'tracker_a'] as const) {
      await assert.rejects(t.services.runs.createRun(systemActor(surface), { team: team.name, text: 'x', surface }), (err: unknown) => err instanceof Problem && err.status === 422 && err.errors[0]?.field === 'external_ref');
    }
    assert.deepEqual((await t.services.runs.listOfTeam(team.name, { limit: 10 })).items, []);
  });

  for (const surface of ['chat_a', 'chat_b'] as const) {
    it(`a reply to or a cancel of a ${surface} run is 409 saying to act in its ${surface} thread, and changes nothing`, async () => {
      const { run_id } = await chatRun(surface);
      const before = await t.services.runs.get(run_id);
      const postsBefore = (await t.services.runs.posts(run_id, 0, 100)).items;
      await assert.rejects(t.services.runs.reply(systemActor('test'), run_id, { text: 'and add a licence' }), conflict(new RegExp(`lives on ${serviceName(surface)}: answer it in its ${serviceName(surface)} thread`)));
      await assert.rejects(t.services.runs.cancel(systemActor('test'), run_id), conflict(new RegExp(`lives on ${serviceName(surface)}: cancel it in its ${serviceName(surface)} thread`)));
      // The routes answer the same.
      const reply = await t.request({ method: 'POST', url: `/api/v1/runs/${run_id}/replies`, token: t.adminToken, body: { text: 'and add a licence' } });
      assert.equal(reply.status, 409, reply.text);
      assert.match(reply.body.detail, new RegExp(`answer it in its ${serviceName(surface)} thread`));
      const cancel = await t.request({ method: 'POST', url: `/api/v1/runs/${run_id}/cancel`, token: t.adminToken });
      assert.equal(cancel.status, 409, cancel.text);
      assert.match(cancel.body.detail, new RegExp(`cancel it in its ${serviceName(surface)} thread`));
      const after = await t.services.runs.get(run_id);
      assert.equal(after.version, before.version);
      assert.equal(after.run.state, 'running');
      assert.deepEqual((await t.services.runs.posts(run_id, 0, 100)).items, postsBefore);
    });
  }

  it('a code-host run is answered and cancelled through the routes', async () => {
    const { run_id } = await makeRun(t, { actor: 'code_host:alice', text: 'Fix issue 7', surface: 'code_host' });
    assert.equal((await t.services.runs.get(run_id)).run.surface, 'code_host');
    const reply = await t.services.runs.reply(systemActor('test'), run_id, { text: 'and add a licence' });
    assert.equal(reply.state, 'running');
    const { run } = await t.services.runs.cancel(systemActor('test'), run_id);
    assert.equal(run.state, 'cancelled');
  });
});

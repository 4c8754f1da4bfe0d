import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { makeTeam } from '../../../test/factories.ts';
import type { FakeJira } from '../../../test/fakes/jira.ts';
import type { FakeLinear } from '../../../test/fakes/linear.ts';
import type { TestApp } from '../../../test/harness.ts';
import { trackerBench, type TrackerBench } from '../../../test/integrations.ts';
import { jiraIntentOf } from '../tracker_b/tracker_b.ts';
import { linearIntentOf } from '../tracker_a/tracker_a.ts';

// A person stops the agent where they work: Linear's "Send stop request" in the agent session (a
// prompt with the `stop` signal), or unassigning the agent from the issue (Linear without
// sessions, Jira). The run is cancelled once, never given the stop as an answer or a follow-up,
// and the issue's last note says it stopped. No sandbox runs here: the surfaces' jobs are
// performed by a runner of those kinds alone (trackerBench).
describe('trackers: stopping the agent from the issue', () => {
  let bench: TrackerBench;
  let t: TestApp;
  let linear: FakeLinear;
  let jira: FakeJira;
  let team: string;
  let engTeam: string;
  const drainSurfaces = () => bench.drain();
  const rowOf = (kind: string, id: string) => bench.delivery(kind, id);

  before(async () => {
    bench = await trackerBench();
    ({ t, linear, jira } = bench);
    engTeam = linear.addTeam({ key: 'ENG', name: 'Engineering' }).id;
    jira.addProject({ key: 'OPS', name: 'Operations' });
    team = (await makeTeam(t)).name;
    for (const [surface, id] of [['tracker_a', 'ENG'], ['tracker_b', 'OPS']]) {
      const res = await t.request({ method: 'PUT', url: `/api/v1/teams/${team}/links`, token: t.adminToken, body: { surface, external_id: id } });
      assert.equal(res.status, 201, res.text);
    }
  });
  after(() => bench.close());

  it('the rules: Linear\'s stop signal and unassigning the app, Jira\'s unassigning the agent, are stops; the agent\'s own changes are not', () => {
    const app = { id: 'app-1', names: ['Crewhouse'] };
    const session = { id: 's1', issueId: 'i1' };
    const stop = linearIntentOf({ event: 'AgentSessionEvent', payload: { action: 'prompted', appUserId: 'app-1', agentSession: session, agentActivity: { content: { type: 'prompt', body: 'Stop' }, signal: 'stop', user: { id: 'u1', name: 'Ada' } } } }, app);
    assert.deepEqual(stop, { kind: 'stop', issueId: 'i1', session: 's1', by: { id: 'u1', name: 'Ada' }, how: 'asked the agent to stop' });
    const unassigned = linearIntentOf({ event: 'Issue', payload: { action: 'update', data: { id: 'i2', identifier: 'ENG-2', assigneeId: 'u1' }, updatedFrom: { assigneeId: 'app-1' }, actor: { id: 'u1', name: 'Ada' } } }, app);
    assert.deepEqual(unassigned.kind === 'stop' && [unassigned.issueId, unassigned.session, unassigned.by.name], ['i2', null, 'Ada']);
    assert.equal(linearIntentOf({ event: 'Issue', payload: { action: 'update', data: { id: 'i2', assigneeId: null }, updatedFrom: { assigneeId: 'app-1' }, actor: { id: 'app-1' } } }, app).kind, 'ignore');
    const issue = { id: '10001', key: 'OPS-1', fields: { summary: 'Rotate logs' } };
    const jiraStop = jiraIntentOf({ event: 'jira:issue_updated', payload: { issue, user: { accountId: 'u1', displayName: 'Uma' }, changelog: { items: [{ field: 'assignee', from: 'agent-1', to: null }] } } }, 'agent-1', null);
    assert.deepEqual(jiraStop.kind === 'stop' && [jiraStop.issueId, jiraStop.by.name], ['10001', 'Uma']);
    assert.equal(jiraIntentOf({ event: 'jira:issue_updated', payload: { issue, user: { accountId: 'agent-1' }, changelog: { items: [{ field: 'assignee', from: 'agent-1', to: 'u1' }] } } }, 'agent-1', null).kind, 'ignore');
  });

  it('Linear: "Send stop request" in the session cancels the run once (not a follow-up), and the session\'s last activity says it stopped', async () => {
    const ada = linear.addUser({ name: 'Ada' });
    const issue = linear.addIssue({ teamId: engTeam, title: 'Fix the footer', creatorId: ada.id });
    const { session, delivery } = await linear.assignToApp(issue.id, ada.id);
    await drainSurfaces();
    const runId = (await rowOf('tracker_a', delivery.id)).run_id as string;
    assert.equal((await t.services.runs.get(runId)).run.state, 'running');

    const stopped = await linear.stopSession(session.id, ada.id);
    assert.equal(stopped.status, 202, stopped.response);
    assert.equal(JSON.parse((await linear.redeliver(stopped.id)).response).outcome, 'duplicate');
    await drainSurfaces();
    const row = await rowOf('tracker_a', stopped.id);
    assert.deepEqual([row.outcome, row.run_id], ['processed', runId], row.detail);
    assert.match(row.detail, /Ada asked the agent to stop on ENG-\d+: run \S+ is cancelled/);
    assert.equal((await t.services.runs.get(runId)).run.state, 'cancelled');
    const posts = (await t.services.runs.posts(runId, 0, 100)).items;
    assert.deepEqual(posts.filter((p) => p.kind === 'reply' || p.kind === 'answer').map((p) => p.text), [], 'the stop is not said to the agent as words');
    assert.deepEqual(posts.filter((p) => p.kind === 'canceled').map((p) => p.data.by), ['tracker_a:Ada']);
    const ours = linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id);
    assert.deepEqual(ours.map((a) => a.content.type), ['thought', 'error']);
    assert.match(ours[1]!.content.body!, /The run was cancelled, and the team stopped working on it/);

    // Asked again once the run has ended: nothing more is done, and the delivery says why.
    const again = await linear.stopSession(session.id, ada.id);
    await drainSurfaces();
    const later = await rowOf('tracker_a', again.id);
    assert.equal(later.outcome, 'ignored');
    assert.match(later.detail, /is already cancelled/);
    assert.equal(linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id).length, 2);
  });

  it('Jira: unassigning the agent from the issue cancels its run, and a comment says so', async () => {
    const bob = jira.addUser('Bob');
    const issue = jira.addIssue({ projectKey: 'OPS', summary: 'Rotate the logs', reporter: bob.accountId });
    const assigned = await jira.assign(issue.key, jira.agent.accountId, bob.accountId);
    await drainSurfaces();
    const runId = (await rowOf('tracker_b', assigned.id)).run_id as string;
    assert.equal((await t.services.runs.get(runId)).run.state, 'running');

    const unassigned = await jira.assign(issue.key, null, bob.accountId);
    assert.equal(unassigned.status, 202, unassigned.response);
    await drainSurfaces();
    const row = await rowOf('tracker_b', unassigned.id);
    assert.deepEqual([row.outcome, row.run_id], ['processed', runId], row.detail);
    assert.match(row.detail, /Bob unassigned the agent on OPS-\d+: run \S+ is cancelled/);
    assert.equal((await t.services.runs.get(runId)).run.state, 'cancelled');
    const said = jira.comments.filter((c) => c.issueId === issue.id && c.author === jira.agent.accountId).map((c) => JSON.stringify(c.body));
    assert.equal(said.length, 2, said.join('\n'));
    assert.match(said[1]!, /The run was cancelled, and the team stopped working on it/);
  });
});

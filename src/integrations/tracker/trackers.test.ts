import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeIntegration, makeTeam } from '../../../test/factories.ts';
import { startFakeJira, type FakeJira } from '../../../test/fakes/jira.ts';
import { startFakeLinear, type FakeLinear } from '../../../test/fakes/linear.ts';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { listJobs } from '../../queue/queue.ts';
import { jiraIntentOf } from '../tracker_b/tracker_b.ts';
import { linearIntentOf } from '../tracker_a/tracker_a.ts';

const deliveries = async (t: TestApp, kind: string) => (await t.request({ method: 'GET', url: `/api/v1/integrations/${kind}/deliveries?limit=100`, token: t.adminToken })).body.items as Array<Record<string, any>>;
const link = (t: TestApp, team: string, surface: string, externalId: string) => t.request({ method: 'PUT', url: `/api/v1/teams/${team}/links`, token: t.adminToken, body: { surface, external_id: externalId } });

describe('the trackers\' event rules', () => {
  it('Linear: sessions become tasks and prompts replies; assignment and mentions without sessions; the app itself is ignored', () => {
    const app = { id: 'app-1', names: ['Crewhouse'] };
    const session = { id: 's1', issueId: 'i1', issue: { id: 'i1', identifier: 'ENG-1', title: 'Fix it', description: 'Broken.', url: 'u', team: { key: 'ENG' } }, creator: { id: 'u1', name: 'Alice' } };
    const created = linearIntentOf({ event: 'AgentSessionEvent', payload: { action: 'created', appUserId: 'app-1', agentSession: session } }, app);
    assert.deepEqual(created.kind === 'task' && [created.issue.key, created.issue.text, created.session, created.by.name], ['ENG-1', 'Broken.', 's1', 'Alice']);
    const prompted = linearIntentOf({ event: 'AgentSessionEvent', payload: { action: 'prompted', appUserId: 'app-1', agentSession: session, agentActivity: { content: { type: 'prompt', body: 'the footer' }, user: { id: 'u1', name: 'Alice' } } } }, app);
    assert.deepEqual(prompted.kind === 'reply' && [prompted.text, prompted.session, prompted.addressed], ['the footer', 's1', true]);
    assert.equal(linearIntentOf({ event: 'AgentSessionEvent', payload: { action: 'created', appUserId: 'other-app', agentSession: session } }, app).kind, 'ignore');
    assert.equal(linearIntentOf({ event: 'AgentSessionEvent', payload: { action: 'prompted', agentSession: session, agentActivity: { content: { body: 'x' }, user: { id: 'app-1' } } } }, app).kind, 'ignore');
    const assigned = linearIntentOf({ event: 'Issue', payload: { action: 'update', data: { id: 'i2', identifier: 'ENG-2', title: 'T', assigneeId: 'app-1' }, updatedFrom: { assigneeId: null }, actor: { id: 'u1', name: 'Alice' } } }, app);
    assert.deepEqual(assigned.kind === 'task' && [assigned.issue.key, assigned.session], ['ENG-2', null]);
    assert.equal(linearIntentOf({ event: 'Issue', payload: { action: 'update', data: { id: 'i2', identifier: 'ENG-2', assigneeId: 'app-1' }, updatedFrom: { title: 'old' } } }, app).kind, 'ignore');
    const mention = linearIntentOf({ event: 'Comment', payload: { action: 'create', data: { id: 'c1', body: '@crewhouse please add a test', issueId: 'i2', user: { id: 'u1', name: 'Alice' } } } }, app);
    assert.deepEqual(mention.kind === 'needs_issue' && [mention.comment.text, mention.addressed], ['please add a test', true]);
    assert.equal(linearIntentOf({ event: 'Comment', payload: { action: 'create', data: { id: 'c2', body: 'done @crewhouse', issueId: 'i2', userId: 'app-1' } } }, app).kind, 'ignore');
    assert.equal(linearIntentOf({ event: 'Project', payload: { action: 'update' } }, app).kind, 'ignore');
  });

  it('Jira: assignment to the agent is a task; comments answer or, mentioning it, follow up; the agent\'s own are ignored', () => {
    const issue = { id: '10001', key: 'OPS-1', fields: { summary: 'Rotate logs', description: 'Daily.', project: { key: 'OPS' }, reporter: { accountId: 'r1', displayName: 'Rita' } } };
    const task = jiraIntentOf({ event: 'jira:issue_updated', payload: { issue_event_type_name: 'issue_assigned', issue, user: { accountId: 'u1', displayName: 'Uma' }, changelog: { items: [{ field: 'assignee', to: 'agent-1' }] } } }, 'agent-1', 'https://acme.atlassian.net');
    assert.deepEqual(task.kind === 'task' && [task.issue.key, task.issue.url, task.issue.text, task.by.name], ['OPS-1', 'https://acme.atlassian.net/browse/OPS-1', 'Daily.', 'Rita']);
    assert.equal(jiraIntentOf({ event: 'jira:issue_updated', payload: { issue, changelog: { items: [{ field: 'assignee', to: 'someone' }] } } }, 'agent-1', null).kind, 'ignore');
    assert.equal(jiraIntentOf({ event: 'jira:issue_updated', payload: { issue, user: { accountId: 'agent-1' }, changelog: { items: [{ field: 'assignee', to: 'agent-1' }] } } }, 'agent-1', null).kind, 'ignore');
    const mentioned = jiraIntentOf({ event: 'comment_created', payload: { issue, comment: { body: '[~accountid:agent-1] add a test', author: { accountId: 'u1', displayName: 'Uma' } } } }, 'agent-1', null);
    assert.deepEqual(mentioned.kind === 'reply' && [mentioned.text, mentioned.addressed, mentioned.orTask?.kind], ['add a test', true, 'task']);
    const plain = jiraIntentOf({ event: 'comment_created', payload: { issue, comment: { body: 'weekly', author: { accountId: 'u1' } } } }, 'agent-1', null);
    assert.deepEqual(plain.kind === 'reply' && [plain.addressed, plain.orTask], [false, null]);
    assert.equal(jiraIntentOf({ event: 'comment_created', payload: { issue, comment: { body: 'Team is on it', author: { accountId: 'agent-1' } } } }, 'agent-1', null).kind, 'ignore');
    assert.equal(jiraIntentOf({ event: 'jira:issue_deleted', payload: { issue } }, 'agent-1', null).kind, 'ignore');
  });
});

describe('trackers: signed deliveries, connection tests and links', () => {
  let t: TestApp;
  let linear: FakeLinear;
  let jira: FakeJira;
  let base: string;
  before(async () => {
    t = await testApp({ modelProxy: true });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    [linear, jira] = await Promise.all([startFakeLinear(), startFakeJira()]);
  });
  after(async () => {
    await Promise.all([linear.stop(), jira.stop()]);
    await t.close();
  });

  it('tracker_a: a real connection test, links checked against Linear, and deliveries verified in Linear\'s format', async () => {
    const secret = crypto.randomBytes(20).toString('hex');
    await makeIntegration(t, 'tracker_a', { settings: { api_url: linear.url }, secrets: { access_token: linear.appToken, webhook_secret: secret } });
    const test = await t.request({ method: 'POST', url: '/api/v1/integrations/tracker_a/test', token: t.adminToken });
    assert.equal(test.body.state, 'ok', test.body.detail);
    assert.match(test.body.detail, /signed in to Linear as the app Crewhouse/);

    const eng = linear.addTeam({ key: 'ENG', name: 'Engineering' });
    linear.addTeam({ key: 'SEC', appAccess: false });
    const unlinkedTeam = linear.addTeam({ key: 'OPS' });
    const team = await makeTeam(t);
    const linked = await link(t, team.name, 'tracker_a', 'ENG');
    assert.equal(linked.status, 201, linked.text);
    assert.deepEqual([linked.body.verified, linked.body.verification, linked.body.label], [true, 'verified', 'ENG Engineering']);
    const hidden = await link(t, team.name, 'tracker_a', 'SEC');
    assert.equal(hidden.status, 422);
    assert.match(hidden.body.errors[0].message, /cannot see a team with the key SEC/);

    linear.setWebhook({ url: `${base}/webhooks/tracker_a`, secret });
    const alice = linear.addUser({ name: 'Alice' });
    // An issue of a team no Crewhouse team is linked to: recorded, ignored, no run.
    const elsewhere = linear.addIssue({ teamId: unlinkedTeam.id, title: 'Not ours', creatorId: alice.id });
    const { delivery: unlinked } = await linear.assignToApp(elsewhere.id, alice.id);
    assert.equal(unlinked.status, 202, unlinked.response);
    // Replayed ten times, byte for byte: one row, counted ten times, one job.
    for (let i = 0; i < 9; i++) assert.equal(JSON.parse((await linear.redeliver(unlinked.id)).response).outcome, 'duplicate');
    assert.equal((await listJobs(t.db, { kind: 'webhooks.process-delivery', limit: 100 })).filter((j) => j.key === `webhook:tracker_a:${unlinked.id}`).length, 1);
    // A forged delivery, a stale one, an event that is not work, the app's own comment.
    const forged = await linear.deliver('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created' }, { signWith: 'not-the-secret' });
    assert.equal(forged.status, 401);
    const stale = await linear.deliver('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created' }, { timestamp: Date.now() - 5 * 60_000 });
    assert.equal(stale.status, 401);
    assert.match(JSON.parse(stale.response).detail, /more than a minute/);
    const other = await linear.deliver('Project', { type: 'Project', action: 'update', data: { id: 'p' } });
    assert.equal(other.status, 202);
    const own = linear.addIssue({ teamId: eng.id, title: 'Ours', creatorId: alice.id });
    const mine = await linear.deliver('Comment', { type: 'Comment', action: 'create', data: { id: crypto.randomUUID(), body: 'Team is on it', issueId: own.id, userId: linear.app.id, user: { id: linear.app.id, name: linear.app.name } } });
    assert.equal(mine.status, 202);
    await t.drainJobs();
    const rows = await deliveries(t, 'tracker_a');
    const row = (id: string) => rows.find((d) => d.id === id)!;
    assert.deepEqual([row(unlinked.id).event, row(unlinked.id).outcome, row(unlinked.id).times_received, row(unlinked.id).signature_valid], ['AgentSessionEvent.created', 'ignored', 10, true]);
    assert.match(row(unlinked.id).detail, /no team is linked to OPS/);
    assert.deepEqual([row(forged.id).signature_valid, row(forged.id).outcome], [false, 'refused']);
    assert.deepEqual([row(stale.id).signature_valid, row(stale.id).outcome], [true, 'refused']);
    assert.deepEqual([row(other.id).event, row(other.id).outcome], ['Project.update', 'ignored']);
    assert.deepEqual([row(mine.id).outcome, row(mine.id).detail], ['ignored', 'a comment written by the app itself']);
    assert.equal(linear.activities.filter((a) => a.userId === linear.app.id).length, 0, 'nothing was posted for work that was not taken');
    assert.ok(!t.logs.some((l) => l.includes(secret) || l.includes(linear.appToken)));
  });

  it('tracker_b: a real connection test with a client-credentials token, project links checked, deliveries verified in Jira\'s format', async () => {
    const secret = crypto.randomBytes(20).toString('hex');
    await makeIntegration(t, 'tracker_b', {
      settings: { client_id: jira.clientId, cloud_id: jira.cloudId, account_id: jira.agent.accountId, api_url: jira.apiUrl, auth_url: jira.authUrl, site_url: 'https://acme.atlassian.net' },
      secrets: { client_secret: jira.clientSecret, webhook_secret: secret },
    });
    const test = await t.request({ method: 'POST', url: '/api/v1/integrations/tracker_b/test', token: t.adminToken });
    assert.equal(test.body.state, 'ok', test.body.detail);
    assert.match(test.body.detail, /acting as Crewhouse/);
    jira.addProject({ key: 'OPS', name: 'Operations' });
    jira.addProject({ key: 'HR', agentAccess: false });
    jira.addProject({ key: 'MKT' });
    const team = await makeTeam(t);
    const linked = await link(t, team.name, 'tracker_b', 'OPS');
    assert.deepEqual([linked.status, linked.body.verification, linked.body.label], [201, 'verified', 'OPS Operations']);
    const hidden = await link(t, team.name, 'tracker_b', 'HR');
    assert.equal(hidden.status, 422);
    assert.match(hidden.body.detail, /cannot see a Jira project HR/);

    jira.setWebhook({ url: `${base}/webhooks/tracker_b`, secret });
    const bob = jira.addUser('Bob');
    const elsewhere = jira.addIssue({ projectKey: 'MKT', summary: 'Not ours', reporter: bob.accountId });
    const unlinked = await jira.assign(elsewhere.key, jira.agent.accountId, bob.accountId);
    assert.equal(unlinked.status, 202, unlinked.response);
    for (let i = 0; i < 9; i++) assert.equal(JSON.parse((await jira.redeliver(unlinked.id)).response).outcome, 'duplicate');
    const forged = await jira.deliver('jira:issue_updated', { issue: { id: '1', key: 'OPS-9' } }, { signWith: 'wrong' });
    assert.equal(forged.status, 401);
    const unsigned = await jira.deliver('jira:issue_updated', { issue: { id: '1', key: 'OPS-9' } }, { signWith: null });
    assert.equal(unsigned.status, 401);
    assert.match(JSON.parse(unsigned.response).detail, /X-Hub-Signature is missing/);
    const ops = jira.addIssue({ projectKey: 'OPS', summary: 'Ours', reporter: bob.accountId });
    const own = await jira.deliver('comment_created', { comment: { id: '5', body: 'Team is on it', author: { accountId: jira.agent.accountId } }, issue: { id: ops.id, key: ops.key, fields: { project: { key: 'OPS' } } } });
    const unknown = await jira.deliver('worklog_updated', { worklog: {} });
    assert.equal(unknown.status, 202);
    await t.drainJobs();
    const rows = await deliveries(t, 'tracker_b');
    const row = (id: string) => rows.find((d) => d.id === id)!;
    assert.deepEqual([row(unlinked.id).event, row(unlinked.id).outcome, row(unlinked.id).times_received], ['jira:issue_updated.issue_assigned', 'ignored', 10]);
    assert.match(row(unlinked.id).detail, /no team is linked to MKT/);
    assert.deepEqual([row(forged.id).signature_valid, row(forged.id).outcome], [false, 'refused']);
    assert.deepEqual([row(own.id).outcome, row(own.id).detail], ['ignored', 'a comment written by the agent itself']);
    assert.deepEqual([row(unknown.id).event, row(unknown.id).outcome, row(unknown.id).signature_valid], ['worklog_updated', 'ignored', true]);
    assert.equal(jira.comments.length, 0);
    assert.ok(!t.logs.some((l) => l.includes(secret) || l.includes(jira.clientSecret)));
  });
});

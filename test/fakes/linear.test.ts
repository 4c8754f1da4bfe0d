import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { LinearClient } from '@linear/sdk';
import { LinearWebhookClient } from '@linear/sdk/webhooks';
import { createLinearApp, idOfKey } from '../../src/integrations/tracker_a/client.ts';
import { TrackerError } from '../../src/integrations/tracker/errors.ts';
import { startFakeLinear, type FakeLinear } from './linear.ts';
import { startCapture } from './webhook-sender.ts';

describe('the fake Linear workspace, through @linear/sdk', () => {
  let lin: FakeLinear;
  before(async () => {
    lin = await startFakeLinear();
  });
  after(() => lin.stop());

  it('answers the SDK operations with the app token: viewer, team, project, issue, comments and activities once per key', async () => {
    const alice = lin.addUser({ name: 'Alice' });
    const eng = lin.addTeam({ key: 'ENG', name: 'Engineering' });
    const hidden = lin.addTeam({ key: 'SEC', appAccess: false });
    const proj = lin.addProject({ name: 'Website', teamIds: [eng.id] });
    const issue = lin.addIssue({ teamId: eng.id, projectId: proj.id, title: 'Fix the footer', description: 'It overlaps.', creatorId: alice.id });
    const app = createLinearApp({ apiUrl: lin.url, accessToken: lin.appToken });
    assert.deepEqual(await app.viewer(), { id: lin.app.id, name: lin.app.name });
    assert.deepEqual(await app.findTeamOrProject('ENG'), { found: true, label: 'ENG Engineering', kind: 'team' });
    assert.deepEqual(await app.findTeamOrProject(proj.id), { found: true, label: 'Website', kind: 'project' });
    const notSeen = await app.findTeamOrProject(hidden.key);
    assert.equal(notSeen.found, false);
    assert.match(!notSeen.found ? notSeen.reason : '', /cannot see a team with the key SEC/);
    const got = await app.issue(issue.identifier);
    assert.deepEqual([got.id, got.identifier, got.teamKey, got.projectId, got.description], [issue.id, 'ENG-1', 'ENG', proj.id, 'It overlaps.']);
    // The SDK's own models read the fake's answers.
    const sdk = new LinearClient({ accessToken: lin.appToken, apiUrl: lin.url });
    assert.equal((await (await sdk.issue(issue.id)).team)?.key, 'ENG');

    const { session } = await (async () => {
      lin.setWebhook({ url: 'http://127.0.0.1:9/unused', secret: 'x' });
      return lin.assignToApp(issue.id, alice.id);
    })();
    const first = await app.activity(session.id, 'run-1:started', { type: 'thought', body: 'On it.' });
    assert.deepEqual(first, { id: idOfKey('run-1:started'), created: true });
    assert.deepEqual(await app.activity(session.id, 'run-1:started', { type: 'thought', body: 'On it.' }), { id: first.id, created: false });
    await app.activity(session.id, 'run-1:q1', { type: 'elicitation', body: 'Which footer?' });
    assert.equal(lin.sessions.get(session.id)!.status, 'awaitingInput');
    assert.deepEqual(lin.activities.filter((a) => a.userId === lin.app.id).map((a) => a.content.type), ['thought', 'elicitation']);
    await app.comment(issue.id, 'run-1:comment', 'Hello from the app');
    await app.comment(issue.id, 'run-1:comment', 'Hello from the app');
    assert.deepEqual(lin.comments.map((c) => c.body), ['Hello from the app']);
    assert.deepEqual([...new Set(lin.requests.map((r) => r.auth))], ['Bearer']);

    await assert.rejects(createLinearApp({ apiUrl: lin.url, accessToken: 'lin_oauth_wrong0000' }).viewer(), (e: unknown) => e instanceof TrackerError && e.status === 401 && !e.message.includes('wrong0000'));
    lin.throttleNext = 1;
    await assert.rejects(app.viewer(), (e: unknown) => e instanceof TrackerError && e.status === 429 && e.transient);
    await assert.rejects(app.issue('NOPE-1'), (e: unknown) => e instanceof TrackerError && e.status === 404);
  });

  it('signs deliveries as Linear does: the SDK webhook client verifies them, and a replay is byte for byte', async () => {
    const capture = await startCapture(200);
    const got = capture.got;
    try {
      const secret = crypto.randomBytes(16).toString('hex');
      lin.setWebhook({ url: capture.url, secret });
      const bob = lin.addUser({ name: 'Bob' });
      const team = lin.addTeam({ key: 'WEB' });
      const issue = lin.addIssue({ teamId: team.id, title: 'Add dark mode', creatorId: bob.id });
      const { session, delivery } = await lin.assignToApp(issue.id, bob.id);
      assert.equal(delivery.status, 200);
      await lin.prompt(session.id, bob.id, 'Use the system setting.');
      await lin.redeliver(delivery.id);
      const verifier = new LinearWebhookClient(secret);
      for (const d of got) assert.equal(verifier.verify(Buffer.from(d.body), String(d.headers['linear-signature'])), true);
      assert.throws(() => new LinearWebhookClient('other').verify(Buffer.from(got[0]!.body), String(got[0]!.headers['linear-signature'])));
      assert.deepEqual(got.map((d) => [d.headers['linear-event'], JSON.parse(d.body).action]), [['AgentSessionEvent', 'created'], ['AgentSessionEvent', 'prompted'], ['AgentSessionEvent', 'created']]);
      assert.equal(got[2]!.headers['linear-delivery'], got[0]!.headers['linear-delivery']);
      assert.equal(got[2]!.body, got[0]!.body);
      const created = JSON.parse(got[0]!.body);
      assert.deepEqual([created.agentSession.id, created.agentSession.issue.identifier, created.agentSession.issue.team.key, created.agentSession.creator.id], [session.id, 'WEB-1', 'WEB', bob.id]);
      assert.equal(JSON.parse(got[1]!.body).agentActivity.content.body, 'Use the system setting.');
      // An old timestamp is signed as given; the SDK refuses it as stale.
      await lin.deliver('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created' }, { timestamp: Date.now() - 5 * 60_000 });
      assert.throws(() => verifier.verify(Buffer.from(got[3]!.body), String(got[3]!.headers['linear-signature'])), /timestamp/);
    } finally {
      await capture.close();
    }
  });
});

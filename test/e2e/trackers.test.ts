// The issue trackers end to end, through a real `local` sandbox: an issue assigned to the Linear
// agent app opens an agent session whose signed delivery becomes a run of the team linked to
// the issue's Linear team; the lead (a scripted model) asks a question, which appears in the
// session as an elicitation and is answered by a person's prompt there; the lead pushes its
// branch, the code host opens the pull request, and the session ends with a response naming it.
// A Jira issue assigned to the agent's account becomes a run whose notes are ADF comments: the
// question mentions the reporter, a comment answers it, the result names the pull request, and
// the issue moves through the configured transition. Replays and forged deliveries of both
// have no effect. A team homed in a chat_a room takes its Linear issue too: the run's progress
// is agent activities in the session and a thread in the home room, where the question is
// answered.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../../src/gateway/certificates.ts';
import { makeIntegration } from '../factories.ts';
import { startFakeCodeHost, type FakeCodeHost } from '../fakes/code-host.ts';
import { startFakeDns, type FakeDns } from '../fakes/dns-server.ts';
import { startFakeJira, textOfAdf, type FakeJira } from '../fakes/jira.ts';
import { startFakeLinear, type FakeLinear } from '../fakes/linear.ts';
import { startFakeMattermost, type FakeMattermost } from '../fakes/mattermost.ts';
import { uniq } from '../harness.ts';
import { putSecret, setChatA } from '../integrations.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { addCodeHostDestination, lastText, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const HOST = 'code.crewhouse.test';
const REPO = 'acme/app';

describe('the trackers end to end: an assigned issue becomes a run that answers there', { skip: stackSkip }, () => {
  let stack: Stack;
  let code: FakeCodeHost;
  let linear: FakeLinear;
  let jira: FakeJira;
  let dns: FakeDns;
  let mm: FakeMattermost;
  let tmp: string;
  let team: string;
  let base: string;
  let engTeam: string;
  const linearSecret = crypto.randomBytes(16).toString('hex');
  const jiraSecret = crypto.randomBytes(16).toString('hex');

  // The lead asks first; then writes a file named for the tracker, commits, pushes and finishes.
  function script(req: ScriptedRequest): ScriptedAnswer {
    const text = lastText(req);
    const task = String(req.body.messages.find((m) => m.role === 'user')?.content ?? '');
    // The chat-homed team's issue: a question answered in the home room, then done.
    if (task.includes('SCENARIO home')) {
      if (text.startsWith('The answer:')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `Painted it (${text}).` } }] };
      return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which colour?' } }] };
    }
    const file = task.includes('Jira') ? 'repo/JIRA.md' : 'repo/LINEAR.md';
    if (text.startsWith('wrote')) return { tool_calls: [{ name: 'git_commit', arguments: { message: `Work for ${file}` } }] };
    if (text.startsWith('committed')) return { tool_calls: [{ name: 'git_push', arguments: {} }] };
    if (text.startsWith('pushed')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `Wrote ${file}.` } }] };
    if (text.startsWith('The answer:')) return { tool_calls: [{ name: 'write_file', arguments: { path: file, content: `${text}\n` } }] };
    if (text.includes('add a changelog line too')) return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which changelog?' } }] };
    if (req.body.messages.some((m) => m.role === 'tool')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: `unexpected: ${text.slice(0, 300)}` } }] };
    return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Which file should I write?' } }] };
  }

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-trackers-e2e-'));
    const ca = mintCertificateAuthority('Test code host CA');
    fs.writeFileSync(path.join(tmp, 'ca.pem'), ca.certPem);
    code = await startFakeCodeHost({ tls: mintLeaf(issuerOf(ca), HOST), host: HOST });
    const installation = code.addInstallation('acme');
    code.addRepo(REPO, { installation });
    [linear, jira, dns, mm] = await Promise.all([startFakeLinear(), startFakeJira(), startFakeDns({ [HOST]: ['127.0.0.1'] }), startFakeMattermost()]);
    stack = await startStack({
      script,
      codeHostClock: code.now,
      config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1', SERVICE_GATEWAY_DNS: dns.server, SERVICE_GATEWAY_UPSTREAM_CA_FILE: path.join(tmp, 'ca.pem') },
    });
    const { t } = stack;
    const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => t.request({ method, url: `/api/v1${url}`, token: t.adminToken, body, headers });
    const enable = (kind: string, settings: Record<string, string>, secrets: Record<string, string>) => makeIntegration(t, kind, { settings, secrets });
    await enable('code_host', { app_id: String(code.app.id), installation_id: String(installation), api_url: code.apiUrl }, { app_key: code.app.privateKeyPem, webhook_secret: crypto.randomBytes(8).toString('hex') });
    await enable('tracker_a', { api_url: linear.url }, { access_token: linear.appToken, webhook_secret: linearSecret });
    await enable(
      'tracker_b',
      { client_id: jira.clientId, cloud_id: jira.cloudId, account_id: jira.agent.accountId, api_url: jira.apiUrl, auth_url: jira.authUrl, site_url: 'https://acme.atlassian.net', done_transition: 'Done' },
      { client_secret: jira.clientSecret, webhook_secret: jiraSecret },
    );

    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    linear.setWebhook({ url: `${base}/webhooks/tracker_a`, secret: linearSecret });
    jira.setWebhook({ url: `${base}/webhooks/tracker_b`, secret: jiraSecret });

    await addCodeHostDestination(t, HOST, code.httpsPort);
    const tools = ['write_file', 'git_commit', 'git_push', 'ask_person', 'finish'];
    team = await stack.makeTeam({ roles: { lead: { tools, role: { confirmation_policy: 'never_confirm' } } }, repo_url: `https://${HOST}:${code.httpsPort}/${REPO}.git` });
    engTeam = linear.addTeam({ key: 'ENG', name: 'Engineering' }).id;
    jira.addProject({ key: 'OPS', name: 'Operations' });
    for (const [surface, id] of [['code_host', REPO], ['tracker_a', 'ENG'], ['tracker_b', 'OPS']]) {
      const link = await api('PUT', `/teams/${team}/links`, { surface, external_id: id });
      assert.equal(link.status, 201, link.text);
      assert.equal(link.body.verification, 'verified');
    }
    const url = `/teams/${team}/roles/lead/egress`;
    const etag = String((await api('GET', url)).headers.etag);
    assert.equal((await api('PUT', url, { mode: 'allowlist', destinations: ['codehost'] }, { 'if-match': etag })).status, 200);
  });

  after(async () => {
    await stack?.stop();
    await code?.close();
    await Promise.all([linear?.stop(), jira?.stop(), dns?.close(), mm?.stop()]);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  const deliveries = async (kind: string): Promise<Array<Record<string, any>>> => (await stack.t.request({ method: 'GET', url: `/api/v1/integrations/${kind}/deliveries?limit=200`, token: stack.t.adminToken })).body.items;

  it('Linear: an issue assigned to the app becomes a run; its question is answered in the agent session; the result is a response with the pull request', async () => {
    const alice = linear.addUser({ name: 'Alice' });
    const issue = linear.addIssue({ teamId: engTeam, title: 'Write the Linear file', description: 'Please.', creatorId: alice.id });
    const { session, delivery } = await linear.assignToApp(issue.id, alice.id);
    assert.equal(delivery.status, 202, delivery.response);
    for (let i = 0; i < 10; i++) assert.equal((await linear.redeliver(delivery.id)).status, 202);
    const forged = await linear.deliver('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created', agentSession: { id: session.id } }, { signWith: 'not-the-secret' });
    assert.equal(forged.status, 401);

    const runId = await waitFor('the session to become a run', async () => (await deliveries('tracker_a')).find((d) => d.id === delivery.id && d.run_id)?.run_id as string | undefined);
    await stack.waitForState(runId, 'waiting');
    const ours = () => linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id);
    const asked = await waitFor('the elicitation in the session', async () => ours().find((a) => a.content.type === 'elicitation'));
    assert.match(asked.content.body ?? '', /Which file should I write\?/);
    assert.equal(linear.sessions.get(session.id)!.status, 'awaitingInput');
    assert.equal((await linear.prompt(session.id, alice.id, 'LINEAR.md, please')).status, 202);

    const done = await stack.waitForState(runId, 'succeeded');
    assert.ok((await stack.posts(runId)).some((p) => p.kind === 'answer' && p.text.includes('LINEAR.md, please')), 'the prompt answered the question');
    const pr = await waitFor('the pull request', async () => code.pulls.find((p) => p.head === done.delivery.branch));
    const response = await waitFor('the response activity', async () => ours().find((a) => a.content.type === 'response'));
    assert.match(response.content.body ?? '', new RegExp(`Pull request: .*/pull/${pr.number}`));
    assert.deepEqual(ours().map((a) => a.content.type), ['thought', 'elicitation', 'response']);
    assert.equal(linear.sessions.get(session.id)!.status, 'complete');
    const row = (await deliveries('tracker_a')).find((d) => d.id === delivery.id)!;
    assert.deepEqual([row.times_received, row.outcome], [11, 'processed']);
    assert.deepEqual((await deliveries('tracker_a')).filter((d) => d.id === forged.id).map((d) => [d.signature_valid, d.outcome]), [[false, 'refused']]);
    const runs = await stack.t.request({ method: 'GET', url: `/api/v1/teams/${team}/runs`, token: stack.t.adminToken });
    assert.equal(runs.body.items.filter((r: any) => r.text.includes(issue.identifier)).length, 1, 'one run however often the session was delivered');
    // The run knows where it came from: Linear, and the issue's address.
    const origin = await stack.t.db.selectFrom('runs').select(['surface', 'external_ref']).where('id', '=', runId).executeTakeFirstOrThrow();
    assert.deepEqual(origin, { surface: 'tracker_a', external_ref: `${linear.url.replace(/\/graphql$/, '')}/issue/${issue.identifier}` });

    // A later mention on the issue opens another session: a follow-up in the same run, told in that session.
    const { session: second, delivery: mention } = await linear.mentionApp(issue.id, alice.id, 'add a changelog line too');
    assert.equal(mention.status, 202, mention.response);
    await waitFor('the follow-up', async () => ((await stack.posts(runId)).some((p) => p.kind === 'reply' && p.text === 'add a changelog line too') ? true : null));
    const inSecond = () => linear.activities.filter((a) => a.sessionId === second.id && a.userId === linear.app.id);
    await waitFor('the question in the second session', async () => inSecond().find((a) => a.content.type === 'elicitation'));
    assert.equal((await linear.prompt(second.id, alice.id, 'CHANGELOG.md')).status, 202);
    await waitFor('the second response', async () => inSecond().find((a) => a.content.type === 'response'));
    assert.deepEqual(inSecond().map((a) => a.content.type), ['thought', 'elicitation', 'response']);
    assert.match(inSecond()[0]!.content.body ?? '', /resumed work on Alice's follow-up/);
    assert.equal(ours().length, 3, 'the first session is told nothing more');
    assert.equal((await stack.run(runId)).state, 'succeeded');
  });

  it('a team homed in a chat_a room: its Linear issue becomes a run told in the session and in a thread of the home room, whose question is answered in the thread', async () => {
    const { t } = stack;
    const botToken = `mm-e2e-trackers-${'t'.repeat(16)}`;
    const bot = mm.addUser({ username: 'crewhouse', bot: true, token: botToken });
    const person = mm.addUser({ username: 'alice' });
    const room = mm.addChannel({ teamId: mm.addTeam(uniq('acme')).id, name: 'design', members: [bot.id, person.id] });
    await putSecret(t, 'integrations/chat_a/bot_token', botToken);
    await setChatA(t, true, { url: mm.url });
    const homed = await stack.makeTeam({ roles: { lead: { tools: ['ask_person', 'finish'], role: { confirmation_policy: 'never_confirm' } } }, home: { surface: 'chat_a', room_id: room.id } });
    const design = linear.addTeam({ key: 'DES', name: 'Design' });
    const link = await t.request({ method: 'PUT', url: `/api/v1/teams/${homed}/links`, token: t.adminToken, body: { surface: 'tracker_a', external_id: 'DES' } });
    assert.equal(link.status, 201, link.text);
    // The worker follows the chat server once it sees chat_a enabled.
    await waitFor('the worker to listen to the chat server', async () => mm.openSockets === 1, 60_000);

    const ada = linear.addUser({ name: 'Ada' });
    const issue = linear.addIssue({ teamId: design.id, title: 'SCENARIO home: paint the door', creatorId: ada.id });
    const { session, delivery } = await linear.assignToApp(issue.id, ada.id);
    assert.equal(delivery.status, 202, delivery.response);
    const runId = await waitFor('the session to become a run', async () => (await deliveries('tracker_a')).find((d) => d.id === delivery.id && d.run_id)?.run_id as string | undefined);
    await stack.waitForState(runId, 'waiting');

    // Linear's session has the question, and so has the home room's thread.
    const ours = () => linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id);
    const asked = await waitFor('the elicitation in the session', async () => ours().find((a) => a.content.type === 'elicitation'));
    assert.match(asked.content.body ?? '', /Which colour\?/);
    const root = await waitFor('the thread in the home room', async () => mm.posts.find((p) => p.channel_id === room.id && p.root_id === '' && p.message.includes(runId)));
    assert.equal(root.user_id, bot.id);
    assert.ok(root.message.includes(`took work from [${issue.identifier} on Linear](${linear.url.replace(/\/graphql$/, '')}/issue/${issue.identifier}), asked by Ada.`), root.message);
    const inThread = (what: RegExp) => waitFor(`${what} in the thread`, async () => mm.threadOf(root.id).slice(1).find((p) => what.test(p.message)));
    await inThread(/asks: Which colour\?/);
    const run = await stack.run(runId);
    assert.deepEqual([run.surface, run.team, run.chat_thread_url], ['tracker_a', homed, mm.permalink(root.id)]);

    // A person in the room answers in the thread (through the worker's WebSocket listener).
    mm.post(person.id, room.id, 'green', root.id);
    const done = await stack.waitForState(runId, 'succeeded');
    assert.match(String(done.text), /SCENARIO home/);
    assert.ok((await stack.posts(runId)).some((p) => p.kind === 'answer' && p.text === 'green' && p.data?.by === 'chat_a:@alice'), 'the thread answered the question');
    await inThread(/Done: Painted it/);
    const response = await waitFor('the response activity', async () => ours().find((a) => a.content.type === 'response'));
    assert.match(response.content.body ?? '', /Painted it/);
    assert.deepEqual(ours().map((a) => a.content.type), ['thought', 'elicitation', 'response']);
    // A task from the Console is still refused for the chat-homed team.
    const console409 = await t.request({ method: 'POST', url: `/api/v1/teams/${homed}/tasks`, token: t.adminToken, body: { text: 'x' } });
    assert.equal(console409.status, 409, console409.text);
    assert.ok(!stack.logLines.some((l) => l.includes(botToken)));
  });

  it('Jira: an issue assigned to the agent becomes a run with ADF comments; a comment answers its question; success moves the issue', async () => {
    const rita = jira.addUser('Rita');
    const issue = jira.addIssue({ projectKey: 'OPS', summary: 'Write the Jira file', description: 'Soon.', reporter: rita.accountId });
    const assigned = await jira.assign(issue.key, jira.agent.accountId, rita.accountId);
    assert.equal(assigned.status, 202, assigned.response);
    for (let i = 0; i < 10; i++) assert.equal((await jira.redeliver(assigned.id)).status, 202);
    const forged = await jira.deliver('jira:issue_updated', { issue: { id: issue.id, key: issue.key } }, { signWith: 'not-the-secret' });
    assert.equal(forged.status, 401);

    const runId = await waitFor('the issue to become a run', async () => (await deliveries('tracker_b')).find((d) => d.id === assigned.id && d.run_id)?.run_id as string | undefined);
    await stack.waitForState(runId, 'waiting');
    const ours = () => jira.comments.filter((c) => c.issueId === issue.id && c.author === jira.agent.accountId);
    const asked = await waitFor('the question on the issue', async () => ours().find((c) => textOfAdf(c.body).includes('Which file should I write?')));
    assert.ok(JSON.stringify(asked.body).includes(`"type":"mention","attrs":{"id":"${rita.accountId}"`), 'the question mentions the reporter');
    assert.equal((await jira.comment(issue.key, rita.accountId, 'JIRA.md, please')).status, 202);

    const done = await stack.waitForState(runId, 'succeeded');
    const pr = await waitFor('the pull request', async () => code.pulls.find((p) => p.head === done.delivery.branch));
    const delivered = await waitFor('the delivered comment', async () => ours().find((c) => textOfAdf(c.body).includes('Pull request:')));
    assert.match(JSON.stringify(delivered.body), new RegExp(`"marks":\\[\\{"type":"link","attrs":\\{"href":"[^"]*/pull/${pr.number}"`), 'the pull request is a link');
    assert.deepEqual(ours().map((c) => textOfAdf(c.body).split('\n')[0]), [`Team ${team} is on it: run ${runId}.`, `@Rita lead of team ${team} asks:`, `Team ${team} finished.`]);
    await waitFor('the transition', async () => jira.issues.get(issue.id)!.status === 'Done');
    const origin = await stack.t.db.selectFrom('runs').select(['surface', 'external_ref']).where('id', '=', runId).executeTakeFirstOrThrow();
    assert.deepEqual(origin, { surface: 'tracker_b', external_ref: `https://acme.atlassian.net/browse/${issue.key}` });
    assert.deepEqual(await stack.t.services.trackerB.originOf(runId), { surface: 'tracker_b', place: issue.key, url: `https://acme.atlassian.net/browse/${issue.key}` });
    assert.equal(await stack.t.services.trackerA.originOf(runId), null, 'another tracker has no part in it');
    const row = (await deliveries('tracker_b')).find((d) => d.id === assigned.id)!;
    assert.deepEqual([row.times_received, row.outcome], [11, 'processed']);
    assert.deepEqual((await deliveries('tracker_b')).filter((d) => d.id === forged.id).map((d) => [d.signature_valid, d.outcome]), [[false, 'refused']]);
    assert.ok(!stack.logLines.some((l) => l.includes(jiraSecret) || l.includes(jira.clientSecret) || l.includes(linear.appToken)));
  });
});

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { Version3Client } from 'jira.js';
import { adf } from '../../src/integrations/tracker_b/adf.ts';
import { createJiraAgent, POST_PROPERTY } from '../../src/integrations/tracker_b/client.ts';
import { startFakeJira, textOfAdf, type FakeJira } from './jira.ts';
import { startCapture } from './webhook-sender.ts';

describe('the fake Jira Cloud site, through jira.js', () => {
  let jira: FakeJira;
  before(async () => {
    jira = await startFakeJira();
  });
  after(() => jira.stop());

  const agentOf = (over: Partial<Parameters<typeof createJiraAgent>[0]> = {}) =>
    createJiraAgent({ apiUrl: jira.apiUrl, authUrl: jira.authUrl, cloudId: jira.cloudId, clientId: jira.clientId, clientSecret: jira.clientSecret, accountId: jira.agent.accountId, ...over }, { now: () => jira.now() });

  it('mints a client-credentials token, caches it, refreshes it before expiry; REST v3 with ADF comments once per key and transitions', async () => {
    const alice = jira.addUser('Alice');
    jira.addProject({ key: 'OPS', name: 'Operations' });
    jira.addProject({ key: 'HR', agentAccess: false });
    const issue = jira.addIssue({ projectKey: 'OPS', summary: 'Rotate the logs', description: 'Daily, please.', reporter: alice.accountId });
    const agent = agentOf();
    const [a, b] = await Promise.all([agent.check(), agent.check()]);
    assert.equal(a.state, 'ok', a.detail);
    assert.equal(b.state, 'ok');
    assert.equal(jira.tokens.length, 1, 'concurrent callers share one token fetch');
    assert.deepEqual(await agent.findProject('OPS'), { found: true, label: 'OPS Operations' });
    const hidden = await agent.findProject('HR');
    assert.equal(hidden.found, false);
    const got = await agent.issue(issue.key);
    assert.deepEqual([got.key, got.summary, got.description, got.projectKey, got.reporter?.accountId], [issue.key, 'Rotate the logs', 'Daily, please.', 'OPS', alice.accountId]);
    // 56 minutes later the token has under five minutes left: a new one is fetched.
    jira.advance(56 * 60_000);
    await agent.issue(issue.key);
    assert.equal(jira.tokens.length, 2);
    const body = adf(['Question for ', { mention: alice.accountId, name: 'Alice' }, ': which logs?'], ['See ', { link: 'https://example.com/pr/1', text: 'the pull request' }]);
    const first = await agent.comment(issue.key, 'run-1:q1', body);
    assert.equal(first.created, true);
    assert.deepEqual(await agent.comment(issue.key, 'run-1:q1', body), { id: first.id, created: false });
    assert.equal(jira.comments.length, 1);
    assert.deepEqual(jira.comments[0]!.properties, [{ key: POST_PROPERTY, value: { key: 'run-1:q1' } }]);
    assert.equal(textOfAdf(jira.comments[0]!.body), 'Question for @Alice: which logs?\nSee the pull request');
    assert.equal(await agent.transition(issue.key, 'done'), true);
    assert.equal(jira.issues.get(issue.id)!.status, 'Done');
    assert.equal(await agent.transition(issue.key, 'Shipped'), false);
    // jira.js unchanged: a bearer token and the site's host.
    const rest = new Version3Client({ host: jira.host, authentication: { oauth2: { accessToken: jira.tokens[1]!.token } } });
    assert.equal((await rest.myself.getCurrentUser()).accountId, jira.agent.accountId);
    assert.deepEqual([...new Set(jira.requests.filter((r) => r.path.startsWith('/ex/')).map((r) => r.auth))], ['Bearer']);

    const wrong = await agentOf({ clientSecret: 'not-the-secret-000' }).check();
    assert.equal(wrong.state, 'error');
    assert.match(wrong.detail, /refused the client credentials/);
    assert.ok(!wrong.detail.includes('not-the-secret'));
    const other = await agentOf({ accountId: 'someone-else' }).check();
    assert.match(other.detail, /not account_id someone-else/);
    const away = await agentOf({ authUrl: 'http://127.0.0.1:9' }).check();
    assert.match(away.detail, /could not be reached/);
  });

  it('delivers webhooks signed with X-Hub-Signature and identified by X-Atlassian-Webhook-Identifier, the same on a retry', async () => {
    const capture = await startCapture(202);
    const got = capture.got;
    try {
      const secret = crypto.randomBytes(16).toString('hex');
      jira.setWebhook({ url: capture.url, secret });
      const bob = jira.addUser('Bob');
      jira.addProject({ key: 'WEB' });
      const issue = jira.addIssue({ projectKey: 'WEB', summary: 'Dark mode', reporter: bob.accountId });
      const assigned = await jira.assign(issue.key, jira.agent.accountId, bob.accountId);
      assert.equal(assigned.status, 202);
      await jira.comment(issue.key, bob.accountId, `[~accountid:${jira.agent.accountId}] use the system setting`);
      await jira.redeliver(assigned.id);
      for (const d of got) assert.equal(d.headers['x-hub-signature'], `sha256=${crypto.createHmac('sha256', secret).update(d.body).digest('hex')}`);
      assert.deepEqual(got.map((d) => JSON.parse(d.body).webhookEvent), ['jira:issue_updated', 'comment_created', 'jira:issue_updated']);
      assert.equal(got[2]!.headers['x-atlassian-webhook-identifier'], got[0]!.headers['x-atlassian-webhook-identifier']);
      const a = JSON.parse(got[0]!.body);
      assert.deepEqual([a.issue.key, a.changelog.items[0].to, a.user.accountId], [issue.key, jira.agent.accountId, bob.accountId]);
      await jira.deliver('jira:issue_updated', { issue: a.issue }, { signWith: null });
      assert.equal(got[3]!.headers['x-hub-signature'], undefined);
    } finally {
      await capture.close();
    }
  });
});

// The code host end to end: a person opens a labelled issue on the fake GitHub, which delivers a
// signed webhook to the console; the issue becomes a run of the linked team; the lead (a
// scripted model) commits and pushes its branch through the real gateway, which injects an
// installation token narrowed to the repository; the run succeeds, a job opens the pull
// request on the fake host and tells the issue. A comment on the pull request becomes a
// follow-up in the same run, after the first token's hour has passed (the gateway gets a fresh
// one); the issue is told once that the run resumed, naming the follow-up; merging the pull
// request is recorded on the run.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { sql } from 'kysely';
import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../../src/gateway/certificates.ts';
import { postProgressJob } from '../../src/integrations/code_host/post-progress.job.ts';
import { listJobs } from '../../src/queue/queue.ts';
import { makeIntegration } from '../factories.ts';
import { startFakeCodeHost, type FakeCodeHost } from '../fakes/code-host.ts';
import { startFakeDns, type FakeDns } from '../fakes/dns-server.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { addCodeHostDestination, lastText, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

const HOST = 'code.crewhouse.test';
const REPO = 'acme/app';
const SECRET = crypto.randomBytes(16).toString('hex');
const HOUR = 60 * 60 * 1000;

describe('the code host end to end: an issue becomes a run that ends in a pull request', { skip: stackSkip }, () => {
  let stack: Stack;
  let fake: FakeCodeHost;
  let dns: FakeDns;
  let tmp: string;
  let team: string;

  // The lead asks the person first; then it writes a file in the repository, commits, pushes and
  // finishes. A follow-up does the same with another file.
  let probing = false;
  function script(req: ScriptedRequest): ScriptedAnswer {
    const text = lastText(req);
    const followUp = req.body.messages.some((m) => String(m.content ?? '').includes('add a test'));
    if (text.startsWith('wrote')) return { tool_calls: [{ name: 'git_commit', arguments: { message: followUp ? 'Add a test' : 'Fix the thing' } }] };
    if (text.startsWith('committed')) return { tool_calls: [{ name: 'git_push', arguments: {} }] };
    // The follow-up asks for the pull request itself (the engine opens it through the app; it is the same one).
    if (text.startsWith('pushed') && followUp) return { tool_calls: [{ name: 'open_pull_request', arguments: { title: 'Add a test', body: 'With a test.' } }] };
    if (text.startsWith('opened pull request')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `Added a test in TEST.md; ${text}` } }] };
    if (text.startsWith('pushed')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'Fixed the thing in FIX.md.' } }] };
    // After the answer the lead first tries a host outside its egress: the refusal is reported in the pull request.
    if (text.startsWith('The answer:')) {
      probing = true;
      return { tool_calls: [{ name: 'http_request', arguments: { method: 'GET', url: 'https://elsewhere.crewhouse.test/' } }] };
    }
    if (probing || text.includes('add a test')) {
      probing = false;
      return { content: 'On it.', tool_calls: [{ name: 'write_file', arguments: { path: followUp ? 'repo/TEST.md' : 'repo/FIX.md', content: followUp ? 'a test\n' : 'the fix\n' } }] };
    }
    if (req.body.messages.some((m) => m.role === 'tool')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'failed', summary: `unexpected: ${text.slice(0, 300)}` } }] };
    return { tool_calls: [{ name: 'ask_person', arguments: { question: 'Shall I put the fix in FIX.md?' } }] };
  }

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-codehost-e2e-'));
    const ca = mintCertificateAuthority('Test code host CA');
    fs.writeFileSync(path.join(tmp, 'ca.pem'), ca.certPem);
    fake = await startFakeCodeHost({ tls: mintLeaf(issuerOf(ca), HOST), host: HOST });
    const installation = fake.addInstallation('acme');
    fake.addRepo(REPO, { installation });
    dns = await startFakeDns({ [HOST]: ['127.0.0.1'] });
    stack = await startStack({
      script,
      // The app judges its tokens' hour by the code host's clock, which the test moves on.
      codeHostClock: fake.now,
      config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1', SERVICE_GATEWAY_DNS: dns.server, SERVICE_GATEWAY_UPSTREAM_CA_FILE: path.join(tmp, 'ca.pem') },
    });
    const { t } = stack;
    const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => t.request({ method, url: `/api/v1${url}`, token: t.adminToken, body, headers });

    // The integration: the app's key and webhook secret, then its settings, enabled.
    await makeIntegration(t, 'code_host', {
      settings: { app_id: String(fake.app.id), installation_id: String(installation), api_url: fake.apiUrl },
      secrets: { app_key: fake.app.privateKeyPem, webhook_secret: SECRET },
    });

    // The console listens, and the fake GitHub delivers to it.
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    fake.setWebhook({ url: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/webhooks/code_host`, secret: SECRET });

    // The repository, reached through the gateway with the installation token it injects.
    await addCodeHostDestination(t, HOST, fake.httpsPort);
    const tools = ['write_file', 'read_file', 'git_commit', 'git_push', 'open_pull_request', 'http_request', 'ask_person', 'finish'];
    team = await stack.makeTeam({ roles: { lead: { tools, role: { confirmation_policy: 'never_confirm' } } }, repo_url: `https://${HOST}:${fake.httpsPort}/${REPO}.git` });
    // The repository is the team's through a code_host link (the app's installation covers it).
    const link = await api('PUT', `/teams/${team}/links`, { surface: 'code_host', external_id: REPO });
    assert.ok([200, 201].includes(link.status), link.text);
    const url = `/teams/${team}/roles/lead/egress`;
    const etag = String((await api('GET', url)).headers.etag);
    const put = await api('PUT', url, { mode: 'allowlist', destinations: ['codehost'] }, { 'if-match': etag });
    assert.equal(put.status, 200, put.text);
  });

  after(async () => {
    await stack?.stop();
    await fake?.close();
    await dns?.close();
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  async function deliveries(): Promise<Array<Record<string, any>>> {
    const r = await stack.t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=200', token: stack.t.adminToken });
    assert.equal(r.status, 200, r.text);
    return r.body.items;
  }

  it('a signed issue webhook becomes a run, the run a pull request; a replayed delivery has one effect; a forged one is refused', async () => {
    const issue = fake.openIssue(REPO, { title: 'Fix the thing', body: 'It is broken.', labels: ['crewhouse'], user: 'alice' });
    await fake.settled();
    const opened = fake.deliveries.find((d) => d.event === 'issues')!;
    assert.equal(opened.status, 202, opened.response);

    // GitHub's "Redeliver", ten times: each answered, none a second run.
    for (let i = 0; i < 10; i++) assert.equal((await fake.redeliver(opened.id)).status, 202);
    // A delivery signed with another secret is refused and recorded.
    const forged = await fake.deliver('issues', { action: 'opened', issue: { number: 99, title: 'forged', labels: [{ name: 'crewhouse' }] }, repository: { full_name: REPO } }, { signWith: 'not-the-secret' });
    assert.equal(forged.status, 401);

    const runId = await waitFor('the issue to become a run', async () => (await deliveries()).find((d) => d.id === opened.id && d.run_id)?.run_id as string | undefined);

    // The lead's question is posted on the issue; a comment addressed to the team answers it.
    const waiting = await stack.waitForState(runId, 'waiting');
    assert.equal(waiting.surface, 'code_host', 'the run says its work came from the code host');
    assert.ok(String(waiting.origin_url).endsWith(`/${REPO}/issues/${issue.number}`), `the run links back to its issue: ${waiting.origin_url}`);
    const asked = await waitFor('the question on the issue', async () => fake.comments.find((c) => c.issue === issue.number && c.body.includes('Shall I put the fix in FIX.md?')));
    assert.match(asked.body, /\/crewhouse/);
    fake.commentOnIssue(REPO, issue.number, 'Looks right to me.', 'carol');
    fake.commentOnIssue(REPO, issue.number, '@crewhouse yes, go ahead', 'alice');
    await fake.settled();
    const done = await stack.waitForState(runId, 'succeeded');
    const answer = (await stack.posts(runId)).find((p) => p.kind === 'answer');
    assert.ok(answer && /yes, go ahead/.test(answer.text), 'the addressed comment answered the question');
    assert.ok(!(await stack.posts(runId)).some((p) => p.text.includes('Looks right to me')), 'a comment not addressed to the team is not');
    assert.equal(waiting.open_question.text.includes('FIX.md'), true);
    assert.match(done.delivery.branch, /^crewhouse\//);

    const row = (await deliveries()).find((d) => d.id === opened.id)!;
    assert.equal(row.times_received, 11);
    assert.equal(row.outcome, 'processed');
    assert.deepEqual((await deliveries()).filter((d) => d.id === forged.id).map((d) => [d.signature_valid, d.outcome]), [[false, 'refused']]);
    const runs = await stack.t.request({ method: 'GET', url: `/api/v1/teams/${team}/runs`, token: stack.t.adminToken });
    assert.equal(runs.body.items.length, 1, 'one run however often the issue was delivered');
    assert.match(runs.body.items[0].text, /Fix the thing/);

    // The pull request, opened by a job from the pushed branch; the run's delivery names it.
    const pr = await waitFor('the pull request', async () => fake.pulls.find((p) => p.head === done.delivery.branch));
    assert.equal(pr.repo, REPO);
    assert.equal(pr.base, 'main');
    assert.match(pr.body ?? '', /Fixed the thing in FIX\.md/);
    assert.match(pr.body ?? '', /What changed[\s\S]*pushed crewhouse\//);
    assert.match(pr.body ?? '', new RegExp(`http://crewhouse\\.test/#/runs/${runId}`));
    assert.match(pr.body ?? '', new RegExp(`Closes #${issue.number}`));
    assert.match(pr.body ?? '', /### Refused egress\n- lead: [A-Z]+ elsewhere\.crewhouse\.test/);
    const delivered = await waitFor('the run to name its pull request', async () => {
      const r = await stack.run(runId);
      return r.delivery?.pull_request ? r : null;
    });
    assert.equal(delivered.delivery.pull_request.number, pr.number);
    assert.equal(delivered.delivery.pull_request.state, 'open');
    assert.equal(delivered.delivery.branch, done.delivery.branch);
    assert.ok(fake.refs(REPO)[`refs/heads/${done.delivery.branch}`], 'the branch is on the code host');

    // The issue was told: started with a link, finished with the pull request; each once.
    const onIssue = await waitFor('the finished comment', async () => {
      const c = fake.comments.filter((x) => x.issue === issue.number);
      return c.some((x) => x.body.includes(`/pull/${pr.number}`)) ? c : null;
    });
    const ours = onIssue.filter((c) => c.user.type === 'Bot');
    assert.equal(ours.length, 3, ours.map((c) => c.body).join('\n---\n'));
    assert.match(ours[0].body, new RegExp(`is on it: \\[run ${runId}\\]`));
    assert.match(ours[1].body, /asks/);
    // The link back, through the surface: the issue the run came from.
    const origin = await stack.t.services.surfaces.code_host.originOf(runId);
    assert.deepEqual(origin && [origin.surface, origin.place], ['code_host', `${REPO}#${issue.number}`]);
    assert.match(origin?.url ?? '', new RegExp(`/${REPO}/issues/${issue.number}$`));

    // Every git request through the gateway carried an installation token narrowed to the repository.
    const gitTokens = fake.tokens.filter((tk) => tk.repositories?.length === 1 && tk.repositories[0].toLowerCase() === REPO);
    assert.ok(gitTokens.length >= 1);
    assert.ok(fake.requests.some((r) => r.auth === 'basic' && r.path.includes('git-receive-pack')));
  });

  it('a comment on the pull request becomes a follow-up in the same run, with a fresh token after the first expired; merging is recorded', async () => {
    const runId = (await deliveries()).find((d) => d.run_id)!.run_id as string;
    const pr = fake.pulls.find((p) => p.repo === REPO)!;
    const tokensBefore = fake.tokens.length;
    // The installation token's hour passes on the code host: the next push needs a new one.
    fake.advance(HOUR + 60_000);

    fake.commentOnIssue(REPO, pr.number, '/crewhouse please add a test', 'bob');
    await fake.settled();
    await waitFor('the follow-up to start', async () => ((await stack.run(runId)).tasks.length >= 2 ? true : null));
    const again = await stack.waitForState(runId, 'succeeded');
    const posts = await stack.posts(runId);
    assert.ok(posts.some((p) => p.kind === 'reply' && p.text.includes('please add a test')), 'the comment is the follow-up');
    assert.equal(again.delivery.pull_request.number, pr.number, 'the same pull request');
    // The agent's open_pull_request got the existing pull request back from the engine.
    assert.ok(posts.some((p) => p.kind === 'completed' && p.text.includes(`opened pull request #${pr.number}: `)), 'the tool answered with the pull request');
    // The push went through with a token minted after the first expired.
    const fresh = fake.tokens.slice(tokensBefore);
    assert.ok(fresh.some((tk) => tk.repositories?.[0]?.toLowerCase() === REPO && tk.expiresAt > fake.now()), 'a fresh narrowed token');
    const branch = fake.refs(REPO)[`refs/heads/${again.delivery.branch}`];
    assert.ok(branch);
    assert.equal(fake.pulls.filter((p) => p.head === again.delivery.branch).length, 1, 'the pull request is not opened twice');

    // The issue is told the run resumed, naming the follow-up, once; then that it finished again.
    const issueNumber = fake.comments.find((c) => c.user.type === 'Bot' && c.body.includes('is on it'))!.issue;
    const followUp = posts.find((p) => p.kind === 'reply' && p.text.includes('please add a test'))!;
    const marker = `<!-- crewhouse:${runId}:resumed:${followUp.seq} -->`;
    const ours = await waitFor('the resumed and second finished comments', async () => {
      const c = fake.comments.filter((x) => x.issue === issueNumber && x.user.type === 'Bot');
      return c.length >= 5 ? c : null;
    });
    assert.equal(ours.length, 5, ours.map((c) => c.body).join('\n---\n'));
    const resumed = ours.filter((c) => /resumed/.test(c.body));
    assert.equal(resumed.length, 1);
    assert.match(resumed[0].body, new RegExp(`^Team \`${team}\` resumed work on a follow-up from @bob:\n\n> please add a test\n\n\\[Run ${runId}\\]`));
    assert.ok(resumed[0].body.includes(marker));
    assert.ok(ours.indexOf(resumed[0]) > ours.findIndex((c) => c.body.includes(`/pull/${pr.number}`)), 'after the first finished comment');
    assert.equal(ours.filter((c) => /finished\. Pull request:/.test(c.body)).length, 2, 'each end is told');
    // The job was queued once for the reopening; run again (a worker killed after posting), it finds its comment.
    const progressJobs = (await listJobs(stack.t.db, { kind: postProgressJob.kind, limit: 100 })).filter((j) => (j.payload as { event: string }).event === 'resumed');
    assert.equal(progressJobs.length, 1);
    const again2 = await stack.t.db.transaction().execute((trx) => postProgressJob.enqueue(trx, { run_id: runId, event: 'resumed', seq: followUp.seq }, { key: `${postProgressJob.kind}:${runId}:resumed:${followUp.seq}` }));
    assert.equal(again2.id, progressJobs[0].id, 'the same key is the same job');
    await stack.t.services.surfaces.code_host.progress(runId, 'resumed', followUp.seq);
    assert.equal(fake.comments.filter((c) => c.body.includes(marker)).length, 1, 'the retried job posted nothing more');
    // The comment's delivery was settled in the follow-up's own transaction (the same xmin), so its job
    // run again after the reply committed (a worker killed) finds it done and gives no second follow-up.
    const row = await stack.t.db.selectFrom('webhook_deliveries').select(['id', 'outcome', sql<string>`xmin::text`.as('xmin')]).where('event', '=', 'issue_comment').where('run_id', '=', runId).where('detail', 'like', '%follow-up%').executeTakeFirstOrThrow();
    assert.equal(row.outcome, 'processed');
    const replyRow = await stack.t.db.selectFrom('run_posts').select(sql<string>`xmin::text`.as('xmin')).where('run_id', '=', runId).where('seq', '=', followUp.seq).executeTakeFirstOrThrow();
    assert.equal(row.xmin, replyRow.xmin, 'the delivery is settled with the reply');
    await stack.t.services.webhooks.process(String(row.id));
    assert.equal((await stack.posts(runId)).filter((p) => p.kind === 'reply').length, 1, 'the follow-up was taken once');
    assert.equal((await stack.run(runId)).state, 'succeeded');

    // Merged on the code host: recorded on the run.
    fake.closePull(REPO, pr.number, { merged: true, user: 'alice' });
    await fake.settled();
    const merged = await waitFor('the merge to be recorded', async () => {
      const r = await stack.run(runId);
      return r.delivery?.pull_request?.state === 'merged' ? r : null;
    });
    assert.equal(merged.delivery.pull_request.number, pr.number);
    assert.ok((await stack.posts(runId)).some((p) => p.kind === 'notice' && /merged/.test(p.text)));
  });
});

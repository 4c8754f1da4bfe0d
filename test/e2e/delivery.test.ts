// A team of three roles delivers a branch: the task arrives, the lead plans and hands off, the
// coder edits, commits and pushes the run's branch through the credential gateway to a real git
// server (`git http-backend` over HTTPS), the reviewer sends it back once, the coder fixes and
// pushes again, the reviewer passes it on, the lead asks the person a question, a reply answers
// it, and the run succeeds with `delivery` naming the branch and the pushed commit. A follow-up
// reply then reopens the finished run. The model is a scripted fake behind the real model proxy.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../../src/gateway/certificates.ts';
import { startFakeDns, type FakeDns } from '../fakes/dns-server.ts';
import { startGitServer } from '../fakes/git-server.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { uniq } from '../harness.ts';
import { lastText, roleOf, startStack, stackSkip, type Stack } from './stack.ts';

const GIT_HOST = 'git.delivery.test';

describe('a team of three delivers a branch', { skip: stackSkip }, () => {
  let stack: Stack;
  let git: Awaited<ReturnType<typeof startGitServer>>;
  let dns: FakeDns;
  let tmp: string;
  const gitToken = `git-token-${crypto.randomBytes(12).toString('hex')}`;
  const requests: Array<{ role: string; text: string; body: ScriptedRequest['body'] }> = [];

  function script(req: ScriptedRequest): ScriptedAnswer {
    const role = roleOf(req);
    const text = lastText(req);
    requests.push({ role, text, body: req.body });
    if (role === 'coder') {
      if (text.includes('Add greeting.txt')) return { content: 'Writing the greeting.', tool_calls: [{ name: 'write_file', arguments: { path: 'repo/greeting.txt', content: 'helo\n' } }] };
      if (text.includes('Fix the typo')) return { tool_calls: [{ name: 'write_file', arguments: { path: 'repo/greeting.txt', content: 'hello\n' } }] };
      if (text.startsWith('wrote')) return { tool_calls: [{ name: 'git_commit', arguments: { message: 'Greet people' } }] };
      if (text.startsWith('committed')) return { tool_calls: [{ name: 'shell', arguments: { command: 'env | sort > /workspace/env.txt' } }, { name: 'git_push', arguments: {} }] };
      if (text.startsWith('pushed')) return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'greeting.txt is committed and pushed' } }] };
      return { status: 400, body: JSON.stringify({ error: { message: `coder: unexpected ${text.slice(0, 200)}`, type: 'invalid_request_error', param: null, code: null } }) };
    }
    if (role === 'reviewer') {
      if (text.includes('committed and pushed')) return { tool_calls: [{ name: 'read_file', arguments: { path: 'repo/greeting.txt' } }] };
      if (text.includes('helo') && !text.includes('hello')) return { tool_calls: [{ name: 'hand_off', arguments: { to_role: 'coder', summary: 'Fix the typo: it says helo' } }] };
      if (text.includes('hello')) return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'Reviewed: the greeting is right' } }] };
      return { status: 400, body: JSON.stringify({ error: { message: `reviewer: unexpected ${text.slice(0, 200)}`, type: 'invalid_request_error', param: null, code: null } }) };
    }
    if (text.includes('Also sign the greeting')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'the follow-up is noted' } }] };
    if (text.includes('Reviewed: the greeting is right')) return { tool_calls: [{ name: 'ask_person', arguments: { question: 'The greeting is reviewed. Announce it?', options: ['yes', 'no'] } }] };
    if (text.startsWith('The answer: yes')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'greeting.txt delivered' } }] };
    if (text.includes('Write a greeting')) return { content: 'Planning.', tool_calls: [{ name: 'update_plan', arguments: { steps: [{ step: 'coder adds greeting.txt', status: 'in_progress' }, { step: 'reviewer checks it', status: 'pending' }] } }, { name: 'hand_off', arguments: { summary: 'Add greeting.txt saying hello, commit and push.' } }] };
    return { status: 400, body: JSON.stringify({ error: { message: `lead: unexpected ${text.slice(0, 200)}`, type: 'invalid_request_error', param: null, code: null } }) };
  }

  before(async () => {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-delivery-'));
    const ca = mintCertificateAuthority('Delivery test upstream CA');
    fs.writeFileSync(path.join(tmp, 'upstream-ca.pem'), ca.certPem);
    git = await startGitServer(mintLeaf(issuerOf(ca), GIT_HOST));
    dns = await startFakeDns({ [GIT_HOST]: ['127.0.0.1'] });
    stack = await startStack({
      script,
      config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1', SERVICE_GATEWAY_DNS: dns.server, SERVICE_GATEWAY_UPSTREAM_CA_FILE: path.join(tmp, 'upstream-ca.pem') },
    });
  });

  after(async () => {
    await stack?.stop();
    await Promise.all([git?.close(), dns?.close()]);
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it('goes from a task to a reviewed, pushed branch, a question, an answer and success; a follow-up reopens it', async () => {
    const { t } = stack;
    const api = (method: string, url: string, body?: unknown, headers?: Record<string, string>) => t.request({ method, url: `/api/v1${url}`, token: t.adminToken, body, headers });
    const repo = `${uniq('repo')}.git`;
    const bare = git.makeRepo(repo);
    // A first commit on main, so the run's branch starts from the default branch.
    const seed = path.join(tmp, 'seed');
    execFileSync('git', ['clone', '-q', bare, seed]);
    fs.writeFileSync(path.join(seed, 'README.md'), '# greetings\n');
    execFileSync('git', ['-C', seed, 'add', 'README.md']);
    execFileSync('git', ['-C', seed, '-c', 'user.name=t', '-c', 'user.email=t@t', 'commit', '-qm', 'readme']);
    execFileSync('git', ['-C', seed, 'push', '-q', 'origin', 'HEAD:main']);

    // The git host: a dev-only destination whose token the gateway injects; pushes only to the runs' branches.
    assert.equal((await api('PUT', '/secrets/delivery-git-token', { value: gitToken })).status, 201);
    const dest = uniq('git');
    const d = await api('POST', '/destinations', {
      name: dest,
      host: `${GIT_HOST}:${git.port}`,
      methods: [],
      paths: [],
      header_allowlist: ['git-protocol', 'accept', 'user-agent'],
      git_push_ref_globs: ['crewhouse/*'],
      inject_secret: 'secret:delivery-git-token',
      dev_only: true,
      what: 'the test git server',
    });
    assert.equal(d.status, 201, d.text);

    const tools = ['read_file', 'write_file', 'shell', 'update_plan', 'ask_person', 'hand_off', 'finish', 'git_commit', 'git_push', 'git_status'];
    const team = await stack.makeTeam({
      roles: { lead: { tools }, coder: { tools }, reviewer: { tools } },
      pipeline: { lead: 'coder', coder: 'reviewer' },
      rework_rounds: 1,
      repo_url: `https://${GIT_HOST}:${git.port}/${repo}`,
    });
    for (const role of ['lead', 'coder', 'reviewer']) {
      const url = `/teams/${team}/roles/${role}/egress`;
      const etag = String((await api('GET', url)).headers.etag);
      const put = await api('PUT', url, { mode: 'allowlist', destinations: [dest] }, { 'if-match': etag });
      assert.equal(put.status, 200, put.text);
    }

    const runId = await stack.giveTask(team, 'Write a greeting file for the repository.');
    const branch = `crewhouse/${runId}`;
    const waiting = await stack.waitForState(runId, 'waiting');
    assert.equal(waiting.waiting_for.kind, 'question');
    assert.equal(waiting.waiting_for.role, 'lead');
    assert.match(waiting.open_question.text, /Announce it\?/);

    // A reply without in_reply_to while a question is open is refused, naming the question.
    const early = await api('POST', `/runs/${runId}/replies`, { text: 'also do more' });
    assert.equal(early.status, 409, early.text);
    assert.match(early.body.detail, new RegExp(`in_reply_to ${waiting.open_question.seq}`));
    const reply = await api('POST', `/runs/${runId}/replies`, { text: 'yes', in_reply_to: waiting.open_question.seq });
    assert.equal(reply.status, 202, reply.text);

    const done = await stack.waitForState(runId, 'succeeded');
    assert.deepEqual(
      done.tasks.map((x: { role: string; state: string }) => `${x.role}:${x.state}`),
      ['lead:done', 'coder:done', 'reviewer:done', 'coder:done', 'reviewer:done', 'lead:done'],
    );

    // The branch and its last pushed commit are in the bare repository, and the delivery names them.
    const refs = git.refs(repo);
    const head = refs[`refs/heads/${branch}`];
    assert.ok(head, `the branch ${branch} is in the repository: ${JSON.stringify(refs)}`);
    assert.deepEqual(done.delivery, { branch, commit: head, pull_request: null });
    assert.equal(execFileSync('git', ['-C', bare, 'show', `${head}:greeting.txt`], { encoding: 'utf8' }), 'hello\n');
    assert.equal(execFileSync('git', ['-C', bare, 'show', `${head}:README.md`], { encoding: 'utf8' }), '# greetings\n', 'the branch starts from the default branch');
    const log = execFileSync('git', ['-C', bare, 'log', '--format=%s|%an', head], { encoding: 'utf8' }).trim().split('\n');
    assert.deepEqual(log.slice(0, 2), ['Greet people|crewhouse coder', 'Greet people|crewhouse coder']);
    assert.equal(refs['refs/heads/main'] !== undefined, true);

    const posts = await stack.posts(runId);
    posts.forEach((p, i) => assert.equal(p.seq, i + 1, 'posts are numbered without gaps'));
    const artifacts = posts.filter((p) => p.kind === 'artifact');
    assert.equal(artifacts.length, 2, 'two pushes, each an artifact');
    assert.equal(artifacts[1].data?.commit, head);
    assert.equal(artifacts[0].data?.branch, branch);
    const rework = posts.find((p) => p.kind === 'task' && p.role === 'coder' && p.data?.rework === true);
    assert.ok(rework, 'the reviewer sent the work back once');
    assert.match(rework.text, /Fix the typo/);
    assert.equal(posts.at(-1)?.kind, 'completed');

    // Every role's clone and fetch and both pushes went through the gateway, which put the git host's credential on each request.
    const toRepo = git.requests.filter((r) => r.path.startsWith(`/${repo}/`));
    assert.ok(toRepo.filter((r) => r.path.endsWith('git-upload-pack')).length >= 3, 'each role fetched the repository');
    assert.equal(toRepo.filter((r) => r.method === 'POST' && r.path.endsWith('git-receive-pack')).length, 2, 'two pushes');
    assert.ok(toRepo.every((r) => r.authorization?.includes(gitToken)), JSON.stringify(toRepo.map((r) => [r.method, r.path, r.authorization ? 'auth' : 'none'])));

    // The reviewer read the pushed work from its own sandbox's clone of the branch.
    const reviewerReads = requests.filter((r) => r.role === 'reviewer' && r.body.messages.at(-1)?.role === 'tool');
    assert.ok(reviewerReads.some((r) => r.text.includes('helo')) && reviewerReads.some((r) => r.text.includes('hello')));

    // No secret in any sandbox: not the git token the gateway injected, not a role's model key, not the deployment's settings.
    const keys = await Promise.all(['lead', 'coder', 'reviewer'].map((r) => t.services.teamsDirectory.roleModelKey(team, r)));
    const files = (fs.readdirSync(stack.sandboxDir, { recursive: true }) as string[]).map((f) => path.join(stack.sandboxDir, f));
    const envFile = files.find((f) => f.endsWith(`workspace${path.sep}env.txt`));
    assert.ok(envFile, 'the coder wrote its environment');
    const envText = fs.readFileSync(envFile!, 'utf8');
    assert.match(envText, /^HTTPS_PROXY=/m);
    assert.doesNotMatch(envText, /SERVICE_|Bearer/);
    for (const f of files) {
      let st;
      try {
        st = fs.lstatSync(f);
      } catch {
        continue;
      }
      if (!st.isFile() || st.size > 4 * 1024 * 1024) continue;
      const body = fs.readFileSync(f);
      assert.ok(!body.includes(gitToken), `the git token is not in ${f}`);
      for (const k of keys) assert.ok(k && !body.includes(k), `no model key in ${f}`);
    }
    assert.ok(!JSON.stringify(posts).includes(gitToken));

    // A follow-up without in_reply_to reopens the finished run; the lead gets the text; it finishes again.
    const before = posts.length;
    const follow = await api('POST', `/runs/${runId}/replies`, { text: 'Also sign the greeting, please.' });
    assert.equal(follow.status, 202, follow.text);
    assert.equal(follow.body.state, 'running');
    const again = await stack.waitForState(runId, 'succeeded');
    assert.equal(again.failure_reason, null);
    assert.equal(again.tasks.length, 7);
    assert.equal(again.tasks.at(-1).role, 'lead');
    assert.ok(requests.some((r) => r.role === 'lead' && r.text.includes('Also sign the greeting, please.')), 'the lead got the follow-up');
    const more = (await stack.posts(runId)).slice(before);
    assert.deepEqual(more.map((p) => p.kind), ['reply', 'completed'], JSON.stringify(more));
    assert.equal(more[0].data?.reopened, true);
    // The delivery is kept across the follow-up.
    assert.deepEqual(again.delivery, done.delivery);
  });
});

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { verify } from '@octokit/webhooks-methods';
import { startFakeCodeHost, type FakeCodeHost } from '../../../test/fakes/code-host.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../../gateway/certificates.ts';
import { CodeHostError, createCodeHostApp, type CodeHostApp } from './app.ts';

const MINUTE = 60_000;

describe('code-host app client against the fake code host', () => {
  let fake: FakeCodeHost;
  let installation: number;
  let client: CodeHostApp;
  let caFile: string;
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-codehost-test-'));

  before(async () => {
    const ca = mintCertificateAuthority('Test code host CA');
    caFile = path.join(tmp, 'ca.pem');
    fs.writeFileSync(caFile, ca.certPem);
    fake = await startFakeCodeHost({ tls: mintLeaf(issuerOf(ca), '127.0.0.1') });
    installation = fake.addInstallation('acme');
    fake.addRepo('acme/widgets', { installation });
    fake.addRepo('acme/gadgets', { installation });
    fake.addRepo('acme/secret-plans');
    fake.addInstallation('other-org');
    fake.addRepo('other-org/tools');
    client = createCodeHostApp({ apiUrl: fake.apiUrl, appId: fake.app.id, installationId: installation, privateKey: fake.app.privateKeyPem }, { now: fake.now });
  });
  after(async () => {
    await fake?.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('check: ok names the app, the account and how many repositories the installation covers', async () => {
    const r = await client.check();
    assert.equal(r.state, 'ok', r.detail);
    assert.match(r.detail, /crewhouse-test/);
    assert.match(r.detail, /acme/);
    assert.match(r.detail, /2 repositories/);
    assert.ok(!r.detail.includes('\n'));
  });

  test('check: errors are one line naming the cause, never the key', async () => {
    const wrongInstallation = createCodeHostApp({ apiUrl: fake.apiUrl, appId: fake.app.id, installationId: 999999, privateKey: fake.app.privateKeyPem });
    const r1 = await wrongInstallation.check();
    assert.equal(r1.state, 'error');
    assert.match(r1.detail, /installation 999999.*404/);

    const otherKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }) as string;
    const r2 = await createCodeHostApp({ apiUrl: fake.apiUrl, appId: fake.app.id, installationId: installation, privateKey: otherKey }).check();
    assert.equal(r2.state, 'error');
    assert.match(r2.detail, /401 A JSON web token could not be decoded/);
    assert.ok(!r2.detail.includes('PRIVATE KEY'));

    const garbage = 'not a key at all, but a secret value';
    const r3 = await createCodeHostApp({ apiUrl: fake.apiUrl, appId: fake.app.id, installationId: installation, privateKey: garbage }).check();
    assert.deepEqual(r3, { state: 'error', detail: 'app_key is not a PEM RSA private key' });

    const closed = http.createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', () => resolve()));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    const r4 = await createCodeHostApp({ apiUrl: `http://127.0.0.1:${port}`, appId: fake.app.id, installationId: installation, privateKey: fake.app.privateKeyPem }).check();
    assert.equal(r4.state, 'error');
    assert.match(r4.detail, /cannot reach the code host \(ECONNREFUSED\)/);

    fake.failWith(503);
    try {
      const r5 = await client.check();
      assert.equal(r5.state, 'error');
      assert.match(r5.detail, /503/);
    } finally {
      fake.failWith(null);
    }
  });

  test('installation tokens: concurrent callers share one mint, cached until 5 minutes before expiry, then refreshed', async () => {
    const app = createCodeHostApp({ apiUrl: fake.apiUrl, appId: fake.app.id, installationId: installation, privateKey: fake.app.privateKeyPem }, { now: fake.now });
    const minted = fake.tokens.length;
    const [a, b, c] = await Promise.all([app.installationToken(), app.installationToken(), app.installationToken()]);
    assert.equal(fake.tokens.length, minted + 1);
    assert.equal(a.token, b.token);
    assert.equal(b.token, c.token);
    assert.ok(Math.abs(Date.parse(a.expiresAt) - fake.now() - 60 * MINUTE) < MINUTE, 'valid one hour');

    fake.advance(54 * MINUTE);
    assert.equal((await app.installationToken()).token, a.token, 'six minutes left: still cached');
    assert.equal(fake.tokens.length, minted + 1);

    // Past the refresh point; the host's clock has also moved past the JWT's lifetime, so the
    // client must also correct its JWT for the skew the host's Date shows.
    fake.advance(2 * MINUTE);
    const fresh = await app.installationToken();
    assert.notEqual(fresh.token, a.token);
    assert.equal(fake.tokens.length, minted + 2);
    assert.ok(Date.parse(fresh.expiresAt) > Date.parse(a.expiresAt));

    fake.advance(5 * MINUTE);
    const res = await fetch(`${fake.apiUrl}/installation/repositories`, { headers: { authorization: `token ${a.token}` } });
    assert.equal(res.status, 401, 'the old token has expired on the host');
    const ok = await fetch(`${fake.apiUrl}/installation/repositories`, { headers: { authorization: `token ${fresh.token}` } });
    assert.equal(ok.status, 200);
  });

  test('installation tokens: narrowed to the repositories asked for, cached per set', async () => {
    const one = await client.installationToken({ repositories: ['acme/widgets'] });
    const rec = fake.tokens.find((t) => t.token === one.token)!;
    assert.deepEqual(rec.repositories, ['acme/widgets']);
    assert.equal((await client.installationToken({ repositories: ['ACME/Widgets'] })).token, one.token);
    const both = await client.installationToken({ repositories: ['acme/gadgets', 'acme/widgets'] });
    assert.notEqual(both.token, one.token);

    const other = await fetch(`${fake.apiUrl}/repos/acme/gadgets`, { headers: { authorization: `token ${one.token}` } });
    assert.equal(other.status, 404, 'a narrowed token does not see the other repository');
    const mine = await fetch(`${fake.apiUrl}/repos/acme/widgets`, { headers: { authorization: `token ${one.token}` } });
    assert.equal(mine.status, 200);

    await assert.rejects(client.installationToken({ repositories: ['acme/secret-plans'] }), (e: unknown) => e instanceof CodeHostError && /422 There is at least one repository/.test(e.message));
    await assert.rejects(client.installationToken({ repositories: ['other-org/tools'] }), /belongs to acme, not other-org/);
  });

  test('coverage: covered, not installed, another account', async () => {
    assert.deepEqual(await client.coversRepository('acme/widgets'), { covered: true });
    assert.deepEqual(await client.coversRepository('Acme/Gadgets'), { covered: true });
    const no = await client.coversRepository('acme/secret-plans');
    assert.equal(no.covered, false);
    assert.match((no as { reason: string }).reason, /not installed on acme\/secret-plans/);
    const elsewhere = await client.coversRepository('other-org/tools');
    assert.equal(elsewhere.covered, false);
    assert.match((elsewhere as { reason: string }).reason, /on acme, not on other-org/);
    await assert.rejects(client.coversRepository('not a repo'), /is not <owner>\/<repo>/);
  });

  test('repository, issue, comments', async () => {
    const repo = await client.repository('acme/widgets');
    assert.equal(repo.defaultBranch, 'main');
    assert.equal(repo.cloneUrl, `${fake.httpsUrl}/acme/widgets.git`);

    const opened = fake.openIssue('acme/widgets', { title: 'Fix the frobnicator', body: 'It squeaks.', labels: ['crewhouse'], user: 'alice' });
    const issue = await client.issue({ repo: 'acme/widgets', number: opened.number });
    assert.deepEqual(issue, { number: opened.number, title: 'Fix the frobnicator', body: 'It squeaks.', state: 'open', labels: ['crewhouse'], author: 'alice', url: issue.url, isPullRequest: false });

    const c = await client.comment({ repo: 'acme/widgets', issue: opened.number, body: 'On it.' });
    assert.ok(c.id > 0);
    assert.equal(fake.comments.at(-1)!.user.login, await client.botLogin());
    fake.commentOnIssue('acme/widgets', opened.number, 'Thanks!', 'alice');
    const list = await client.issueComments({ repo: 'acme/widgets', number: opened.number });
    assert.deepEqual(list.map((x) => [x.author, x.body]), [['crewhouse-test[bot]', 'On it.'], ['alice', 'Thanks!']]);

    await assert.rejects(client.issue({ repo: 'acme/widgets', number: 999 }), /404/);
  });

  test('pull requests: opened once per head, the existing open one answered again', async () => {
    fake.pushBranch('acme/widgets', 'agent/fix-1', { 'fix.txt': 'fixed\n' });
    const first = await client.openPullRequest({ repo: 'acme/widgets', head: 'agent/fix-1', title: 'Fix it', body: 'Summary' });
    assert.equal(first.created, true);
    const again = await client.openPullRequest({ repo: 'acme/widgets', head: 'agent/fix-1', title: 'Fix it', body: 'Summary' });
    assert.deepEqual(again, { ...first, created: false });
    const opened = fake.pulls.filter((p) => p.repo === 'acme/widgets' && p.head === 'agent/fix-1');
    assert.equal(opened.length, 1);
    assert.equal(opened[0]!.base, 'main');

    const pr = await client.pullRequest({ repo: 'acme/widgets', number: first.number });
    assert.deepEqual([pr.state, pr.merged, pr.head, pr.base], ['open', false, 'agent/fix-1', 'main']);
    fake.closePull('acme/widgets', first.number, { merged: true });
    assert.equal((await client.pullRequest({ repo: 'acme/widgets', number: first.number })).merged, true);

    // Closed: a new one may be opened for the same head.
    const next = await client.openPullRequest({ repo: 'acme/widgets', head: 'agent/fix-1', title: 'Fix it again', body: 'Summary' });
    assert.equal(next.created, true);
    assert.notEqual(next.number, first.number);

    await assert.rejects(client.openPullRequest({ repo: 'acme/widgets', head: 'agent/none', title: 'x', body: 'y' }), /422 Validation Failed \(head invalid\)/);
  });

  test('git over HTTPS takes only x-access-token with a token covering the repository', async () => {
    const { token } = await client.installationToken({ repositories: ['acme/widgets'] });
    // Not execFileSync: the fake answers in this process.
    const git = (url: string) =>
      new Promise<string>((resolve, reject) =>
        execFile('git', ['ls-remote', url], { encoding: 'utf8', env: { ...process.env, GIT_SSL_CAINFO: caFile, GIT_TERMINAL_PROMPT: '0' } }, (err, stdout, stderr) =>
          err ? reject(new Error(stderr)) : resolve(stdout),
        ),
      );
    const base = new URL(fake.httpsUrl);
    const withAuth = (user: string, pass: string, repo: string) => `https://${user}:${pass}@${base.host}/${repo}.git`;
    assert.match(await git(withAuth('x-access-token', token, 'acme/widgets')), /refs\/heads\/main/);
    await assert.rejects(git(withAuth('x-access-token', token, 'acme/gadgets')), /not found/i);
    await assert.rejects(git(withAuth('x-access-token', 'ghs_wrong', 'acme/widgets')), /Authentication failed|Invalid username/i);
    await assert.rejects(git(withAuth('someone', token, 'acme/widgets')), /Authentication failed|Invalid username/i);
  });

  test('webhooks are signed like GitHub and a redelivery keeps its id', async () => {
    const got: { headers: http.IncomingHttpHeaders; body: string }[] = [];
    const receiver = http.createServer((req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        got.push({ headers: req.headers, body });
        res.writeHead(202).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', () => resolve()));
    try {
      fake.setWebhook({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/webhooks/code_host`, secret: 'hook-secret' });
      fake.openIssue('acme/widgets', { title: 'Hooked', user: 'bob' });
      await fake.settled();
      assert.equal(got.length, 1);
      const [d] = got;
      assert.equal(d!.headers['x-github-event'], 'issues');
      assert.ok(await verify('hook-secret', d!.body, String(d!.headers['x-hub-signature-256'])));
      const payload = JSON.parse(d!.body);
      assert.equal(payload.action, 'opened');
      assert.equal(payload.repository.full_name, 'acme/widgets');
      assert.equal(payload.installation.id, installation);

      const again = await fake.redeliver(String(d!.headers['x-github-delivery']));
      assert.equal(again.status, 202);
      assert.equal(got[1]!.headers['x-github-delivery'], d!.headers['x-github-delivery']);

      await fake.deliver('ping', { zen: 'Keep it simple.' }, { signWith: 'wrong' });
      assert.equal(await verify('hook-secret', got[2]!.body, String(got[2]!.headers['x-hub-signature-256'])), false);
    } finally {
      fake.setWebhook(null);
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
});

import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { makeTeam, makeTemplate } from '../../../test/factories.ts';
import { startFakeCodeHost, type FakeCodeHost } from '../../../test/fakes/code-host.ts';
import { startFakeMattermost } from '../../../test/fakes/mattermost.ts';
import { captureLogger, dbKind, testApp, uniq, waitFor, type TestApp } from '../../../test/harness.ts';
import { makeHostRow } from '../../../test/sandboxes.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../../gateway/certificates.ts';
import { watchIntegrationSettings } from '../../gateway/integration-settings.ts';
import { repositoryOnCodeHost } from './integrations.service.ts';

describe(`integrations (${dbKind})`, () => {
  let t: TestApp;
  let fake: FakeCodeHost;
  let installation: number;
  let viewer: { token: string };
  let operator: { token: string };
  const WEBHOOK_SECRET = `whsec-${uniq('value')}`;
  /** Every answer's text, to check no secret value ever leaves. */
  const seen: string[] = [];

  const req = async (method: string, url: string, opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {}) => {
    const res = await t.request({ method, url: `/api/v1${url}`, token: opts.token ?? t.adminToken, body: opts.body, headers: opts.headers });
    seen.push(res.text);
    return res;
  };
  const etag = async (kind: string) => String((await req('GET', `/integrations/${kind}`)).headers.etag);
  const put = async (kind: string, body: unknown, token?: string) => req('PUT', `/integrations/${kind}`, { token, body, headers: { 'if-match': await etag(kind) } });
  /** Writes a value; a declared (unset) reference exists already, so it is replaced with its ETag, like any secret. */
  const putSecret = async (name: string, value: string) => {
    const ref = await req('GET', `/secrets/${name}`);
    const res = await req('PUT', `/secrets/${name}`, { body: { value }, headers: ref.status === 200 ? { 'if-match': String(ref.headers.etag) } : {} });
    assert.ok(res.status === 200 || res.status === 201, res.text);
  };
  const codeHostSettings = () => ({ app_id: fake.app.id, installation_id: installation, api_url: fake.apiUrl });

  before(async () => {
    t = await testApp({ modelProxy: true });
    viewer = await t.user('viewer');
    operator = await t.user('operator');
    const ca = mintCertificateAuthority('Test code host CA');
    fake = await startFakeCodeHost({ tls: mintLeaf(issuerOf(ca), '127.0.0.1') });
    installation = fake.addInstallation('acme');
    fake.addRepo('acme/widgets', { installation });
    fake.addRepo('acme/private-plans');
  });
  after(async () => {
    await t?.close();
    await fake?.close();
  });

  test('the five kinds are listed, disabled, with what each needs; viewers read them', async () => {
    const res = await req('GET', '/integrations', { token: viewer.token });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.body.items.map((i: any) => i.kind), ['chat_a', 'chat_b', 'code_host', 'tracker_a', 'tracker_b']);
    const byKind = Object.fromEntries(res.body.items.map((i: any) => [i.kind, i]));
    for (const i of res.body.items) {
      assert.equal(i.enabled, false);
      assert.deepEqual(i.status, { applied: 'current', generation: 0, pending_hosts: [], complete: false });
    }
    assert.deepEqual(byKind.code_host.missing, ['settings.app_id', 'settings.installation_id', 'secrets.app_key', 'secrets.webhook_secret']);
    assert.deepEqual(byKind.code_host.secrets.map((s: any) => [s.ref, s.status, s.set_with]), [
      ['secret:integrations/code_host/app_key', 'unset', 'PUT /api/v1/secrets/integrations/code_host/app_key'],
      ['secret:integrations/code_host/webhook_secret', 'unset', 'PUT /api/v1/secrets/integrations/code_host/webhook_secret'],
    ]);
    assert.deepEqual(byKind.chat_a.missing, ['settings.url', 'secrets.bot_token']);
    assert.deepEqual(byKind.chat_b.missing, ['secrets.bot_token', 'secrets.app_token']);
    assert.deepEqual(byKind.tracker_a.missing, ['secrets.access_token', 'secrets.webhook_secret']);
    assert.deepEqual(byKind.tracker_b.missing, ['settings.client_id', 'settings.cloud_id', 'settings.account_id', 'secrets.client_secret']);
    const base = t.config.publicBaseUrl;
    assert.equal(byKind.code_host.webhook_url, `${base}/webhooks/code_host`);
    assert.equal(byKind.tracker_a.webhook_url, `${base}/webhooks/tracker_a`);
    assert.equal(byKind.tracker_b.webhook_url, `${base}/webhooks/tracker_b`);
    assert.equal(byKind.chat_a.webhook_url, null);

    const first = await req('GET', '/integrations?limit=2');
    assert.deepEqual(first.body.items.map((i: any) => i.kind), ['chat_a', 'chat_b']);
    const second = await req('GET', `/integrations?limit=2&cursor=${first.body.next_cursor}`);
    assert.deepEqual(second.body.items.map((i: any) => i.kind), ['code_host', 'tracker_a']);
    assert.equal((await req('GET', `/integrations?limit=2&cursor=${second.body.next_cursor}`)).body.next_cursor, null);
    assert.equal((await req('GET', '/integrations?cursor=bogus')).status, 400);

    const one = await req('GET', '/integrations/code_host', { token: viewer.token });
    assert.equal(one.status, 200);
    assert.match(String(one.headers.etag), /^"\d+\.[0-9a-f]{16}"$/, 'the row version and a digest of the body (secrets set, status.applied are derived)');
    assert.deepEqual(one.body, byKind.code_host);
    assert.equal((await req('GET', '/integrations/jira')).status, 404);
    // One integration takes no query parameter: one sent is refused naming it, as the list refuses one it does not know.
    for (const url of ['/integrations/code_host?kind=chat_a', '/integrations?verbose=1']) {
      const refused = await req('GET', url, { token: viewer.token });
      assert.equal(refused.status, 400, `${url}: ${refused.text}`);
      assert.equal(refused.body.errors[0].message, 'is not a known field');
    }
  });

  test('the ETag changes with what the body shows (a secret of the kind set), and If-Match still compares the integration itself', async () => {
    const before = await req('GET', '/integrations/tracker_b');
    const secret = await req('GET', '/secrets/integrations/tracker_b/webhook_secret');
    const headers: Record<string, string> = secret.status === 200 ? { 'if-match': String(secret.headers.etag) } : {};
    const set = await req('PUT', '/secrets/integrations/tracker_b/webhook_secret', { body: { value: 'whs-etag-test' }, headers });
    assert.ok([200, 201].includes(set.status), set.text);
    const after = await req('GET', '/integrations/tracker_b');
    assert.notDeepEqual(after.body.secrets, before.body.secrets);
    assert.notEqual(after.headers.etag, before.headers.etag, 'a body that differs has another ETag');
    const written = await req('PUT', '/integrations/tracker_b', { body: { enabled: false, settings: before.body.settings }, headers: { 'if-match': String(before.headers.etag) } });
    assert.equal(written.status, 200, written.text);
    // As it was: the reference stays, unset.
    await req('DELETE', '/secrets/integrations/tracker_b/webhook_secret', { headers: { 'if-match': String(set.headers.etag) } });
  });

  test('PUT: admin only, If-Match required (428) and current (412)', async () => {
    const body = { enabled: false, settings: { url: 'https://chat.example.com' } };
    assert.equal((await put('chat_a', body, viewer.token)).status, 403);
    assert.equal((await put('chat_a', body, operator.token)).status, 403);
    assert.equal((await req('PUT', '/integrations/chat_a', { body })).status, 428);
    const old = await etag('chat_a');
    const ok = await put('chat_a', body);
    assert.equal(ok.status, 200, ok.text);
    assert.notEqual(ok.headers.etag, old);
    assert.deepEqual(ok.body.settings, { url: 'https://chat.example.com' });
    assert.equal((await req('PUT', '/integrations/chat_a', { body, headers: { 'if-match': old } })).status, 412);
    // Stale is said before anything about the body: reading again is what the client must do first.
    const staleAndWrong = await req('PUT', '/integrations/chat_a', { body: { enabled: true, settings: { colour: 'blue' } }, headers: { 'if-match': old } });
    assert.equal(staleAndWrong.status, 412, staleAndWrong.text);
    assert.equal((await req('PUT', '/integrations/nope', { body, headers: { 'if-match': old } })).status, 404);
    const audit = await t.db.selectFrom('audit_log').select(['action', 'details']).where('target_type', '=', 'integration').where('target', '=', 'chat_a').execute();
    assert.equal(audit.length, 1);
    assert.equal(audit[0]!.action, 'integration.update');
  });

  test('PUT: unknown settings, secrets sent as settings and malformed values are 422 naming them', async () => {
    const unknown = await put('code_host', { enabled: false, settings: { app_id: 1, colour: 'blue' } });
    assert.equal(unknown.status, 422);
    assert.deepEqual(unknown.body.errors.map((e: any) => e.field), ['settings.colour']);
    const secret = await put('code_host', { enabled: false, settings: { app_key: '-----BEGIN RSA PRIVATE KEY-----' } });
    assert.equal(secret.status, 422);
    assert.match(secret.body.errors[0].message, /is a secret, not a setting: an admin sets its value as the secret "integrations\/code_host\/app_key"/);
    const bad = await put('code_host', { enabled: false, settings: { app_id: 'x y', installation_id: -1, api_url: 'ftp://example.com' } });
    assert.equal(bad.status, 400, 'a negative integer breaks the schema');
    const forms = await put('code_host', { enabled: false, settings: { app_id: 'x y', installation_id: 'abc', api_url: 'https://user:pw@example.com' } });
    assert.equal(forms.status, 422);
    assert.deepEqual(forms.body.errors.map((e: any) => e.field).sort(), ['settings.api_url', 'settings.app_id', 'settings.installation_id']);
    const extra = await put('code_host', { enabled: false, settings: {}, colour: 'blue' });
    assert.equal(extra.status, 400);
  });

  test('enabling names each missing setting and secret (422); the secret references are declared for the admin', async () => {
    const partial = await put('code_host', { enabled: true, settings: { app_id: fake.app.id } });
    assert.equal(partial.status, 422);
    assert.deepEqual(partial.body.errors.map((e: any) => e.field), ['settings.installation_id', 'secrets.app_key', 'secrets.webhook_secret']);
    assert.match(partial.body.detail, /code_host cannot be enabled: missing settings.installation_id, secrets.app_key, secrets.webhook_secret/);
    assert.match(partial.body.errors[1].message, /the secret "integrations\/code_host\/app_key" has no value yet; an admin sets it first/);
    for (const e of partial.body.errors) assert.doesNotMatch(e.message, /\/api\/|PUT /, 'no message names an API path');

    // Disabled, it may be incomplete; the secrets it needs are then listed, unset.
    const saved = await put('code_host', { enabled: false, settings: codeHostSettings() });
    assert.equal(saved.status, 200, saved.text);
    assert.deepEqual(saved.body.missing, ['secrets.app_key', 'secrets.webhook_secret']);
    const refs = await req('GET', '/secrets?prefix=integrations/code_host/');
    assert.deepEqual(refs.body.items.map((s: any) => [s.name, s.set, s.used_by]), [
      ['integrations/code_host/app_key', false, 1],
      ['integrations/code_host/webhook_secret', false, 1],
    ]);

    await putSecret('integrations/code_host/app_key', fake.app.privateKeyPem);
    const still = await put('code_host', { enabled: true, settings: codeHostSettings() });
    assert.equal(still.status, 422);
    assert.deepEqual(still.body.errors.map((e: any) => e.field), ['secrets.webhook_secret']);

    await putSecret('integrations/code_host/webhook_secret', WEBHOOK_SECRET);
    const on = await put('code_host', { enabled: true, settings: codeHostSettings() });
    assert.equal(on.status, 200, on.text);
    assert.equal(on.body.enabled, true);
    assert.deepEqual(on.body.settings, { app_id: String(fake.app.id), installation_id: String(installation), api_url: fake.apiUrl });
    assert.deepEqual(on.body.secrets.map((s: any) => s.status), ['set', 'set']);
    assert.equal(on.body.status.complete, true);
    assert.equal(await t.services.integrations.webhookSecret('code_host'), WEBHOOK_SECRET);
  });

  test('a conditional requirement: chat_a\'s slash command needs command_token', async () => {
    await putSecret('integrations/chat_a/bot_token', `bot-${uniq('v')}`);
    const plain = await put('chat_a', { enabled: true, settings: { url: 'https://chat.example.com' } });
    assert.equal(plain.status, 200, plain.text);
    const slash = await put('chat_a', { enabled: true, settings: { url: 'https://chat.example.com', slash_command: true } });
    assert.equal(slash.status, 422);
    assert.deepEqual(slash.body.errors.map((e: any) => e.field), ['secrets.command_token']);
    const notBool = await put('chat_a', { enabled: false, settings: { url: 'https://chat.example.com', slash_command: 'yes' } });
    assert.equal(notBool.status, 422);
    assert.deepEqual(notBool.body.errors.map((e: any) => e.field), ['settings.slash_command']);
  });

  test('test: operator and up; code_host asks the code host for real; kinds without an adapter are unknown', async () => {
    assert.equal((await req('POST', '/integrations/code_host/test', { token: viewer.token })).status, 403);
    // The trackers' adapters exist: without their secrets the test says what is missing (chat_b's own test covers it).
    for (const kind of ['tracker_a', 'tracker_b']) {
      const r = await req('POST', `/integrations/${kind}/test`, { token: operator.token });
      assert.equal(r.status, 200);
      assert.equal(r.body.state, 'error');
      assert.match(r.body.detail, new RegExp(`${kind} is not configured`));
    }
    const before = fake.tokens.length;
    const ok = await req('POST', '/integrations/code_host/test', { token: operator.token });
    assert.equal(ok.status, 200, ok.text);
    assert.equal(ok.body.state, 'ok', ok.body.detail);
    assert.match(ok.body.detail, /installed on acme/);
    assert.ok(fake.tokens.length > before, 'the test minted a token on the code host');

    fake.failWith(502);
    try {
      const down = await req('POST', '/integrations/code_host/test', { token: operator.token });
      assert.equal(down.body.state, 'error');
      assert.match(down.body.detail, /502/);
    } finally {
      fake.failWith(null);
    }
    const wrong = await put('code_host', { enabled: true, settings: { ...codeHostSettings(), installation_id: 987654 } });
    assert.equal(wrong.status, 200);
    const err = await req('POST', '/integrations/code_host/test', { token: operator.token });
    assert.equal(err.body.state, 'error');
    assert.match(err.body.detail, /installation 987654.*404/);
    assert.equal((await put('code_host', { enabled: true, settings: codeHostSettings() })).status, 200);
  });

  test('links: a code_host repository the app covers is verified; one it does not is 422 with the reason', async () => {
    const team = await makeTeam(t);
    const url = `/teams/${team.name}/links`;
    const ok = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/widgets' } });
    assert.equal(ok.status, 201, ok.text);
    assert.deepEqual(ok.body, { surface: 'code_host', external_id: 'acme/widgets', label: 'acme/widgets', verified: true, verification: 'verified' });
    const no = await req('PUT', `/teams/${(await makeTeam(t)).name}/links`, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/private-plans' } });
    assert.equal(no.status, 422);
    assert.equal(no.body.errors[0].field, 'external_id');
    assert.match(no.body.detail, /not installed on acme\/private-plans/);
    const elsewhere = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'globex/thing' } });
    assert.equal(elsewhere.status, 422);
    assert.match(elsewhere.body.detail, /on acme, not on globex/);
    assert.equal(await t.services.integrations.codeHostRepositoryOf(team.name), 'acme/widgets');
  });

  test('links and repo_url: a code host that fails or cannot be reached is 502 saying what to do, not a refusal of the repository', async () => {
    const tpl = await makeTemplate(t);
    const url = `/teams/${(await makeTeam(t)).name}/links`;
    const saysWhatToDo = /Nothing was changed: send this again once the code host answers \(the code_host integration's connection test says what fails\)$/;
    fake.failWith(503);
    try {
      const failing = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/widgets' } });
      assert.equal(failing.status, 502, failing.text);
      assert.equal(failing.body.type, 'https://crewhouse.dev/problems/bad-gateway');
      assert.match(failing.body.detail, /^could not check that the code-host app is installed on acme\/widgets: .*503/);
      assert.match(failing.body.detail, saysWhatToDo);
      const create = await req('POST', '/teams', { token: operator.token, body: { name: uniq('team'), template: { name: tpl.name, version: null }, repo_url: `${fake.httpsUrl}/acme/widgets.git` } });
      assert.equal(create.status, 502, create.text);
      assert.match(create.body.detail, saysWhatToDo);
    } finally {
      fake.failWith(null);
    }
    // A port nothing listens on (one just let go).
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const closed = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    assert.equal((await put('code_host', { enabled: true, settings: { ...codeHostSettings(), api_url: `http://127.0.0.1:${closed}` } })).status, 200);
    try {
      const away = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/widgets' } });
      assert.equal(away.status, 502, away.text);
      assert.match(away.body.detail, /cannot reach the code host \(ECONNREFUSED\)/);
      assert.match(away.body.detail, saysWhatToDo);
    } finally {
      assert.equal((await put('code_host', { enabled: true, settings: codeHostSettings() })).status, 200);
    }
    // Answering again, the code host's own refusal is the repository's: 422.
    const back = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/private-plans' } });
    assert.equal(back.status, 422, back.text);
  });

  test("links and repo_url: a code host that refuses the app's credentials is 503 (an admin mends the integration, not the repository); its rate limit is 502", async () => {
    const tpl = await makeTemplate(t);
    const url = `/teams/${(await makeTeam(t)).name}/links`;
    const saysWhatToDo = /Nothing was changed: the code host refuses the code_host integration's credentials, which this request cannot mend; an admin mends the integration \(its connection test says what fails\), then send this again$/;
    try {
      for (const status of [401, 403]) {
        fake.failWith(status, { message: 'Bad credentials' });
        const refused = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/widgets' } });
        assert.equal(refused.status, 503, refused.text);
        assert.equal(refused.body.type, 'https://crewhouse.dev/problems/unavailable');
        assert.match(refused.body.detail, new RegExp(`^could not check that the code-host app is installed on acme/widgets: .*${status} Bad credentials`));
        assert.match(refused.body.detail, saysWhatToDo);
        const create = await req('POST', '/teams', { token: operator.token, body: { name: uniq('team'), template: { name: tpl.name, version: null }, repo_url: `${fake.httpsUrl}/acme/widgets.git` } });
        assert.equal(create.status, 503, create.text);
        assert.match(create.body.detail, saysWhatToDo);
      }
      // A spent rate limit answered as 403 is a wait, not a refused credential.
      fake.failWith(403, { message: 'API rate limit exceeded for installation ID 1.', headers: { 'x-ratelimit-remaining': '0' } });
      const limited = await req('PUT', url, { token: operator.token, body: { surface: 'code_host', external_id: 'acme/widgets' } });
      assert.equal(limited.status, 502, limited.text);
      assert.match(limited.body.detail, /send this again once the code host answers/);
    } finally {
      fake.failWith(null);
    }
    assert.equal((await req('GET', url, { token: operator.token })).body.items.length, 0, 'nothing was linked');
  });

  test('a team\'s repo_url on the code host is its repository once the app covers it; elsewhere it is any git server', async () => {
    const tpl = await makeTemplate(t);
    // It counts as a code_host link: a repository the app does not cover is refused, naming why.
    const refused = await req('POST', '/teams', { token: operator.token, body: { name: uniq('team'), template: { name: tpl.name, version: null }, repo_url: `${fake.httpsUrl}/acme/private-plans.git` } });
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.errors[0].field, 'repo_url');
    assert.match(refused.body.detail, /not installed on acme\/private-plans/);
    const onHost = await makeTeam(t, { template: tpl.name, body: { repo_url: `${fake.httpsUrl}/acme/widgets.git` } });
    assert.equal(await t.services.integrations.codeHostRepositoryOf(onHost.name), 'acme/widgets');
    const other = await makeTeam(t, { template: tpl.name, body: { repo_url: 'https://git.example.org/acme/widgets.git' } });
    assert.equal(await t.services.integrations.codeHostRepositoryOf(other.name), null);
    assert.equal(repositoryOnCodeHost('git@github.com:acme/widgets.git', 'https://api.github.com'), 'acme/widgets');
    assert.equal(repositoryOnCodeHost('https://github.com/acme/widgets', 'https://api.github.com'), 'acme/widgets');
    assert.equal(repositoryOnCodeHost('https://ghe.corp.example/acme/widgets.git', 'https://ghe.corp.example/api/v3'), 'acme/widgets');
    assert.equal(repositoryOnCodeHost('https://github.com/acme/widgets/tree/main', 'https://api.github.com'), null);
    assert.equal(repositoryOnCodeHost('https://gitlab.com/acme/widgets', 'https://api.github.com'), null);
  });

  test('codeHostApp: null until enabled and complete, one client per settings, rebuilt when they change', async () => {
    const svc = t.services.integrations;
    const app = await svc.codeHostApp();
    assert.ok(app);
    assert.equal(await svc.codeHostApp(), app, 'cached while nothing changed');
    assert.deepEqual(await app.coversRepository('acme/widgets'), { covered: true });
    assert.equal((await put('code_host', { enabled: false, settings: codeHostSettings() })).status, 200);
    assert.equal(await svc.codeHostApp(), null);
    assert.equal(await svc.webhookSecret('code_host'), null, 'a disabled integration takes no deliveries');
    assert.equal((await put('code_host', { enabled: true, settings: codeHostSettings() })).status, 200);
    const again = await svc.codeHostApp();
    assert.ok(again && again !== app);
    assert.equal(await svc.webhookSecret('chat_a'), null, 'chat kinds receive no webhooks');
  });

  test('status.applied: pending after a PUT until every live host\'s gateway has loaded it, then current', async () => {
    await t.db.deleteFrom('sandbox_hosts').execute();
    const hostId = await makeHostRow(t.db);
    const address = `${hostId}.test`;
    const changed = await put('tracker_a', { enabled: false, settings: {} });
    assert.equal(changed.status, 200);
    assert.equal(changed.body.status.applied, 'pending');
    assert.deepEqual(changed.body.status.pending_hosts, [address]);

    const watch = await watchIntegrationSettings({ db: t.db, integrations: t.services.integrations, hostAddress: address, logger: captureLogger().logger });
    try {
      const now = await req('GET', '/integrations/tracker_a');
      assert.equal(now.body.status.applied, 'current', 'the gateway loads the settings at its start');
      // A change reaches the running gateway by NOTIFY, with no restart.
      const next = await put('tracker_a', { enabled: false, settings: {} });
      assert.ok(next.body.status.generation > now.body.status.generation);
      await waitFor('the gateway to load the new generation', async () => (await req('GET', '/integrations/tracker_a')).body.status.applied === 'current');
      assert.equal(watch.loaded(), (await req('GET', '/integrations/tracker_a')).body.status.generation);
    } finally {
      await watch.stop();
    }
    // A second live host that has loaded nothing holds it pending again; a dead one does not count.
    const other = await makeHostRow(t.db);
    await makeHostRow(t.db, { dead: true });
    const list = await req('GET', '/integrations');
    const tracker = list.body.items.find((i: any) => i.kind === 'tracker_a');
    assert.equal(tracker.status.applied, 'pending');
    assert.deepEqual(tracker.status.pending_hosts, [`${other}.test`]);
    await t.db.deleteFrom('sandbox_hosts').execute();
  });

  test('role-bots: one entry per role of each active team homed on chat_a, with the bot it posts as', async () => {
    // A chat_a home is checked on the chat server: its surface bot must be in the channel.
    const mm = await startFakeMattermost();
    const botToken = `mm-bot-${uniq('v')}`;
    const bot = mm.addUser({ username: 'crewhouse', bot: true, token: botToken });
    const room = mm.addChannel({ teamId: mm.addTeam('acme').id, name: 'dev', displayName: 'Dev', members: [bot.id] });
    await putSecret('integrations/chat_a/bot_token', botToken);
    assert.equal((await put('chat_a', { enabled: true, settings: { url: mm.url } })).status, 200);
    const tpl = await makeTemplate(t);
    const homed = await makeTeam(t, { template: tpl.name, body: { home: { surface: 'chat_a', room_id: room.id } } }).finally(() => mm.stop());
    await makeTeam(t, { template: tpl.name });
    await putSecret(`integrations/chat_a/bots/${homed.name}/lead`, `rolebot-${uniq('v')}`);
    const res = await req('GET', '/integrations/chat_a/role-bots', { token: viewer.token });
    assert.equal(res.status, 200, res.text);
    const mine = res.body.items.filter((b: any) => b.team === homed.name);
    assert.deepEqual(mine.map((b: any) => [b.role, b.posts_as, b.bot_secret.status, b.room_id]), [
      ['dev', 'surface_bot', 'unset', room.id],
      ['lead', 'role_bot', 'set', room.id],
    ]);
    assert.equal(mine[0].display_name, '[dev]');
    assert.equal(mine[1].bot_secret.ref, `secret:integrations/chat_a/bots/${homed.name}/lead`);
    assert.equal(res.body.items.filter((b: any) => b.team !== homed.name).length, 0, 'a team homed elsewhere is not listed');
  });

  test('no secret value appears in any answer', async () => {
    await req('GET', '/integrations');
    for (const kind of ['chat_a', 'chat_b', 'code_host', 'tracker_a', 'tracker_b']) await req('GET', `/integrations/${kind}`);
    const all = seen.join('\n');
    assert.ok(!all.includes(WEBHOOK_SECRET));
    assert.ok(!all.includes('PRIVATE KEY-----\n'));
    assert.ok(!all.includes(fake.app.privateKeyPem.split('\n')[1]!));
    for (const tok of fake.tokens) assert.ok(!all.includes(tok.token), 'no installation token either');
  });
});

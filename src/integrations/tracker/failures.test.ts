import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeIntegration, makeTeam } from '../../../test/factories.ts';
import { startFakeJira, type FakeJira } from '../../../test/fakes/jira.ts';
import { startFakeLinear, type FakeLinear } from '../../../test/fakes/linear.ts';
import { captureLogger, testApp, type TestApp } from '../../../test/harness.ts';
import { problems, reasonForPeople } from '../../errors/problems.ts';
import { byKind } from '../../queue/queue.ts';
import { createJobRunner } from '../../queue/runner.ts';
import { processDeliveryJob } from '../webhooks/process-delivery.job.ts';
import { TrackerError } from './errors.ts';

/** What a broken server does with each request: answer a page that is not JSON, close the connection, answer an API error quoting an address and a token, or answer with a bare status. */
type Mode = 'garbage' | 'close' | 'linear-error' | 'jira-error' | number;

// A tracker that answers garbage, closes the connection, or answers an error echoing an address
// and a token: the connection test and a delivery's detail say what failed and what to do in one
// line of words, never the exception's or the body's text.
describe('trackers: failures said in words', () => {
  let t: TestApp;
  let linear: FakeLinear;
  let jira: FakeJira;
  let broken: http.Server;
  let brokenUrl: string;
  let mode: Mode = 'garbage';
  const leaked = crypto.randomBytes(24).toString('hex');

  before(async () => {
    t = await testApp({ modelProxy: true });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    [linear, jira] = await Promise.all([startFakeLinear(), startFakeJira()]);
    broken = http.createServer((req, res) => {
      req.resume();
      if (mode === 'close') return req.socket.destroy();
      if (typeof mode === 'number') {
        res.writeHead(mode, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ message: 'no', errorMessages: ['no'] }));
      }
      if (mode === 'garbage') {
        res.writeHead(200, { 'content-type': 'text/html' });
        return res.end(`<html>oops, see https://evil.test/?access_token=${leaked} ${req.headers.authorization ?? ''}</html>`);
      }
      if (mode === 'linear-error') {
        res.writeHead(200, { 'content-type': 'application/json' });
        return res.end(JSON.stringify({ errors: [{ message: `Entity not found, see https://evil.test/?t=${leaked}`, extensions: { type: 'invalid input', code: 'INVALID_INPUT', userError: true } }] }));
      }
      res.writeHead(400, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ errorMessages: [`Bad request ${leaked} from ${req.headers.authorization ?? ''}`] }));
    });
    await new Promise<void>((r) => broken.listen(0, '127.0.0.1', r));
    brokenUrl = `http://127.0.0.1:${(broken.address() as AddressInfo).port}`;
  });
  after(async () => {
    await new Promise((r) => broken.close(r));
    await Promise.all([linear.stop(), jira.stop()]);
    await t.close();
  });

  const test = async (kind: string) => (await t.request({ method: 'POST', url: `/api/v1/integrations/${kind}/test`, token: t.adminToken })).body as { state: string; detail: string };
  /** A detail is one line of words: no body, address, token or secret in it. */
  const clean = (detail: string, secrets: string[]) => {
    assert.doesNotMatch(detail, /\n|<html|evil\.test/);
    for (const s of [leaked, ...secrets]) assert.ok(!detail.includes(s), `the detail quotes a secret: ${detail}`);
  };
  /** Each way the broken server fails, in turn: the kind's test is an error saying so in words, quoting no secret. */
  const expectErrors = async (kind: string, cases: Array<[Mode, RegExp]>, secrets: string[]) => {
    for (const [m, pattern] of cases) {
      mode = m;
      const r = await test(kind);
      assert.equal(r.state, 'error');
      assert.match(r.detail, pattern, `${m}: ${r.detail}`);
      clean(r.detail, secrets);
    }
  };

  it('tracker_a: garbage, a closed connection, an error echoing an address, a refused connection', async () => {
    const token = `lin_oauth_${crypto.randomBytes(16).toString('hex')}`;
    await makeIntegration(t, 'tracker_a', { settings: { api_url: `${brokenUrl}/graphql` }, secrets: { access_token: token, webhook_secret: 'x'.repeat(20) } });
    const expected: Array<[Mode, RegExp]> = [
      ['garbage', /^Linear answered something that is not a GraphQL answer \(HTTP 200\) while reading who the app is: is api_url Linear's GraphQL endpoint\?$/],
      ['close', /^Linear could not be reached while reading who the app is: the connection was closed before an answer came; check the setting api_url/],
      ['linear-error', /^Linear refused the request while reading who the app is: Entity not found, see \(an address\)$/],
    ];
    await expectErrors('tracker_a', expected, [token]);
    // A port nothing listens on (one just let go).
    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const closed = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    await makeIntegration(t, 'tracker_a', { settings: { api_url: `http://127.0.0.1:${closed}/graphql` } });
    const refused = await test('tracker_a');
    assert.match(refused.detail, /^Linear could not be reached while reading who the app is: the connection was refused; check the setting api_url and that the service is up, then try again$/);
    assert.ok(!t.logs.some((l) => l.includes(token)));
  });

  it('tracker_b: the token endpoint and the REST API answering garbage, closing, or an error echoing a token', async () => {
    const base = { client_id: jira.clientId, cloud_id: jira.cloudId, account_id: jira.agent.accountId };
    await makeIntegration(t, 'tracker_b', { settings: { ...base, api_url: jira.apiUrl, auth_url: brokenUrl }, secrets: { client_secret: jira.clientSecret } });
    await expectErrors(
      'tracker_b',
      [
        ['garbage', /^the Atlassian token endpoint \(auth_url\) answered something that is not JSON while fetching a token: is api_url the API's address\?$/],
        ['close', /^the Atlassian token endpoint \(auth_url\) could not be reached while fetching a token: the connection was closed before an answer came/],
      ],
      [jira.clientSecret],
    );
    // A token from the real (fake) endpoint; the REST calls go to the broken server.
    await makeIntegration(t, 'tracker_b', { settings: { ...base, api_url: brokenUrl, auth_url: jira.authUrl } });
    await expectErrors(
      'tracker_b',
      [
        ['garbage', /^Jira answered something that is not JSON while reading who the agent is: is api_url Atlassian's API gateway/],
        ['close', /^Jira could not be reached while reading who the agent is: the connection was closed before an answer came/],
        // Jira's own error message is quoted, with what looks like a token in it redacted.
        ['jira-error', /^Jira refused the request \(HTTP 400\) while reading who the agent is: Bad request \[redacted\] from Bearer \[redacted\]$/],
      ],
      [jira.clientSecret],
    );
  });

  it('a link check that cannot reach the tracker is 502 saying what to do; a tracker that answers no is 422', async () => {
    const team = await makeTeam(t);
    const link = (surface: string, externalId: string) => t.request({ method: 'PUT', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken, body: { surface, external_id: externalId } });
    const expectBadGateway = async (surface: string, externalId: string, reason: RegExp, title: string) => {
      const r = await link(surface, externalId);
      assert.equal(r.status, 502, r.text);
      assert.equal(r.body.type, 'https://crewhouse.dev/problems/bad-gateway');
      assert.match(r.body.detail, new RegExp(`^could not check ${externalId} with ${title}: `));
      assert.match(r.body.detail, reason);
      assert.match(r.body.detail, new RegExp(`Nothing was changed: send this again once ${title} answers \\(the ${surface} integration's connection test says what fails\\)$`));
      clean(r.body.detail, []);
    };
    await makeIntegration(t, 'tracker_a', { settings: { api_url: `${brokenUrl}/graphql` }, secrets: { access_token: `lin_oauth_${crypto.randomBytes(16).toString('hex')}`, webhook_secret: 'x'.repeat(20) } });
    mode = 'close';
    await expectBadGateway('tracker_a', 'ENG', /Linear could not be reached while .*: the connection was closed before an answer came; check the setting api_url/, 'Linear');
    // Linear answering that it has no such thing is the link's problem: 422, as before.
    mode = 'linear-error';
    const refused = await link('tracker_a', 'ENG');
    assert.equal(refused.status, 422, refused.text);
    assert.equal(refused.body.errors[0].field, 'external_id');

    const probe = http.createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const closed = (probe.address() as AddressInfo).port;
    await new Promise((r) => probe.close(r));
    await makeIntegration(t, 'tracker_b', {
      settings: { client_id: jira.clientId, cloud_id: jira.cloudId, account_id: jira.agent.accountId, api_url: `http://127.0.0.1:${closed}`, auth_url: jira.authUrl },
      secrets: { client_secret: jira.clientSecret },
    });
    await expectBadGateway('tracker_b', 'OPS', /Jira could not be reached while .*: the connection was refused; check the setting api_url/, 'Jira');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken })).body.items.length, 0, 'nothing was linked');
  });

  it("a link check whose tracker refuses the integration's credentials is 503 (an admin mends the integration, not the link); a rate limit is 502 and promises no retry", async () => {
    const team = await makeTeam(t);
    const link = (surface: string, externalId: string) => t.request({ method: 'PUT', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken, body: { surface, external_id: externalId } });
    const expect = async (surface: string, externalId: string, title: string) => {
      for (const status of [401, 403]) {
        mode = status;
        const r = await link(surface, externalId);
        assert.equal(r.status, 503, `${status}: ${r.text}`);
        assert.equal(r.body.type, 'https://crewhouse.dev/problems/unavailable');
        assert.match(r.body.detail, new RegExp(`^could not check ${externalId} with ${title}: `));
        assert.match(r.body.detail, new RegExp(`Nothing was changed: ${title} refuses the ${surface} integration's credentials, which this request cannot mend; an admin mends the integration \\(its connection test says what fails\\), then send this again$`));
        clean(r.body.detail, []);
      }
      // Rate-limited: a 502 saying to send it again, not that it "will be tried again later" (a link check is not retried).
      mode = 429;
      const limited = await link(surface, externalId);
      assert.equal(limited.status, 502, limited.text);
      assert.match(limited.body.detail, new RegExp(`${title} is rate-limiting the (app|agent)`));
      assert.doesNotMatch(limited.body.detail, /tried again/);
      assert.match(limited.body.detail, new RegExp(`send this again once ${title} answers`));
    };
    await makeIntegration(t, 'tracker_a', { settings: { api_url: `${brokenUrl}/graphql` }, secrets: { access_token: `lin_oauth_${crypto.randomBytes(16).toString('hex')}`, webhook_secret: 'x'.repeat(20) } });
    await expect('tracker_a', 'ENG', 'Linear');
    await makeIntegration(t, 'tracker_b', {
      settings: { client_id: jira.clientId, cloud_id: jira.cloudId, account_id: jira.agent.accountId, api_url: brokenUrl, auth_url: jira.authUrl },
      secrets: { client_secret: jira.clientSecret },
    });
    await expect('tracker_b', 'OPS', 'Jira');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/teams/${team.name}/links`, token: t.adminToken })).body.items.length, 0, 'nothing was linked');
  });

  it('a failure is shown by a Problem\'s detail or an adapter\'s reason for people, never another exception\'s text', () => {
    const otherwise = 'its work failed with an unexpected error';
    assert.equal(reasonForPeople(problems.conflict('run x is already cancelled'), otherwise), 'run x is already cancelled');
    assert.equal(reasonForPeople(new TrackerError('Jira failed (HTTP 503) while reading the issue OPS-1; try again later', 503), otherwise), 'Jira failed (HTTP 503) while reading the issue OPS-1; try again later');
    assert.equal(reasonForPeople(new TypeError(`fetch https://evil.test/?access_token=${leaked} failed`), otherwise), otherwise);
    assert.equal(reasonForPeople('a string thrown', otherwise), otherwise);
  });

  it('a delivery whose work keeps failing ends `failed` with the reason in words', async () => {
    const secret = crypto.randomBytes(16).toString('hex');
    const token = `lin_oauth_${crypto.randomBytes(16).toString('hex')}`;
    await makeIntegration(t, 'tracker_a', { settings: { api_url: `${brokenUrl}/graphql` }, secrets: { access_token: token, webhook_secret: secret } });
    linear.setWebhook({ url: `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/webhooks/tracker_a`, secret });
    mode = 'garbage';
    const sent = await linear.deliver('AgentSessionEvent', { type: 'AgentSessionEvent', action: 'created', agentSession: { id: crypto.randomUUID() } });
    assert.equal(sent.status, 202, sent.response);
    // Each attempt fails (who the app is cannot be read); the clock passes each backoff until the attempts are used up.
    for (let attempt = 1; attempt <= 10; attempt++) {
      const at = Date.now() + attempt * 2 * 3_600_000;
      await createJobRunner({ db: t.db, logger: captureLogger().logger, handlers: byKind([processDeliveryJob.handler({ webhooks: t.services.webhooks })]), now: () => new Date(at) }).drain();
    }
    const rows = (await t.request({ method: 'GET', url: '/api/v1/integrations/tracker_a/deliveries?limit=50', token: t.adminToken })).body.items as Array<Record<string, any>>;
    const row = rows.find((d) => d.id === sent.id)!;
    assert.equal(row.outcome, 'failed');
    assert.match(row.detail, /^Linear answered something that is not a GraphQL answer \(HTTP 200\) while reading who the app is/);
    clean(row.detail, [token, secret]);
  });
});

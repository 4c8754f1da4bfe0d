import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { processDeliveryJob } from '../src/integrations/webhooks/process-delivery.job.ts';
import { postProgressJob } from '../src/integrations/tracker/post-progress.job.ts';
import { byKind } from '../src/queue/queue.ts';
import { createJobRunner } from '../src/queue/runner.ts';
import { makeIntegration } from './factories.ts';
import { startFakeJira, type FakeJira } from './fakes/jira.ts';
import { startFakeLinear, type FakeLinear } from './fakes/linear.ts';
import { captureLogger, testApp, type TestApp } from './harness.ts';
import { makeHostRow } from './sandboxes.ts';

/** Writes a secret through the API (creating or replacing it). */
export async function putSecret(t: TestApp, name: string, value: string) {
  const current = await t.request({ method: 'GET', url: `/api/v1/secrets/${name}`, token: t.adminToken });
  const headers: Record<string, string> = current.status === 200 ? { 'if-match': String(current.headers.etag) } : {};
  const res = await t.request({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value }, headers });
  assert.ok([200, 201].includes(res.status), res.text);
}

/** Writes chat_a's settings (enabled or not) through the integrations resource. */
export async function setChatA(t: TestApp, enabled: boolean, settings: Record<string, unknown>) {
  const current = await t.request({ method: 'GET', url: '/api/v1/integrations/chat_a', token: t.adminToken });
  const res = await t.request({ method: 'PUT', url: '/api/v1/integrations/chat_a', token: t.adminToken, body: { enabled, settings }, headers: { 'if-match': String(current.headers.etag) } });
  assert.equal(res.status, 200, res.text);
}

/** Enables Linear (tracker_a) and Jira (tracker_b) against their fakes, each sending its deliveries to the listening app with a fresh webhook secret. */
export async function connectTrackers(t: TestApp, linear: FakeLinear, jira: FakeJira) {
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const linearSecret = crypto.randomBytes(16).toString('hex');
  await makeIntegration(t, 'tracker_a', { settings: { api_url: linear.url }, secrets: { access_token: linear.appToken, webhook_secret: linearSecret } });
  linear.setWebhook({ url: `${base}/webhooks/tracker_a`, secret: linearSecret });
  const jiraSecret = crypto.randomBytes(16).toString('hex');
  await makeIntegration(t, 'tracker_b', {
    settings: { client_id: jira.clientId, cloud_id: jira.cloudId, account_id: jira.agent.accountId, api_url: jira.apiUrl, auth_url: jira.authUrl, site_url: 'https://acme.atlassian.net' },
    secrets: { client_secret: jira.clientSecret, webhook_secret: jiraSecret },
  });
  jira.setWebhook({ url: `${base}/webhooks/tracker_b`, secret: jiraSecret });
}

/** A listening app with the model proxy, Linear's and Jira's fakes connected to it, and a live sandbox host: what the tracker suites start from. */
export interface TrackerBench {
  t: TestApp;
  linear: FakeLinear;
  jira: FakeJira;
  /** Performs the surfaces' queued jobs (deliveries, progress notes) by a runner of those kinds alone, at `now` (the queue's clock) when given. */
  drain(now?: () => Date): Promise<void>;
  /** The delivery `id` of a surface as GET /integrations/{kind}/deliveries lists it. */
  delivery(kind: string, id: string): Promise<Record<string, any>>;
  close(): Promise<void>;
}

export async function trackerBench(): Promise<TrackerBench> {
  const t = await testApp({ modelProxy: true });
  await t.app.listen({ port: 0, host: '127.0.0.1' });
  const [linear, jira] = await Promise.all([startFakeLinear(), startFakeJira()]);
  await connectTrackers(t, linear, jira);
  // A live host (its heartbeat fresh) takes the runs; none runs them here.
  await makeHostRow(t.db, { providers: ['local', 'microvm'] });
  return {
    t,
    linear,
    jira,
    drain: (now) =>
      createJobRunner({
        db: t.db,
        logger: captureLogger().logger,
        handlers: byKind([processDeliveryJob.handler({ webhooks: t.services.webhooks }), postProgressJob.handler({ tracker_a: t.services.trackerA, tracker_b: t.services.trackerB })]),
        ...(now ? { now } : {}),
      }).drain(),
    async delivery(kind, id) {
      const res = await t.request({ method: 'GET', url: `/api/v1/integrations/${kind}/deliveries?limit=100`, token: t.adminToken });
      return (res.body.items as Array<Record<string, any>>).find((d) => d.id === id)!;
    },
    async close() {
      await t.close();
      await Promise.all([linear.stop(), jira.stop()]);
    },
  };
}

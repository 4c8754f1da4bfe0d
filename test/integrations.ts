import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { makeIntegration } from './factories.ts';
import type { FakeJira } from './fakes/jira.ts';
import type { FakeLinear } from './fakes/linear.ts';
import type { TestApp } from './harness.ts';

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

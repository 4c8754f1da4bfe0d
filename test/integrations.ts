import assert from 'node:assert/strict';
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

import assert from 'node:assert/strict';
import { systemActor } from '../src/audit/audit.ts';
import type { RunSurface } from '../src/console/runs/runs.tables.ts';
import { uniq, type TestApp } from './harness.ts';

/**
 * Small factories that create what a test needs through the real API, creating missing
 * parents, so tests never depend on each other.
 */
export async function makeEnvironment(t: TestApp, overrides: Record<string, unknown> = {}) {
  const name = (overrides.name as string) ?? uniq('env');
  const res = await t.request({
    method: 'POST',
    url: '/api/v1/environments',
    token: t.adminToken,
    body: { name, provider: 'microvm', profile: 'small', vcpus: 2, memory_mib: 2048, disk_gib: 10, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, ...overrides },
  });
  assert.equal(res.status, 201, `makeEnvironment: ${res.text}`);
  return res.body as { name: string };
}

/** An agent; `version` fields join its first version, `body` fields its other fields. */
export async function makeAgent(t: TestApp, overrides: { name?: string; version?: Record<string, unknown>; body?: Record<string, unknown> } = {}) {
  const name = overrides.name ?? uniq('agent');
  const res = await t.request({
    method: 'POST',
    url: '/api/v1/agents',
    token: t.adminToken,
    body: { name, description: 'test agent', version: { system_prompt: 'You write code.', note: 'first', ...(overrides.version ?? {}) }, ...(overrides.body ?? {}) },
  });
  assert.equal(res.status, 201, `makeAgent: ${res.text}`);
  return { name, etag: String(res.headers.etag), body: res.body as Record<string, any> };
}

/** An egress destination (on `<name>.example.com` unless a host is given). */
export async function makeDestination(t: TestApp, overrides: Record<string, unknown> = {}) {
  const name = (overrides.name as string) ?? uniq('dest');
  const res = await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name, host: `${name}.example.com`, ...overrides } });
  assert.equal(res.status, 201, `makeDestination: ${res.text}`);
  return { name, etag: String(res.headers.etag), body: res.body as Record<string, any> };
}

/** A secret's value, set (a new secret: 201) under its name, `platform/<unique>` unless named. */
export async function makeSecret(t: TestApp, opts: { name?: string; value?: string } = {}) {
  const name = opts.name ?? `platform/${uniq('secret')}`;
  const value = opts.value ?? `value-${uniq('v')}`;
  const res = await t.request({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value } });
  assert.equal(res.status, 201, `makeSecret: ${res.text}`);
  return { name, value, etag: String(res.headers.etag), body: res.body as Record<string, any> };
}

/** A template whose roles (default lead + dev) run fresh agents on a fresh environment. */
export async function makeTemplate(t: TestApp, overrides: Record<string, unknown> = {}, roleNames = ['lead', 'dev']) {
  const env = await makeEnvironment(t);
  const roles: Record<string, unknown> = {};
  for (const r of roleNames) roles[r] = { agent: (await makeAgent(t)).name, model: 'fast', vm: env.name };
  const res = await t.request({
    method: 'POST',
    url: '/api/v1/team-templates',
    token: t.adminToken,
    body: {
      name: uniq('tpl'),
      description: 'test template',
      lead: roleNames[0],
      roles,
      sleep: {},
      idle_after_seconds: 600,
      deep_sleep_after_seconds: 3600,
      budget_usd_per_day: 10,
      pipeline: roleNames.length > 1 ? { [roleNames[0]]: roleNames[1] } : {},
      ...overrides,
    },
  });
  assert.equal(res.status, 201, `makeTemplate: ${res.text}`);
  return { ...(res.body as { name: string; current: any }), etag: String(res.headers.etag), env: env.name };
}

/** A team from a template (a fresh one unless named); needs testApp({ modelProxy: true }). */
export async function makeTeam(
  t: TestApp,
  opts: { template?: string; version?: number | null; body?: Record<string, unknown>; token?: string } = {},
): Promise<Record<string, any> & { name: string; etag: string; template: string }> {
  const template = opts.template ?? (await makeTemplate(t)).name;
  const res = await t.request({
    method: 'POST',
    url: '/api/v1/teams',
    token: opts.token ?? t.adminToken,
    body: { name: uniq('team'), template: { name: template, version: opts.version ?? null }, ...(opts.body ?? {}) },
  });
  assert.equal(res.status, 201, `makeTeam: ${res.text}`);
  return { ...(res.body as Record<string, any>), name: res.body.name as string, etag: String(res.headers.etag), template };
}

/** Writes a secret's value (creating or replacing it) as an admin. */
export async function putSecret(t: TestApp, name: string, value: string) {
  const current = await t.request({ method: 'GET', url: `/api/v1/secrets/${name}`, token: t.adminToken });
  const headers: Record<string, string> = current.status === 200 ? { 'if-match': String(current.headers.etag) } : {};
  const res = await t.request({ method: 'PUT', url: `/api/v1/secrets/${name}`, token: t.adminToken, body: { value }, headers });
  assert.ok([200, 201].includes(res.status), res.text);
}

/** Writes an integration's settings (enabled or not) through the integrations resource. */
export async function setIntegration(t: TestApp, kind: string, enabled: boolean, settings: Record<string, unknown>) {
  const current = await t.request({ method: 'GET', url: `/api/v1/integrations/${kind}`, token: t.adminToken });
  const res = await t.request({ method: 'PUT', url: `/api/v1/integrations/${kind}`, token: t.adminToken, body: { enabled, settings }, headers: { 'if-match': String(current.headers.etag) } });
  assert.equal(res.status, 200, res.text);
  return { kind, etag: String(res.headers.etag), body: res.body as Record<string, any> };
}

/**
 * A run of a team (a fresh one unless named), created through the runs service as a surface
 * creates it (console unless told; a chat or tracker surface needs `external_ref`). Needs
 * testApp({ modelProxy: true }) and a sandbox host row (makeHostRow), as any new run does.
 */
export async function makeRun(
  t: TestApp,
  opts: { team?: string; text?: string; surface?: RunSurface; external_ref?: string | null; requested_by?: string; /** The actor's name (the audit's, and who asked unless `requested_by`). */ actor?: string } = {},
) {
  const team = opts.team ?? (await makeTeam(t)).name;
  const { actor, ...input } = opts;
  const run = await t.services.runs.createRun(systemActor(actor ?? 'test'), { text: 'Write a README', surface: 'console', ...input, team });
  return { ...run, team };
}

/**
 * An integration of a kind, enabled (unless told) with `settings`, its `secrets` (by name:
 * integrations/<kind>/<name>) set first, all through the real API.
 */
export async function makeIntegration(t: TestApp, kind: string, opts: { settings?: Record<string, string>; secrets?: Record<string, string>; enabled?: boolean } = {}) {
  for (const [name, value] of Object.entries(opts.secrets ?? {})) await putSecret(t, `integrations/${kind}/${name}`, value);
  return setIntegration(t, kind, opts.enabled ?? true, opts.settings ?? {});
}

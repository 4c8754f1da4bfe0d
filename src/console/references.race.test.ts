import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { makeAgent, makeEnvironment } from '../../test/factories.ts';
import { TEST_DATABASE_URL, testApp, uniq, type TestApp } from '../../test/harness.ts';

/**
 * A delete's "in use" check and a write naming the same thing race on PostgreSQL (the embedded
 * database runs one transaction at a time, so there is no race to see there). Whatever the
 * interleaving, the end state must never be a reference to something deleted.
 */
const ROUNDS = 25;

describe('references: a delete and a write naming the thing, concurrently', { skip: TEST_DATABASE_URL ? false : 'needs SERVICE_TEST_DATABASE_URL (PostgreSQL)' }, () => {
  let t: TestApp;
  let env: string;
  before(async () => {
    t = await testApp();
    env = (await makeEnvironment(t)).name;
  });
  after(() => t.close());

  const etagOf = async (url: string) => {
    const res = await t.request({ method: 'GET', url, token: t.adminToken });
    assert.equal(res.status, 200, res.text);
    return String(res.headers.etag);
  };

  test('delete agent X vs create a template naming X: one of them loses', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const agent = (await makeAgent(t)).name;
      const etag = await etagOf(`/api/v1/agents/${agent}`);
      const template = uniq('tpl');
      const [del, create] = await Promise.all([
        t.request({ method: 'DELETE', url: `/api/v1/agents/${agent}`, token: t.adminToken, headers: { 'if-match': etag } }),
        t.request({
          method: 'POST',
          url: '/api/v1/team-templates',
          token: t.adminToken,
          body: { name: template, lead: 'lead', roles: { lead: { agent, model: 'fast', vm: env } }, sleep: {}, idle_after_seconds: 600, deep_sleep_after_seconds: 3600, budget_usd_per_day: 1 },
        }),
      ]);
      assert.ok([204, 409].includes(del.status), `delete: ${del.status} ${del.text}`);
      assert.ok([201, 422].includes(create.status), `create: ${create.status} ${create.text}`);
      assert.ok(!(del.status === 204 && create.status === 201), `round ${i}: the agent was deleted and a template naming it was created`);
      if (create.status === 422) assert.match(create.body.errors[0].field, /^roles\.lead\.agent$/);
      const agentRows = await t.db.selectFrom('agents').select('name').where('name', '=', agent).execute();
      const naming = await t.db.selectFrom('team_template_version_roles').select('template_name').where('agent', '=', agent).execute();
      assert.ok(agentRows.length === 1 || naming.length === 0, `round ${i}: ${naming.length} template version(s) name the deleted agent ${agent}`);
      assert.equal(agentRows.length === 1, del.status === 409);
    }
  });

  test('delete destination D vs a new agent version naming D: one of them loses', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const destination = uniq('dst');
      const made = await t.request({ method: 'POST', url: '/api/v1/destinations', token: t.adminToken, body: { name: destination, host: `${destination}.example.com`, what: 'race' } });
      assert.equal(made.status, 201, made.text);
      const destEtag = String(made.headers.etag);
      const agent = (await makeAgent(t)).name;
      const agentEtag = await etagOf(`/api/v1/agents/${agent}`);
      const [del, version] = await Promise.all([
        t.request({ method: 'DELETE', url: `/api/v1/destinations/${destination}`, token: t.adminToken, headers: { 'if-match': destEtag } }),
        t.request({
          method: 'POST',
          url: `/api/v1/agents/${agent}/versions`,
          token: t.adminToken,
          headers: { 'if-match': agentEtag },
          body: { from_version: 1, egress: { mode: 'allowlist', destinations: [destination], upstream_deny_cidrs: [] } },
        }),
      ]);
      assert.ok([204, 409].includes(del.status), `delete: ${del.status} ${del.text}`);
      assert.ok([201, 422].includes(version.status), `version: ${version.status} ${version.text}`);
      assert.ok(!(del.status === 204 && version.status === 201), `round ${i}: the destination was deleted and a version naming it was added`);
      if (version.status === 422) assert.equal(version.body.errors[0].field, 'egress.destinations.0');
      const destRows = await t.db.selectFrom('destinations').select('name').where('name', '=', destination).execute();
      const naming = await t.db
        .selectFrom('agent_versions')
        .select('version')
        .where('agent_name', '=', agent)
        .where(sql<boolean>`egress -> 'destinations' @> jsonb_build_array(${destination}::text)`)
        .execute();
      assert.ok(destRows.length === 1 || naming.length === 0, `round ${i}: a version of ${agent} names the deleted destination ${destination}`);
      assert.equal(destRows.length === 1, del.status === 409);
    }
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { makeTeam } from '../../../test/factories.ts';
import { testApp, type TestApp } from '../../../test/harness.ts';

// What an agent proposes for its team's skills (the run engine's proposal job calls this); the whole path is test/e2e/proposals.test.ts.
describe('skill proposals', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp({ modelProxy: true });
  });
  after(() => t.close());

  const skillsOf = async (team: string) => (await t.request({ method: 'GET', url: `/api/v1/teams/${team}/skills`, token: t.adminToken })).body.items;

  it('stores a proposal as proposed; a new one of the name is its next version; bad input is a 422 naming the field', async () => {
    const team = await makeTeam(t);
    const actor = systemActor(`${team.name}/lead`);
    const input = { name: 'deploy-notes', description: 'Deploying: "first" the checks\nthen: the rest', instructions: '# Deploy\n\nRun the checks.', source: 'agent lead, run run_1' };
    assert.deepEqual(await t.services.teams.proposeSkill(actor, team.name, input), { name: 'deploy-notes', version: 1, status: 'proposed' });
    await t.services.teams.proposeSkill(actor, team.name, { ...input, instructions: 'v2' });
    const [skill] = await skillsOf(team.name);
    assert.deepEqual({ name: skill.name, version: skill.version, status: skill.status, source: skill.source }, { name: 'deploy-notes', version: 2, status: 'proposed', source: 'agent lead, run run_1' });

    await assert.rejects(t.services.teams.proposeSkill(actor, team.name, { ...input, name: 'Not A Name' }), (e: { status: number; errors: Array<{ field: string }> }) => e.status === 422 && e.errors[0].field === 'name');
    await assert.rejects(t.services.teams.proposeSkill(actor, team.name, { ...input, instructions: 'x'.repeat(70_000) }), (e: { status: number; errors: Array<{ field: string }> }) => e.status === 422 && e.errors[0].field === 'body');
    await assert.rejects(t.services.teams.proposeSkill(actor, 'no-such-team', input), (e: { status: number }) => e.status === 404);
    assert.equal((await skillsOf(team.name)).length, 1);
  });
});

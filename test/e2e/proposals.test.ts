// An agent proposes a skill and MCP servers for its team from inside its sandbox: the proposals
// travel as journal events, the engine records them, and they are stored `proposed` (given to
// no role) for a person to accept; one the MCP servers module refuses becomes a notice saying why.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { startStack, stackSkip, waitFor, type Stack } from './stack.ts';

describe('agents propose skills and MCP servers', { skip: stackSkip }, () => {
  let stack: Stack;

  function script(req: ScriptedRequest): ScriptedAnswer {
    if (req.body.messages.some((m) => m.role === 'tool')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'proposed what the team needs' } }] };
    return {
      tool_calls: [
        { name: 'propose_skill', arguments: { name: 'release-notes', description: 'Writing release notes: "what changed", then why', instructions: '# Release notes\n\nList the changes, newest first.' } },
        { name: 'propose_mcp_server', arguments: { name: 'issues', url: 'https://issues.example.com/mcp', destination: 'mcp', auth: 'bearer', reason: 'to read the tracker' } },
        { name: 'propose_mcp_server', arguments: { name: 'nowhere', url: 'https://nowhere.example.com/mcp', destination: 'no-such-destination', auth: 'none' } },
        { name: 'propose_skill', arguments: { name: 'Bad Name', description: 'x', instructions: 'y' } },
      ],
    };
  }

  before(async () => {
    stack = await startStack({ script });
  });

  after(async () => {
    await stack?.stop();
  });

  it('stores them as proposed, says why one was refused, and a person accepts the server', async () => {
    const { t } = stack;
    const tools = ['propose_skill', 'propose_mcp_server', 'finish'];
    const team = await stack.makeTeam({ roles: { lead: { tools } } });
    const catalog = await t.request({ method: 'GET', url: '/api/v1/tools', token: t.adminToken });
    assert.ok(['propose_skill', 'propose_mcp_server'].every((n) => catalog.body.items.some((x: { name: string }) => x.name === n)), 'the catalogue lists the proposal tools');

    const runId = await stack.giveTask(team, 'Set the team up for release notes.');
    await stack.waitForState(runId, 'succeeded');

    // The stored skill and server (the jobs run after the events are recorded).
    const skills = await waitFor('the proposed skill', async () => {
      const r = await t.request({ method: 'GET', url: `/api/v1/teams/${team}/skills`, token: t.adminToken });
      assert.equal(r.status, 200, r.text);
      return r.body.items.length ? r.body.items : null;
    });
    assert.equal(skills.length, 1, 'the badly named skill was not stored');
    assert.deepEqual({ name: skills[0].name, version: skills[0].version, status: skills[0].status }, { name: 'release-notes', version: 1, status: 'proposed' });
    assert.match(skills[0].source, /lead/);

    const id = `${team}%2Fissues`;
    const server = await waitFor('the proposed server', async () => {
      const r = await t.request({ method: 'GET', url: `/api/v1/mcp-servers/${id}`, token: t.adminToken });
      return r.status === 200 ? r : null;
    });
    assert.equal(server.body.status, 'proposed');
    assert.equal(server.body.proposed_by, `${team}/lead`);
    assert.equal(server.body.url, 'https://issues.example.com/mcp');
    assert.equal((await t.request({ method: 'GET', url: `/api/v1/mcp-servers/${team}%2Fnowhere`, token: t.adminToken })).status, 404);

    // The conversation shows each proposal once, and why the bad ones were not stored.
    const posts = await waitFor('the refusal notices', async () => {
      const all = await stack.posts(runId);
      return all.filter((p) => p.data?.stored === false).length >= 1 ? all : null;
    });
    const proposed = posts.filter((p) => p.kind === 'notice' && /proposes/.test(p.text));
    assert.deepEqual(proposed.map((p) => p.data?.name).sort(), ['issues', 'nowhere', 'release-notes']);
    const refused = posts.filter((p) => p.data?.stored === false);
    assert.equal(refused.length, 1);
    assert.match(refused[0].text, /MCP server "nowhere".*not stored: .*destination/);
    const badSkill = posts.find((p) => p.kind === 'working' && p.data?.tool === 'propose_skill' && p.data?.ok === false);
    assert.ok(badSkill, 'the badly named skill was refused to the model by the tool schema');

    // A person accepts the server: it becomes curated.
    const accepted = await t.request({ method: 'POST', url: `/api/v1/mcp-servers/${team}/issues/accept`, token: t.adminToken, headers: { 'if-match': String(server.headers.etag) } });
    assert.equal(accepted.status, 200, accepted.text);
    assert.equal(accepted.body.status, 'curated');
  });
});

// A team's MCP server used by an agent in a real `local` sandbox: the runtime reaches it only at
// the gateway's mcp.crewhouse.internal, the gateway sends the request to the server's real
// address under its destination's rules and puts the server's secret on; the sandbox never holds
// it. Under confirm_risky, the read-only tool runs at once and the other waits for a person.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import fs from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { startFakeMcpServer, type FakeMcpServer } from '../fakes/mcp-server.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { lastText, startStack, stackSkip, waitFor, type Stack } from './stack.ts';

describe('an agent uses its team MCP server through the gateway', { skip: stackSkip }, () => {
  let stack: Stack;
  let mcp: FakeMcpServer;
  const token = `mcp-token-${crypto.randomBytes(12).toString('hex')}`;
  const offered: string[][] = [];

  function script(req: ScriptedRequest): ScriptedAnswer {
    offered.push((req.body.tools ?? []).map((t: { function: { name: string } }) => t.function.name));
    const text = lastText(req);
    if (text.startsWith('noted')) return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'The release day is Thursday; noted.' } }] };
    if (text === 'Thursday') return { tool_calls: [{ name: 'mcp__knowledge__write_note', arguments: { text: 'release on Thursday' } }] };
    return { content: 'Looking it up.', tool_calls: [{ name: 'mcp__knowledge__lookup', arguments: { key: 'release-day' } }] };
  }

  before(async () => {
    mcp = await startFakeMcpServer();
    // The fake server speaks plain HTTP on loopback: its credential may go in cleartext only because this dev-only host:port is listed.
    stack = await startStack({ script, config: { SERVICE_EGRESS_DEV_DESTINATIONS: '1', SERVICE_GATEWAY_CLEARTEXT_HOSTS: new URL(mcp.url).host } });
  });

  after(async () => {
    await stack?.stop();
    await mcp?.close();
  });

  it('offers the server tools, injects the credential, and asks before a tool that is not read-only', async () => {
    const { t } = stack;
    const admin = (method: string, url: string, body?: unknown) => t.request({ method, url: `/api/v1${url}`, token: t.adminToken, body });
    const port = new URL(mcp.url).port;
    const dest = await admin('POST', '/destinations', { name: 'knowledge-host', host: `127.0.0.1:${port}`, methods: [], paths: [], header_allowlist: [], git_push_ref_globs: [], dev_only: true, what: 'the fake MCP server' });
    assert.equal(dest.status, 201, dest.text);
    const team = await stack.makeTeam({ roles: { lead: { tools: ['finish', 'ask_person'], role: { confirmation_policy: 'confirm_risky' } } } });
    // A team server's secret lives in the team's namespace.
    assert.equal((await admin('PUT', `/secrets/teams/${team}/knowledge`, { value: token })).status, 201);
    const server = await admin('POST', '/mcp-servers', { team, name: 'knowledge', url: mcp.url, destination: 'knowledge-host', auth: 'bearer', secret: `secret:teams/${team}/knowledge`, roles: [] });
    assert.equal(server.status, 201, server.text);

    const run = await stack.giveTask(team, 'When do we release?');
    const waiting = await stack.waitForState(run, 'waiting');
    assert.equal(waiting.waiting_for.kind, 'confirmation');
    assert.match(waiting.open_question.text, /mcp__knowledge__write_note/);
    assert.deepEqual(mcp.calls, [{ tool: 'lookup', args: { key: 'release-day' } }], 'the read-only tool ran without asking; the other waits');
    assert.ok(offered[0].includes('mcp__knowledge__lookup') && offered[0].includes('mcp__knowledge__write_note'), `the model is offered the server's tools: ${offered[0].join(', ')}`);

    const reply = await admin('POST', `/runs/${run}/replies`, { text: 'approve', in_reply_to: waiting.open_question.seq });
    assert.equal(reply.status, 202, reply.text);
    await stack.waitForState(run, 'succeeded');
    assert.deepEqual(mcp.notes, ['release on Thursday']);
    await waitFor('every MCP request to be seen', async () => mcp.authorizations.length > 0);
    assert.ok(mcp.authorizations.every((a) => a === `Bearer ${token}`), 'every request to the server carried its secret, put there by the gateway');

    const posts = await stack.posts(run);
    const lookup = posts.find((p) => p.data?.tool === 'mcp__knowledge__lookup');
    assert.ok(lookup && lookup.data?.ok === true && String(lookup.data?.output).includes('Thursday'), JSON.stringify(posts.map((p) => [p.kind, p.text.slice(0, 80)])));
    // The secret never entered the sandbox (its files and the agent's journal).
    const files = fs.readdirSync(stack.sandboxDir, { recursive: true }) as string[];
    for (const f of files) {
      const full = `${stack.sandboxDir}/${f}`;
      if (fs.statSync(full).isFile() && fs.statSync(full).size < 8 * 1024 * 1024) assert.ok(!fs.readFileSync(full, 'latin1').includes(token), `${f} holds the MCP secret`);
    }
  });
});

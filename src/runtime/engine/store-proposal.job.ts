/**
 * What an agent proposes for its team (a skill, an MCP server) travels as a journal event; the
 * runs service queues an `engine.store-proposal` job for it in the transaction that records the event, so
 * it is stored once whichever worker records it. The job stores it `proposed` through the module
 * that owns it; a person accepts it later. A proposal the owner refuses (a bad name, an unknown
 * destination, a curated one of the same name) becomes a notice in the run saying why.
 */
import { Type } from 'typebox';
import type { Proposal } from '../../agent/protocol.ts';
import { systemActor, type Actor } from '../../audit/audit.ts';
import type { McpServerProposal } from '../../console/mcp-servers/mcp-servers.schemas.ts';
import type { RunJournal } from '../../console/runs/runs.journal.ts';
import { Problem } from '../../errors/problems.ts';
import { defineJob } from '../../queue/queue.ts';

const what = (p: Proposal) => (p.kind === 'skill' ? `skill "${p.name}"` : `MCP server "${p.name}"`);

export interface ProposalDeps {
  runs: Pick<RunJournal, 'notice'>;
  team(name: string): Promise<{ id: number } | null>;
  proposeSkill(actor: Actor, team: string, input: { name: string; description: string; instructions: string; source: string }): Promise<unknown>;
  proposeMcpServer(actor: Actor, team: string, input: McpServerProposal): Promise<unknown>;
}

export const storeProposalJob = defineJob({
  kind: 'engine.store-proposal',
  payload: Type.Object({
    run_id: Type.String({ minLength: 1, maxLength: 64 }),
    team: Type.String({ minLength: 1, maxLength: 63 }),
    team_id: Type.Integer(),
    role: Type.String({ minLength: 1, maxLength: 63 }),
    /** The recorded event's source (`<conversation>:<seq>`): names the proposal in the run's log. */
    source: Type.String({ minLength: 1, maxLength: 200 }),
    proposal: Type.Unknown(),
  }),
  maxAttempts: 20,
  async perform(deps: ProposalDeps, p) {
    const proposal = p.proposal as Proposal;
    const refused = (why: string) => deps.runs.notice(p.run_id, `the ${what(proposal)} that the ${p.role} role proposed was not stored: ${why}`, `proposal-refused:${p.source}`, { proposal: proposal.kind, name: proposal.name, stored: false });
    const team = await deps.team(p.team);
    if (!team || team.id !== p.team_id) return void (await refused('the team was archived'));
    // The agent is the proposer; the person who accepts it is recorded when they do.
    const actor = systemActor(`${p.team}/${p.role}`);
    try {
      if (proposal.kind === 'skill') {
        await deps.proposeSkill(actor, p.team, { name: proposal.name, description: proposal.description, instructions: proposal.instructions, source: `agent ${p.role}, run ${p.run_id}` });
      } else {
        await deps.proposeMcpServer(actor, p.team, { name: proposal.name, url: proposal.url, destination: proposal.destination, auth: proposal.auth, header: proposal.header, secret: null, roles: proposal.roles });
      }
    } catch (err) {
      // A refusal will not change on a retry: the run says why. Anything else (the database) is retried.
      if (err instanceof Problem && err.status < 500) return void (await refused(err.detail));
      throw err;
    }
  },
});

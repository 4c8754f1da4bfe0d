import type { AgentConfig } from '../../agent/protocol.ts';
import type { RunWork } from '../../console/runs/runs.journal.ts';
import { RunFailure } from './failures.ts';
import type { WorkspacePlan } from './workspace.ts';

/** What the engine reads to set a role up: the pinned agent version, the role's documents and skills, the model's window. */
export interface RoleConfigDeps {
  agentVersion(agent: string, version: number | null): Promise<{ system_prompt: string; tools: string[]; confirmation_policy: 'never_confirm' | 'confirm_risky'; skills: string[] }>;
  documents(role: { agent: string; team: string }): Promise<Array<{ name: string; path: string; description: string; media_type: string; size_bytes: number; scope: string; content: string | Buffer }>>;
  skill(name: string): Promise<{ name: string; description: string; body: string; resources: Record<string, string> } | null>;
  contextWindow(model: string): number;
  /** Names of the MCP servers the role may use (the gateway answers for each at `mcpBaseUrl/<name>`). */
  mcpServers(team: string, role: string): Promise<string[]>;
  mcpBaseUrl: string;
  /** Base URL of the model proxy as a sandbox reaches it (through the gateway). */
  modelBaseUrl: string;
}

const DEFAULT_ITERATIONS = 50;
export const WORKSPACE = '/workspace';

/** The run's branch: named after the run. */
export const branchOf = (runId: string) => `crewhouse/${runId}`;

/** The agent runtime's configuration for a task's role, and what to place in its workspace. */
export async function roleSetup(deps: RoleConfigDeps, work: RunWork): Promise<{ config: AgentConfig; plan: WorkspacePlan }> {
  const { run, task, team } = work;
  const role = team.roles.find((r) => r.role === task.role);
  if (!role) throw new RunFailure(`the team no longer has a role "${task.role}"`);
  const version = await deps.agentVersion(role.agent, task.agent_version ?? run.agent_versions?.[role.role] ?? null);
  const documents = await deps.documents({ agent: role.agent, team: team.name });
  const skillNames = [...new Set([...version.skills, ...role.skills])];
  const skills = [];
  for (const name of skillNames) {
    const s = await deps.skill(name);
    if (s) skills.push(s);
  }
  const branch = team.repo_url ? branchOf(run.id) : null;
  const config: AgentConfig = {
    role: role.role,
    lead: role.role === team.lead,
    model: role.model,
    base_url: deps.modelBaseUrl,
    system_prompt: version.system_prompt,
    tools: version.tools,
    confirmation_policy: role.confirmation_policy ?? version.confirmation_policy,
    max_iterations: role.max_iterations ?? DEFAULT_ITERATIONS,
    roles: team.roles.map((r) => r.role),
    next_role: role.next_role,
    workspace: WORKSPACE,
    repo_dir: team.repo_url ? `${WORKSPACE}/repo` : null,
    branch,
    documents: documents.map((d) => ({ path: `${WORKSPACE}/context/${d.name}`, description: d.description, type: d.media_type, size: d.size_bytes, scope: d.scope })),
    skills: skills.map((s) => ({ name: s.name, path: `${WORKSPACE}/skills/${s.name}/SKILL.md`, description: s.description })),
    context_tokens: deps.contextWindow(role.model),
    mcp_servers: (await deps.mcpServers(team.name, role.role)).map((name) => ({ name, url: `${deps.mcpBaseUrl}/${name}` })),
  };
  const plan: WorkspacePlan = {
    documents: documents.map((d) => ({ name: d.name, content: d.content })),
    skills: skills.map((s) => ({ name: s.name, body: s.body, resources: s.resources })),
    repo: team.repo_url && branch ? { url: team.repo_url, branch } : null,
  };
  return { config, plan };
}

/**
 * What the worker and the agent runtime say to each other over the sandbox's control channel
 * (the runtime's stdin and stdout): one request in, a stream of journal events out, each a
 * JSON line. The runtime keeps every event in an append-only journal on the sandbox's disk;
 * the conversation the model sees is derived from that journal, never kept beside it.
 */

/** How the agent is set up for one conversation (fixed for the run: the agent version of its start). */
export interface AgentConfig {
  /** The role this agent plays in its team. */
  role: string;
  /** True for the team's lead: the only role that talks to the person and ends the run. */
  lead: boolean;
  /** The model alias (the model proxy resolves it). */
  model: string;
  /** Base URL of the OpenAI-compatible endpoint, e.g. `http://model-proxy/v1` (reached through the gateway). */
  base_url: string;
  system_prompt: string;
  /** Built-in tool names the agent version allows (a subset of the catalogue). */
  tools: string[];
  confirmation_policy: 'never_confirm' | 'confirm_risky';
  /** Model calls allowed in one turn before the turn ends with `iteration_cap`. */
  max_iterations: number;
  /** Roles of the team, for hand-offs, and the pipeline's next role of this one. */
  roles: string[];
  next_role: string | null;
  /** The workspace root (/workspace in a sandbox) and the repository folder in it, if any. */
  workspace: string;
  repo_dir: string | null;
  /** The branch this run's work goes on. */
  branch: string | null;
  /** Context documents placed read-only, listed to the model. */
  documents: Array<{ path: string; description: string; type: string; size: number; scope: string }>;
  /** Skills placed on disk, indexed for the model. */
  skills: Array<{ name: string; path: string; description: string }>;
  /** Approximate context window of the model, in tokens (4 characters a token). */
  context_tokens: number;
  temperature?: number | null;
  /** The MCP servers the role may use, at the gateway's address for each (`http://mcp.crewhouse.internal/<name>`). */
  mcp_servers?: Array<{ name: string; url: string }>;
}

/** What starts or continues a turn. */
export type AgentInput =
  | { kind: 'task'; text: string; from: string; memory?: string | null }
  | { kind: 'answer'; text: string }
  | { kind: 'confirmation'; approved: boolean; note?: string | null }
  /** The result of a tool the worker carried out (open_pull_request). */
  | { kind: 'tool_result'; ok: boolean; output: string }
  | { kind: 'resume' };

/**
 * One request per runtime process. `turn` runs a turn of the conversation and streams its
 * events; `events` replays the journal after a seq (a new worker catching up after the old one
 * died). `conversation` names the journal: one per role's task thread in a run.
 */
export type AgentRequest =
  | { op: 'turn'; conversation: string; config: AgentConfig; input: AgentInput }
  | { op: 'events'; conversation: string; workspace: string; after: number };

export interface ToolCall {
  id: string;
  name: string;
  /** The arguments as the model sent them (a JSON text, possibly malformed). */
  arguments: string;
}

export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
}

/** How a turn ended: what the worker must do next. */
export type TurnOutcome =
  | { kind: 'question'; question: string; options: string[] }
  | { kind: 'confirmation'; call: ToolCall; reason: string }
  | { kind: 'hand_off'; to_role: string | null; summary: string; branch: string | null }
  | { kind: 'finished'; outcome: 'succeeded' | 'failed'; summary: string; branch: string | null; pull_request_url: string | null }
  | { kind: 'pull_request'; call: ToolCall; title: string; body: string; head: string | null; base: string | null; draft: boolean }
  | { kind: 'iteration_cap'; iterations: number }
  /** `cause`: why, when trying again cannot help until something changes (the budget is spent, the model refuses the role's calls). */
  | { kind: 'failed'; reason: string; cause?: AgentFailureCause }
  | { kind: 'cancelled' };

/** Why a turn failed, when a retry would fail the same way: the team's daily budget is spent, or the model refuses the role's calls. */
export type AgentFailureCause = 'budget' | 'model_refused';

/** What an agent proposes for its team: stored as `proposed` until a person accepts it. */
export type Proposal =
  | { kind: 'skill'; name: string; description: string; instructions: string }
  | { kind: 'mcp_server'; name: string; url: string; destination: string; auth: 'none' | 'bearer' | 'header'; header: string | null; roles: string[]; reason: string | null };

/** One journal entry. `seq` starts at 1 and has no gaps. */
export type AgentEvent = { seq: number; at: string } & (
  | { type: 'input'; input: AgentInput }
  | { type: 'model_call'; iteration: number }
  | { type: 'model_reply'; content: string | null; tool_calls: ToolCall[]; usage: Usage | null; finish_reason: string | null; /** When the request went out (the call's span starts there). */ started_at?: string }
  | { type: 'model_error'; attempt: number; reason: string; final: boolean; started_at?: string }
  | { type: 'tool_started'; call: ToolCall }
  | { type: 'tool_result'; call_id: string; name: string; ok: boolean; output: string; interrupted?: boolean; /** When the tool began to run; absent for a call that never ran. */ started_at?: string }
  | { type: 'progress'; text: string }
  | { type: 'proposal'; proposal: Proposal }
  | { type: 'plan'; steps: Array<{ step: string; status: string }> }
  | { type: 'context_masked'; up_to_seq: number; tool_results: number; chars: number }
  | { type: 'context_summarized'; up_to_seq: number; summary: string }
  | { type: 'turn_end'; outcome: TurnOutcome }
);

export type AgentEventBody = AgentEvent extends infer E ? (E extends AgentEvent ? Omit<E, 'seq' | 'at'> : never) : never;

import { Compile, type Validator } from 'typebox/compile';
import type { Proposal } from '../protocol.ts';
import { toolNamed, type ToolDefinition } from './catalog.ts';
import { gitBranch, gitCommit, gitDiff, gitLog, gitPull, gitPush, gitStatus, httpRequest, shell } from './commands.ts';
import { ToolFailure, type ToolAnswer, type ToolContext } from './context.ts';
import { deleteFile, editFile, listFiles, moveFile, readFile, search, writeFile } from './files.ts';

export { ToolFailure, type ToolAnswer, type ToolContext } from './context.ts';

type Impl = (ctx: ToolContext, args: any) => Promise<string | ToolAnswer>;

/** Tools the runtime carries out in the sandbox. */
const WORK_TOOLS: Record<string, Impl> = {
  shell,
  read_file: readFile,
  write_file: writeFile,
  edit_file: editFile,
  list_files: listFiles,
  search,
  delete_file: deleteFile,
  move_file: moveFile,
  git_status: gitStatus,
  git_diff: gitDiff,
  git_log: gitLog,
  git_branch: gitBranch,
  git_commit: gitCommit,
  git_pull: gitPull,
  git_push: gitPush,
  http_request: httpRequest,
};

/** Tools that end the turn: the worker acts on them (a person, another role, the code host). */
export const TURN_TOOLS = new Set(['ask_person', 'hand_off', 'finish', 'open_pull_request']);
/** Tools that only record something in the run's log. */
export const NOTE_TOOLS = new Set(['update_plan', 'post_progress']);
/** Tools that propose something for the team: recorded, and stored as proposed by the worker. */
export const PROPOSAL_TOOLS = new Set(['propose_skill', 'propose_mcp_server']);

/** The proposal a checked call of a proposal tool makes. */
export function proposalOf(name: string, args: Record<string, unknown>): Proposal {
  if (name === 'propose_skill') return { kind: 'skill', name: String(args.name), description: String(args.description), instructions: String(args.instructions) };
  return {
    kind: 'mcp_server',
    name: String(args.name),
    url: String(args.url),
    destination: String(args.destination),
    auth: args.auth as 'none' | 'bearer' | 'header',
    header: typeof args.header === 'string' ? args.header : null,
    roles: Array.isArray(args.roles) ? args.roles.map(String) : [],
    reason: typeof args.reason === 'string' ? args.reason : null,
  };
}

/** Each tool's argument check, compiled at its first call: a compiled check costs a microsecond where walking the schema each time cost 30 to 200 (the runtime's code runs cold, once a step). */
const validators = new Map<string, Validator>();

function validatorOf(tool: ToolDefinition): Validator {
  let v = validators.get(tool.name);
  if (!v) validators.set(tool.name, (v = Compile(tool.parameters)));
  return v;
}

export type ParsedCall = { ok: true; tool: ToolDefinition; args: Record<string, unknown> } | { ok: false; error: string };

/** Checks a call the model made: a known tool the agent may use, arguments that are JSON and fit the schema. */
export function parseCall(name: string, rawArgs: string, allowed: ReadonlySet<string>): ParsedCall {
  const tool = toolNamed(name);
  if (!tool || !allowed.has(name)) return { ok: false, error: `there is no tool named "${name}" for this agent; the tools are: ${[...allowed].join(', ')}` };
  let args: unknown;
  try {
    args = rawArgs.trim() === '' ? {} : JSON.parse(rawArgs);
  } catch {
    return { ok: false, error: `the arguments of ${name} are not valid JSON: ${rawArgs.slice(0, 200)}` };
  }
  if (!args || typeof args !== 'object' || Array.isArray(args)) return { ok: false, error: `the arguments of ${name} must be a JSON object` };
  const validator = validatorOf(tool);
  if (!validator.Check(args)) {
    const problems = validator
      .Errors(args)
      .filter((e) => e.keyword !== 'boolean')
      .slice(0, 5)
      .map((e) => `${e.instancePath || '(arguments)'} ${e.message}`);
    return { ok: false, error: `the arguments of ${name} do not fit its schema: ${problems.join('; ')}` };
  }
  return { ok: true, tool, args: args as Record<string, unknown> };
}

/**
 * Whether a call needs a person's confirmation under `confirm_risky`: decided by our rules on
 * the tool and its arguments, never by the model. The catalogue marks the risky tools; a read
 * over HTTP (GET, HEAD) is not risky; a shell command is always risky.
 */
export function riskOf(tool: ToolDefinition, args: Record<string, unknown>): string | null {
  if (!tool.risky) return null;
  switch (tool.name) {
    case 'http_request':
      return args.method === 'GET' || args.method === 'HEAD' ? null : `${String(args.method)} request to ${String(args.url)}`;
    case 'shell':
      return `shell command: ${String(args.command).slice(0, 500)}`;
    case 'delete_file':
      return `delete ${String(args.path)}`;
    case 'git_push':
      return `push ${String(args.branch ?? 'the current branch')} to the team's repository`;
    case 'open_pull_request':
      return `open a pull request "${String(args.title)}"`;
    default:
      return `${tool.name} (${JSON.stringify(args).slice(0, 300)})`;
  }
}

/** Carries out a work tool; failures the model can act on come back as `ok: false`, not as throws. */
export async function runWorkTool(name: string, ctx: ToolContext, args: Record<string, unknown>): Promise<ToolAnswer> {
  const impl = WORK_TOOLS[name];
  if (!impl) return { ok: false, output: `${name} is not carried out in the sandbox` };
  try {
    const out = await impl(ctx, args);
    return typeof out === 'string' ? { ok: true, output: out } : out;
  } catch (err) {
    if (err instanceof ToolFailure) return { ok: false, output: err.message };
    const e = err as NodeJS.ErrnoException;
    if (e?.code && typeof e.message === 'string') return { ok: false, output: `${name} failed: ${e.message}` };
    throw err;
  }
}

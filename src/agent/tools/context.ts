import path from 'node:path';

/** What a tool works with: the workspace, the repository folder, the run's branch, a cancel signal. */
export interface ToolContext {
  workspace: string;
  repoDir: string | null;
  branch: string | null;
  role: string;
  signal: AbortSignal;
  /** Environment for child processes (the sandbox's: proxy variables, CA paths). */
  env: NodeJS.ProcessEnv;
}

/** A tool's answer to the model: `ok` false for a failure the model should see and handle. */
export interface ToolAnswer {
  ok: boolean;
  output: string;
}

/** A failure the model can act on (a missing file, text not found); shown to it as the result. */
export class ToolFailure extends Error {}

/** Longest text of one tool result kept for the model (the tail, with a note of what was cut). */
export const MAX_OUTPUT = 64 * 1024;

export function clip(text: string, max = MAX_OUTPUT): string {
  if (text.length <= max) return text;
  return `[${text.length - max} characters cut]\n${text.slice(text.length - max)}`;
}

/** A path as the model gives it: relative to the workspace unless absolute. */
export function resolvePath(ctx: ToolContext, p: string | undefined, fallback?: string): string {
  const given = p ?? fallback ?? ctx.workspace;
  return path.resolve(ctx.workspace, given);
}

/** Context documents are read-only: the sandbox mounts them so, and the tools refuse too. */
export function assertWritable(ctx: ToolContext, target: string): void {
  const context = path.join(ctx.workspace, 'context');
  if (target === context || target.startsWith(`${context}${path.sep}`)) throw new ToolFailure(`${target} is a context document folder and is read-only`);
}

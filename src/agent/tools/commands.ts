import { resolvePath, ToolFailure, type ToolContext } from './context.ts';
import { runProcess, type ProcessResult } from './process.ts';

function report(r: ProcessResult, timeoutSeconds?: number): string {
  const parts = [`exit code: ${r.code}${r.timedOut ? ` (killed after ${timeoutSeconds} s)` : ''}`];
  if (r.stdout) parts.push(`stdout:\n${r.stdout}`);
  if (r.stderr) parts.push(`stderr:\n${r.stderr}`);
  return parts.join('\n');
}

export async function shell(ctx: ToolContext, a: { command: string; cwd?: string; timeout_seconds?: number }): Promise<{ ok: boolean; output: string }> {
  const timeout = a.timeout_seconds ?? 300;
  const r = await runProcess(['bash', '-c', a.command], { cwd: resolvePath(ctx, a.cwd), env: ctx.env, timeoutMs: timeout * 1000, signal: ctx.signal });
  return { ok: r.code === 0 && !r.timedOut, output: report(r, timeout) };
}

/** The repository the git tools work on: the path given, or the team's repository folder. */
function repoOf(ctx: ToolContext, p?: string): string {
  if (p) return resolvePath(ctx, p);
  if (!ctx.repoDir) throw new ToolFailure('this team has no repository; give the path of one');
  return ctx.repoDir;
}

async function git(ctx: ToolContext, cwd: string, args: string[], timeoutMs = 120_000): Promise<ProcessResult> {
  const env = {
    ...ctx.env,
    GIT_TERMINAL_PROMPT: '0',
    GIT_AUTHOR_NAME: ctx.env.GIT_AUTHOR_NAME ?? `crewhouse ${ctx.role}`,
    GIT_AUTHOR_EMAIL: ctx.env.GIT_AUTHOR_EMAIL ?? `${ctx.role}@agents.crewhouse.invalid`,
    GIT_COMMITTER_NAME: ctx.env.GIT_COMMITTER_NAME ?? `crewhouse ${ctx.role}`,
    GIT_COMMITTER_EMAIL: ctx.env.GIT_COMMITTER_EMAIL ?? `${ctx.role}@agents.crewhouse.invalid`,
  };
  return runProcess(['git', ...args], { cwd, env, timeoutMs, signal: ctx.signal });
}

async function gitOk(ctx: ToolContext, cwd: string, args: string[], timeoutMs?: number): Promise<string> {
  const r = await git(ctx, cwd, args, timeoutMs);
  if (r.code !== 0) throw new ToolFailure(`git ${args[0]} failed (exit ${r.code}):\n${(r.stderr || r.stdout).trim()}`);
  return `${r.stdout}${r.stderr ? (r.stdout ? '\n' : '') + r.stderr : ''}`.trim();
}

export async function gitStatus(ctx: ToolContext, a: { path?: string }): Promise<string> {
  return (await gitOk(ctx, repoOf(ctx, a.path), ['status', '--porcelain=v1', '--branch'])) || 'clean';
}

export async function gitDiff(ctx: ToolContext, a: { staged?: boolean; ref?: string; path?: string }): Promise<string> {
  const args = ['diff', '--no-color'];
  if (a.staged) args.push('--staged');
  if (a.ref) args.push(a.ref);
  args.push('--');
  if (a.path) args.push(resolvePath(ctx, a.path));
  return (await gitOk(ctx, repoOf(ctx), args)) || 'no differences';
}

export async function gitLog(ctx: ToolContext, a: { max_count?: number; ref?: string; path?: string }): Promise<string> {
  const args = ['log', `--max-count=${a.max_count ?? 20}`, '--format=%h %an %ad %s', '--date=iso-strict'];
  if (a.ref) args.push(a.ref);
  args.push('--');
  if (a.path) args.push(resolvePath(ctx, a.path));
  return (await gitOk(ctx, repoOf(ctx), args)) || 'no commits';
}

export async function gitBranch(ctx: ToolContext, a: { name: string; from?: string }): Promise<string> {
  const repo = repoOf(ctx);
  const exists = (await git(ctx, repo, ['rev-parse', '--verify', '--quiet', `refs/heads/${a.name}`])).code === 0;
  if (exists) {
    await gitOk(ctx, repo, ['switch', a.name]);
    return `switched to the existing branch ${a.name}`;
  }
  await gitOk(ctx, repo, ['switch', '-c', a.name, ...(a.from ? [a.from] : [])]);
  return `created and switched to ${a.name}${a.from ? ` from ${a.from}` : ''}`;
}

export async function gitCommit(ctx: ToolContext, a: { message: string; paths?: string[]; all?: boolean }): Promise<string> {
  const repo = repoOf(ctx);
  if (a.paths?.length) await gitOk(ctx, repo, ['add', '--', ...a.paths.map((p) => resolvePath(ctx, p))]);
  else if (a.all !== false) await gitOk(ctx, repo, ['add', '--all']);
  const staged = await git(ctx, repo, ['diff', '--staged', '--quiet']);
  if (staged.code === 0) throw new ToolFailure('nothing to commit: no staged changes');
  await gitOk(ctx, repo, ['commit', '--quiet', '-m', a.message]);
  return `committed ${await gitOk(ctx, repo, ['log', '-1', '--format=%H %s'])}`;
}

export async function gitPull(ctx: ToolContext, a: { ref?: string }): Promise<string> {
  const repo = repoOf(ctx);
  return (await gitOk(ctx, repo, ['pull', '--ff-only', 'origin', ...(a.ref ? [a.ref] : [])], 600_000)) || 'up to date';
}

export async function currentBranch(ctx: ToolContext): Promise<string> {
  return gitOk(ctx, repoOf(ctx), ['rev-parse', '--abbrev-ref', 'HEAD']);
}

export async function gitPush(ctx: ToolContext, a: { branch?: string }): Promise<string> {
  const repo = repoOf(ctx);
  const branch = a.branch ?? (await currentBranch(ctx));
  // Never forced: the gateway checks every ref of a push against the policy as well.
  const out = await gitOk(ctx, repo, ['push', '--porcelain', '--set-upstream', 'origin', `refs/heads/${branch}:refs/heads/${branch}`], 600_000);
  const commit = await gitOk(ctx, repo, ['rev-parse', `refs/heads/${branch}`]);
  return `pushed ${branch} at ${commit}\n${out}`;
}

export async function httpRequest(
  ctx: ToolContext,
  a: { method: string; url: string; headers?: Record<string, string>; body?: string; timeout_seconds?: number },
): Promise<{ ok: boolean; output: string }> {
  const signal = AbortSignal.any([ctx.signal, AbortSignal.timeout((a.timeout_seconds ?? 60) * 1000)]);
  let res: Response;
  try {
    res = await fetch(a.url, { method: a.method, headers: a.headers, body: a.method === 'GET' || a.method === 'HEAD' ? undefined : a.body, signal, redirect: 'manual' });
  } catch (err) {
    throw new ToolFailure(`the request failed: ${err instanceof Error ? ((err.cause as Error | undefined)?.message ?? err.message) : String(err)}`);
  }
  const text = a.method === 'HEAD' ? '' : await res.text();
  const headers = [...res.headers.entries()].map(([k, v]) => `${k}: ${v}`).join('\n');
  return { ok: res.status < 400, output: `HTTP ${res.status} ${res.statusText}\n${headers}\n\n${text.length > 64 * 1024 ? `${text.slice(0, 64 * 1024)}\n[${text.length - 64 * 1024} characters cut]` : text}` };
}

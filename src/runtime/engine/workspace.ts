import type { ExecHandle, ExecRequest } from '../sandboxes/provider.ts';
import { RunFailure } from './failures.ts';

/** What a role finds in its workspace at the start of a task. */
export interface WorkspacePlan {
  /** Context documents, placed read-only under /workspace/context/<name>. */
  documents: Array<{ name: string; content: string | Buffer }>;
  /** Skills, each at /workspace/skills/<name>/SKILL.md with its resource files beside it. */
  skills: Array<{ name: string; body: string; resources: Record<string, string> }>;
  /** The team's repository, cloned through the gateway into /workspace/repo, and the run's branch. */
  repo: { url: string; branch: string } | null;
}

interface Workspace {
  exec(req: ExecRequest): Promise<ExecHandle>;
  copyIn(files: Array<{ path: string; content: Buffer | string; mode?: number }>): Promise<void>;
}

async function run(ws: Workspace, argv: string[], cwd = '/workspace'): Promise<{ code: number; out: string }> {
  const h = await ws.exec({ argv, cwd });
  h.stdin.end();
  let out = '';
  h.stdout.on('data', (c: Buffer) => (out = (out + c.toString('utf8')).slice(-4000)));
  h.stderr.on('data', (c: Buffer) => (out = (out + c.toString('utf8')).slice(-4000)));
  return { code: await h.exit, out };
}

/** Git's answer without anything that looks like a credential (the gateway injects them; none should be there). */
const scrub = (s: string) => s.replace(/(https?:\/\/)[^/@\s]+@/g, '$1***@').trim().slice(-1000);

/**
 * Places documents and skills and brings the repository up to date: cloned once, fetched at
 * every task, and on the run's branch (the remote's when another role pushed it, else a new
 * one from the default branch). Safe to run again.
 */
export async function prepareWorkspace(ws: Workspace, plan: WorkspacePlan): Promise<void> {
  await run(ws, ['rm', '-rf', '/workspace/context', '/workspace/skills']);
  const files: Array<{ path: string; content: Buffer | string; mode?: number }> = [];
  for (const d of plan.documents) files.push({ path: `context/${d.name}`, content: d.content, mode: 0o444 });
  for (const s of plan.skills) {
    files.push({ path: `skills/${s.name}/SKILL.md`, content: s.body, mode: 0o444 });
    for (const [rel, text] of Object.entries(s.resources)) if (!rel.split('/').includes('..')) files.push({ path: `skills/${s.name}/${rel}`, content: text, mode: 0o444 });
  }
  if (files.length) await ws.copyIn(files);
  if (!plan.repo) return;
  const { url, branch } = plan.repo;
  const has = await run(ws, ['test', '-d', '/workspace/repo/.git']);
  if (has.code !== 0) {
    const clone = await run(ws, ['git', 'clone', '--quiet', url, '/workspace/repo']);
    if (clone.code !== 0) throw new RunFailure(`could not clone the team's repository: ${scrub(clone.out)}`);
  } else {
    const fetch = await run(ws, ['git', 'fetch', '--quiet', '--prune', 'origin'], '/workspace/repo');
    if (fetch.code !== 0) throw new RunFailure(`could not fetch the team's repository: ${scrub(fetch.out)}`);
  }
  const remote = await run(ws, ['git', 'rev-parse', '--verify', '--quiet', `refs/remotes/origin/${branch}`], '/workspace/repo');
  const local = await run(ws, ['git', 'rev-parse', '--verify', '--quiet', `refs/heads/${branch}`], '/workspace/repo');
  const head = await run(ws, ['git', 'rev-parse', '--verify', '--quiet', 'refs/remotes/origin/HEAD'], '/workspace/repo');
  // Local work on the branch is kept (a role coming back for rework); otherwise start where the
  // remote is: its copy of the branch, its default branch, or nothing yet (an empty repository).
  const args =
    local.code === 0
      ? ['git', 'switch', '--quiet', branch]
      : remote.code === 0
        ? ['git', 'switch', '--quiet', '-c', branch, `origin/${branch}`]
        : head.code === 0
          ? ['git', 'switch', '--quiet', '-c', branch, 'origin/HEAD']
          : ['git', 'switch', '--quiet', '--orphan', branch];
  const sw = await run(ws, args, '/workspace/repo');
  if (sw.code !== 0) throw new RunFailure(`could not switch to the run's branch ${branch}: ${scrub(sw.out)}`);
  if (local.code === 0 && remote.code === 0) {
    const ff = await run(ws, ['git', 'merge', '--ff-only', '--quiet', `origin/${branch}`], '/workspace/repo');
    if (ff.code !== 0) throw new RunFailure(`the run's branch ${branch} moved on the remote in a way that cannot fast-forward: ${scrub(ff.out)}`);
  }
}

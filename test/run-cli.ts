// `crewhouse` in this process: the CLI's one entry (runCli) with its streams captured, as
// main.ts runs it for a person.
import { PassThrough } from 'node:stream';
import { runCli } from '../src/cli/index.ts';

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliRun {
  /** What has been printed so far. */
  out: CliResult;
  /** The exit status, when the command ends. */
  exited: Promise<number>;
  /** Stops a command that follows something live (runs watch). */
  stop(): void;
}

/** Starts a command; its output is read as it comes (`out`). */
export function startCli(argv: string[], opts: { env: Record<string, string | undefined>; input?: string; terminal?: boolean }): CliRun {
  const out: CliResult = { code: -1, stdout: '', stderr: '' };
  const stdin = Object.assign(new PassThrough(), { isTTY: opts.terminal === true });
  stdin.end(opts.input ?? '');
  const ac = new AbortController();
  const exited = runCli(argv, { env: opts.env, stdin, stdout: (s) => void (out.stdout += s), stderr: (s) => void (out.stderr += s), signal: ac.signal, localGroups: async () => (await import('../src/local-commands.ts')).LOCAL_GROUPS }).then((code) => (out.code = code));
  return { out, exited, stop: () => ac.abort() };
}

/** Runs a command to its end. */
export async function runCliIn(argv: string[], opts: { env: Record<string, string | undefined>; input?: string; terminal?: boolean }): Promise<CliResult> {
  const run = startCli(argv, opts);
  await run.exited;
  return run.out;
}

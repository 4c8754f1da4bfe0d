import { runCli } from './cli/index.ts';

/**
 * `crewhouse`: one command table (src/cli/), whose commands of this machine load the service
 * only when one is run. An unexpected failure prints its stack and exits 1.
 */
try {
  process.exitCode = await runCli(process.argv.slice(2), { env: process.env, stdin: process.stdin, stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s), localGroups: async () => (await import('./local-commands.ts')).LOCAL_GROUPS });
} catch (err) {
  process.stderr.write(`crewhouse: ${(err as Error)?.stack ?? String(err)}\n`);
  process.exitCode = 1;
}

import { isApiCommand, runCli } from './cli/index.ts';

/**
 * `crewhouse`: the commands that work through the HTTP API (src/cli/) load only the client, so
 * they start in a fraction of the time; the commands of this machine (serve, migrate, ...)
 * load the service (src/local-commands.ts). `secrets rotate-key` is one of the latter.
 */
const argv = process.argv.slice(2);
if (isApiCommand(argv[0]) && !(argv[0] === 'secrets' && argv[1] === 'rotate-key')) {
  process.exitCode = await runCli(argv, { env: process.env, stdin: process.stdin, stdout: (s) => process.stdout.write(s), stderr: (s) => process.stderr.write(s) });
} else {
  const { runLocalCommand } = await import('./local-commands.ts');
  await runLocalCommand(argv);
}

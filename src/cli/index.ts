import { runGroup, type Group } from './command.ts';
import { agents } from './commands/agents.ts';
import { destinations } from './commands/destinations.ts';
import { environments } from './commands/environments.ts';
import { hosts } from './commands/hosts.ts';
import { integrations } from './commands/integrations.ts';
import { mcpServers } from './commands/mcp-servers.ts';
import { models } from './commands/models.ts';
import { runs, task } from './commands/runs.ts';
import { secrets } from './commands/secrets.ts';
import { login, logout, whoami } from './commands/session.ts';
import { skills } from './commands/skills.ts';
import { exportGroup, importGroup } from './commands/import.ts';
import { spend } from './commands/spend.ts';
import { teams } from './commands/teams.ts';
import { templates } from './commands/templates.ts';
import { users } from './commands/users.ts';
import { ApiError, CliError } from './errors.ts';

/** The commands that work through the HTTP API with a token, in the order help lists them. */
export const API_GROUPS: Group[] = [login, logout, whoami, task, runs, teams, templates, agents, environments, destinations, secrets, skills, mcpServers, integrations, users, spend, hosts, models, importGroup, exportGroup];

/** The API commands' lines of `crewhouse help`. */
// A summary's first word is lowercased unless it is an acronym ("MCP servers" stays).
const lowerFirst = (s: string) => (/^[A-Z][a-z]/.test(s) ? s.charAt(0).toLowerCase() + s.slice(1) : s);
export const API_USAGE = API_GROUPS.map((g) => `  ${g.name.padEnd(36)}${lowerFirst(g.summary)}`).join('\n');

export const isApiCommand = (name: string | undefined) => API_GROUPS.some((g) => g.name === name);

export interface CliIo {
  env: Record<string, string | undefined>;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: (s: string) => void;
  stderr: (s: string) => void;
}

/**
 * Runs an API command; returns the exit status: 0 done, 1 the API refused or could not be
 * reached (the problem's detail printed), 2 the command was used wrongly.
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  const group = API_GROUPS.find((g) => g.name === argv[0])!;
  try {
    return await runGroup(group, argv.slice(1), { env: io.env, stdin: io.stdin, out: { stdout: io.stdout, progress: io.stderr } });
  } catch (err) {
    if (err instanceof ApiError) {
      io.stderr(`crewhouse: ${err.render()}\n`);
      return 1;
    }
    if (err instanceof CliError) {
      io.stderr(`crewhouse: ${err.message.trimEnd()}\n`);
      return 2;
    }
    throw err;
  }
}

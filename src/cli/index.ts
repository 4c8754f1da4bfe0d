import { helpLine, localHelpLines, runGroup, type Group } from './command.ts';
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

// A summary's first word is lowercased unless it is an acronym ("MCP servers" stays).
const lowerFirst = (s: string) => (/^[A-Z][a-z]/.test(s) ? s.charAt(0).toLowerCase() + s.slice(1) : s);

/** `crewhouse help`: the API's command groups, then the commands of this machine. */
function usage(local: Group[]): string {
  return `crewhouse <command>     (crewhouse <command> --help for its options)

Through the API (crewhouse login --url URL --token T once, or CREWHOUSE_URL and CREWHOUSE_TOKEN):
${API_GROUPS.map((g) => helpLine(g.name, lowerFirst(g.summary))).join('\n')}

On this machine, opening the database (SERVICE_* variables):
${localHelpLines(local)}

The service's configuration comes from SERVICE_* environment variables; see README.md.
`;
}

export interface CliIo {
  env: Record<string, string | undefined>;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  stdout: (s: string) => void;
  stderr: (s: string) => void;
  /** Aborted when the caller gives up: a command following something live stops. */
  signal?: AbortSignal;
  /**
   * The commands of this machine (serve, migrate, ...), loaded with the service only when one is
   * asked for. The composition root gives them (src/main.ts), so the CLI does not import the service.
   */
  localGroups: () => Promise<Group[]>;
}

/** Whether the command is served by the API's table alone, so the service's code need not load. */
function apiOnly(argv: string[]): Group | undefined {
  const group = API_GROUPS.find((g) => g.name === argv[0]);
  if (!group) return undefined;
  const verb = argv[1];
  const single = group.commands.length === 1 && group.commands[0].name === '';
  if (single || verb === undefined || verb.startsWith('-') || verb === 'help' || group.commands.some((c) => c.name === verb)) return group;
  return undefined;
}

/**
 * Runs a command: one table, two halves. The commands that work through the HTTP API load only
 * the client, so they start in a fraction of the time; the commands of this machine (serve,
 * migrate, ..., `secrets rotate-key`) are loaded with the service when one is asked for. Returns
 * the exit status: 0 done, 1 the API refused or could not be reached (the problem's detail
 * printed), 2 the command was used wrongly.
 */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  try {
    let group = apiOnly(argv);
    if (!group) {
      const LOCAL_GROUPS = await io.localGroups();
      const [name] = argv;
      if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
        io.stdout(usage(LOCAL_GROUPS));
        return 0;
      }
      const api = API_GROUPS.find((g) => g.name === name);
      const local = LOCAL_GROUPS.find((g) => g.name === name);
      if (!api && !local) throw new CliError(`unknown command "${name}"\n\n${usage(LOCAL_GROUPS)}`);
      group = api && local ? { ...api, commands: [...api.commands, ...local.commands] } : (api ?? local)!;
    }
    return await runGroup(group, argv.slice(1), { env: io.env, stdin: io.stdin, signal: io.signal, out: { stdout: io.stdout, progress: io.stderr } });
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

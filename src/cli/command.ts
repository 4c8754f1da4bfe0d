import fs from 'node:fs';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { ApiClient } from './client.ts';
import { CliError } from './errors.ts';
import type { Out } from './output.ts';
import { loadProfile } from './profile.ts';

type Options = NonNullable<ParseArgsConfig['options']>;

/** What a command runs with: output, the API (built on first use), and the terminal. */
export interface Ctx {
  out: Out;
  env: Record<string, string | undefined>;
  api(): ApiClient;
  /** Standard input, for secret values and prompts. */
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  /** Aborted when the caller gives up (a command that follows something live stops). */
  signal?: AbortSignal;
  /** A usage error of this command: the problem, then its usage (exit status 2). */
  usageError(problem?: string): CliError;
}

export interface Command {
  /** The verb after the group (`list`), or '' for a group that is itself the command (`login`). */
  name: string;
  /** The positional arguments as help shows them (`NAME [VERSION]`). */
  args?: string;
  /** The options as the usage line shows them, after the arguments (`--user NAME [--name LABEL]`). */
  synopsis?: string;
  summary: string;
  /** What the usage says the command does, when it says more than the summary. */
  about?: string;
  options?: Options;
  /** One help line per option, `--flag V   meaning`. */
  help?: string[];
  /** A command of this machine: it opens the database (SERVICE_* variables) and has no --json. */
  local?: boolean;
  /** The exit status; nothing means 0. */
  run(ctx: Ctx, args: string[], flags: Record<string, any>): Promise<number | void>;
}

export interface Group {
  name: string;
  summary: string;
  commands: Command[];
  /** The verb run when none is given (`crewhouse sandboxes` lists them). */
  default?: string;
}

const HELP: Options = { help: { type: 'boolean', short: 'h' } };
const JSON_OPTION: Options = { json: { type: 'boolean' } };

const headOf = (group: Group, c: Command) => `crewhouse ${[group.name, c.name, c.args, c.synopsis].filter(Boolean).join(' ')}`;

/** The usage of one command. */
export function commandUsage(group: Group, c: Command): string {
  const about = (c.about ?? c.summary).replace(/^(?=.)/gm, '  ');
  const help = [...(c.help ?? []), ...(c.local ? [] : ['--json              print the API\'s JSON (for scripts)'])];
  return [`${headOf(group, c)}\n\n${about}`, ...(help.length ? ['', ...help.map((h) => `  ${h}`)] : [])].join('\n') + '\n';
}

/** The usage of a group: each of its commands on a line. */
export function groupUsage(group: Group): string {
  const rows = group.commands.map((c) => [headOf(group, c), c.summary]);
  const width = Math.max(...rows.map(([a]) => a.length));
  return `${group.summary}\n\n${rows.map(([a, s]) => `  ${a.padEnd(width)}  ${s}`).join('\n')}\n\nRun a command with --help for its options.\n`;
}

/** One line of `crewhouse help`: what to type, then what it does (on the next line when the first is full). */
export function helpLine(left: string, summary: string): string {
  return left.length < 36 ? `  ${left.padEnd(36)}${summary}` : `  ${left}\n${' '.repeat(38)}${summary}`;
}

/** The lines of `crewhouse help` for commands of this machine: one per command. */
export function localHelpLines(groups: Group[]): string {
  return groups.flatMap((g) => g.commands.map((c) => helpLine([g.name, c.name, c.args, c.synopsis].filter(Boolean).join(' '), c.summary))).join('\n');
}

/** A usage error: the problem (if any), then the usage. */
const usageError = (usage: string, problem?: string) => new CliError(`${problem ? `${problem}\n\n` : ''}usage: ${usage}`);

/** Runs `crewhouse <group> [verb] ...` from the table; returns the exit status. */
export async function runGroup(group: Group, argv: string[], ctx: Omit<Ctx, 'out' | 'api' | 'usageError'> & { out: Omit<Out, 'json'> }): Promise<number> {
  const single = group.commands.length === 1 && group.commands[0].name === '';
  const first = argv[0];
  const asksHelp = first === 'help' || first === '--help' || first === '-h';
  const [verb, ...rest] = single ? ['', ...argv] : group.default !== undefined && !asksHelp && (first === undefined || first.startsWith('-')) ? [group.default, ...argv] : argv;
  if (!single && (verb === undefined || asksHelp)) {
    ctx.out.stdout(groupUsage(group));
    return 0;
  }
  const command = group.commands.find((c) => c.name === verb);
  if (!command) throw new CliError(`unknown command "crewhouse ${group.name} ${verb}"\n\n${groupUsage(group)}`);
  const usage = commandUsage(group, command);
  let parsed;
  try {
    parsed = parseArgs({ args: rest, allowPositionals: true, options: { ...HELP, ...(command.local ? {} : JSON_OPTION), ...command.options } });
  } catch (err) {
    throw usageError(usage, (err as Error).message.split('. To specify')[0]);
  }
  const { values, positionals } = parsed;
  if (values.help) {
    ctx.out.stdout(usage);
    return 0;
  }
  const wanted = (command.args ?? '').split(' ').filter((a) => a && !a.startsWith('[') && !a.endsWith(']') && !a.endsWith('...'));
  if (positionals.length < wanted.length) throw usageError(usage, `missing ${wanted.slice(positionals.length).join(' ')}`);
  const maxArgs = (command.args ?? '').includes('...') ? Infinity : (command.args ?? '').split(' ').filter(Boolean).length;
  if (positionals.length > maxArgs) throw usageError(usage, `unexpected argument "${positionals[maxArgs]}"`);
  const json = values.json === true;
  const out: Out = { ...ctx.out, json, progress: json ? () => {} : ctx.out.progress };
  let client: ApiClient | null = null;
  const full: Ctx = { ...ctx, out, api: () => (client ??= new ApiClient(loadProfile(ctx.env))), usageError: (problem) => usageError(usage, problem) };
  const status = await command.run(full, positionals, values);
  return typeof status === 'number' ? status : 0;
}

/** Reads all of standard input (a secret value, a file given as `-`). */
export async function readStdin(stdin: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stdin) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(String(c)));
  return Buffer.concat(chunks).toString('utf8');
}

/** A file's text, `-` for standard input. */
export async function readText(ctx: Ctx, file: string): Promise<string> {
  if (file === '-') return readStdin(ctx.stdin);
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new CliError(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** A JSON or YAML object from --file (YAML is a superset of JSON, so one parser reads both). */
export async function readObject(ctx: Ctx, file: string): Promise<Record<string, unknown>> {
  const text = await readText(ctx, file);
  let value: unknown;
  try {
    value = parseYaml(text);
  } catch (err) {
    throw new CliError(`${file} is neither JSON nor YAML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new CliError(`${file} must hold an object (the request body), not ${Array.isArray(value) ? 'a list' : typeof value}`);
  return value as Record<string, unknown>;
}

export const FILE_OPTION: Options = { file: { type: 'string', short: 'f' } };
export const FILE_HELP = '--file F, -f F      the request body as JSON or YAML (- for stdin); flags override its fields';
export const LIMIT_OPTION: Options = { limit: { type: 'string' } };
export const LIMIT_HELP = '--limit N           at most N items (all by default, page by page)';

/**
 * The body of a create or update: --file's object, then each flag given, by its field name.
 * `kinds` says how a flag's text becomes the field's value.
 */
export async function bodyOf(ctx: Ctx, flags: Record<string, any>, fields: Record<string, 'string' | 'number' | 'int' | 'bool' | 'list' | 'nullable'>): Promise<Record<string, unknown>> {
  const body: Record<string, unknown> = flags.file ? await readObject(ctx, flags.file) : {};
  for (const [field, kind] of Object.entries(fields)) {
    const flag = field.replace(/_/g, '-');
    const raw = flags[flag];
    if (raw === undefined) continue;
    if (kind === 'bool') body[field] = raw === true || raw === 'true';
    else if (kind === 'list') body[field] = String(raw).split(',').map((s) => s.trim()).filter(Boolean);
    else if (kind === 'nullable') body[field] = raw === '' || raw === 'null' ? null : raw;
    else if (kind === 'number' || kind === 'int') {
      const n = raw === 'null' ? null : Number(raw);
      if (n !== null && (!Number.isFinite(n) || (kind === 'int' && !Number.isInteger(n)))) throw new CliError(`--${flag} must be ${kind === 'int' ? 'an integer' : 'a number'}, not "${raw}"`);
      body[field] = n;
    } else body[field] = raw;
  }
  return body;
}

/** Options for `bodyOf`'s fields: each a string flag, booleans as boolean flags. */
export function flagsOf(fields: Record<string, string>): Options {
  return Object.fromEntries(Object.entries(fields).map(([f, kind]) => [f.replace(/_/g, '-'), { type: kind === 'bool' ? 'boolean' : 'string' }])) as Options;
}

import { Type, type TSchema } from 'typebox';

/**
 * One built-in tool the agent runtime offers a model: the name the model calls, what it does
 * (shown to the model), whether it is risky (an agent with `confirm_risky` asks a person before
 * each call), and the JSON schema of its arguments.
 */
export interface ToolDefinition {
  name: string;
  description: string;
  risky: boolean;
  parameters: TSchema;
}

const Path = (description: string) => Type.String({ minLength: 1, maxLength: 4096, description });
const Args = <P extends Record<string, TSchema>>(properties: P) => Type.Object(properties, { additionalProperties: false });

/**
 * The single definition of the built-in tools. The Console lists it (`GET /tools`), agent
 * versions are checked against it, and the runtime implements exactly these names.
 * Paths are relative to /workspace unless absolute; context documents are read-only under
 * /workspace/context.
 */
export const TOOL_CATALOG: readonly ToolDefinition[] = [
  {
    name: 'shell',
    description: 'Runs a shell command (bash -lc) in the sandbox and returns its exit code, stdout and stderr (each cut to the last 64 KiB). Network traffic leaves only through the gateway.',
    risky: true,
    parameters: Args({
      command: Type.String({ minLength: 1, maxLength: 16384, description: 'the command line' }),
      cwd: Type.Optional(Path('working directory; default /workspace')),
      timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600, default: 300, description: 'killed after this long' })),
    }),
  },
  {
    name: 'read_file',
    description: 'Reads a text file, optionally a range of lines; lines are numbered in the answer.',
    risky: false,
    parameters: Args({
      path: Path('file to read'),
      offset: Type.Optional(Type.Integer({ minimum: 1, description: 'first line, 1-based' })),
      limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 10000, description: 'number of lines' })),
    }),
  },
  {
    name: 'write_file',
    description: 'Creates or overwrites a text file with the given content, creating missing directories.',
    risky: false,
    parameters: Args({
      path: Path('file to write'),
      content: Type.String({ maxLength: 4 * 1024 * 1024, description: 'the whole new content' }),
    }),
  },
  {
    name: 'edit_file',
    description: 'Replaces exact text in a file. old_text must occur exactly once unless replace_all is true; fails without changing anything otherwise.',
    risky: false,
    parameters: Args({
      path: Path('file to edit'),
      old_text: Type.String({ minLength: 1, maxLength: 1024 * 1024, description: 'text to find, verbatim' }),
      new_text: Type.String({ maxLength: 1024 * 1024, description: 'replacement' }),
      replace_all: Type.Optional(Type.Boolean({ default: false })),
    }),
  },
  {
    name: 'list_files',
    description: 'Lists files and directories under a path, optionally recursively and filtered by a glob; skips .git.',
    risky: false,
    parameters: Args({
      path: Type.Optional(Path('directory; default /workspace')),
      recursive: Type.Optional(Type.Boolean({ default: false })),
      glob: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'e.g. "**/*.ts"' })),
      max_entries: Type.Optional(Type.Integer({ minimum: 1, maximum: 5000, default: 500 })),
    }),
  },
  {
    name: 'search',
    description: 'Searches file contents (grep): returns matching lines with file and line number.',
    risky: false,
    parameters: Args({
      pattern: Type.String({ minLength: 1, maxLength: 1024, description: 'regular expression, or literal text when fixed is true' }),
      path: Type.Optional(Path('directory or file; default /workspace')),
      glob: Type.Optional(Type.String({ minLength: 1, maxLength: 512, description: 'only files matching this glob' })),
      fixed: Type.Optional(Type.Boolean({ default: false })),
      case_sensitive: Type.Optional(Type.Boolean({ default: true })),
      max_results: Type.Optional(Type.Integer({ minimum: 1, maximum: 2000, default: 200 })),
    }),
  },
  {
    name: 'delete_file',
    description: 'Deletes a file or an empty directory.',
    risky: true,
    parameters: Args({ path: Path('what to delete') }),
  },
  {
    name: 'move_file',
    description: 'Moves or renames a file or directory.',
    risky: false,
    parameters: Args({ from: Path('current path'), to: Path('new path') }),
  },
  {
    name: 'git_status',
    description: 'Shows the current branch, staged, unstaged and untracked changes of the repository.',
    risky: false,
    parameters: Args({ path: Type.Optional(Path('repository directory; default /workspace/repo')) }),
  },
  {
    name: 'git_diff',
    description: 'Shows a diff: working tree against HEAD by default, the staged changes, or against a ref.',
    risky: false,
    parameters: Args({
      staged: Type.Optional(Type.Boolean({ default: false })),
      ref: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'compare against this ref' })),
      path: Type.Optional(Path('limit to this path')),
    }),
  },
  {
    name: 'git_log',
    description: 'Lists recent commits (hash, author, date, subject).',
    risky: false,
    parameters: Args({
      max_count: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 20 })),
      ref: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
      path: Type.Optional(Path('only commits touching this path')),
    }),
  },
  {
    name: 'git_branch',
    description: 'Creates a branch (from HEAD or a given ref) and switches to it, or switches to an existing one.',
    risky: false,
    parameters: Args({
      name: Type.String({ minLength: 1, maxLength: 200, pattern: '^[A-Za-z0-9._/-]+$' }),
      from: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'start point for a new branch' })),
    }),
  },
  {
    name: 'git_commit',
    description: 'Stages the given paths (or all changes) and commits them with the message.',
    risky: false,
    parameters: Args({
      message: Type.String({ minLength: 1, maxLength: 10000 }),
      paths: Type.Optional(Type.Array(Path('path to stage'), { maxItems: 1000 })),
      all: Type.Optional(Type.Boolean({ default: true, description: 'stage every change when no paths are given' })),
    }),
  },
  {
    name: 'git_pull',
    description: 'Fetches from the remote through the gateway and fast-forwards the current branch.',
    risky: false,
    parameters: Args({ ref: Type.Optional(Type.String({ minLength: 1, maxLength: 256, description: 'remote branch; default the upstream' })) }),
  },
  {
    name: 'git_push',
    description: "Pushes a branch to the team's repository through the gateway (only refs the egress policy allows; never force).",
    risky: true,
    parameters: Args({ branch: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'default the current branch' })) }),
  },
  {
    name: 'open_pull_request',
    description: "Opens (or updates) a pull request from a pushed branch on the team's repository.",
    risky: true,
    parameters: Args({
      title: Type.String({ minLength: 1, maxLength: 256 }),
      body: Type.Optional(Type.String({ maxLength: 65536 })),
      head: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'default the current branch' })),
      base: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'default the default branch' })),
      draft: Type.Optional(Type.Boolean({ default: false })),
    }),
  },
  {
    name: 'http_request',
    description: "Sends an HTTP request through the credential gateway; only destinations in the agent's egress policy answer, and the gateway adds their credentials.",
    risky: true,
    parameters: Args({
      method: Type.Union(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE'].map((m) => Type.Literal(m))),
      url: Type.String({ minLength: 1, maxLength: 8192, format: 'uri' }),
      headers: Type.Optional(Type.Record(Type.String({ maxLength: 256 }), Type.String({ maxLength: 8192 }))),
      body: Type.Optional(Type.String({ maxLength: 1024 * 1024 })),
      timeout_seconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 300, default: 60 })),
    }),
  },
  {
    name: 'update_plan',
    description: 'Records the current plan as a list of steps with their status; shown to the person following the run.',
    risky: false,
    parameters: Args({
      steps: Type.Array(
        Type.Object(
          { step: Type.String({ minLength: 1, maxLength: 500 }), status: Type.Union([Type.Literal('pending'), Type.Literal('in_progress'), Type.Literal('done')]) },
          { additionalProperties: false },
        ),
        { minItems: 1, maxItems: 50 },
      ),
    }),
  },
  {
    name: 'post_progress',
    description: "Posts a short progress note to the run's conversation without waiting for an answer.",
    risky: false,
    parameters: Args({ text: Type.String({ minLength: 1, maxLength: 4000 }) }),
  },
  {
    name: 'propose_skill',
    description: "Proposes a skill for the team (instructions later conversations find on disk). It is stored as proposed and reaches no role until a person accepts it.",
    risky: false,
    parameters: Args({
      name: Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', description: 'lower-case words joined by -' }),
      description: Type.String({ minLength: 1, maxLength: 500, description: 'one line: when the skill helps' }),
      instructions: Type.String({ minLength: 1, maxLength: 30_000, description: 'the skill itself, in Markdown' }),
    }),
  },
  {
    name: 'propose_mcp_server',
    description: "Proposes an MCP server for the team. It is stored as proposed and reaches no role until a person accepts it (and gives it a secret, if it needs one).",
    risky: false,
    parameters: Args({
      name: Type.String({ minLength: 1, maxLength: 63, pattern: '^[a-z0-9][a-z0-9-]{0,62}$' }),
      url: Type.String({ minLength: 8, maxLength: 2000, pattern: '^[Hh][Tt][Tt][Pp][Ss]?://\\S+$', description: 'http(s) URL of the server, without credentials' }),
      destination: Type.String({ minLength: 1, maxLength: 128, description: "an existing egress destination that reaches the server" }),
      auth: Type.Union([Type.Literal('none'), Type.Literal('bearer'), Type.Literal('header')], { description: 'how the server wants its credential (a person supplies the secret)' }),
      header: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9][A-Za-z0-9-]*$', description: 'the header name, for auth `header`' })),
      roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 32 }), { maxItems: 32, uniqueItems: true, description: 'roles that should get it; empty or absent: every role' })),
      reason: Type.Optional(Type.String({ maxLength: 2000, description: 'why the team needs it (shown to the person)' })),
    }),
  },
  {
    name: 'ask_person',
    description: 'Asks the person a question and waits for the answer (the run becomes waiting). Only the lead role talks to the person; other roles ask the lead.',
    risky: false,
    parameters: Args({
      question: Type.String({ minLength: 1, maxLength: 4000 }),
      options: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 10, description: 'suggested answers' })),
    }),
  },
  {
    name: 'hand_off',
    description: "Hands the work to another role of the team (by default the next role of the pipeline) with a summary; this role's turn ends.",
    risky: false,
    parameters: Args({
      summary: Type.String({ minLength: 1, maxLength: 16000, description: 'what was done and what the next role should do' }),
      to_role: Type.Optional(Type.String({ minLength: 1, maxLength: 63 })),
      branch: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'the branch holding the work' })),
    }),
  },
  {
    name: 'finish',
    description: 'Ends the task: succeeded (naming the delivered branch or pull request) or failed (with the reason). Only the lead ends a run.',
    risky: false,
    parameters: Args({
      outcome: Type.Union([Type.Literal('succeeded'), Type.Literal('failed')]),
      summary: Type.String({ minLength: 1, maxLength: 16000 }),
      branch: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
      pull_request_url: Type.Optional(Type.String({ minLength: 1, maxLength: 2000 })),
    }),
  },
];

const byName = new Map(TOOL_CATALOG.map((t) => [t.name, t]));

/** The built-in tool of that name, or undefined. */
export function toolNamed(name: string): ToolDefinition | undefined {
  return byName.get(name);
}

/** The names among `names` that are not built-in tools. */
export function unknownTools(names: string[]): string[] {
  return names.filter((n) => !byName.has(n));
}

import type { ChatFormat } from './format.ts';

/**
 * The chat commands, the same on every chat surface: what a message addressed to the team's bot
 * (a mention, or the surface's slash command) asks for, and the words a message in a run's
 * thread can say. A message that starts with `/` is the chat server's own slash command, so a
 * thread's cancel is also `!cancel` or the bare word `cancel`.
 */

export type ChatCommand =
  | { kind: 'help' }
  | { kind: 'task'; text: string }
  | { kind: 'status' }
  | { kind: 'cancel'; run: string | null }
  | { kind: 'skills' }
  | { kind: 'skill'; decision: 'accept' | 'reject'; name: string }
  | { kind: 'mcp' }
  | { kind: 'unknown'; word: string };

export const COMMANDS: Array<{ usage: string; what: string }> = [
  { usage: 'help', what: 'this list' },
  { usage: '<what to do>', what: 'a task for the team homed in (or linked to) this room; its run gets a thread here' },
  { usage: 'task <what to do>', what: 'the same, said explicitly' },
  { usage: 'status', what: "the team's open runs and what each is doing" },
  { usage: 'cancel <run id>', what: 'cancel a run (in its thread: `cancel` or `!cancel`)' },
  { usage: 'skills', what: "the team's skills, proposed ones first" },
  { usage: 'skills accept <name>', what: 'make a proposed skill curated: the team uses it' },
  { usage: 'skills reject <name>', what: 'drop a proposed skill' },
  { usage: 'mcp', what: "the team's MCP servers, proposed ones first" },
];

/** The command list in the surface's dialect, for help and for an unknown command; `how` says how a command is given on this surface (`@crewhouse` or `/crewhouse`). */
export function commandList(how: string, f: ChatFormat): string {
  return [
    `Crewhouse commands (say them as ${f.code(`${how} <command>`)}):`,
    ...COMMANDS.map((c) => `- ${f.code(`${how} ${c.usage}`)}: ${c.what}`),
    `In a run's thread: a reply answers its question, any other message is a follow-up, and ${f.code('cancel')} (or ${f.code('!cancel')}) cancels it.`,
  ].join('\n');
}

const WORDS = new Set(['help', 'task', 'status', 'cancel', 'skills', 'skill', 'mcp']);

/**
 * What an addressed message (the mention removed) or a slash command's text asks for. A known
 * first word is that command; `!word` of an unknown word, or one unknown word alone, is an
 * unknown command (answered with the list); anything else is a task.
 */
export function parseCommand(text: string): ChatCommand {
  const trimmed = text.trim();
  const bang = trimmed.startsWith('!');
  const words = (bang ? trimmed.slice(1) : trimmed).split(/\s+/).filter(Boolean);
  const first = (words[0] ?? '').toLowerCase();
  if (first === '' || first === 'help') return { kind: 'help' };
  if (!WORDS.has(first)) {
    if (bang || (words.length === 1 && !/[.?!]$/.test(first) && first.length <= 20)) return { kind: 'unknown', word: first.slice(0, 40) };
    return { kind: 'task', text: trimmed };
  }
  const rest = words.slice(1);
  switch (first) {
    case 'task': {
      const body = trimmed.replace(/^!?task\s*/i, '');
      return body ? { kind: 'task', text: body } : { kind: 'help' };
    }
    case 'status':
      return { kind: 'status' };
    case 'cancel':
      return { kind: 'cancel', run: rest[0] ?? null };
    case 'skills':
    case 'skill': {
      const verb = (rest[0] ?? '').toLowerCase();
      if ((verb === 'accept' || verb === 'reject') && rest[1]) return { kind: 'skill', decision: verb, name: rest[1] };
      if (verb === '' || verb === 'list') return { kind: 'skills' };
      return { kind: 'unknown', word: `skills ${verb}`.slice(0, 40) };
    }
    default:
      return { kind: 'mcp' };
  }
}

/** Whether a message in a run's thread is its cancel word (`cancel`, `!cancel`, `/cancel` where the server passes it on). */
export function isThreadCancel(text: string): boolean {
  return /^[!/]?cancel[.!]?$/i.test(text.trim());
}

import type { Kysely, Transaction } from 'kysely';
import type { Actor } from './audit/audit.ts';
import type { Database } from './db/schema.ts';

/** The chat surfaces a team can live in or link to, each with its adapter. */
export type ChatSurface = 'chat_a' | 'chat_b';

/** The kinds of names one module's resources give another's (an agent names destinations, a template agents...). */
export type RefKind = 'agent' | 'destination' | 'environment' | 'skill' | 'mcp_server' | 'secret' | 'tool' | 'model' | 'template';

/** The query runner a hook asks on; undefined is the answering module's own database. Inside a transaction it must be the transaction (the embedded database has one connection). */
export type RefQuery = Kysely<Database> | Transaction<Database> | undefined;

/** One use of a checkpoint: a module that names checkpoints answers `checkpointUses` with these. */
export interface CheckpointUse {
  checkpoint_id: string;
  kind: string;
  name: string;
}

/** Whether the code-host app is installed where a repository is, and why not when it is not. */
export type Coverage = { covered: true } | { covered: false; reason: string };

/** What is locked and looked up as the owner of another module's rows (documents, team MCP servers). */
export type OwnerKind = 'agent' | 'team';

/**
 * A run started, was reopened by a follow-up (`resumed`), began waiting for a person, or ended
 * (`seq`: the run's post that says so, the follow-up for `resumed`; unique per change).
 */
export interface RunChange {
  run_id: string;
  team: string;
  event: 'started' | 'resumed' | 'waiting' | 'finished';
  state: 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';
  seq: number;
}

type Reaction<T> = (trx: Transaction<Database>, actor: Actor, subject: T) => Promise<unknown>;

/**
 * Every way one module asks about or reacts to another, by name and signature. Modules call
 * them (`ask`, `react`); only the composition root (src/services.ts) says who answers (`on`),
 * so no module knows which others listen. Two kinds:
 *
 * - questions, whose answers are gathered: `unknown:<kind>` (the owner of a kind says which
 *   names do not exist), `uses:<kind>` (each module naming things of a kind counts its uses of
 *   each of some names, in one query whatever their number, so a page costs the same as one), `lock:<owner>` (the owner module locks the owner's row FOR SHARE for the rest of the
 *   transaction and says whether it exists), `checkpointUses`, `codeHost:covers`, `codeHost:coversUrl`, `chat:room`, `tracker:link`;
 * - reactions, run one after the other inside the caller's transaction, so what they remove
 *   (or queue) goes or stays with the change: `teamArchived`, `secretRemoved`, `runChanged`, `runPosted`.
 */
export type HookSignatures = {
  [K in RefKind as `unknown:${K}`]: (names: string[], q: RefQuery) => Promise<string[]>;
} & {
  [K in RefKind as `uses:${K}`]: (names: string[], q: RefQuery) => Promise<Map<string, number>>;
} & {
  [K in OwnerKind as `lock:${K}`]: (q: Kysely<Database> | Transaction<Database>, name: string) => Promise<boolean>;
} & {
  checkpointUses: () => Promise<CheckpointUse[]>;
  /**
   * Whether the code-host app is installed on `<owner>/<repo>` (the code_host integration
   * answers; no answer: it is not set up); it throws 502 when the code host cannot be asked now.
   */
  'codeHost:covers': (repo: string) => Promise<Coverage>;
  /** Whether the code-host app covers the repository of a URL; null when the URL is not on the (enabled) code host. 502 as `codeHost:covers`. */
  'codeHost:coversUrl': (url: string) => Promise<(Coverage & { repository: string }) | null>;
  /**
   * The display name of a room of a chat surface (chat_a, chat_b) that the surface's bot can read
   * and post in: that surface's adapter answers, the others answer null; it throws 422 naming why
   * the bot cannot, 502/503 when the chat server fails or the surface is not set up. `field` names
   * the input the problem is about. No answer: no adapter for the surface here.
   */
  'chat:room': (surface: ChatSurface, field: string, roomId: string) => Promise<{ label: string } | null>;
  /**
   * Whether an issue tracker shows its agent a team or project (the tracker's adapter answers):
   * `verified` with its label, `refused` with the reason, `unverified` while the tracker is not
   * configured; it throws 502 when the tracker cannot be asked now (unreachable, rate-limiting or
   * failing). No answer: no adapter here (the link stays unverified).
   */
  'tracker:link': (surface: 'tracker_a' | 'tracker_b', externalId: string) => Promise<{ verification: 'verified'; label: string } | { verification: 'unverified' } | { refused: string }>;
  /** A team was archived: its rows in other modules go or end with it (the name is free for a new team). */
  teamArchived: Reaction<{ id: number; name: string }>;
  /** A secret's reference was removed: nothing may go on injecting it. */
  secretRemoved: Reaction<string>;
  /** A run started, was reopened, waits for a person, or ended: integrations queue what they tell the run's origin. */
  runChanged: Reaction<RunChange>;
  /** A run's agents added posts (steps, hand-offs), up to `seq`: a surface that mirrors every post (a chat thread) queues its catching up. */
  runPosted: Reaction<{ run_id: string; seq: number }>;
};

export type HookName = keyof HookSignatures;
type Args<N extends HookName> = Parameters<HookSignatures[N]>;
type Answer<N extends HookName> = Awaited<ReturnType<HookSignatures[N]>>;

export function createHooks() {
  const table = new Map<HookName, Array<(...args: unknown[]) => Promise<unknown>>>();
  const handlers = <N extends HookName>(name: N) => (table.get(name) ?? []) as unknown as Array<(...args: Args<N>) => Promise<Answer<N>>>;
  return {
    /** Who answers or reacts: called in the composition root only. */
    on<N extends HookName>(name: N, fn: HookSignatures[N]): void {
      const list = table.get(name) ?? [];
      list.push(fn as (...args: unknown[]) => Promise<unknown>);
      table.set(name, list);
    },
    /** Every answer to a question, in the order they were registered; one at a time (a transaction has one connection). */
    async ask<N extends HookName>(name: N, ...args: Args<N>): Promise<Array<Answer<N>>> {
      const answers: Array<Answer<N>> = [];
      for (const fn of handlers(name)) answers.push(await fn(...args));
      return answers;
    },
    /** Runs every reaction, in order; the first failure fails the caller (and so its transaction). */
    async react<N extends 'teamArchived' | 'secretRemoved' | 'runChanged' | 'runPosted'>(name: N, ...args: Args<N>): Promise<void> {
      for (const fn of handlers(name)) await fn(...args);
    },
  };
}

export type Hooks = ReturnType<typeof createHooks>;
/** What a module gets: it may ask and react, never register. */
export type HookCaller = Pick<Hooks, 'ask' | 'react'>;

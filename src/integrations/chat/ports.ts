import type { Transaction } from 'kysely';
import type { Database } from '../../db/schema.ts';
import type { ChatDialect } from './format.ts';

/**
 * What the chat core needs from the rest of the service and from a chat surface's adapter: the
 * core (core.ts) is the same for every chat surface (chat_a, chat_b); an adapter gives it work
 * items (`ChatMessageIn`) and posts for it (`ChatSurface`); the composition root connects
 * `ChatRuns` and `ChatTeams` to the runs and teams modules.
 */

export type ChatSurfaceKind = 'chat_a' | 'chat_b';
type Trx = Transaction<Database>;

/** One message seen on a surface (an event, a catch-up, a slash command), already known to be a person's. */
export interface ChatMessageIn {
  surface: ChatSurfaceKind;
  /** The surface's own id of the message (a slash command: a hash of its trigger), recorded so one message is one effect. */
  message_id: string;
  room_id: string;
  /** The thread the message is in (its root's id), null for a message in the room itself. */
  thread_id: string | null;
  user_id: string;
  user_name: string;
  /** The text, the bot's mention removed. */
  text: string;
  /** Addressed to the team's bot: a mention, or the slash command. */
  addressed: boolean;
  /** A slash command: answers go to the person alone (ephemeral). */
  command: boolean;
  via: 'event' | 'catch_up' | 'command';
}

/** Buttons of a confirmation: `token` is unguessable and names the confirmation (surfaces do not sign button clicks). */
export interface ChatButtons {
  token: string;
}

/** Long output attached to a post as a file (a diff, a log): the post's text is then a short summary. */
export interface ChatFile {
  /** The file's name, unique per run post (`run_x-12.diff`): a retried post finds it by name. */
  name: string;
  content: string;
  /** Its media type (`text/x-diff`, `text/plain`). */
  type: string;
}

export interface ChatOutbound {
  room_id: string;
  /** The thread to post in, null for a root post in the room. */
  thread_id: string | null;
  /** In the surface's dialect, others' words already made safe (format.ts). */
  text: string;
  /** The role whose words these are: posted as the role's own bot when it has one, else by the surface bot naming the role. */
  as: { team: string; role: string } | null;
  /** Stable per run post: the same key is never posted twice (a retry finds the earlier post). */
  key: string;
  buttons?: ChatButtons;
  /** Long output, posted as a file with the post (chat_a: a file attached to it; chat_b: a file shared in the thread after it). */
  file?: ChatFile;
}

/** A call to the chat server that failed: `transient` ones are worth a retry, after `retryAfterSeconds` when the server said. */
export interface ChatCallError extends Error {
  readonly transient: boolean;
  readonly retryAfterSeconds: number | null;
}

export const isChatCallError = (err: unknown): err is ChatCallError => err instanceof Error && typeof (err as Partial<ChatCallError>).transient === 'boolean';

/** What a chat surface's adapter does for the core. Each call throws a `ChatCallError` when the server fails. */
export interface ChatSurface {
  readonly surface: ChatSurfaceKind;
  /** How the surface formats text (format.ts): the core writes every post and answer in it. */
  readonly dialect: ChatDialect;
  /** How people address the bot here, for the command list (`@crewhouse`, `/crewhouse`). */
  how(): Promise<string>;
  /** A mention of a person that notifies them, in the surface's dialect. */
  mention(userId: string, userName: string): string;
  /** Posts and answers the post's id; the post carries its key. */
  post(out: ChatOutbound): Promise<{ id: string }>;
  /** The post of `out.key` made before (the worker may have died after posting), or null. */
  find(out: ChatOutbound): Promise<{ id: string } | null>;
  /** Shows a message to one person only (a slash command's answer). */
  ephemeral(roomId: string, userId: string, text: string, threadId: string | null): Promise<void>;
  /** The link people open for a post (a run's thread). */
  permalink(roomId: string, postId: string): Promise<string>;
}

export interface ChatRunView {
  id: string;
  team: string;
  /** Where the work came from: the thread's own surface, or elsewhere (a tracker, the code host) for a team homed in a chat room. */
  surface: string;
  /** Who asked, as the run shows it (`tracker_a:Alice` for work from elsewhere). */
  created_by: string;
  state: 'running' | 'waiting' | 'succeeded' | 'failed' | 'cancelled';
  text: string;
  cost_usd: number;
  waiting_for: { role: string; kind: 'question' | 'confirmation' } | null;
  open_question: { seq: number; role: string; text: string } | null;
  delivery: { branch: string | null; pull_request: { url: string } | null } | null;
  created_at: string;
}

export interface ChatRunPost {
  seq: number;
  kind: string;
  role: string | null;
  text: string;
  data: Record<string, unknown>;
}

/** Who acts, as the runs and audit see them: the person on the surface. */
export interface ChatPerson {
  surface: ChatSurfaceKind;
  user_id: string;
  user_name: string;
}

/** What the chat core asks of the runs module. Refusals are `Problem`s (their detail is said in the chat). */
export interface ChatRuns {
  /** The longest task and reply text the runs module takes (characters). */
  readonly maxTaskChars: number;
  readonly maxReplyChars: number;
  /** A run of `team` from a chat message; `within` runs in its creating transaction. */
  start(input: { team: string; text: string; by: ChatPerson; thread: { room_id: string; message_id: string } }, within: (trx: Trx, runId: string) => Promise<void>): Promise<{ run_id: string }>;
  /** An answer (`in_reply_to` the open question) or a follow-up (without), from the run's thread. */
  reply(runId: string, by: ChatPerson, input: { text: string; in_reply_to?: number; approve?: boolean }, within: (trx: Trx) => Promise<void>): Promise<void>;
  cancel(runId: string, by: ChatPerson): Promise<void>;
  get(runId: string): Promise<ChatRunView | null>;
  /** The run's posts after `after`, oldest first. */
  posts(runId: string, after: number, limit: number): Promise<ChatRunPost[]>;
  /** The team's runs, newest first. */
  recent(team: string, limit: number): Promise<ChatRunView[]>;
  /** Where a run from elsewhere came from (a tracker's issue, the code host's), with its link, or null. */
  originOf(runId: string): Promise<{ surface: string; place: string; url: string | null } | null>;
  /** The ids of the runs with a thread on a surface (its own, and those from elsewhere of teams homed there) open (running, waiting) or ended within `endedWithinSeconds`, most recently changed first, at most `limit`. */
  live(surface: ChatSurfaceKind, endedWithinSeconds: number, limit: number): Promise<string[]>;
  /** Something the run's people should know that the chat could not say (a post never delivered); once per `key`. */
  notice(runId: string, text: string, key: string): Promise<void>;
}

/** What the chat core asks of the teams module. */
export interface ChatTeams {
  /** The live team homed in or linked to a room, or null. */
  teamOfRoom(surface: ChatSurfaceKind, roomId: string): Promise<string | null>;
  /** The chat room a live team is homed in, read in the caller's transaction `trx`; null when its home is not a chat room. */
  homeRoomOf(team: string, trx: Trx): Promise<{ surface: ChatSurfaceKind; room_id: string } | null>;
  /** Every room a live team lives in or is linked to (the listener's catch-up). */
  rooms(surface: ChatSurfaceKind): Promise<string[]>;
  skills(team: string): Promise<Array<{ name: string; status: string; version: number }>>;
  /** Accepts (curated) or rejects (removes) a proposed skill; a Problem when there is none of the name. */
  decideSkill(team: string, name: string, decision: 'accept' | 'reject', by: ChatPerson): Promise<void>;
  mcpServers(team: string): Promise<Array<{ name: string; status: string }>>;
}

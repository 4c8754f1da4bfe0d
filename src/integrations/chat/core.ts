import crypto from 'node:crypto';
import type { Kysely, Transaction } from 'kysely';
import type { Logger } from 'pino';
import type { Database } from '../../db/schema.ts';
import { Problem, problems, type SaidForPeople } from '../../errors/problems.ts';
import { handleMessageJob } from './handle-message.job.ts';
import { mirrorThreadJob } from './mirror-thread.job.ts';
import * as store from './chat.store.ts';
import { commandList, isThreadCancel, parseCommand, type ChatCommand } from './commands.ts';
import { formatOf, type ChatFormat } from './format.ts';
import { isChatCallError, type ChatMessageIn, type ChatOutbound, type ChatPerson, type ChatRuns, type ChatSurface, type ChatSurfaceKind, type ChatTeams } from './ports.ts';
import { serviceName } from '../surface.ts';
import { longOutput, personNamed, renderPost, renderStart, renderStartFrom, statusLine } from './render.ts';

type Db = Kysely<Database>;
type Trx = Transaction<Database>;

/**
 * The chat core, the same for every chat surface (docs/integrations-chat.md):
 *
 * - `receive` records a message by its id (one message is one effect, however often the
 *   WebSocket, a catch-up, a replayed slash command or a second process sees it) and queues its
 *   work (`chat.message`); `handle` does it: a task starts a run with a thread, a message in a
 *   run's thread answers its question, follows up or cancels it, a command is answered.
 * - A run's thread follows its posts (`chat.mirror-thread`, queued in the transaction of each change of
 *   the run): each post is made once by its stable key (`<surface>:run:<id>:<seq>`), retried
 *   with backoff and as slowly as the server asks; one that can never be made is a notice on the run.
 *   Work that came from elsewhere (a tracker, the code host) to a team homed in a chat room gets
 *   a thread in the home room too, opened when its run starts (`runChanged`); it is answered,
 *   followed up and cancelled there as a chat run's thread is.
 * - A confirmation's buttons carry an unguessable token (its hash stored): `decide` approves or
 *   refuses the confirmation it names.
 */
export interface ChatCoreDeps {
  db: Db;
  logger: Logger;
  runs: ChatRuns;
  teams: ChatTeams;
  /** The adapter of a surface, or why it cannot post now (not enabled, not configured). */
  surface(kind: ChatSurfaceKind): Promise<ChatSurface | { missing: string }>;
}

/** A claim on a post older than this is taken over (its job died and was not retried). */
const CLAIM_STALE_SECONDS = 300;
/**
 * The threads a listener catches up on after a reconnection: those of runs still open, and of
 * runs ended within a day (a follow-up in the thread reopens one), at most this many.
 */
const CATCH_UP_ENDED_SECONDS = 24 * 3600;
const CATCH_UP_THREADS = 200;

/** Another job is making this post now: this one tries again later. */
export class PostBusy extends Error {
  override name = 'PostBusy';
  constructor(key: string) {
    super(`post ${key} is being made by another job; tried again later`);
  }
}

/** What a person is told when they address a room no team lives in. */
export const NO_TEAM = 'No Crewhouse team lives in this room: an admin creates a team with this room as its home (or links the room to a team) in the Crewhouse console.';

/** A surface that cannot post now (not enabled, not configured): said as it is where people read it (a delivery's detail). */
class SurfaceMissing extends Error implements SaidForPeople {
  override name = 'SurfaceMissing';
  readonly forPeople = true;
}

const sha256 = (s: string) => crypto.createHash('sha256').update(s).digest('hex');
const personOf = (m: ChatMessageIn): ChatPerson => ({ surface: m.surface, user_id: m.user_id, user_name: m.user_name });
const detailOf = (err: unknown) => (err instanceof Problem ? err.detail : null);

export function createChatCore(deps: ChatCoreDeps) {
  const { db } = deps;
  const log = deps.logger.child({ component: 'chat' });
  /** Runs seen without a thread after they started (see runChanged); started again empty past 10,000, as it only saves reads. */
  const threadless = new Set<string>();

  async function surfaceOf(kind: ChatSurfaceKind): Promise<ChatSurface> {
    const s = await deps.surface(kind);
    // Not enabled or not configured: the queue tries again (an admin may mend it); the job's error says why.
    if ('missing' in s) throw new SurfaceMissing(`${kind} cannot post: ${s.missing}`);
    return s;
  }

  /**
   * Makes a post once per key, for `owner` (the job making it): a key already made answers its
   * post; a key this owner tried before (the worker died after posting, maybe) lets the adapter
   * look for it first; a key another job is making now is `PostBusy` (this job tries again
   * later, by when it is made). A rate limit is waited out as the server asks, a few times,
   * before the job's own backoff takes over.
   */
  async function deliver(s: ChatSurface, out: ChatOutbound, owner: string, prepare?: () => Promise<Partial<ChatOutbound>>): Promise<string> {
    const claim = await store.claimPost(db, out.key, owner, CLAIM_STALE_SECONDS);
    if ('made' in claim) return claim.made;
    if ('busy' in claim) throw new PostBusy(out.key);
    if (claim.triedBefore) {
      const earlier = await s.find(out);
      if (earlier) {
        await store.postMade(db, out.key, earlier.id);
        return earlier.id;
      }
    }
    // What only this post's maker may set up (a confirmation's token), once it is sure to post.
    const full = { ...out, ...(prepare ? await prepare() : {}) };
    for (let attempt = 1; ; attempt++) {
      try {
        const { id } = await s.post(full);
        await store.postMade(db, out.key, id);
        return id;
      } catch (err) {
        if (attempt < 4 && isChatCallError(err) && err.retryAfterSeconds !== null && err.retryAfterSeconds <= 10) continue;
        throw err;
      }
    }
  }

  /** Says something to the person who sent a message: to them alone for a slash command, else in a thread under their message. `say` is in the surface's dialect, or writes it. */
  async function answer(m: ChatMessageIn, say: string | ((f: ChatFormat) => string)): Promise<void> {
    const s = await surfaceOf(m.surface);
    const text = typeof say === 'string' ? say : say(formatOf(s.dialect));
    if (m.command) return s.ephemeral(m.room_id, m.user_id, text, m.thread_id);
    // One job per message: its own key is its owner.
    await deliver(s, { room_id: m.room_id, thread_id: m.thread_id ?? m.message_id, text, as: null, key: `${m.surface}:answer:${m.message_id}` }, `message:${m.surface}:${m.message_id}`);
  }

  /** A command's answer, in the surface's dialect. */
  async function runCommand(m: ChatMessageIn, team: string, cmd: ChatCommand, s: ChatSurface): Promise<string> {
    const f = formatOf(s.dialect);
    const theTeam = `team ${f.bold(team)}`;
    switch (cmd.kind) {
      case 'help':
        return commandList(await s.how(), f);
      case 'unknown':
        return `${f.code(cmd.word)} is not a Crewhouse command.\n${commandList(await s.how(), f)}`;
      case 'status': {
        const runs = await deps.runs.recent(team, 10);
        const open = runs.filter((r) => r.state === 'running' || r.state === 'waiting');
        if (!runs.length) return `Team ${f.bold(team)} has no runs yet: mention the bot with a task to start one.`;
        return [`Team ${f.bold(team)}: ${open.length} open run${open.length === 1 ? '' : 's'}. The latest:`, ...runs.map((r) => statusLine(r, f))].join('\n');
      }
      case 'cancel': {
        if (!cmd.run) return `Say which run to cancel: ${f.code('cancel <run id>')} (${f.code('status')} lists them), or ${f.code('cancel')} in the run's thread.`;
        const run = await deps.runs.get(cmd.run);
        if (!run || run.team !== team) return `Team ${f.bold(team)} has no run ${f.code(cmd.run.slice(0, 40))}: ${f.code('status')} lists its runs.`;
        await deps.runs.cancel(run.id, personOf(m));
        return `Run ${f.code(run.id)} is cancelled.`;
      }
      case 'skills': {
        const skills = await deps.teams.skills(team);
        if (!skills.length) return `Team ${f.bold(team)} has no skills of its own yet; its agents may propose some.`;
        const sorted = [...skills].sort((a, b) => (a.status === b.status ? a.name.localeCompare(b.name) : a.status === 'proposed' ? -1 : 1));
        return [`Skills of ${theTeam}:`, ...sorted.map((k) => `- ${f.code(k.name)} (${k.status}, version ${k.version})`), `Accept or reject a proposed one with ${f.code('skills accept <name>')} or ${f.code('skills reject <name>')}.`].join('\n');
      }
      case 'skill':
        await deps.teams.decideSkill(team, cmd.name, cmd.decision, personOf(m));
        return cmd.decision === 'accept' ? `Skill ${f.code(cmd.name)} is curated: ${theTeam} uses it from its next task.` : `Skill ${f.code(cmd.name)} was rejected and removed.`;
      case 'mcp': {
        const servers = await deps.teams.mcpServers(team);
        if (!servers.length) return `Team ${f.bold(team)} has no MCP servers of its own.`;
        return [`MCP servers of ${theTeam}:`, ...servers.map((x) => `- ${f.code(x.name)} (${x.status})`), 'A person accepts a proposed server in the Crewhouse console.'].join('\n');
      }
      case 'task':
        throw new Error('a task is not a command');
    }
  }

  /** A message in a run's thread: the cancel word, a command, an answer to the open question, or a follow-up. */
  async function inThread(m: ChatMessageIn, thread: NonNullable<Awaited<ReturnType<typeof store.threadByRoot>>>): Promise<void> {
    const by = personOf(m);
    if (isThreadCancel(m.text)) {
      const run = await deps.runs.get(thread.run_id);
      if (run && run.state !== 'cancelled') await deps.runs.cancel(thread.run_id, by);
      await store.setEffect(db, m.surface, m.message_id, 'cancel', thread.run_id);
      return;
    }
    if (m.addressed) {
      const cmd = parseCommand(m.text);
      if (cmd.kind !== 'task' && cmd.kind !== 'unknown') {
        const s = await surfaceOf(m.surface);
        await answer(m, await runCommand(m, thread.team, cmd, s));
        await store.setEffect(db, m.surface, m.message_id, `command:${cmd.kind}`);
        return;
      }
    }
    if (m.text.length > deps.runs.maxReplyChars) throw problems.validation([{ field: 'text', message: 'too long' }], `the message is ${m.text.length} characters; a reply is at most ${deps.runs.maxReplyChars}`);
    const run = await deps.runs.get(thread.run_id);
    const question = run?.state === 'waiting' ? run.open_question : null;
    await deps.runs.reply(thread.run_id, by, { text: m.text, ...(question ? { in_reply_to: question.seq } : {}) }, (trx) => store.setEffect(trx, m.surface, m.message_id, question ? 'answer' : 'follow_up', thread.run_id));
  }

  /** Queues the thread's catching up with its run, once per change; nothing for a run without a thread. */
  /** `known`: the run is already known to have a thread (read in the same transaction). */
  async function queueMirror(q: Db | Trx, runId: string, event: string, seq: number, known = false): Promise<void> {
    if (!known && !(await store.threadOfRun(q, runId))) return;
    // One job per change (a run that waits at seq N and is cancelled with no post between has two changes at N).
    await mirrorThreadJob.enqueue(q, { run_id: runId }, { key: `chat.mirror-thread:${runId}:${event}:${seq}` });
  }

  return {
    /**
     * Takes a message in, once: records its id and queues its work in one transaction (`q`, or
     * its own). False when the message was seen before (nothing is queued again).
     */
    async receive(m: ChatMessageIn, q?: Trx): Promise<boolean> {
      const go = async (trx: Trx) => {
        if (!(await store.recordMessage(trx, m.surface, m.message_id))) return false;
        await handleMessageJob.enqueue(trx, { message: m }, { key: `chat.handle-message:${m.surface}:${sha256(m.message_id)}` });
        return true;
      };
      return q ? go(q) : db.transaction().execute(go);
    },

    /**
     * Records a message as seen without queueing its work: a delivery (chat_a's slash command)
     * whose work is the delivery's own job, which calls `handle` and reads `effectOf`. Idempotent.
     */
    record: (m: ChatMessageIn) => store.recordMessage(db, m.surface, m.message_id),

    /**
     * What a handled message did: `run`, `answer`, `follow_up`, `cancel`, `command:<kind>`,
     * `ignored`, `no_team` or `refused: <what the person was told>`, with the run it acted on.
     */
    async effectOf(m: Pick<ChatMessageIn, 'surface' | 'message_id'>): Promise<{ effect: string | null; run_id: string | null }> {
      const row = await store.messageEffect(db, m.surface, m.message_id);
      return { effect: row?.effect ?? null, run_id: row?.run_id ?? null };
    },

    /** The job `chat.message`: the one effect of a message. */
    async handle(m: ChatMessageIn): Promise<void> {
      const done = await store.messageEffect(db, m.surface, m.message_id);
      if (done?.effect) return;
      try {
        const thread = m.thread_id ? await store.threadByRoot(db, m.surface, m.thread_id) : undefined;
        if (thread) return await inThread(m, thread);
        if (!m.addressed) return await store.setEffect(db, m.surface, m.message_id, 'ignored');
        const cmd = parseCommand(m.text);
        const team = cmd.kind === 'help' || cmd.kind === 'unknown' ? '' : await deps.teams.teamOfRoom(m.surface, m.room_id);
        if (team === null) {
          await answer(m, NO_TEAM);
          return await store.setEffect(db, m.surface, m.message_id, 'no_team');
        }
        if (cmd.kind === 'task') {
          if (cmd.text.length > deps.runs.maxTaskChars) throw problems.validation([{ field: 'text', message: 'too long' }], `the task is ${cmd.text.length} characters; a task is at most ${deps.runs.maxTaskChars}`);
          await deps.runs.start({ team, text: cmd.text, by: personOf(m), thread: { room_id: m.room_id, message_id: m.message_id } }, async (trx, runId) => {
            // Asked inside a conversation's thread (not a run's): the run lives in that thread, its root known at once, so
            // replies there continue it from the start (and a second mention there at the same time is not a second run).
            await store.insertThread(trx, { run_id: runId, surface: m.surface, room_id: m.room_id, team, requested_by: m.user_id, requested_by_name: m.user_name, root_id: m.thread_id });
            await store.setEffect(trx, m.surface, m.message_id, 'run', runId);
          });
          return;
        }
        const s = await surfaceOf(m.surface);
        await answer(m, await runCommand(m, team, cmd, s));
        await store.setEffect(db, m.surface, m.message_id, `command:${cmd.kind}`);
      } catch (err) {
        const detail = detailOf(err);
        if (detail === null) throw err;
        // Refused (a 4xx of the runs or teams module): the person is told why, and that is the message's effect.
        await answer(m, (f) => `Crewhouse could not do that: ${f.text(detail)}`);
        await store.setEffect(db, m.surface, m.message_id, `refused: ${detail.slice(0, 200)}`);
      }
    },

    /** Queues the thread's catching up with its run (in the transaction of the run's change), opening the home-room thread of a run from elsewhere when it starts; nothing for a run without a thread. */
    async runChanged(trx: Trx, change: { run_id: string; seq: number; event?: string; team?: string }): Promise<void> {
      // A post (no event) comes after its run started, and a thread is only ever made with a
      // run's start (insertThread: in the start's transaction, or at its 'started' change): a
      // run seen once without a thread after it started never gets one, and its posts (most of
      // a run's changes) need no read to say so.
      if (change.event === undefined && threadless.has(change.run_id)) return;
      if (!(await store.threadOfRun(trx, change.run_id))) {
        if (change.event === undefined) {
          if (threadless.size >= 10_000) threadless.clear();
          threadless.add(change.run_id);
        }
        // A chat run's thread is recorded before its run starts: a run starting without one came from elsewhere, and its team's home room (if any) gets a thread.
        const home = change.event === 'started' && change.team ? await deps.teams.homeRoomOf(change.team, trx) : null;
        if (!home) return;
        await store.insertThread(trx, { run_id: change.run_id, surface: home.surface, room_id: home.room_id, team: change.team!, requested_by: '', requested_by_name: '' });
      }
      await queueMirror(trx, change.run_id, change.event ?? 'posted', change.seq, true);
    },

    /** The same, outside a run's change (the `Surface`'s `progress`): queued in a transaction of its own. */
    progress: (runId: string, event: string, seq: number) => queueMirror(db, runId, event, seq),

    /** Where a run's work came from in chat: its thread (`<room>/<root post>`) and the thread's permalink, or null for a run without one. */
    async originOf(runId: string): Promise<{ surface: ChatSurfaceKind; place: string; url: string | null } | null> {
      const thread = await store.threadOfRun(db, runId);
      if (!thread) return null;
      return { surface: thread.surface as ChatSurfaceKind, place: thread.root_id ? `${thread.room_id}/${thread.root_id}` : thread.room_id, url: thread.url };
    },

    /** The job `chat.mirror`: the thread's root (first) and each of the run's posts since it last caught up, in order. */
    async mirror(runId: string, owner: string): Promise<void> {
      let thread = await store.threadOfRun(db, runId);
      if (!thread) return;
      const s = await surfaceOf(thread.surface as ChatSurfaceKind);
      const run = await deps.runs.get(runId);
      if (!run) return;
      const fromElsewhere = run.surface !== thread.surface;
      const requester = fromElsewhere ? personNamed(run.created_by) : s.mention(thread.requested_by, thread.requested_by_name);
      const format = formatOf(s.dialect);
      // The run's first post is not made yet (its permalink, set with it, is unknown): a root post in the room, or,
      // for a run asked for inside a conversation's thread (its root known from the start), the first post in that thread.
      if (!thread.url) {
        const text = fromElsewhere ? renderStartFrom({ team: thread.team, runId, text: run.text, by: requester, origin: await deps.runs.originOf(runId), format }) : renderStart({ requester, team: thread.team, runId, text: run.text, format });
        const first = await deliver(s, { room_id: thread.room_id, thread_id: thread.root_id, text, as: null, key: `${thread.surface}:run:${runId}:root` }, owner);
        await store.setRoot(db, runId, thread.root_id ?? first, await s.permalink(thread.room_id, first));
        thread = (await store.threadOfRun(db, runId))!;
      }
      let after = thread.mirrored_seq;
      let lastRole = thread.last_role;
      for (;;) {
        const posts = await deps.runs.posts(runId, after, 50);
        if (!posts.length) return;
        for (const p of posts) {
          // Long output (a diff, a log) goes as a short summary and the whole, as it was written, as a file named for this post (so a retry finds it).
          const long = longOutput(p.text, `${runId}-${p.seq}`);
          const shown = renderPost(long ? { ...p, text: long.text } : p, { requester, lastRole, run, format });
          if (shown) {
            // A confirmation's token is made by the one job about to post it (a new token replaces one never posted).
            const buttons = shown.confirmation
              ? async () => {
                  const token = crypto.randomBytes(24).toString('base64url');
                  await store.putConfirmation(db, { token_hash: sha256(token), run_id: runId, seq: p.seq, room_id: thread.room_id });
                  return { buttons: { token } };
                }
              : undefined;
            const out: ChatOutbound = { room_id: thread.room_id, thread_id: thread.root_id, text: shown.text, as: shown.role ? { team: thread.team, role: shown.role } : null, key: `${thread.surface}:run:${runId}:${p.seq}`, ...(long ? { file: long.file } : {}) };
            try {
              await deliver(s, out, owner, buttons);
            } catch (err) {
              if (err instanceof PostBusy || !isChatCallError(err) || err.transient) throw err;
              // Never deliverable as it is (refused by the server): the run says so, and the thread goes on.
              log.warn({ run: runId, seq: p.seq, reason: err.message }, 'a run post could not be posted in its chat thread');
              await deps.runs.notice(runId, `post ${p.seq} could not be posted in the ${serviceName(thread.surface)} thread: ${err.message}`, `${thread.surface}:undelivered:${p.seq}`);
            }
            if (shown.working) lastRole = shown.working;
          }
          after = p.seq;
          await store.advanceThread(db, runId, p.seq, lastRole);
        }
      }
    },

    /**
     * A confirmation's button, clicked by `by`: approves or refuses the confirmation its token
     * names, once. Answers what the post should now say (the buttons gone), or why nothing was done.
     */
    async decide(token: string, approve: boolean, by: ChatPerson, roomId: string): Promise<{ decided: boolean; text: string }> {
      const hash = sha256(token);
      const c = await store.confirmationOf(db, hash);
      if (!c || c.room_id !== roomId) return { decided: false, text: 'This confirmation is unknown to Crewhouse: answer the newest one in the run\'s thread.' };
      if (c.decided_by) return { decided: false, text: `This confirmation was already answered by ${c.decided_by}.` };
      try {
        await deps.runs.reply(c.run_id, by, { text: approve ? 'approve' : 'refuse', in_reply_to: c.seq, approve }, async (trx) => {
          if (!(await store.confirmationDecided(trx, hash, `@${by.user_name}`))) throw problems.conflict('this confirmation was already answered');
        });
      } catch (err) {
        const detail = detailOf(err);
        if (detail === null) throw err;
        return { decided: false, text: `Nothing was done: ${detail}` };
      }
      return { decided: true, text: `${approve ? 'Approved' : 'Refused'} by @${by.user_name}.` };
    },

    /** The rooms a surface's listener follows: every live team's home or linked room there. */
    rooms: (surface: ChatSurfaceKind) => deps.teams.rooms(surface),

    /**
     * The threads (room, root post) a surface's listener catches up on after a reconnection, where
     * reading a room does not show replies (Slack's history has top-level messages only): those of
     * the surface's open runs and of runs ended within a day, the most recently changed first, bounded.
     */
    async openThreads(surface: ChatSurfaceKind): Promise<Array<{ room_id: string; root_id: string }>> {
      const ids = await deps.runs.live(surface, CATCH_UP_ENDED_SECONDS, CATCH_UP_THREADS);
      const order = new Map(ids.map((id, i) => [id, i]));
      return (await store.threadRoots(db, surface, ids)).sort((a, b) => order.get(a.run_id)! - order.get(b.run_id)!).map(({ room_id, root_id }) => ({ room_id, root_id }));
    },

  };
}

export type ChatCore = ReturnType<typeof createChatCore>;

import crypto from 'node:crypto';
import { safeEqual } from '../../auth/credentials.ts';
import type { Db } from '../../db/database.ts';
import { Problem, problems } from '../../errors/problems.ts';
import { processDeliveryJob } from '../webhooks/process-delivery.job.ts';
import * as store from '../webhooks/webhooks.store.ts';
import { ChatAError, type ChatAClient } from './client.ts';

export const COMMAND_TOKEN = 'integrations/chat_a/command_token';

/**
 * The slash command (`/crewhouse ...` as configured on the chat server), POSTed to
 * `/webhooks/chat_a` as a form with the command token in the `token` field and in
 * `Authorization: Token <token>`. The route verifies the token in constant time, records the
 * request as a delivery (its id is the request's `trigger_id`, so a replayed request is one
 * delivery with one effect), and answers at once with Mattermost's response body; what takes a
 * call to the server is a job.
 *
 * Until runs can start from chat, the work commands are refused with an ephemeral answer
 * saying so; `help` and an unknown command get the command list (posted by the job).
 */

export const COMMAND_LIST = [
  'Crewhouse commands (type them after the slash command, e.g. `/crewhouse help`):',
  '- `help`: this list',
  '- `task <what to do>`: give the team homed in this channel a task',
  '- `status`: the team\'s runs and what each is doing',
  '- `cancel <run id>`: cancel a run',
  '- `skills`: the team\'s skills; `skills accept <name>` or `skills reject <name>` for a proposed one',
  '- `mcp`: the team\'s MCP servers',
].join('\n');

const WORK = new Set(['task', 'status', 'cancel', 'skills', 'mcp']);

export const NOT_ENABLED_YET =
  'Chat-started runs are not enabled on this deployment yet: the team cannot take work, report status or cancel from chat. Give the team its work from the Crewhouse console for now (`/crewhouse help` lists the commands).';

/** What a command's text asks for: the first word is the command. */
export function commandOf(text: string): { kind: 'help' } | { kind: 'work'; verb: string } | { kind: 'unknown'; word: string } {
  const word = text.trim().split(/\s+/)[0]?.toLowerCase() ?? '';
  if (word === '' || word === 'help') return { kind: 'help' };
  if (WORK.has(word)) return { kind: 'work', verb: word };
  return { kind: 'unknown', word: word.slice(0, 40) };
}

/** Mattermost's slash-command response body. */
export interface CommandAnswer {
  response_type: 'ephemeral' | 'in_channel';
  text: string;
}

interface CommandPayload {
  channel_id: string;
  user_id: string;
  command: string;
  text: string;
  kind: 'help' | 'unknown';
}

const ID = /^[a-z0-9]{26}$/;

export function createChatACommands(deps: { db: Db; surfaceClient: (opts: { requireEnabled: boolean }) => Promise<ChatAClient | { missing: string }>; settings: () => Promise<{ enabled: boolean; slashCommand: boolean }>; reveal: (name: string) => Promise<string | null>; logger: { warn: (o: object, m: string) => void } }) {
  const { db } = deps;

  return {
    /** `POST /webhooks/chat_a`: verified, recorded, answered; never the work itself. */
    async receive(headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<CommandAnswer> {
      const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v) ?? '';
      const form = /^application\/x-www-form-urlencoded\b/i.test(one(headers['content-type'])) ? new URLSearchParams(raw.toString('utf8')) : null;
      const trigger = form?.get('trigger_id') ?? '';
      // The request's own id: a replay of it carries the same trigger (or, without one, the same bytes).
      const deliveryId = crypto.createHash('sha256').update(trigger || raw).digest('hex');
      const refuse = async (problem: Problem) => {
        await store.recordRefused(db, { surface: 'chat_a', delivery_id: deliveryId, event: 'command', action: null, signature_valid: false, outcome: 'refused', detail: problem.detail });
        deps.logger.warn({ surface: 'chat_a', status: problem.status, reason: problem.detail }, 'chat_a slash command refused');
        return problem;
      };
      const s = await deps.settings();
      if (!s.enabled || !s.slashCommand) throw await refuse(problems.conflict('the chat_a slash command is not enabled on this deployment: an admin turns on chat_a and its slash_command setting'));
      const expected = await deps.reveal(COMMAND_TOKEN);
      if (!expected) throw await refuse(problems.conflict(`the chat_a slash command has no command token: an admin writes the secret ${COMMAND_TOKEN} (the token the chat server shows for the command)`));
      const auth = one(headers.authorization);
      const headerToken = /^Token (\S+)$/i.exec(auth)?.[1] ?? null;
      const formToken = form?.get('token') ?? null;
      if (headerToken === null && formToken === null) throw await refuse(problems.unauthorized('the slash command carries no command token (the form field token, or Authorization: Token)'));
      // Each token sent must match; both are compared, whatever the first says, in constant time.
      const headerOk = headerToken === null || safeEqual(headerToken, expected);
      const formOk = formToken === null || safeEqual(formToken, expected);
      if (!headerOk || !formOk) throw await refuse(problems.unauthorized('the slash command\'s token does not match the chat_a command token: copy the token the chat server shows for the command into the secret'));
      if (!form) throw await refuse(problems.badRequest('a slash command is a form (application/x-www-form-urlencoded)'));
      const channelId = form.get('channel_id') ?? '';
      const userId = form.get('user_id') ?? '';
      const missing = [!ID.test(channelId) && 'channel_id', !ID.test(userId) && 'user_id'].filter((x): x is string => Boolean(x));
      if (missing.length) throw await refuse(problems.badRequest(`the slash command lacks a valid ${missing.join(' and ')}`, missing.map((f) => ({ field: f, message: 'missing or not a chat_a id' }))));
      const text = (form.get('text') ?? '').slice(0, 4000);
      const command = (form.get('command') ?? '/crewhouse').slice(0, 64);
      const what = commandOf(text);
      if (what.kind === 'work') {
        await store.recordVerified(db, { surface: 'chat_a', delivery_id: deliveryId, event: 'command', action: what.verb, outcome: 'refused', detail: 'chat-started runs are not enabled on this deployment yet', payload: null });
        return { response_type: 'ephemeral', text: NOT_ENABLED_YET };
      }
      const payload: CommandPayload = { channel_id: channelId, user_id: userId, command, text, kind: what.kind };
      await db.transaction().execute(async (trx) => {
        const row = await store.recordVerified(trx, { surface: 'chat_a', delivery_id: deliveryId, event: 'command', action: what.kind, outcome: 'accepted', detail: null, payload });
        if (row.first) await processDeliveryJob.enqueue(trx, { delivery: row.id }, { key: `webhook:chat_a:${deliveryId}` });
      });
      return { response_type: 'ephemeral', text: what.kind === 'help' ? '' : `\`${command} ${what.word}\` is not a Crewhouse command; the list follows.` };
    },

    /** The job of an accepted command: the command list, shown to the person who typed it. */
    async process(deliveryRow: string, payload: unknown): Promise<void> {
      const p = payload as CommandPayload;
      const client = await deps.surfaceClient({ requireEnabled: true });
      if ('missing' in client) return store.settleDelivery(db, deliveryRow, { outcome: 'ignored', detail: `the command list was not posted: ${client.missing}` });
      try {
        await client.ephemeral(p.user_id, { channel_id: p.channel_id, message: COMMAND_LIST });
      } catch (err) {
        if (err instanceof ChatAError && !err.transient) return store.settleDelivery(db, deliveryRow, { outcome: 'failed', detail: `the command list could not be posted: ${err.message}` });
        throw err;
      }
      await store.settleDelivery(db, deliveryRow, { outcome: 'processed', detail: 'the command list was shown to the person who asked' });
    },
  };
}

export type ChatACommands = ReturnType<typeof createChatACommands>;

import crypto from 'node:crypto';
import { safeEqual } from '../../auth/credentials.ts';
import type { Db } from '../../db/database.ts';
import { commandList, parseCommand } from '../chat/commands.ts';
import { formatOf } from '../chat/format.ts';
import type { ChatMessageIn } from '../chat/ports.ts';
import { Problem, problems } from '../../errors/problems.ts';
import { acceptDelivery, unstorablePayload } from '../webhooks/accept.ts';
import type { RefusalCap } from '../webhooks/refusal-cap.ts';
import * as store from '../webhooks/webhooks.store.ts';
import { ChatAError, type ChatAClient } from './client.ts';

export const COMMAND_TOKEN = 'integrations/chat_a/command_token';

/**
 * The slash command (`/crewhouse ...` as configured on the chat server), POSTed to
 * `/webhooks/chat_a` as a form with the command token in the `token` field and in
 * `Authorization: Token <token>`. The route verifies the token in constant time, records the
 * request as a delivery (its id is the request's `trigger_id`, so a replayed request is one
 * delivery with one effect) whose payload is the chat core's work item, and answers at once
 * with Mattermost's response body. The work is the delivery's job, as for every webhook: the
 * chat surface's `takeIn` (src/integrations/chat/surface.ts) has the core do the message and
 * settles the delivery with what it did (`processed`, `refused` with what the person was told,
 * or `failed` when the work gave up).
 *
 * The commands are the chat core's (src/integrations/chat/commands.ts). `process` answers the
 * delivery jobs of commands queued by an earlier version (the command list).
 */

export const COMMAND_LIST = commandList('/crewhouse', formatOf('markdown'));

/** Mattermost's slash-command response body. */
export interface CommandAnswer {
  response_type: 'ephemeral' | 'in_channel';
  text: string;
}

/** A command queued by the previous version (`webhook.process`): it gets the command list. */
interface CommandPayload {
  channel_id: string;
  user_id: string;
}

const ID = /^[a-z0-9]{26}$/;

export function createChatACommands(deps: { db: Db; surfaceClient: (opts: { requireEnabled: boolean }) => Promise<ChatAClient | { missing: string }>; settings: () => Promise<{ enabled: boolean; slashCommand: boolean }>; reveal: (name: string) => Promise<string | null>; logger: { warn: (o: object, m: string) => void }; refusalCap: RefusalCap }) {
  const { db } = deps;

  return {
    /** `POST /webhooks/chat_a`: verified, recorded, answered; never the work itself. */
    async receive(headers: Record<string, string | string[] | undefined>, raw: Buffer): Promise<CommandAnswer> {
      const one = (v: string | string[] | undefined) => (Array.isArray(v) ? v[0] : v) ?? '';
      const form = /^application\/x-www-form-urlencoded\b/i.test(one(headers['content-type'])) ? new URLSearchParams(raw.toString('utf8')) : null;
      const trigger = form?.get('trigger_id') ?? '';
      // The request's own id: a replay of it carries the same trigger (or, without one, the same bytes).
      const deliveryId = crypto.createHash('sha256').update(trigger || raw).digest('hex');
      // `verified`: the command token matched, so the sender holds it; before that anyone could be sending, and refusals are recorded only up to the cap.
      const refuse = async (problem: Problem, verified = false) => {
        if (!verified && !(await deps.refusalCap.mayRecord('chat_a'))) return problem;
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
      if (!form) throw await refuse(problems.badRequest('a slash command is a form (application/x-www-form-urlencoded)'), true);
      const channelId = form.get('channel_id') ?? '';
      const userId = form.get('user_id') ?? '';
      const missing = [!ID.test(channelId) && 'channel_id', !ID.test(userId) && 'user_id'].filter((x): x is string => Boolean(x));
      if (missing.length) throw await refuse(problems.badRequest(`the slash command lacks a valid ${missing.join(' and ')}`, missing.map((f) => ({ field: f, message: 'missing or not a chat_a id' }))), true);
      const text = (form.get('text') ?? '').slice(0, 16_000);
      const userName = (form.get('user_name') ?? '').slice(0, 64);
      const command = (form.get('command') ?? '/crewhouse').slice(0, 64);
      const what = parseCommand(text);
      const item: ChatMessageIn = { surface: 'chat_a', message_id: `command:${deliveryId}`, room_id: channelId, thread_id: null, user_id: userId, user_name: userName, text, addressed: true, command: true, via: 'command' };
      // The text and name are the person's (a NUL typed or sent cannot be stored): refused in words and recorded, not a bare database error.
      const unstorable = unstorablePayload(item);
      if (unstorable) throw await refuse(unstorable, true);
      // Its work is the delivery's job: the chat core does the message and the delivery is settled with what it did.
      await acceptDelivery(db, { surface: 'chat_a', delivery_id: deliveryId, event: 'command', action: what.kind, payload: item });
      const said = what.kind === 'task' ? 'Taken: the team starts on it, and its run gets a thread in this channel.' : what.kind === 'unknown' ? `\`${command} ${what.word}\` is not a Crewhouse command; the list follows.` : '';
      return { response_type: 'ephemeral', text: said };
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

import type { Logger } from 'pino';
import type { Db } from '../../db/database.ts';
import { integrationCheckProblem, Problem, problems } from '../../errors/problems.ts';
import { chatAClient, ChatAError, isChatAId, type ChatAClient } from './client.ts';
import type { ChatCore } from '../chat/core.ts';
import type { ChatSurface } from '../chat/ports.ts';
import { receiveAction } from './actions.ts';
import { createChatACommands } from './commands.ts';
import type { RefusalCap } from '../webhooks/refusal-cap.ts';
import { startChatAInbound } from './inbound.ts';
import { chatASurface } from './surface.ts';

/**
 * The chat_a (Mattermost-compatible) adapter, the part that needs no run: the connection test,
 * the role bots' names and pictures, whether the surface bot can read and post in a room (for a
 * team's home and links), and the slash command's answers (see commands.ts). Every outbound call
 * goes to the integration's `url` setting with a token read from the secrets service when it is
 * needed; no token is ever kept in a message, a log line or an answer.
 */

export const BOT_TOKEN = 'integrations/chat_a/bot_token';
export const roleBotSecret = (team: string, role: string) => `integrations/chat_a/bots/${team}/${role}`;

export interface ChatASettings {
  enabled: boolean;
  /** The server's base URL (the `url` setting), null when unset. */
  url: string | null;
  slashCommand: boolean;
}

export interface ChatARole {
  team: string;
  role: string;
  /** The agent's display name (the role's name when it has none). */
  displayName: string;
  /** The agent's avatar, null when it has none. */
  avatar: () => Promise<{ bytes: Buffer; mediaType: string } | null>;
}

export interface ChatADeps {
  db: Db;
  /** The cap on recording slash commands refused before their token matched (the webhooks' own, shared). */
  refusalCap: RefusalCap;
  logger: Logger;
  /** The chat_a integration as stored. */
  settings(): Promise<ChatASettings>;
  /** A secret's value, null when unset (read through the secrets service). */
  reveal(name: string): Promise<string | null>;
  /** Every role of every active team homed on chat_a, with what its bot should show. */
  roles(): Promise<ChatARole[]>;
  /** The chat core (late-bound: it posts through this adapter). */
  core(): ChatCore;
  /** Where the chat server sends button clicks (`<base>/webhooks/chat_a/actions`). */
  publicBaseUrl: string;
}

export interface RoomCheck {
  label: string;
}

export function createChatAService(deps: ChatADeps) {
  const log = deps.logger.child({ component: 'chat_a' });

  /** The surface bot's client for the configured server, or why there is none (for people). */
  async function surfaceClient(opts: { requireEnabled: boolean }): Promise<ChatAClient | { missing: string }> {
    const s = await deps.settings();
    if (opts.requireEnabled && !s.enabled) return { missing: 'the chat_a integration is not enabled: an admin enables it in the integrations settings' };
    if (!s.url) return { missing: 'chat_a is not configured: its url setting is missing' };
    const token = await deps.reveal(BOT_TOKEN);
    if (!token) return { missing: `chat_a is not configured: the secret ${BOT_TOKEN} has no value` };
    return chatAClient(s.url, token);
  }

  /** chat_a as the chat core's surface, or why it cannot post (not enabled, not configured). */
  async function chatSurface(): Promise<ChatSurface | { missing: string }> {
    const client = await surfaceClient({ requireEnabled: true });
    if ('missing' in client) return client;
    const s = await deps.settings();
    return chatASurface({
      surface: client,
      publicBaseUrl: deps.publicBaseUrl,
      roleClient: async (team, role) => {
        const token = await deps.reveal(roleBotSecret(team, role));
        return token && s.url ? chatAClient(s.url, token) : null;
      },
    });
  }

  return {
    surfaceClient,
    chatSurface,

    /**
     * Follows the chat server's messages while chat_a is enabled (the worker starts it; two
     * processes may: each message is recorded once). Mentions of the bot and messages in
     * threads become the chat core's work items.
     */
    startInbound: (opts: { everyMs?: number; retry?: { minMs?: number; maxMs?: number; jitterMs?: number } } = {}) =>
      startChatAInbound({
        settings: deps.settings,
        token: () => deps.reveal(BOT_TOKEN),
        rooms: () => deps.core().rooms('chat_a'),
        receive: (m) => deps.core().receive(m),
        logger: deps.logger,
        ...opts,
      }),

    /** A confirmation's button, clicked (`POST /webhooks/chat_a/actions`). */
    action: (raw: Buffer) => receiveAction({ core: deps.core(), client: () => surfaceClient({ requireEnabled: true }), enabled: async () => (await deps.settings()).enabled }, raw),

    /** The slash command: `receive` for the route, `process` for its job. */
    commands: createChatACommands({ db: deps.db, surfaceClient, settings: deps.settings, reveal: deps.reveal, logger: log, refusalCap: deps.refusalCap }),

    /** `POST /integrations/chat_a/test`: asks the server who the bot is, with the settings as stored (enabled or not). */
    async test(): Promise<{ state: 'ok' | 'error'; detail: string }> {
      const client = await surfaceClient({ requireEnabled: false });
      if ('missing' in client) return { state: 'error', detail: client.missing };
      try {
        const me = await client.me();
        if (!me.is_bot) return { state: 'error', detail: `the token in ${BOT_TOKEN} belongs to @${me.username}, a person, not a bot: create a bot account on the chat server and use its access token` };
        return { state: 'ok', detail: `connected to ${client.url} as the bot @${me.username}` };
      } catch (err) {
        return { state: 'error', detail: err instanceof ChatAError ? err.message : 'the chat server answered in a way the adapter does not understand' };
      }
    },

    /**
     * Whether the surface bot can read and post in a channel: the channel's display name when it
     * can; 422 naming the reason when it cannot (no such channel, not a member, read-only), 503
     * when chat_a is not enabled or configured or the server refuses the bot's token, 502 when the
     * server fails or cannot be reached (integrationCheckProblem).
     */
    async checkRoom(field: string, roomId: string): Promise<RoomCheck> {
      const refuse = (message: string) => problems.validation([{ field, message }], message);
      if (!isChatAId(roomId)) throw refuse(`"${roomId.slice(0, 80)}" is not a chat_a channel id (26 lower-case letters and digits; the channel's "View Info" shows it)`);
      const client = await surfaceClient({ requireEnabled: true });
      if ('missing' in client) throw problems.unavailable(`the team's room cannot be checked: ${client.missing}`);
      try {
        const me = await client.me();
        let channel;
        try {
          channel = await client.channel(roomId);
        } catch (err) {
          if (err instanceof ChatAError && (err.status === 404 || err.status === 403)) throw refuse(`the chat_a bot @${me.username} cannot see channel ${roomId}: it does not exist or is private and the bot is not in it`);
          throw err;
        }
        const member = await client.membership(roomId, me.id);
        if (!member) throw refuse(`the chat_a bot @${me.username} is not a member of "${channel.display_name}": add it to the channel, then try again`);
        if (/\bchannel_guest\b/.test(member.roles) || channel.type === 'D') throw refuse(`the chat_a bot @${me.username} cannot post in "${channel.display_name}": give it a member's role there`);
        return { label: channel.display_name || channel.name };
      } catch (err) {
        if (err instanceof Problem) throw err;
        if (err instanceof ChatAError) {
          // The bot's token refused is the integration's to mend (a 403 on the channel is the channel's, above); the rest is the server failing.
          const check = { what: `the chat_a room ${roomId}`, service: 'the chat server', integration: 'chat_a', said: err.message };
          throw integrationCheckProblem(err.status === 401 ? 'credentials' : 'failed', check);
        }
        throw err;
      }
    },

    /**
     * Sets each role bot's display name and picture on the server from its agent (the job
     * `chat_a.sync-role-bots`). A bot whose token the server refuses is skipped with a warning (a
     * retry cannot mend it); a failure a retry can mend throws, and the job tries again.
     */
    async syncRoleBots(): Promise<{ updated: number; skipped: string[] }> {
      const s = await deps.settings();
      if (!s.enabled || !s.url) return { updated: 0, skipped: [] };
      let updated = 0;
      const skipped: string[] = [];
      for (const r of await deps.roles()) {
        const token = await deps.reveal(roleBotSecret(r.team, r.role));
        if (!token) continue;
        const client = chatAClient(s.url, token);
        try {
          const me = await client.me();
          if (!me.is_bot) throw new ChatAError(`the token of the ${r.role} role of team "${r.team}" belongs to @${me.username}, a person, not a bot`, 400);
          if ((await client.botDisplayName(me.id)) !== r.displayName) await client.setBotDisplayName(me.id, r.displayName);
          const avatar = await r.avatar();
          if (avatar) await client.setProfileImage(me.id, new Blob([new Uint8Array(avatar.bytes)], { type: avatar.mediaType }));
          updated++;
        } catch (err) {
          if (err instanceof ChatAError && !err.transient) {
            skipped.push(`${r.team}/${r.role}`);
            log.warn({ team: r.team, role: r.role, reason: err.message }, 'a chat_a role bot could not be updated');
            continue;
          }
          throw err;
        }
      }
      return { updated, skipped };
    },
  };
}

export type ChatAService = ReturnType<typeof createChatAService>;

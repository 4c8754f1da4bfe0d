import type { Logger } from 'pino';
import { integrationCheckProblem, problems } from '../../errors/problems.ts';
import type { ChatCore } from '../chat/core.ts';
import type { ChatSurface } from '../chat/ports.ts';
import { CHAT_B_SECRET, chatBClient, ChatBError, isChannelId, type ChatBClient, type ChatBIdentity } from './client.ts';
import { chatBFingerprint, startChatBInbound } from './inbound.ts';
import type { RoleLook } from './posts.ts';
import { chatBSurface } from './surface.ts';

/**
 * The chat_b (Slack-compatible) adapter, the part that needs no run: the connection test,
 * whether the app's bot can read and post in a channel (for a team's home and links), and the
 * clients the chat core posts and listens with. Every call goes to the `api_url` setting
 * (Slack's by default) with a token read from the secrets service when it is needed; no token
 * is ever kept in a message, a log line or an answer.
 */

export interface ChatBSettings {
  enabled: boolean;
  /** The Web API base URL (the `api_url` setting with its default). */
  apiUrl: string;
}

export interface ChatBDeps {
  logger: Logger;
  /** The chat_b integration as stored. */
  settings(): Promise<ChatBSettings>;
  /** A secret's value, null when unset (read through the secrets service). */
  reveal(name: string): Promise<string | null>;
  /** What a role of a team shows: its agent's display name and a public URL of its picture. */
  roleLook(team: string, role: string): Promise<RoleLook>;
  /** The chat core (late-bound: it posts through this adapter). */
  core(): ChatCore;
}

export const CUSTOMIZE_SCOPE = 'chat:write.customize';

/** How long the bot's identity is trusted with unchanged settings: a reinstall may grant scopes to the same token. */
const IDENTITY_TTL_MS = 10 * 60_000;

export function createChatBService(deps: ChatBDeps) {
  const log = deps.logger.child({ component: 'chat_b' });

  /** The bot's client, or why there is none (for people). */
  async function botClient(opts: { requireEnabled: boolean; rateLimited: 'wait' | 'fail' }): Promise<ChatBClient | { missing: string }> {
    const s = await deps.settings();
    if (opts.requireEnabled && !s.enabled) return { missing: 'the chat_b integration is not enabled: an admin enables it in the integrations settings' };
    const token = await deps.reveal(CHAT_B_SECRET.bot);
    if (!token) return { missing: `chat_b is not configured: the secret ${CHAT_B_SECRET.bot} has no value` };
    return chatBClient({ apiUrl: s.apiUrl, token, secret: CHAT_B_SECRET.bot, rateLimited: opts.rateLimited, logger: log });
  }

  /**
   * The bot's identity (`auth.test`: its user, name and scopes), asked once per configuration
   * (the fingerprint the listener follows: a new `api_url` or token asks again) and at most every
   * ten minutes, not once per post job. A failed ask is not kept.
   */
  let identity: { fingerprint: string; until: number; me: Promise<ChatBIdentity> } | null = null;
  async function identityOf(client: ChatBClient): Promise<ChatBIdentity> {
    const s = await deps.settings();
    const fingerprint = chatBFingerprint(s.apiUrl, (await deps.reveal(CHAT_B_SECRET.bot)) ?? '', await deps.reveal(CHAT_B_SECRET.app));
    if (identity && identity.fingerprint === fingerprint && identity.until > Date.now()) return identity.me;
    const asked = { fingerprint, until: Date.now() + IDENTITY_TTL_MS, me: client.me() };
    identity = asked;
    asked.me.catch(() => {
      if (identity === asked) identity = null;
    });
    return asked.me;
  }

  /** chat_b as the chat core's surface, or why it cannot post (not enabled, not configured). */
  async function chatSurface(): Promise<ChatSurface | { missing: string }> {
    const client = await botClient({ requireEnabled: true, rateLimited: 'wait' });
    if ('missing' in client) return client;
    return chatBSurface({ client, identity: () => identityOf(client), roleLook: deps.roleLook });
  }

  return {
    botClient,
    chatSurface,

    /**
     * Hears the workspace over Socket Mode while chat_b is enabled (the worker starts it; two
     * processes may: each message is recorded once, each confirmation decided once). Mentions,
     * thread messages and the slash command become the chat core's work items; button clicks
     * decide confirmations.
     */
    startInbound: (opts: { everyMs?: number; pingTimeoutMs?: number; reconnectMs?: number } = {}) =>
      startChatBInbound({
        settings: deps.settings,
        reveal: deps.reveal,
        rooms: () => deps.core().rooms('chat_b'),
        threads: async () => (await deps.core().openThreads('chat_b')).map((t) => ({ channel: t.room_id, ts: t.root_id })),
        core: deps.core,
        logger: deps.logger,
        ...opts,
      }),

    /**
     * `POST /integrations/chat_b/test`: asks Slack who the bot is and opens (without using) a
     * Socket Mode connection URL with the app-level token, with the settings as stored.
     */
    async test(): Promise<{ state: 'ok' | 'error'; detail: string }> {
      const client = await botClient({ requireEnabled: false, rateLimited: 'fail' });
      if ('missing' in client) return { state: 'error', detail: client.missing };
      const appToken = await deps.reveal(CHAT_B_SECRET.app);
      if (!appToken) return { state: 'error', detail: `chat_b is not configured: the secret ${CHAT_B_SECRET.app} has no value` };
      try {
        const me = await client.me();
        if (!me.botId) return { state: 'error', detail: `the token in ${CHAT_B_SECRET.bot} belongs to @${me.name}, a person, not the app's bot: use the Bot User OAuth Token (xoxb-...)` };
        const app = chatBClient({ apiUrl: client.apiUrl, token: appToken, secret: CHAT_B_SECRET.app, rateLimited: 'fail', logger: log });
        await app.openConnection();
        const names = me.scopes.includes(CUSTOMIZE_SCOPE)
          ? 'roles post with their own names and pictures'
          : `the app lacks ${CUSTOMIZE_SCOPE}, so roles will post under the bot's name with the role named in the text (add the scope and reinstall the app to give roles their own names)`;
        return { state: 'ok', detail: `connected to the ${me.team} workspace as the bot @${me.name}, Socket Mode ready; ${names}` };
      } catch (err) {
        return { state: 'error', detail: err instanceof ChatBError ? err.message : 'Slack answered in a way the adapter does not understand' };
      }
    },

    /**
     * Whether the bot can read and post in a channel: the channel's name when it can; 422 naming
     * the reason when it cannot (not a channel id, no such channel or a private one the bot is not
     * in, the bot not a member, an archived channel), 503 when chat_b is not enabled or configured
     * or Slack refuses the token, 502 when Slack fails, rate-limits or cannot be reached.
     */
    async checkRoom(field: string, roomId: string): Promise<{ label: string }> {
      const refuse = (message: string) => problems.validation([{ field, message }], message);
      if (!isChannelId(roomId)) throw refuse(`"${roomId.slice(0, 80)}" is not a chat_b channel id (C or G then letters and digits: the channel's details show it at the bottom)`);
      const client = await botClient({ requireEnabled: true, rateLimited: 'fail' });
      if ('missing' in client) throw problems.unavailable(`the team's room cannot be checked: ${client.missing}`);
      // Slack answers channel_not_found alike for a channel that does not exist and a private one the bot is not in.
      const unseen = (err: unknown) => {
        if (err instanceof ChatBError && err.code === 'channel_not_found') return null;
        throw err;
      };
      try {
        const me = await client.me();
        const channel = await client.channel(roomId).catch(unseen);
        if (!channel) throw refuse(`the chat_b bot @${me.name} cannot see channel ${roomId}: it does not exist or is private and the bot is not in it (invite it with /invite @${me.name})`);
        if (channel.isArchived) throw refuse(`the chat_b channel #${channel.name} is archived: nobody can post there`);
        if (!channel.isMember) throw refuse(`the chat_b bot @${me.name} is not a member of #${channel.name}: invite it with /invite @${me.name} in the channel, then try again`);
        return { label: `#${channel.name}` };
      } catch (err) {
        if (err instanceof ChatBError) {
          const check = { what: `the chat_b room ${roomId}`, service: 'Slack', integration: 'chat_b', said: err.message };
          throw integrationCheckProblem(err.refusedToken ? 'credentials' : 'failed', check);
        }
        throw err;
      }
    },
  };
}

export type ChatBService = ReturnType<typeof createChatBService>;

import type { ChatOutbound, ChatSurface } from '../chat/ports.ts';
import type { ChatBClient, ChatBIdentity, ChatBPost } from './client.ts';
import { confirmationPost, rolePost, type RoleLook } from './posts.ts';
import { mrkdwnText } from './text.ts';

/**
 * chat_b as a chat surface of the chat core (src/integrations/chat): Slack messages in a thread
 * (`thread_ts`), a role's words under its own name and picture (`username`, `icon_url`) when the
 * app has `chat:write.customize`, else the bot's with the role named in the text (posts.ts),
 * confirmations with Approve and Refuse buttons (Block Kit; the confirmation's token is the
 * buttons' value), long output as the post's summary and a file shared in its thread
 * (`files.uploadV2`), and each post's key in the message's metadata so a retried post finds the
 * one made before (`conversations.replies` with `include_all_metadata`).
 *
 * Text comes in Slack's mrkdwn (the surface's dialect: the core escapes agents' and people's words
 * as it writes, chat/format.ts), so the only mention a post holds is the core's own of the person
 * who gave the task; posting defuses any `<!...>` command and cuts to Slack's size (text.ts).
 */

export interface ChatBSurfaceDeps {
  client: ChatBClient;
  /** The bot's identity (`auth.test`), cached by the caller across posts. */
  identity(): Promise<ChatBIdentity>;
  /** What a role shows (its agent's name and picture). */
  roleLook(team: string, role: string): Promise<RoleLook>;
}

export const KEY_EVENT_TYPE = 'crewhouse_post';

export function chatBSurface(deps: ChatBSurfaceDeps): ChatSurface {
  const { client } = deps;
  const bot = deps.identity;

  /**
   * A post's file, shared in its thread (`files.uploadV2`) unless it is there already: the
   * file's name is unique per run post, so a retry after the message was posted and before (or
   * after) its file was shares it once.
   */
  async function shareFile(out: ChatOutbound, threadTs: string): Promise<void> {
    if (!out.file) return;
    const { name, content } = out.file;
    const thread = await client.replies(out.room_id, threadTs, '0');
    if (thread.some((m) => (m.files as Array<{ name?: string }> | undefined)?.some((f) => f.name === name))) return;
    await client.upload({ channel: out.room_id, thread_ts: threadTs, filename: name, title: name, content });
  }

  return {
    surface: 'chat_b',
    dialect: 'mrkdwn',
    how: async () => `@${(await bot()).name}`,
    mention: (userId) => `<@${userId.replace(/[^A-Z0-9]/g, '').slice(0, 20)}>`,

    async find(out) {
      const since = '0';
      const messages = out.thread_id ? await client.replies(out.room_id, out.thread_id, since) : await client.history(out.room_id, ((Date.now() - 7 * 24 * 3600_000) / 1000).toFixed(6));
      const earlier = messages.find((m) => m.metadata?.event_type === KEY_EVENT_TYPE && m.metadata.event_payload?.key === out.key);
      if (!earlier) return null;
      // Made before, maybe without its file (the try died between the two): the file follows it now.
      await shareFile(out, out.thread_id ?? earlier.ts);
      return { id: earlier.ts };
    },

    async post(out: ChatOutbound) {
      const metadata = { event_type: KEY_EVENT_TYPE, event_payload: { key: out.key } };
      const thread = out.thread_id ? { thread_ts: out.thread_id } : {};
      const customize = out.as ? (await bot()).scopes.includes('chat:write.customize') : false;
      const look = out.as ? await deps.roleLook(out.as.team, out.as.role) : null;
      let p: ChatBPost;
      if (look) p = rolePost({ channel: out.room_id, ...thread, text: out.text, role: look, customize });
      else p = { channel: out.room_id, ...thread, text: mrkdwnText(out.text) };
      if (out.buttons) {
        const confirm = confirmationPost({ channel: out.room_id, thread_ts: out.thread_id ?? '', text: '', confirmation: out.buttons.token });
        const [, actions] = confirm.blocks ?? [];
        p = { ...p, blocks: [{ type: 'section', text: { type: 'mrkdwn', text: p.text.slice(0, 3000) } }, ...(actions ? [actions] : [])] };
      }
      const { ts } = await client.post({ ...p, metadata });
      // Long output: the summary above, the whole as a file shared in the thread under it (Slack keeps no metadata on a file share).
      await shareFile(out, out.thread_id ?? ts);
      return { id: ts };
    },

    async ephemeral(roomId, userId, text, threadId) {
      await client.ephemeral({ channel: roomId, user: userId, text: mrkdwnText(text), ...(threadId ? { thread_ts: threadId } : {}) });
    },

    permalink: (roomId, postId) => client.permalink(roomId, postId),
  };
}

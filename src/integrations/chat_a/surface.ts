import type { ChatOutbound, ChatSurface } from '../chat/ports.ts';
import { ChatAError, type ChatAClient, type ChatAPost } from './client.ts';
import { postText } from './text.ts';

/**
 * chat_a as a chat surface of the chat core (src/integrations/chat): Mattermost posts in a
 * thread (`root_id`), a role's words posted by the role's own bot when its token is set (the
 * surface bot naming the role otherwise, or when the role's bot cannot post in the room),
 * confirmations as an interactive message (`props.attachments[].actions[]`, each button's
 * `integration` pointing at `/webhooks/chat_a/actions` with the confirmation's token in its
 * context, which Mattermost keeps from clients), long output as a file attached to the post
 * (uploaded first, `POST /files`; the post and its file appear together), and each post's key
 * in `props.crewhouse_key` so a retried post finds the one made before.
 */

export const ACTIONS_PATH = '/webhooks/chat_a/actions';

export interface ChatASurfaceDeps {
  surface: ChatAClient;
  /** A role's own bot, or null when its token is not set. */
  roleClient(team: string, role: string): Promise<ChatAClient | null>;
  publicBaseUrl: string;
}

const KEY_PROP = 'crewhouse_key';

function buttonsProps(url: string, token: string) {
  const action = (id: string, name: string, style: string, decision: string) => ({ id, name, type: 'button', style, integration: { url, context: { token, decision } } });
  return { attachments: [{ text: '', actions: [action('approve', 'Approve', 'good', 'approve'), action('refuse', 'Refuse', 'danger', 'refuse')] }] };
}

export function chatASurface(deps: ChatASurfaceDeps): ChatSurface {
  const { surface } = deps;
  let me: Promise<{ id: string; username: string }> | null = null;
  const bot = () => (me ??= surface.me());
  const teamNames = new Map<string, string>();

  async function findPosted(out: ChatOutbound): Promise<ChatAPost | null> {
    const posts = out.thread_id ? await surface.thread(out.thread_id) : await surface.postsSince(out.room_id, Date.now() - 7 * 24 * 3600_000);
    return posts.find((p) => p.props?.[KEY_PROP] === out.key) ?? null;
  }

  return {
    surface: 'chat_a',
    dialect: 'markdown',
    how: async () => `@${(await bot()).username}`,
    mention: (_userId, userName) => `@${userName}`,

    async find(out) {
      const earlier = await findPosted(out);
      return earlier ? { id: earlier.id } : null;
    },

    async post(out) {
      const props: Record<string, unknown> = { [KEY_PROP]: out.key, ...(out.buttons ? buttonsProps(`${deps.publicBaseUrl.replace(/\/+$/, '')}${ACTIONS_PATH}`, out.buttons.token) : {}) };
      // Long output goes as a file attached to the post, uploaded by whoever posts it (Mattermost attaches only the poster's own uploads).
      const send = async (client: ChatAClient, message: string) => {
        const files = out.file ? { file_ids: [(await client.uploadFile(out.room_id, out.file)).id] } : {};
        return client.post({ channel_id: out.room_id, message: postText(message), ...(out.thread_id ? { root_id: out.thread_id } : {}), props, ...files });
      };
      const own = out.as ? await deps.roleClient(out.as.team, out.as.role) : null;
      if (own) {
        try {
          return { id: (await send(own, out.text)).id };
        } catch (err) {
          // The role's bot is not in the room (or its token is refused): the surface bot says it, naming the role.
          if (!(err instanceof ChatAError) || ![401, 403].includes(err.status)) throw err;
        }
      }
      const named = out.as && !out.text.includes(`**${out.as.role}**`) ? `**${out.as.role}**: ${out.text}` : out.text;
      return { id: (await send(surface, named)).id };
    },

    async ephemeral(roomId, userId, text, threadId) {
      await surface.ephemeral(userId, { channel_id: roomId, message: postText(text), ...(threadId ? { root_id: threadId } : {}) });
    },

    async permalink(roomId, postId) {
      let team = teamNames.get(roomId);
      if (!team) {
        team = await surface.teamName((await surface.channel(roomId)).team_id);
        teamNames.set(roomId, team);
      }
      return surface.permalink(team, postId);
    },
  };
}

/** What a confirmation's post says once decided: its message with the decision, the buttons gone. */
export async function decidedPost(client: ChatAClient, postId: string, said: string): Promise<{ message: string; props: Record<string, unknown> }> {
  const post = await client.getPost(postId);
  const { attachments: _buttons, from_bot: _bot, ...props } = post.props ?? {};
  return { message: `${post.message}\n\n**${said}**`, props };
}

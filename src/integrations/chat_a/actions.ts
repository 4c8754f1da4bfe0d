import { problems } from '../../errors/problems.ts';
import type { ChatCore } from '../chat/core.ts';
import { isChatAId, type ChatAClient } from './client.ts';
import { decidedPost } from './surface.ts';

/**
 * A confirmation's button clicked (Mattermost's interactive message action), POSTed by the chat
 * server to `/webhooks/chat_a/actions` as JSON. Mattermost signs nothing: the only thing trusted
 * is the confirmation's unguessable token in the action's context (which Mattermost keeps from
 * clients); the chat core decides the confirmation it names, once. The answer is Mattermost's
 * action response: the post updated (the decision said, the buttons gone), or a message to the
 * person alone saying why nothing was done.
 */

export interface ActionAnswer {
  update?: { message: string; props: Record<string, unknown> };
  ephemeral_text?: string;
}

export async function receiveAction(deps: { core: ChatCore; client: () => Promise<ChatAClient | { missing: string }>; enabled: () => Promise<boolean> }, raw: Buffer): Promise<ActionAnswer> {
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(raw.toString('utf8')) as Record<string, unknown>;
  } catch {
    throw problems.badRequest('an interactive message action is a JSON body');
  }
  if (!body || typeof body !== 'object') throw problems.badRequest('an interactive message action is a JSON object');
  const context = (body.context ?? {}) as Record<string, unknown>;
  const token = typeof context.token === 'string' ? context.token : '';
  const decision = context.decision;
  const str = (v: unknown) => (typeof v === 'string' ? v : '');
  const userId = str(body.user_id);
  const channelId = str(body.channel_id);
  const postId = str(body.post_id);
  const bad = [
    !/^[A-Za-z0-9_-]{20,100}$/.test(token) && 'context.token',
    decision !== 'approve' && decision !== 'refuse' && 'context.decision',
    !isChatAId(userId) && 'user_id',
    !isChatAId(channelId) && 'channel_id',
    !isChatAId(postId) && 'post_id',
  ].filter((x): x is string => Boolean(x));
  if (bad.length) throw problems.badRequest(`the action lacks a valid ${bad.join(', ')}`, bad.map((f) => ({ field: f, message: 'missing or malformed' })));
  if (!(await deps.enabled())) throw problems.conflict('chat_a is not enabled on this deployment: an admin turns it on');
  const result = await deps.core.decide(token, decision === 'approve', { surface: 'chat_a', user_id: userId, user_name: str(body.user_name).slice(0, 64) || userId }, channelId);
  if (!result.decided) return { ephemeral_text: result.text };
  const client = await deps.client();
  if ('missing' in client) return { ephemeral_text: result.text };
  return { update: await decidedPost(client, postId, result.text) };
}

import { Type } from 'typebox';
import { jobType, type JobHandler } from '../../queue/queue.ts';
import type { ChatCore } from './core.ts';

const Message = Type.Object({
  surface: Type.Union([Type.Literal('chat_a'), Type.Literal('chat_b')]),
  message_id: Type.String({ minLength: 1, maxLength: 200 }),
  room_id: Type.String({ minLength: 1, maxLength: 200 }),
  thread_id: Type.Union([Type.String({ minLength: 1, maxLength: 200 }), Type.Null()]),
  user_id: Type.String({ minLength: 1, maxLength: 200 }),
  user_name: Type.String({ maxLength: 200 }),
  text: Type.String({ maxLength: 40_000 }),
  addressed: Type.Boolean(),
  command: Type.Boolean(),
  via: Type.Union([Type.Literal('event'), Type.Literal('catch_up'), Type.Literal('command')]),
});

/** A message taken in from a chat surface: its one effect (a run, an answer, a follow-up, a cancel, a command's answer). */
export const ChatMessage = jobType('chat.message', Type.Object({ message: Message }));

/** A run's chat thread catches up with the run's posts (queued with each change of the run). */
export const MirrorThread = jobType('chat.mirror', Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 100 }) }));

export function chatJobHandlers(core: ChatCore): Record<string, JobHandler> {
  return {
    [ChatMessage.kind]: ChatMessage.handler(async ({ message }) => core.handle(message)),
    // The job is the owner of the posts it makes: its retries may look for what it made before.
    [MirrorThread.kind]: MirrorThread.handler(async ({ run_id }, ctx) => core.mirror(run_id, `job:${ctx.id}`)),
  };
}

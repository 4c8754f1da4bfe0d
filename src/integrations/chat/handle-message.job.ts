import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { ChatCore } from './core.ts';

/** A work item as queued (and as kept in a delivery's payload): `ChatMessageIn`. */
export const Message = Type.Object({
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
export const handleMessageJob = defineJob({
  kind: 'chat.handle-message',
  payload: Type.Object({ message: Message }),
  async perform(core: Pick<ChatCore, 'handle'>, { message }) {
    await core.handle(message);
  },
});

import type { KnownBlock } from '@slack/web-api';
import type { ChatBPost } from './client.ts';
import { escapeText, messageText, mrkdwnText } from './text.ts';

/**
 * The shapes of what a run posts in a chat_b thread, as plain functions for the chat core to
 * send with the client: a role's message (its own name and picture where the app may, else the
 * bot's with the role named in the text), a question that mentions the person who gave the
 * task, a confirmation with Approve and Refuse buttons (Block Kit), the same message once
 * decided. Whether output goes as a file is the chat core's call (render.ts `longOutput`).
 */

/** The `action_id`s of a confirmation's buttons; a click comes back as `action` work with one of them. */
export const CONFIRM_ACTIONS = { approve: 'crewhouse.approve', refuse: 'crewhouse.refuse' } as const;

/** Slack's limit on a section block's text. */
const MAX_SECTION_CHARS = 3000;

export interface RoleLook {
  role: string;
  /** The agent's display name (the role's name when it has none). */
  displayName: string;
  /** A public URL of the agent's picture, or null. */
  iconUrl: string | null;
}

/**
 * A role's message in a thread (`text` in mrkdwn, as the chat core writes it). With
 * `chat:write.customize` (`customize`), under the role's name and picture; without it Slack
 * would ignore both, so the text starts with `[<role>]`.
 */
export function rolePost(input: { channel: string; thread_ts?: string; text: string; role: RoleLook; customize: boolean }): ChatBPost {
  const base = { channel: input.channel, ...(input.thread_ts ? { thread_ts: input.thread_ts } : {}) };
  if (input.customize) return { ...base, text: mrkdwnText(input.text), username: input.role.displayName.slice(0, 80), ...(input.role.iconUrl ? { icon_url: input.role.iconUrl } : {}) };
  return { ...base, text: mrkdwnText(`[${escapeText(input.role.displayName)}] ${input.text}`) };
}

/** A question to the person who gave the task: it mentions them, so Slack notifies them. */
export function questionText(question: string, askedOf: string): string {
  return `<@${askedOf.replace(/[^A-Z0-9]/g, '')}> ${messageText(question)}`;
}

/** A confirmation: the question and two buttons whose value is the confirmation's id. */
export function confirmationPost(input: { channel: string; thread_ts: string; text: string; confirmation: string; askedOf?: string }): ChatBPost {
  const text = input.askedOf ? questionText(input.text, input.askedOf) : messageText(input.text);
  const value = input.confirmation.slice(0, 2000);
  const blocks: KnownBlock[] = [
    { type: 'section', text: { type: 'mrkdwn', text: text.slice(0, MAX_SECTION_CHARS) } },
    {
      type: 'actions',
      block_id: `confirmation:${value}`.slice(0, 255),
      elements: [
        { type: 'button', action_id: CONFIRM_ACTIONS.approve, style: 'primary', value, text: { type: 'plain_text', text: 'Approve' } },
        { type: 'button', action_id: CONFIRM_ACTIONS.refuse, style: 'danger', value, text: { type: 'plain_text', text: 'Refuse' } },
      ],
    },
  ];
  return { channel: input.channel, thread_ts: input.thread_ts, text, blocks };
}

/** Whether a click is a decision on a confirmation, and which. */
export function decisionOf(actionId: string): 'approve' | 'refuse' | null {
  if (actionId === CONFIRM_ACTIONS.approve) return 'approve';
  if (actionId === CONFIRM_ACTIONS.refuse) return 'refuse';
  return null;
}

/** The confirmation's message once decided (`chat.update`; `text` the message's as Slack gave it, mrkdwn): the buttons replaced by who decided what. */
export function decidedUpdate(input: { channel: string; ts: string; text: string; decision: 'approve' | 'refuse'; by: string }): { channel: string; ts: string; text: string; blocks: KnownBlock[] } {
  const said = `${input.decision === 'approve' ? 'Approved' : 'Refused'} by <@${input.by.replace(/[^A-Z0-9]/g, '')}>`;
  const text = mrkdwnText(input.text);
  return {
    channel: input.channel,
    ts: input.ts,
    text: `${text}\n${said}`,
    blocks: [
      { type: 'section', text: { type: 'mrkdwn', text: text.slice(0, MAX_SECTION_CHARS) } },
      { type: 'context', elements: [{ type: 'mrkdwn', text: said }] },
    ],
  };
}

import { Type } from 'typebox';
import { chatErrors } from '../http/errors.ts';
import { Envelope, type ChatRouter } from '../http/server.ts';
import { readNarrow } from '../messages/messages.routes.ts';
import type { ChatEventsService } from './events.service.ts';

const tags = ['chat-events'];

export function chatEventsRoutes(r: ChatRouter, deps: { events: ChatEventsService }) {
  const { events } = deps;

  r.authed(
    { method: 'POST', url: '/register', operationId: 'registerQueue', tags, description: 'An event queue and the initial state of the event types asked for (`fetch_event_types`, else `event_types`, else all): among them `realm_emoji`, `user_settings` (stored time zone, presence and email visibility; Zulip defaults for the rest), `muted_users` (with when each was muted), `max_file_upload_size_mib` with the realm, and the empty `realm_user_groups`, `drafts` and `alert_words` (this server has none).', response: Envelope({}, { open: true }) },
    async ({ params, caller }) => {
      const eventTypes = params.stringList('event_types', { maxLength: 100 });
      const fetchEventTypes = params.stringList('fetch_event_types', { maxLength: 100 });
      // Not acted on (client_capabilities, all_public_streams, presence_history_limit_days) stay
      // unread, so the answer lists them in ignored_parameters_unsupported.
      return events.register(caller, {
        eventTypes,
        fetchEventTypes,
        narrow: readNarrow(params),
        applyMarkdown: params.bool('apply_markdown') ?? false,
        clientGravatar: params.bool('client_gravatar') ?? false,
        includeSubscribers: params.bool('include_subscribers') ?? false,
        slimPresence: params.bool('slim_presence') ?? false,
      });
    },
  );

  r.authed(
    {
      method: 'GET',
      url: '/events',
      operationId: 'getEvents',
      tags,
      description: 'Long-polls an event queue: answers at once with events after last_event_id, or when one arrives, or with a heartbeat.',
      response: Envelope({ events: Type.Array(Type.Object({}, { additionalProperties: true })), queue_id: Type.Optional(Type.String()) }),
    },
    async ({ req, params, caller }) => {
      const queueId = params.string('queue_id', { required: true, maxLength: 200 });
      const lastEventId = params.int('last_event_id') ?? -1;
      const dontBlock = params.bool('dont_block') ?? false;
      if (caller.user.is_bot && caller.user.bot_type === 2) throw chatErrors.bad('This API is not available to incoming webhook bots.');
      const ac = new AbortController();
      const onClose = () => ac.abort();
      req.raw.socket?.once('close', onClose);
      try {
        return await events.events(caller, { queueId, lastEventId, dontBlock, signal: ac.signal });
      } finally {
        req.raw.socket?.off('close', onClose);
      }
    },
  );

  r.authed({ method: 'DELETE', url: '/events', operationId: 'deleteQueue', tags, response: Envelope() }, async ({ params, caller }) => {
    events.deleteQueue(caller, params.string('queue_id', { required: true, maxLength: 200 }));
    return {};
  });
}

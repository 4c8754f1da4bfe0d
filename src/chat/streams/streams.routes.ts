import { Type } from 'typebox';
import { chatErrors } from '../http/errors.ts';
import { Envelope, pathId, type ChatRouter } from '../http/server.ts';
import { MAX_STREAM_NAME_LENGTH, MAX_TOPIC_NAME_LENGTH, type ChatStreamsService } from './streams.service.ts';

const tags = ['chat-channels'];

const Stream = Type.Object({
  stream_id: Type.Integer(),
  name: Type.String(),
  description: Type.String(),
  invite_only: Type.Boolean(),
  is_archived: Type.Boolean(),
  is_web_public: Type.Boolean(),
  creator_id: Type.Union([Type.Integer(), Type.Null()]),
  date_created: Type.Integer(),
});
const ByUser = Type.Record(Type.String(), Type.Array(Type.String()));
/** Zulip's Subscription object: the channel, the caller's settings for it, and its subscribers when asked for (the group settings and any later field pass as they are). */
const Subscription = Type.Object(
  {
    ...Stream.properties,
    rendered_description: Type.String(),
    color: Type.String(),
    is_muted: Type.Boolean(),
    in_home_view: Type.Boolean(),
    pin_to_top: Type.Boolean(),
    subscribers: Type.Optional(Type.Array(Type.Integer())),
  },
  { additionalProperties: true },
);

export function chatStreamsRoutes(r: ChatRouter, deps: { streams: ChatStreamsService }) {
  const { streams } = deps;

  r.authed(
    {
      method: 'PATCH',
      url: '/users/me/subscriptions/muted_topics',
      operationId: 'muteTopic',
      tags,
      description: 'Deprecated (feature level 170): mutes or unmutes a topic; use POST /user_topics.',
      response: Envelope(),
    },
    async ({ params, caller }) => {
      const streamId = params.int('stream_id');
      const stream = params.string('stream', { maxLength: MAX_STREAM_NAME_LENGTH * 4 });
      const topic = params.string('topic', { required: true, maxLength: MAX_TOPIC_NAME_LENGTH });
      const op = params.literal('op', ['add', 'remove'] as const, true);
      await streams.updateMutedTopic(caller, { streamId, stream, topic, op });
      return {};
    },
  );

  r.authed({ method: 'POST', url: '/user_topics', operationId: 'updateUserTopic', tags, response: Envelope() }, async ({ params, caller }) => {
    const streamId = params.int('stream_id', true);
    const topic = params.string('topic', { required: true, maxLength: MAX_TOPIC_NAME_LENGTH });
    const visibilityPolicy = params.int('visibility_policy', true);
    await streams.updateUserTopic(caller, { streamId, topic, visibilityPolicy });
    return {};
  });

  r.authed(
    {
      method: 'GET',
      url: '/user_topics',
      operationId: 'getUserTopics',
      tags,
      response: Envelope({ user_topics: Type.Array(Type.Object({ stream_id: Type.Integer(), topic_name: Type.String(), visibility_policy: Type.Integer(), last_updated: Type.Integer() })) }),
    },
    async ({ caller }) => ({ user_topics: await streams.userTopics(caller) }),
  );

  r.authed(
    {
      method: 'POST',
      url: '/users/me/subscriptions',
      operationId: 'subscribe',
      tags,
      description:
        'Subscribes the caller, or the `principals` (a JSON list of user IDs or of emails), to channels, creating the missing ones. Any member but a guest may subscribe others to a channel they can reach; administrators to private ones too. Answers `subscribed` and `already_subscribed` by user ID.',
      response: Envelope({ subscribed: ByUser, already_subscribed: ByUser }),
    },
    async ({ params, caller }) => {
      const subscriptions = params.objectList('subscriptions', true, (x, label) => {
        if (typeof x.name !== 'string') throw chatErrors.bad(x.name === undefined ? `${label}["name"] field is missing` : `${label}["name"] is not a string`);
        if (x.description !== undefined && typeof x.description !== 'string') throw chatErrors.bad(`${label}["description"] is not a string`);
        if (typeof x.description === 'string' && [...x.description].length > 1024) throw chatErrors.bad(`${label}["description"] is too long (limit: 1024 characters)`);
        return { name: x.name, description: (x.description as string | undefined) ?? '' };
      })!;
      const inviteOnly = params.bool('invite_only') ?? false;
      return streams.subscribe(caller, { subscriptions, inviteOnly, principals: params.principals('principals') });
    },
  );

  r.authed(
    {
      method: 'POST',
      url: '/users/me/subscriptions/properties',
      operationId: 'updateSubscriptionSettings',
      tags,
      description:
        "Changes the caller's own settings for channels they are subscribed to: `subscription_data` is a JSON list of `{stream_id, property, value}`, the property one of `color` (a hex color), `is_muted` (or the older `in_home_view`, its inverse), `pin_to_top`, `desktop_notifications`, `audible_notifications`, `push_notifications`, `email_notifications`, `wildcard_mentions_notify` (booleans). All changes apply or none; the caller's queues get `subscription update` events.",
      response: Envelope(),
    },
    async ({ params, caller }) => {
      const changes = params.objectList('subscription_data', true, (x, label) => {
        if (typeof x.stream_id !== 'number' || !Number.isInteger(x.stream_id)) throw chatErrors.bad(x.stream_id === undefined ? `${label}["stream_id"] field is missing` : `${label}["stream_id"] is not an integer`);
        if (typeof x.property !== 'string') throw chatErrors.bad(x.property === undefined ? `${label}["property"] field is missing` : `${label}["property"] is not a string`);
        if (x.value === undefined) throw chatErrors.bad(`${label}["value"] field is missing`);
        return { streamId: x.stream_id, property: x.property, value: x.value };
      })!;
      await streams.setSubscriptionProperties(caller, changes);
      return {};
    },
  );

  r.authed(
    { method: 'DELETE', url: '/users/me/subscriptions', operationId: 'unsubscribe', tags, response: Envelope({ removed: Type.Array(Type.String()), not_removed: Type.Array(Type.String()) }) },
    async ({ params, caller }) => {
      const names = params.stringList('subscriptions', { required: true, maxLength: MAX_STREAM_NAME_LENGTH * 4 })!;
      return streams.unsubscribe(caller, names);
    },
  );

  r.authed(
    {
      method: 'GET',
      url: '/users/me/subscriptions',
      operationId: 'getSubscriptions',
      tags,
      description: "The caller's subscriptions as Zulip's Subscription objects (color, muting, notification settings); `include_subscribers=true` adds each channel's subscribers' user ids.",
      response: Envelope({ subscriptions: Type.Array(Subscription) }),
    },
    async ({ params, caller }) => ({
      subscriptions: await streams.subscriptionObjects(caller, params.bool('include_subscribers') ?? false),
    }),
  );

  r.authed({ method: 'GET', url: '/streams', operationId: 'getStreams', tags, response: Envelope({ streams: Type.Array(Stream) }) }, async ({ params, caller }) => ({
    streams: await streams.streams(caller, {
      includePublic: params.bool('include_public'),
      includeSubscribed: params.bool('include_subscribed'),
      // include_all replaced include_all_active at feature level 356.
      includeAll: params.bool('include_all') ?? params.bool('include_all_active'),
      includeContent: params.bool('include_can_access_content'),
      excludeArchived: params.bool('exclude_archived'),
    }),
  }));

  r.authed(
    { method: 'GET', url: '/streams/:stream_id', operationId: 'getStreamById', tags, description: "A channel the caller can see, as Zulip's BasicChannel.", response: Envelope({ stream: Type.Object({}, { additionalProperties: true }) }) },
    async ({ req, caller }) => ({ stream: await streams.stream(caller, pathId((req.params as { stream_id: string }).stream_id)) }),
  );

  r.authed(
    {
      method: 'PATCH',
      url: '/streams/:stream_id',
      operationId: 'updateStream',
      tags,
      description:
        'An organization administrator or the channel\'s creator renames a channel (new_name), changes its description, or makes it private or public (is_private; history_public_to_subscribers must match: public history for public channels only). Web-public channels are not enabled. Everyone who can see the channel gets stream update events.',
      response: Envelope(),
    },
    async ({ req, params, caller }) => {
      await streams.update(caller, pathId((req.params as { stream_id: string }).stream_id), {
        newName: params.string('new_name', { maxLength: MAX_STREAM_NAME_LENGTH * 4 }),
        description: params.string('description', { maxLength: 1024 }),
        isPrivate: params.bool('is_private'),
        isWebPublic: params.bool('is_web_public'),
        historyPublicToSubscribers: params.bool('history_public_to_subscribers'),
      });
      return {};
    },
  );

  r.authed({ method: 'GET', url: '/get_stream_id', operationId: 'getStreamId', tags, response: Envelope({ stream_id: Type.Integer() }) }, async ({ params, caller }) => ({
    stream_id: await streams.streamId(caller, params.string('stream', { required: true, maxLength: MAX_STREAM_NAME_LENGTH * 4 })),
  }));
}

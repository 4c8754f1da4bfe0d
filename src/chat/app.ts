import swagger from '@fastify/swagger';
import type { Logger } from 'pino';
import type { Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { createServer, type App } from '../http/kernel.ts';
import type { Registry } from '../metrics.ts';
import type { Cipher } from '../secrets/cipher.ts';
import { createChatBotStorageService } from './bot-storage/bot-storage.service.ts';
import { chatBotStorageRoutes } from './bot-storage/bot-storage.routes.ts';
import { chatEmojiRoutes } from './emoji/emoji.routes.ts';
import { createChatEmojiService } from './emoji/emoji.service.ts';
import { chatEventsRoutes } from './events/events.routes.ts';
import { createChatEventsService } from './events/events.service.ts';
import type { QueueLimits } from './events/queues.ts';
import { chatErrors } from './http/errors.ts';
import { RateLimiter } from './http/rate-limit.ts';
import { chatRouter, pathId, useChatConventions } from './http/server.ts';
import { chatInvitesRoutes } from './invites/invites.routes.ts';
import { createChatInvitesService } from './invites/invites.service.ts';
import { chatMessagesRoutes } from './messages/messages.routes.ts';
import { createChatMessagesService } from './messages/messages.service.ts';
import { chatPresenceRoutes, createChatPresenceService } from './presence/presence.ts';
import { chatPlaygroundsRoutes } from './playgrounds/playgrounds.routes.ts';
import { createChatPlaygroundsService } from './playgrounds/playgrounds.service.ts';
import { chatProfileFieldsRoutes } from './profile-fields/profile-fields.routes.ts';
import { createChatProfileFieldsService } from './profile-fields/profile-fields.service.ts';
import { chatRealmRoutes } from './realm/realm.routes.ts';
import { createChatRealmService } from './realm/realm.service.ts';
import { chatStatusRoutes } from './status/status.routes.ts';
import { createChatStatusService } from './status/status.service.ts';
import { chatStreamsRoutes } from './streams/streams.routes.ts';
import { createChatStreamsService } from './streams/streams.service.ts';
import { FEATURE_LEVEL } from './realm/realm.service.ts';
import { chatUploadFileRoutes, chatUploadsRoutes } from './uploads/uploads.routes.ts';
import { createChatUploadsService, DEFAULT_MAX_FILE_UPLOAD_MIB } from './uploads/uploads.service.ts';
import { chatMutingRoutes } from './muting/muting.routes.ts';
import { createChatMutingService } from './muting/muting.service.ts';
import { chatUsersRoutes } from './users/users.routes.ts';
import { createChatUsersService } from './users/users.service.ts';

const FEATURE_LEVEL_STRING = `feature level ${FEATURE_LEVEL}`;

/** The chat's composition root: every service built once, each given only what it needs. */
export function createChatServices(deps: { db: Db; cipher: Cipher; queueLimits?: Partial<QueueLimits>; maxFileUploadMib?: number; deleteUnclaimedUploadsDays?: number }) {
  const { db, cipher } = deps;
  const users = createChatUsersService({ db, cipher });
  const realms = createChatRealmService({ db, users });
  const streams = createChatStreamsService({ db, afterCommit: () => events.poke() });
  const emoji = createChatEmojiService({ db });
  const status = createChatStatusService({ db, emoji, users });
  const botStorage = createChatBotStorageService({ db });
  const invites = createChatInvitesService({ db, streams });
  const playgrounds = createChatPlaygroundsService({ db });
  const profileFields = createChatProfileFieldsService({ db });
  // Writers nudge this process's event reader after they commit; other processes hear the NOTIFY.
  const uploads = createChatUploadsService({
    db,
    cipher,
    maxFileUploadMib: deps.maxFileUploadMib ?? DEFAULT_MAX_FILE_UPLOAD_MIB,
    deleteUnclaimedDays: deps.deleteUnclaimedUploadsDays,
    afterCommit: () => events.poke(),
  });
  const muting = createChatMutingService({ db, afterCommit: () => events.poke() });
  const messages = createChatMessagesService({ db, streams, emoji, uploads, muting, afterCommit: () => events.poke() });
  const presence = createChatPresenceService({ db, afterCommit: () => events.poke() });
  const events = createChatEventsService({ db, messages, streams, profileFields, presence, emoji, uploads, muting, limits: deps.queueLimits });
  return { users, realms, streams, emoji, status, botStorage, invites, playgrounds, profileFields, messages, events, presence, uploads, muting };
}

export type ChatServices = ReturnType<typeof createChatServices>;

/** The Zulip-compatible chat server: its API under /api/v1 and the uploaded images it serves. */
export async function buildChatApp(deps: { config: Config; logger: Logger; metrics?: Registry; services: ChatServices }): Promise<App> {
  const { config, services } = deps;
  const app = createServer({ logger: deps.logger, metrics: deps.metrics, bodyLimit: config.bodyLimit, trustProxy: config.trustProxy, component: 'chat' });
  useChatConventions(app);
  const limiter = config.chatRateLimit ? new RateLimiter(config.chatRateLimit) : null;
  // The event queues live as long as this server: it reads the event log while it listens.
  await services.events.start(deps.logger);
  app.addHook('onClose', async () => services.events.stop());

  // The chat server's own contract, served at /api/v1/openapi.json (docs/chat-server.md): every
  // route this server answers, registered before them so each is recorded.
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Crewhouse chat server (Zulip-compatible)',
        version: FEATURE_LEVEL_STRING,
        description:
          'A Zulip-compatible chat server: paths are relative to {chat_base_url}/api/v1. Parameters are form-encoded (typed ones JSON-encoded), answers are ' +
          '{result, msg, ...}; errors are {result: "error", msg, code}. Zulip Server\'s own OpenAPI description is the reference for each operation.',
      },
      servers: [{ url: '/api/v1' }],
      components: { securitySchemes: { basicAuth: { type: 'http', scheme: 'basic', description: 'the account\'s API email address and API key' } } },
      security: [{ basicAuth: [] }],
    },
    transform: ({ schema, url }) => ({ schema: schema as never, url: url.startsWith('/api/v1') ? url.slice('/api/v1'.length) || '/' : url }),
  });

  await app.register(
    async (api: App) => {
      const r = chatRouter(api, { authenticate: (header) => services.users.authenticate(header), limiter });
      chatUploadsRoutes(r, services);
      chatMutingRoutes(r, services);
      chatRealmRoutes(r, services);
      chatUsersRoutes(r, services);
      chatStreamsRoutes(r, services);
      chatStatusRoutes(r, services);
      chatEmojiRoutes(r, services);
      chatBotStorageRoutes(r, services);
      chatInvitesRoutes(r, services);
      chatPlaygroundsRoutes(r, services);
      chatProfileFieldsRoutes(r, services);
      chatMessagesRoutes(r, services);
      chatEventsRoutes(r, services);
      chatPresenceRoutes(r, services);
      api.get('/openapi.json', { schema: { operationId: 'getChatOpenApi', tags: ['meta'], description: 'This chat server\'s contract, as OpenAPI 3.1 JSON (public).' } }, async () => app.swagger());
    },
    { prefix: '/api/v1' },
  );

  // Uploaded files, to signed-in people who may read them (Basic auth, as the API), and by temporary URL.
  chatUploadFileRoutes(chatRouter(app, { authenticate: (header) => services.users.authenticate(header), limiter }), services);

  // Uploaded images, at the addresses avatar_url and source_url give (unguessable names, as Zulip's).
  app.get('/user_avatars/:realm_id/:user_id/:file', { schema: { operationId: 'getAvatarImage', tags: ['chat-files'] } }, async (req, reply) => {
    const p = req.params as { realm_id: string; user_id: string; file: string };
    const m = /^([0-9a-f]{40})\.png$/.exec(p.file);
    const img = m ? await services.users.avatar(pathId(p.realm_id), pathId(p.user_id), m[1]) : undefined;
    if (!img) throw chatErrors.notFound();
    return reply.header('content-type', img.content_type).header('cache-control', 'public, max-age=31536000, immutable').send(img.image);
  });
  app.get('/user_avatars/:realm_id/emoji/images/:emoji_id', { schema: { operationId: 'getEmojiImage', tags: ['chat-files'] } }, async (req, reply) => {
    const p = req.params as { realm_id: string; emoji_id: string };
    const img = await services.emoji.image(pathId(p.realm_id), pathId(p.emoji_id));
    if (!img) throw chatErrors.notFound();
    return reply.header('content-type', img.content_type).header('cache-control', 'public, max-age=86400').send(img.image);
  });
  return app;
}

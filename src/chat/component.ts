import type { Component } from '../components.ts';
import { buildChatApp } from './app.ts';

/** The Zulip-compatible chat server on SERVICE_CHAT_PORT (spec/chat-api.md). */
export const chatComponent: Component = {
  name: 'chat',
  async start(ctx) {
    const app = await buildChatApp({ config: ctx.config, logger: ctx.logger, metrics: ctx.metrics, services: ctx.services.chat });
    const address = await app.listen({ port: ctx.config.chatPort, host: ctx.config.host });
    return { address, stop: () => app.close() };
  },
};

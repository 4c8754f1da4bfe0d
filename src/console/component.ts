import type { Component } from '../components.ts';
import { buildConsoleApp } from './app.ts';

/** The console: Console API, web console, webhooks, health and metrics on SERVICE_PORT. */
export const consoleComponent: Component = {
  name: 'console',
  async start(ctx) {
    const app = await buildConsoleApp(ctx);
    const address = await app.listen({ port: ctx.config.port, host: ctx.config.host });
    return { address, stop: () => app.close() };
  },
};

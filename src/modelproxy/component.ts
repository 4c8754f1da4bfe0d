import type { Component } from '../components.ts';
import { cachedReveal, startModelProxy } from './server.ts';

/** The model proxy of `crewhouse serve`: OpenAI-compatible front and admin API on SERVICE_MODEL_PROXY_PORT. */
export const modelProxyComponent: Component = {
  name: 'modelproxy',
  async start(ctx) {
    const running = await startModelProxy({ config: ctx.config, db: ctx.db, logger: ctx.logger, metrics: ctx.metrics, catalog: ctx.models, credential: cachedReveal(ctx.services.secrets) });
    return { address: running.url, stop: running.stop };
  },
};

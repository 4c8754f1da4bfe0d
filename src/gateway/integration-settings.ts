import type { Logger } from 'pino';
import { listen, type Db, type Unlisten } from '../db/database.ts';
import type { IntegrationsService } from '../console/integrations/integrations.service.ts';

/**
 * The gateway's hold on the integration settings: it loads them at start and again whenever a
 * PUT /integrations/{kind} announces a new generation (NOTIFY; a slow poll covers a lost
 * LISTEN), and records the generation it loaded for its host, which is what turns
 * `status.applied` from `pending` to `current`.
 */
export async function watchIntegrationSettings(deps: {
  db: Db;
  integrations: Pick<IntegrationsService, 'generation' | 'codeHostApp' | 'recordLoaded' | 'settingsChannel'>;
  hostAddress: string;
  logger: Logger;
  pollMs?: number;
}): Promise<{ loaded(): number; reload(): Promise<void>; stop(): Promise<void> }> {
  const { integrations } = deps;
  const log = deps.logger.child({ component: 'gateway-integrations' });
  let loaded = -1;
  let running: Promise<void> | null = null;
  let again = false;

  async function load() {
    const generation = await integrations.generation();
    if (generation === loaded) return;
    // Builds (or keeps) the app client of these settings, so the first injection finds it ready.
    await integrations.codeHostApp().catch((err) => log.warn({ cause: (err as Error).message }, 'the code_host settings could not be loaded'));
    await integrations.recordLoaded(deps.hostAddress, generation);
    loaded = generation;
    log.info({ generation }, 'integration settings loaded');
  }

  // One load at a time; a notice during a load runs one more after it.
  const reload = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = load()
      .catch((err) => log.error({ cause: (err as Error).message }, 'loading the integration settings failed'))
      .finally(() => {
        running = null;
        if (again) {
          again = false;
          void reload();
        }
      });
    return running;
  };

  await reload();
  let unlisten: Unlisten | null = null;
  try {
    unlisten = await listen(deps.db, await integrations.settingsChannel(), () => void reload());
  } catch (err) {
    log.warn({ cause: (err as Error).message }, 'could not LISTEN for integration settings changes; polling only');
  }
  const timer = setInterval(() => void reload(), deps.pollMs ?? 30_000);
  timer.unref();
  return {
    loaded: () => loaded,
    reload,
    async stop() {
      clearInterval(timer);
      await unlisten?.().catch(() => {});
      await running;
    },
  };
}

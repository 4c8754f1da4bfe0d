import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Db } from './db/database.ts';
import type { Registry } from './metrics.ts';
import type { ModelCatalog } from './models/catalog.ts';
import type { Cipher } from './secrets/cipher.ts';
import type { Services } from './services.ts';

/**
 * What every component gets: the parsed config, the database, a logger, the metrics registry,
 * the cipher and model catalogue loaded once per process, and the domain services built once
 * by the composition root (src/services.ts).
 */
export interface ComponentContext {
  config: Config;
  db: Db;
  logger: Logger;
  metrics: Registry;
  cipher: Cipher;
  models: ModelCatalog;
  services: Services;
}

export interface RunningComponent {
  /** Where it listens, for the start-up log. */
  address?: string;
  stop(): Promise<void>;
}

export interface Component {
  name: string;
  start(ctx: ComponentContext): Promise<RunningComponent>;
}

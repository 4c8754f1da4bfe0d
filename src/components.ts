import type { Logger } from 'pino';
import type { Config } from './config.ts';
import type { Db } from './db/database.ts';
import type { Registry } from './http/metrics.ts';

/** What every component gets: the parsed config, the database, a logger and the metrics registry. */
export interface ComponentContext {
  config: Config;
  db: Db;
  logger: Logger;
  metrics: Registry;
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

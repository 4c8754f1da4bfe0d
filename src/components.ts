import type { ComponentContext } from './services.ts';

export type { ComponentContext };

export interface RunningComponent {
  /** Where it listens, for the start-up log. */
  address?: string;
  stop(): Promise<void>;
}

export interface Component {
  name: string;
  start(ctx: ComponentContext): Promise<RunningComponent>;
}

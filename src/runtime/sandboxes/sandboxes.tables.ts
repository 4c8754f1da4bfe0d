import type { ColumnType } from 'kysely';
import type { Timestamp } from '../../db/columns.ts';
import type { SandboxState } from './provider.ts';

/** A nullable text column with no default that an insert may leave out. */
type OptionalText = ColumnType<string | null, string | null | undefined, string | null>;

/** The sandboxes module's tables (created by migrations 0401 and 0605). */
export interface SandboxesTables {
  sandboxes: {
    id: string;
    team_id: number;
    role: string;
    replica: number;
    provider: string;
    state: SandboxState;
    created_at: Timestamp;
    updated_at: Timestamp;
    /** The sandbox host it was placed on. */
    host_id: OptionalText;
    /** The host end and the sandbox end of its link: the gateway knows it by these. */
    host_address: OptionalText;
    sandbox_address: OptionalText;
  };
}

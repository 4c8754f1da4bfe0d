import type { ColumnType } from 'kysely';
import type { Json, RowVersion, Timestamp } from '../../db/columns.ts';
import type { IntegrationKind, SettingValue } from './kinds.ts';

export interface IntegrationsTables {
  integrations: {
    kind: IntegrationKind;
    enabled: ColumnType<boolean, boolean | undefined, boolean>;
    settings: Json<Record<string, SettingValue>>;
    /** From integration_generation_seq at every PUT; 0 until the first. */
    generation: ColumnType<number, number | undefined, unknown>;
    updated_by: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
  /** The settings generation each sandbox host's gateway loaded last, by the host's address. */
  integration_loads: {
    host_address: string;
    generation: ColumnType<number, number, number>;
    loaded_at: Timestamp;
  };
}

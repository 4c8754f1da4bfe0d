import type { NullableTimestamp, RowVersion, Timestamp } from '../db/columns.ts';

export interface SecretsTables {
  secrets: {
    name: string;
    /** `v1.` + base64(iv | tag | ciphertext); null when the reference is unset. */
    value_sealed: string | null;
    key_id: string | null;
    created_by: string;
    updated_by: string;
    value_set_at: NullableTimestamp;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
}

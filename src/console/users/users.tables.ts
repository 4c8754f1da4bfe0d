import type { Generated, NullableTimestamp, RowVersion, Timestamp } from '../../db/columns.ts';

import type { Role } from '../../auth/roles.ts';

export type { Role };

export interface UsersTables {
  users: {
    id: Generated<number>;
    name: string;
    email: string | null;
    role: Role;
    disabled: Generated<boolean>;
    password_hash: string | null;
    last_login_at: NullableTimestamp;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
  setup_tokens: {
    id: Generated<number>;
    user_id: number;
    token_hash: string;
    created_at: Timestamp;
    expires_at: Timestamp;
    used_at: NullableTimestamp;
  };
}

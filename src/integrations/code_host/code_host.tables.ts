import type { ColumnType } from 'kysely';
import type { Timestamp } from '../../db/columns.ts';

type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface CodeHostTables {
  /** The code-host work item a run belongs to: the issue it came from, the pull request it opened. */
  code_host_work: {
    run_id: string;
    team_name: string;
    repository: string;
    issue_number: Defaulted<number | null>;
    pull_number: Defaulted<number | null>;
    pull_url: Defaulted<string | null>;
    created_at: Timestamp;
  };
}

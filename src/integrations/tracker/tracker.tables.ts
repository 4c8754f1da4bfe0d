import type { ColumnType } from 'kysely';
import type { Timestamp } from '../../db/columns.ts';

type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface TrackerTables {
  /** The tracker issue a run came from (a claim `pending:<delivery>` until the run exists). */
  tracker_work: {
    run_id: string;
    surface: 'tracker_a' | 'tracker_b';
    team_name: string;
    /** The tracker's own id of the issue, and the key people know it by (ENG-12, OPS-3). */
    issue_id: string;
    issue_key: string;
    issue_url: Defaulted<string | null>;
    /** Linear's agent session on the issue (its progress goes there as activities); null for Jira. */
    session_id: Defaulted<string | null>;
    /** The tracker account that asked (a question mentions it) and its name. */
    requested_by: Defaulted<string | null>;
    requested_by_name: Defaulted<string | null>;
    created_at: Timestamp;
  };
}

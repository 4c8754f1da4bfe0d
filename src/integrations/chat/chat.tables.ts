import type { ColumnType } from 'kysely';
import type { Timestamp } from '../../db/columns.ts';

type Defaulted<T> = ColumnType<T, T | undefined, T>;

export interface ChatSurfacesTables {
  /** The thread of a run that came from a chat room. */
  surface_threads: {
    run_id: string;
    surface: string;
    room_id: string;
    team: string;
    /** The thread's root post: the run's own, once posted, or the conversation's it was asked for in (known from the start). */
    root_id: Defaulted<string | null>;
    /** The permalink of the run's first post (the run's `chat_thread_url`): null until it is made. */
    url: Defaulted<string | null>;
    requested_by: string;
    requested_by_name: string;
    /** The last run post the thread has taken care of (posted, or chosen not to show). */
    mirrored_seq: Defaulted<number>;
    /** The role last said to be working, so a role's steps are announced once. */
    last_role: Defaulted<string | null>;
    created_at: Timestamp;
  };
  /** Every message taken as work: one message is one effect, however often it is seen. */
  surface_messages: {
    surface: string;
    message_id: string;
    run_id: Defaulted<string | null>;
    /** What it did, once done. */
    effect: Defaulted<string | null>;
    created_at: Timestamp;
  };
  /** Every post made by its stable key; `post_id` null while it is being made (by `claimed_by`, a job). */
  surface_posts: {
    key: string;
    post_id: Defaulted<string | null>;
    claimed_by: string;
    claimed_at: Timestamp;
    created_at: Timestamp;
  };
  /** A confirmation's buttons: the SHA-256 of the unguessable token they carry. */
  surface_confirmations: {
    token_hash: string;
    run_id: string;
    seq: number;
    room_id: string;
    post_id: Defaulted<string | null>;
    decided_by: Defaulted<string | null>;
    created_at: Timestamp;
  };
}

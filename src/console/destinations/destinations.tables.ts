import type { Json, RowVersion, Timestamp } from '../../db/columns.ts';
import type { GithubScope } from '../../egress/policy.ts';

export interface DestinationsTables {
  destinations: {
    name: string;
    host: string | null;
    methods: Json<string[]>;
    paths: Json<string[]>;
    header_allowlist: Json<string[]>;
    inject_secret: string | null;
    git_push_ref_globs: Json<string[]>;
    what: string;
    github_scope: GithubScope | null;
    dev_only: boolean;
    policy_name: string | null;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
}

import type { RowVersion, Timestamp } from '../../db/columns.ts';

export type DocumentScope = 'agent' | 'team';

export interface DocumentsTables {
  context_documents: {
    scope: DocumentScope;
    owner: string;
    name: string;
    media_type: string;
    description: string;
    content: string;
    size_bytes: number;
    sha256: string;
    created_by: string;
    created_at: Timestamp;
    updated_at: Timestamp;
    row_version: RowVersion;
  };
}

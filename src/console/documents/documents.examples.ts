import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of documents (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const documentsExamples: Partial<ContractExamples> = {
  "shapes": {
    "Document": {
      "scope": "agent",
      "owner": "coder",
      "name": "style.md",
      "media_type": "text/markdown",
      "description": "the house code style",
      "size_bytes": 53,
      "sha256": "c36760971240274371e1e24a87d83b95b6196d1db65657d63f4833ae3e729b72",
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:01.869Z",
      "updated_at": "2026-11-22T20:55:01.869Z",
      "content": "# Style\n\n- Small functions.\n- Tests beside the code.\n"
    },
    "DocumentPut": {
      "media_type": "text/markdown",
      "description": "the house code style",
      "content": "# Style\n\n- Small functions.\n- Tests beside the code.\n"
    },
    "DocumentSummary": {
      "scope": "agent",
      "owner": "coder",
      "name": "style.md",
      "media_type": "text/markdown",
      "description": "the house code style",
      "size_bytes": 53,
      "sha256": "c36760971240274371e1e24a87d83b95b6196d1db65657d63f4833ae3e729b72",
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:01.869Z",
      "updated_at": "2026-11-22T20:55:01.869Z"
    }
  }
};

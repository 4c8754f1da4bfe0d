import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of mcp servers (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const mcpServersExamples: Partial<ContractExamples> = {
  "shapes": {
    "McpServer": {
      "id": "docs-team/issues",
      "scope": "team",
      "team": "docs-team",
      "name": "issues",
      "url": "https://mcp.example.com/issues",
      "destination": "github-api",
      "auth": "none",
      "header": null,
      "roles": [
        "dev"
      ],
      "secret": {
        "ref": null,
        "status": "none"
      },
      "status": "curated",
      "proposed_by": null,
      "warnings": [],
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:05.548Z",
      "updated_at": "2026-11-22T20:55:05.548Z"
    },
    "McpServerCreate": {
      "team": "docs-team",
      "name": "issues",
      "url": "https://mcp.example.com/issues",
      "destination": "github-api",
      "auth": "none",
      "roles": [
        "dev"
      ]
    },
    "McpServerPut": {
      "url": "https://mcp.example.com/issues",
      "destination": "github-api",
      "auth": "none",
      "roles": [
        "dev",
        "lead"
      ]
    }
  },
  "params": {
    "mcp-servers.id": "docs-team/issues",
    "mcp-servers.team": "docs-team",
    "mcp-servers.name": "issues"
  }
};

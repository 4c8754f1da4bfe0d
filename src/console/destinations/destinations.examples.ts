import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of destinations (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const destinationsExamples: Partial<ContractExamples> = {
  "shapes": {
    "Destination": {
      "name": "github-api",
      "host": "api.github.com",
      "methods": [
        "GET",
        "POST"
      ],
      "paths": [
        "/repos/*"
      ],
      "header_allowlist": [],
      "inject_secret": "secret:platform/github_token",
      "git_push_ref_globs": [],
      "what": "GitHub REST API",
      "builtin": false,
      "github_scope": null,
      "dev_only": false,
      "policy_name": null,
      "updated_at": "2026-11-22T20:54:59.634Z"
    },
    "DestinationCreate": {
      "name": "github-api",
      "host": "api.github.com",
      "methods": [
        "GET",
        "POST"
      ],
      "paths": [
        "/repos/*"
      ],
      "inject_secret": "secret:platform/github_token",
      "what": "GitHub REST API"
    },
    "DestinationPut": {
      "name": "github-api",
      "host": "api.github.com",
      "methods": [
        "GET"
      ],
      "paths": [
        "/repos/*"
      ],
      "inject_secret": "secret:platform/github_token",
      "what": "GitHub REST API, read only"
    }
  },
  "params": {
    "destinations.name": "github-api"
  }
};

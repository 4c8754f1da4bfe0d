import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of secrets (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const secretsExamples: Partial<ContractExamples> = {
  "shapes": {
    "SecretPut": {
      "value": "ghp_example_not_a_real_token"
    },
    "SecretReference": {
      "name": "platform/github_token",
      "kind": "platform",
      "set": true,
      "used_by": 0,
      "created_at": "2026-11-22T20:54:59.550Z",
      "updated_at": "2026-11-22T20:54:59.550Z",
      "created_by": "admin",
      "updated_by": "admin",
      "value_set_at": "2026-11-22T20:54:59.550Z"
    }
  },
  "params": {
    "secrets.name": "platform/github_token"
  }
};

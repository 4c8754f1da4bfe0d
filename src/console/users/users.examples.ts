import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of users (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const usersExamples: Partial<ContractExamples> = {
  "shapes": {
    "User": {
      "id": 1,
      "name": "admin",
      "email": null,
      "role": "admin",
      "disabled": false,
      "password_set": false,
      "last_login_at": null,
      "created_at": "2026-11-22T20:54:55.960Z",
      "updated_at": "2026-11-22T20:54:55.960Z"
    },
    "UserCreate": {
      "name": "ada",
      "email": "ada@example.com",
      "role": "operator"
    },
    "UserPatch": {
      "role": "viewer"
    },
    "UserWithSetup": {
      "id": 2,
      "name": "ada",
      "email": "ada@example.com",
      "role": "operator",
      "disabled": false,
      "password_set": false,
      "last_login_at": null,
      "created_at": "2026-11-22T20:54:58.772Z",
      "updated_at": "2026-11-22T20:54:58.772Z",
      "setup_token": "chu_example-setup",
      "setup_url": "http://localhost:8080/#setup?token=chu_example-setup",
      "setup_expires_at": "2026-11-29T20:54:58.773Z"
    }
  },
  "params": {
    "users.id": 2
  }
};

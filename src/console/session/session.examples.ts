import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of session (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const sessionExamples: Partial<ContractExamples> = {
  "shapes": {
    "LoginBody": {
      "name": "ada",
      "password": "correct horse battery staple"
    },
    "Me": {
      "id": 1,
      "name": "admin",
      "email": null,
      "role": "admin",
      "via": "token"
    },
    "NewToken": {
      "id": 7,
      "name": "laptop",
      "kind": "api",
      "prefix": "chk_9Fq2",
      "created_at": "2026-11-22T20:55:05.988Z",
      "expires_at": "2027-02-20T20:55:05.988Z",
      "last_used_at": null,
      "token": "chk_9Fq2-example"
    },
    "Onboarding": {
      "role": "admin",
      "console_url": "http://localhost:8080",
      "api_base_url": "http://localhost:8080/api/v1",
      "openapi_url": "http://localhost:8080/api/v1/openapi.json",
      "prompt": "You operate the Crewhouse deployment at http://localhost:8080 through its Console API at http://localhost:8080/api/v1, whose contract is served at http://localhost:8080/api/v1/openapi.json. Send every request with the header \"Authorization: Bearer <token>\" using the token you were given, and call GET http://localhost:8080/api/v1/me first to learn who you are.",
      "instructions": "## Crewhouse Console API\n- Base URL: http://localhost:8080/api/v1; contract: http://localhost:8080/api/v1/openapi.json (OpenAPI 3.1).\n- Authenticate with `Authorization: Bearer <token>`; `GET /me` answers who the token is.\n- Your role is **admin**. You may read and change everything, including agents, team templates, environments, destinations, secrets, platform skills, users and integration settings.\n- Lists answer `{items, next_cursor}`; pass `next_cursor` back as `cursor` for the next page.\n- To change an existing resource, GET it first and send its `ETag` as `If-Match`; 412 means it changed meanwhile: read it again and retry once.\n- Errors are `application/problem+json`: read `detail` and `errors[]`, which names each bad field."
    },
    "OnboardingToken": {
      "id": 7,
      "name": "onboarding",
      "kind": "onboarding",
      "prefix": "chk_9Fq2",
      "created_at": "2026-11-22T20:55:05.988Z",
      "expires_at": "2027-02-20T20:55:05.988Z",
      "last_used_at": null,
      "token": "chk_9Fq2-example",
      "prompt": "You operate the Crewhouse deployment at http://localhost:8080 through its Console API at http://localhost:8080/api/v1. Send every request with the header \"Authorization: Bearer chk_9Fq2-example\" and call GET http://localhost:8080/api/v1/me first to learn who you are."
    },
    "SessionInfo": {
      "user": {
        "id": 2,
        "name": "ada",
        "email": "ada@example.com",
        "role": "operator"
      },
      "via": "session",
      "csrf_token": "o7fq8ADTAxbku8hoL9PiGKyqhVucVxfQ",
      "expires_at": "2026-11-29T20:49:19.560Z"
    },
    "SetupBody": {
      "token": "chu_example-setup",
      "password": "correct horse battery staple"
    },
    "Token": {
      "id": 7,
      "name": "laptop",
      "kind": "api",
      "prefix": "chk_9Fq2",
      "created_at": "2026-11-22T20:55:05.988Z",
      "expires_at": "2027-02-20T20:55:05.988Z",
      "last_used_at": null
    },
    "TokenCreate": {
      "name": "laptop",
      "expires_in_days": 90
    }
  },
  "params": {
    "session.id": 7
  }
};

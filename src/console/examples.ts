import type { ContractExamples } from '../http/openapi.ts';

/**
 * Examples for the contract (see `ContractExamples`): one value of each named shape, the
 * bodies and answers that are not named shapes by operation, and path parameters. They were
 * taken from real answers of this API (names made readable) and are checked against their
 * schemas by examples.test.ts, so a shape that changes without its example fails there.
 */
export const consoleExamples: ContractExamples = {
  "shapes": {
    "ImportRequest": {
      "dry_run": false,
      "force": false,
      "prune": false
    },
    "PlanEntry": {
      "kind": "agent",
      "name": "coder",
      "file": "agents/coder.yaml",
      "action": "update",
      "reason": null,
      "diff": "  version:\n-   system_prompt: You write code.\n+   system_prompt: You write careful code.\n    tools: []",
      "version": 2
    },
    "PlanProblem": {
      "file": "templates/duo.yaml",
      "line": 6,
      "field": "roles.dev.agent",
      "message": "no agent named \"nobody\""
    },
    "ImportPlan": {
      "commit": "4f2c9a1d0b7e3c5a8f6e2d1c0b9a8f7e6d5c4b3a",
      "dry_run": true,
      "applied": false,
      "force": false,
      "prune": false,
      "entries": [
        {
          "kind": "skill",
          "name": "changelog",
          "file": "skills/changelog/SKILL.md",
          "action": "skip",
          "reason": "edited through the API since the last import; import with force to overwrite it",
          "diff": "--- SKILL.md\n- description: Edited in the console\n+ description: Keeps CHANGELOG.md in order",
          "version": null
        },
        {
          "kind": "policy",
          "name": "pypi",
          "file": "policies/pypi.yaml",
          "action": "unchanged",
          "reason": null,
          "diff": null,
          "version": null
        },
        {
          "kind": "agent",
          "name": "coder",
          "file": "agents/coder.yaml",
          "action": "update",
          "reason": null,
          "diff": "  version:\n-   system_prompt: You write code.\n+   system_prompt: You write careful code.\n    tools: []",
          "version": 2
        }
      ],
      "left_alone": [
        {
          "kind": "policy",
          "name": "console-only"
        }
      ],
      "problems": []
    },
    "Integration": {
      "kind": "code_host",
      "purpose": "issues, pull requests and repository access through one app",
      "enabled": false,
      "settings": {
        "app_id": "123456",
        "installation_id": "7890123"
      },
      "fields": [
        {
          "name": "app_id",
          "type": "id",
          "required": true,
          "default": null,
          "description": "the app's id (or client id), the issuer of its JWTs"
        },
        {
          "name": "installation_id",
          "type": "id",
          "required": true,
          "default": null,
          "description": "the id of the app's installation on the account whose repositories teams use"
        },
        {
          "name": "api_url",
          "type": "url",
          "required": false,
          "default": "https://api.github.com",
          "description": "REST base URL; https://<host>/api/v3 for an enterprise server"
        }
      ],
      "secrets": [
        {
          "name": "app_key",
          "ref": "secret:integrations/code_host/app_key",
          "required": true,
          "status": "unset",
          "set_with": "PUT /api/v1/secrets/integrations/code_host/app_key",
          "description": "the app's private key (PEM), checked by POST /integrations/code_host/test"
        },
        {
          "name": "webhook_secret",
          "ref": "secret:integrations/code_host/webhook_secret",
          "required": true,
          "status": "unset",
          "set_with": "PUT /api/v1/secrets/integrations/code_host/webhook_secret",
          "description": "the secret the code host signs webhook deliveries with (X-Hub-Signature-256)"
        }
      ],
      "missing": [
        "secrets.app_key",
        "secrets.webhook_secret"
      ],
      "webhook_url": "http://crewhouse.test/webhooks/code_host",
      "status": {
        "applied": "current",
        "generation": 1,
        "pending_hosts": [],
        "complete": false
      },
      "updated_by": "admin",
      "updated_at": "2026-11-22T21:34:17.036Z"
    },
    "IntegrationList": {
      "items": [
        {
          "kind": "code_host",
          "purpose": "issues, pull requests and repository access through one app",
          "enabled": false,
          "settings": {
            "app_id": "123456",
            "installation_id": "7890123"
          },
          "fields": [
            {
              "name": "app_id",
              "type": "id",
              "required": true,
              "default": null,
              "description": "the app's id (or client id), the issuer of its JWTs"
            },
            {
              "name": "installation_id",
              "type": "id",
              "required": true,
              "default": null,
              "description": "the id of the app's installation on the account whose repositories teams use"
            },
            {
              "name": "api_url",
              "type": "url",
              "required": false,
              "default": "https://api.github.com",
              "description": "REST base URL; https://<host>/api/v3 for an enterprise server"
            }
          ],
          "secrets": [
            {
              "name": "app_key",
              "ref": "secret:integrations/code_host/app_key",
              "required": true,
              "status": "unset",
              "set_with": "PUT /api/v1/secrets/integrations/code_host/app_key",
              "description": "the app's private key (PEM), checked by POST /integrations/code_host/test"
            },
            {
              "name": "webhook_secret",
              "ref": "secret:integrations/code_host/webhook_secret",
              "required": true,
              "status": "unset",
              "set_with": "PUT /api/v1/secrets/integrations/code_host/webhook_secret",
              "description": "the secret the code host signs webhook deliveries with (X-Hub-Signature-256)"
            }
          ],
          "missing": [
            "secrets.app_key",
            "secrets.webhook_secret"
          ],
          "webhook_url": "http://crewhouse.test/webhooks/code_host",
          "status": {
            "applied": "current",
            "generation": 1,
            "pending_hosts": [],
            "complete": false
          },
          "updated_by": "admin",
          "updated_at": "2026-11-22T21:34:17.036Z"
        }
      ],
      "next_cursor": null
    },
    "RoleBot": {
      "team": "payments",
      "room_id": "42",
      "role": "lead",
      "agent": "planner",
      "posts_as": "role_bot",
      "bot_secret": {
        "ref": "secret:integrations/chat_a/bots/payments/lead",
        "status": "set"
      },
      "display_name": "Planner",
      "avatar_url": "https://crewhouse.example/api/v1/agents/planner/avatar"
    },
    "WebhookDelivery": {
      "id": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
      "event": "issues.labeled",
      "received_at": "2026-11-22T21:30:00.000Z",
      "signature_valid": true,
      "times_received": 1,
      "outcome": "processed",
      "detail": null,
      "run_id": "run_wvWx5TNrONHxpeDx"
    },
    "SandboxHost": {
      "id": "host_5f0c2a9e41d7b3c8",
      "address": "build-1",
      "providers": ["local"],
      "status": "live",
      "started_at": "2026-11-26T23:02:11.482Z",
      "heartbeat_at": "2026-11-26T23:40:31.907Z",
      "capacity": { "vcpus": 2, "vcpus_shared": 8, "memory_mib": 2048, "disk_gib": 40 },
      "used": { "vcpus": 2, "memory_mib": 2048, "disk_gib": 20 },
      "sandboxes": { "awake": 2, "asleep": 0 },
      "waiting": 0
    },
    "SandboxWait": {
      "run_id": "run_wvWx5TNrONHxpeDx",
      "team": "checkout",
      "environment": "box",
      "provider": "local",
      "host_id": null,
      "vcpus": 1,
      "memory_mib": 1024,
      "disk_gib": 10,
      "since": "2026-11-26T23:40:12.004Z"
    },
    "SandboxHosts": {
      "hosts": [
        {
          "id": "host_5f0c2a9e41d7b3c8",
          "address": "build-1",
          "providers": ["local"],
          "status": "live",
          "started_at": "2026-11-26T23:02:11.482Z",
          "heartbeat_at": "2026-11-26T23:40:31.907Z",
          "capacity": { "vcpus": 2, "vcpus_shared": 8, "memory_mib": 2048, "disk_gib": 40 },
          "used": { "vcpus": 2, "memory_mib": 2048, "disk_gib": 20 },
          "sandboxes": { "awake": 2, "asleep": 0 },
          "waiting": 0
        }
      ],
      "waiting": [
        {
          "run_id": "run_wvWx5TNrONHxpeDx",
          "team": "checkout",
          "environment": "box",
          "provider": "local",
          "host_id": null,
          "vcpus": 1,
          "memory_mib": 1024,
          "disk_gib": 10,
          "since": "2026-11-26T23:40:12.004Z"
        }
      ]
    },
    "AuditEntry": {
      "id": 4,
      "at": "2026-11-22T21:34:17.036Z",
      "actor": "admin",
      "actor_user_id": 1,
      "via": "token",
      "action": "integration.update",
      "target_type": "integration",
      "target": "code_host",
      "request_id": "e7364887-5944-431d-8c78-0f8b81b09017",
      "details": {
        "enabled": false,
        "settings": {
          "app_id": "123456",
          "installation_id": "7890123"
        },
        "generation": 1
      }
    },
    "RoleBotList": {
      "items": [
        {
          "team": "payments",
          "room_id": "42",
          "role": "lead",
          "agent": "planner",
          "posts_as": "role_bot",
          "bot_secret": {
            "ref": "secret:integrations/chat_a/bots/payments/lead",
            "status": "set"
          },
          "display_name": "Planner",
          "avatar_url": "https://crewhouse.example/api/v1/agents/planner/avatar"
        }
      ],
      "next_cursor": null
    },
    "Agent": {
      "name": "coder",
      "display_name": "Coder",
      "kind": null,
      "description": "Writes and tests code",
      "avatar_url": null,
      "model": "fast",
      "environment": "small-vm",
      "tool_count": 0,
      "mcp": [],
      "current_version": 1,
      "used_by": 0,
      "updated_at": "2026-11-22T20:55:00.699Z",
      "current": {
        "version": 1,
        "note": "first version",
        "created_by": "admin",
        "created_at": "2026-11-22T20:55:00.699Z",
        "system_prompt": "You are a careful software engineer. Write small, tested changes.",
        "tools": [],
        "confirmation_policy": "never_confirm",
        "produces_branch": false,
        "works_on_branch": null,
        "skills": [],
        "mcp_servers": [],
        "egress": {
          "mode": "allow_all",
          "destinations": [],
          "upstream_deny_cidrs": [],
          "report_only": false
        },
        "context": [],
        "model": "fast",
        "environment": "small-vm"
      }
    },
    "AgentCreate": {
      "name": "coder",
      "display_name": "Coder",
      "description": "Writes and tests code",
      "version": {
        "system_prompt": "You are a careful software engineer. Write small, tested changes.",
        "tools": [],
        "environment": "small-vm",
        "model": "fast",
        "note": "first version"
      }
    },
    "AgentPatch": {
      "description": "Writes and tests code in small steps"
    },
    "AgentSummary": {
      "name": "coder",
      "display_name": "Coder",
      "kind": null,
      "description": "Writes and tests code in small steps",
      "avatar_url": null,
      "model": "fast",
      "environment": "small-vm",
      "tool_count": 0,
      "mcp": [],
      "current_version": 2,
      "used_by": 0,
      "updated_at": "2026-11-22T20:55:01.695Z"
    },
    "AgentVersion": {
      "version": 2,
      "note": "run the tests",
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:01.695Z",
      "system_prompt": "You are a careful software engineer. Write small, tested changes; run the tests before handing on.",
      "tools": [],
      "confirmation_policy": "never_confirm",
      "produces_branch": false,
      "works_on_branch": null,
      "skills": [],
      "mcp_servers": [],
      "egress": {
        "mode": "allow_all",
        "destinations": [],
        "upstream_deny_cidrs": [],
        "report_only": false
      },
      "context": [],
      "model": "fast",
      "environment": "small-vm"
    },
    "AgentVersionInput": {
      "from_version": 1,
      "system_prompt": "You are a careful software engineer. Write small, tested changes; run the tests before handing on.",
      "note": "run the tests"
    },
    "Checkpoint": {
      "id": "ckpt-node22",
      "used_by": [
        {
          "kind": "environment",
          "name": "small-vm"
        }
      ]
    },
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
    },
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
    },
    "EgressInput": {
      "mode": "allowlist",
      "destinations": [
        "github-api"
      ],
      "upstream_deny_cidrs": [],
      "report_only": false
    },
    "Environment": {
      "name": "small-vm",
      "provider": "local",
      "profile": null,
      "vcpus": 2,
      "memory_mib": 2048,
      "disk_gib": 10,
      "checkpoint_id": null,
      "idle_after_seconds": 600,
      "deep_sleep_after_seconds": 3600,
      "image": null,
      "used_by": 0,
      "created_at": "2026-11-22T20:54:59.950Z",
      "updated_at": "2026-11-22T20:54:59.950Z"
    },
    "EnvironmentCreate": {
      "name": "small-vm",
      "provider": "local",
      "vcpus": 2,
      "memory_mib": 2048,
      "disk_gib": 10,
      "idle_after_seconds": 600,
      "deep_sleep_after_seconds": 3600
    },
    "EnvironmentPut": {
      "name": "small-vm",
      "provider": "local",
      "vcpus": 2,
      "memory_mib": 4096,
      "disk_gib": 10,
      "idle_after_seconds": 600,
      "deep_sleep_after_seconds": 3600
    },
    "Image": {
      "name": "crewhouse-agent",
      "version": "20261122-1",
      "kernel": {
        "file": "crewhouse-agent-20261122-1.vmlinux",
        "sha256": "9f2c4e0b7a61d3c85e2f4a9b1c7d6e3f0a8b5c2d9e4f1a7b3c6d0e5f2a8b4c1d"
      },
      "rootfs": {
        "file": "crewhouse-agent-20261122-1.ext4",
        "sha256": "1a7b3c6d0e5f2a8b4c1d9f2c4e0b7a61d3c85e2f4a9b1c7d6e3f0a8b5c2d9e4f"
      },
      "built_at": "2026-11-22T18:02:11.000Z",
      "current": true,
      "manifest": "crewhouse-agent-20261122-1.json"
    },
    "Link": {
      "surface": "tracker_a",
      "external_id": "ACME/docs",
      "label": "Docs board",
      "verified": false,
      "verification": "unverified"
    },
    "LoginBody": {
      "name": "ada",
      "password": "correct horse battery staple"
    },
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
    },
    "Me": {
      "id": 1,
      "name": "admin",
      "email": null,
      "role": "admin",
      "via": "token"
    },
    "ModelEntry": {
      "alias": "smart",
      "model": "claude-sonnet-4-5",
      "api": "anthropic",
      "upstream_host": "api.anthropic.com",
      "local": false,
      "context_window": 200000,
      "max_output_tokens": 64000,
      "input_usd_per_mtok": 3,
      "output_usd_per_mtok": 15,
      "description": "strong coding model for leads and reviewers"
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
    "Post": {
      "seq": 1,
      "kind": "task",
      "role": "lead",
      "text": "Add a getting-started page to the docs",
      "data": {
        "by": "admin",
        "from": "person"
      },
      "created_at": "2026-11-22T20:55:05.988Z"
    },
    "ReplyAccepted": {
      "run_id": "run_7Qx2Lm9KpR4sTz1a",
      "seq": 3,
      "state": "running"
    },
    "ReplyInput": {
      "text": "Yes, with the login command first.",
      "in_reply_to": 2
    },
    "Run": {
      "id": "run_7Qx2Lm9KpR4sTz1a",
      "team": "docs-team",
      "work_item_id": "cc66e648-6032-407d-a591-1121227f7935",
      "state": "running",
      "surface": "console",
      "text": "Add a getting-started page to the docs",
      "lead": "lead",
      "cost_usd": 0,
      "waiting_for": null,
      "open_question": null,
      "failure_reason": null,
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:05.988Z",
      "updated_at": "2026-11-22T20:55:06.420Z",
      "finished_at": null,
      "tasks": [
        {
          "id": "task_irkiuF0e6vUX",
          "role": "lead",
          "state": "queued",
          "agent_version": 1,
          "iterations": 0,
          "cost_usd": 0,
          "created_at": "2026-11-22T20:55:05.988Z",
          "started_at": "2026-11-22T20:55:06.080Z",
          "finished_at": null
        }
      ],
      "delivery": null,
      "agent_versions": {
        "dev": 2,
        "lead": 1
      },
      "chat_thread_url": null,
      "jaeger_url": null
    },
    "RunSummary": {
      "id": "run_7Qx2Lm9KpR4sTz1a",
      "team": "docs-team",
      "work_item_id": "cc66e648-6032-407d-a591-1121227f7935",
      "state": "waiting",
      "surface": "console",
      "text": "Add a getting-started page to the docs",
      "lead": "lead",
      "cost_usd": 0,
      "waiting_for": {
        "role": "lead",
        "kind": "question",
        "since": "2026-11-22T20:55:06.158Z"
      },
      "open_question": {
        "seq": 2,
        "role": "lead",
        "text": "Should the page cover the CLI too?\n(options: yes / no)"
      },
      "failure_reason": null,
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:05.988Z",
      "updated_at": "2026-11-22T20:55:06.116Z",
      "finished_at": null
    },
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
    "Skill": {
      "name": "changelog",
      "description": "Writes a changelog entry from the commits since the last tag.",
      "size_bytes": 182,
      "revision": 1,
      "resources": {
        "template.md": "## [Unreleased]\n"
      },
      "created_at": "2026-11-22T20:55:00.353Z",
      "updated_at": "2026-11-22T20:55:00.353Z",
      "body": "---\nname: changelog\ndescription: Writes a changelog entry from the commits since the last tag.\n---\n\nRead `git log` since the last tag and write CHANGELOG.md entries.\n"
    },
    "SkillPut": {
      "body": "---\nname: changelog\ndescription: Writes a changelog entry from the commits since the last tag.\n---\n\nRead `git log` since the last tag and write CHANGELOG.md entries.\n",
      "resources": {
        "template.md": "## [Unreleased]\n"
      }
    },
    "SkillSummary": {
      "name": "changelog",
      "description": "Writes a changelog entry from the commits since the last tag.",
      "size_bytes": 182,
      "revision": 1,
      "files": [
        "template.md"
      ],
      "updated_at": "2026-11-22T20:55:00.353Z"
    },
    "TaskAccepted": {
      "run_id": "run_7Qx2Lm9KpR4sTz1a",
      "work_item_id": "cc66e648-6032-407d-a591-1121227f7935",
      "state": "running"
    },
    "TaskInput": {
      "text": "Add a getting-started page to the docs"
    },
    "Team": {
      "name": "docs-team",
      "template": {
        "name": "web-team",
        "version": 1,
        "hash": "7859d8347abf82f86bc68dde745fb41df55d92fb4230b12ccac50c091138486d"
      },
      "lead": "lead",
      "roles": [
        "dev",
        "lead"
      ],
      "home": {
        "surface": "console",
        "room_id": null,
        "room_label": null
      },
      "repo_url": null,
      "links": [],
      "state": "idle",
      "status": "active",
      "active_runs": 0,
      "spent_usd": 0,
      "budget_usd_per_day": 12,
      "budget_state": "normal",
      "last_run_at": null,
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:02.977Z",
      "role_settings": [
        {
          "role": "dev",
          "agent": "coder",
          "model": "fast",
          "profile": "",
          "provider": "local",
          "checkpoint_id": null,
          "replicas_max": 1,
          "concurrent_runs": 1,
          "max_iterations": null,
          "memory": {
            "inject": true,
            "max_entries": 10,
            "write_outcomes": true,
            "own": []
          },
          "confirmation_policy": "never_confirm",
          "max_budget": null,
          "budget_duration": null,
          "rpm_limit": null,
          "tpm_limit": null,
          "pipeline_next_role": null,
          "skills": [],
          "mcp_servers": []
        },
        {
          "role": "lead",
          "agent": "lead",
          "model": "fast",
          "profile": "",
          "provider": "local",
          "checkpoint_id": null,
          "replicas_max": 1,
          "concurrent_runs": 1,
          "max_iterations": null,
          "memory": {
            "inject": true,
            "max_entries": 10,
            "write_outcomes": true,
            "own": []
          },
          "confirmation_policy": "never_confirm",
          "max_budget": null,
          "budget_duration": null,
          "rpm_limit": null,
          "tpm_limit": null,
          "pipeline_next_role": "dev",
          "skills": [],
          "mcp_servers": []
        }
      ],
      "members": [
        {
          "user_id": 1,
          "name": "admin",
          "email": null,
          "role": "owner"
        }
      ],
      "settings": {
        "idle_after_seconds": 600,
        "deep_sleep_after_seconds": 3600,
        "isolation": "shared",
        "rework_rounds": 2,
        "memory": {
          "inject": true,
          "max_entries": 10,
          "write_outcomes": true
        }
      }
    },
    "TeamCreate": {
      "name": "docs-team",
      "template": {
        "name": "web-team",
        "version": 1
      },
      "repo_url": null,
      "budget_usd_per_day": 12
    },
    "TeamPatch": {
      "budget_usd_per_day": 20,
      "role_settings": {
        "dev": {
          "max_iterations": 60
        }
      }
    },
    "TeamSummary": {
      "name": "docs-team",
      "template": {
        "name": "web-team",
        "version": 2,
        "hash": "6064b1c0264a3da162cabb7def4e49f1c85d01990be4ab5ab64b13b7ce98fd96"
      },
      "lead": "lead",
      "roles": [
        "dev",
        "lead"
      ],
      "home": {
        "surface": "console",
        "room_id": null,
        "room_label": null
      },
      "repo_url": null,
      "links": [],
      "state": "idle",
      "status": "active",
      "active_runs": 0,
      "spent_usd": 0,
      "budget_usd_per_day": 20,
      "budget_state": "normal",
      "last_run_at": null,
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:02.977Z"
    },
    "TeamTemplate": {
      "name": "web-team",
      "description": "A lead and a coder for small web changes",
      "current_version": 1,
      "updated_at": "2026-11-22T20:55:02.012Z",
      "used_by": 0,
      "current": {
        "version": 1,
        "note": "first version",
        "created_by": "admin",
        "created_at": "2026-11-22T20:55:02.012Z",
        "content_sha256": "7859d8347abf82f86bc68dde745fb41df55d92fb4230b12ccac50c091138486d",
        "lead": "lead",
        "roles": {
          "dev": {
            "agent": "coder",
            "model": "fast",
            "vm": "small-vm",
            "profile": "",
            "provider": "local",
            "checkpoint_id": null,
            "vcpus": 2,
            "memory_mib": 4096,
            "disk_gib": 10,
            "replicas": {
              "max": 1
            },
            "concurrent_runs": 1,
            "max_iterations": null,
            "confirmation_policy": null,
            "memory": {},
            "max_budget": null,
            "budget_duration": null,
            "rpm_limit": null,
            "tpm_limit": null,
            "skills": [],
            "mcp_servers": []
          },
          "lead": {
            "agent": "lead",
            "model": "fast",
            "vm": "small-vm",
            "profile": "",
            "provider": "local",
            "checkpoint_id": null,
            "vcpus": 2,
            "memory_mib": 4096,
            "disk_gib": 10,
            "replicas": {
              "max": 1
            },
            "concurrent_runs": 1,
            "max_iterations": null,
            "confirmation_policy": null,
            "memory": {},
            "max_budget": null,
            "budget_duration": null,
            "rpm_limit": null,
            "tpm_limit": null,
            "skills": [],
            "mcp_servers": []
          }
        },
        "idle_after_seconds": 600,
        "deep_sleep_after_seconds": 3600,
        "budget_usd_per_day": 10,
        "isolation": "shared",
        "requires_repo": false,
        "rework_rounds": 2,
        "sleep": {
          "idle_after_seconds": 600,
          "deep_sleep_after_seconds": 3600
        },
        "pipeline": {
          "lead": "dev"
        }
      }
    },
    "TeamTemplateSummary": {
      "name": "web-team",
      "description": "A lead and a coder for small web changes",
      "current_version": 2,
      "updated_at": "2026-11-22T20:55:02.682Z",
      "used_by": 0,
      "roles": [
        "dev",
        "lead"
      ],
      "lead": "lead"
    },
    "TeamTemplateVersion": {
      "version": 2,
      "note": "more budget",
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:02.682Z",
      "content_sha256": "6064b1c0264a3da162cabb7def4e49f1c85d01990be4ab5ab64b13b7ce98fd96",
      "lead": "lead",
      "roles": {
        "dev": {
          "agent": "coder",
          "model": "fast",
          "vm": "small-vm",
          "profile": "",
          "provider": "local",
          "checkpoint_id": null,
          "vcpus": 2,
          "memory_mib": 4096,
          "disk_gib": 10,
          "replicas": {
            "max": 1
          },
          "concurrent_runs": 1,
          "max_iterations": null,
          "confirmation_policy": null,
          "memory": {},
          "max_budget": null,
          "budget_duration": null,
          "rpm_limit": null,
          "tpm_limit": null,
          "skills": [],
          "mcp_servers": []
        },
        "lead": {
          "agent": "lead",
          "model": "fast",
          "vm": "small-vm",
          "profile": "",
          "provider": "local",
          "checkpoint_id": null,
          "vcpus": 2,
          "memory_mib": 4096,
          "disk_gib": 10,
          "replicas": {
            "max": 1
          },
          "concurrent_runs": 1,
          "max_iterations": null,
          "confirmation_policy": null,
          "memory": {},
          "max_budget": null,
          "budget_duration": null,
          "rpm_limit": null,
          "tpm_limit": null,
          "skills": [],
          "mcp_servers": []
        }
      },
      "idle_after_seconds": 600,
      "deep_sleep_after_seconds": 3600,
      "budget_usd_per_day": 15,
      "isolation": "shared",
      "requires_repo": false,
      "rework_rounds": 2,
      "sleep": {
        "idle_after_seconds": 600,
        "deep_sleep_after_seconds": 3600
      },
      "pipeline": {
        "lead": "dev"
      }
    },
    "TeamUpgrade": {
      "version": 2
    },
    "TemplateCreate": {
      "name": "web-team",
      "description": "A lead and a coder for small web changes",
      "lead": "lead",
      "roles": {
        "lead": {
          "agent": "lead",
          "model": "fast",
          "vm": "small-vm"
        },
        "dev": {
          "agent": "coder",
          "model": "fast",
          "vm": "small-vm"
        }
      },
      "pipeline": {
        "lead": "dev"
      },
      "sleep": {},
      "idle_after_seconds": 600,
      "deep_sleep_after_seconds": 3600,
      "budget_usd_per_day": 10,
      "note": "first version"
    },
    "TemplatePatch": {
      "description": "A lead and a coder for small web changes"
    },
    "TemplateNewVersion": {
      "from_version": 1,
      "budget_usd_per_day": 20,
      "note": "version 1 again, with a bigger budget"
    },
    "TemplateVersionInput": {
      "lead": "lead",
      "roles": {
        "lead": {
          "agent": "lead",
          "model": "fast",
          "vm": "small-vm"
        },
        "dev": {
          "agent": "coder",
          "model": "fast",
          "vm": "small-vm"
        }
      },
      "pipeline": {
        "lead": "dev"
      },
      "sleep": {},
      "idle_after_seconds": 600,
      "deep_sleep_after_seconds": 3600,
      "budget_usd_per_day": 15,
      "note": "more budget"
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
    },
    "ToolEntry": {
      "name": "shell",
      "description": "Runs a shell command (bash -lc) in the sandbox and returns its exit code, stdout and stderr (each cut to the last 64 KiB). Network traffic leaves only through the gateway.",
      "risky": true,
      "parameters": {
        "type": "object",
        "required": [
          "command"
        ],
        "properties": {
          "command": {
            "type": "string",
            "minLength": 1,
            "maxLength": 16384,
            "description": "the command line"
          },
          "cwd": {
            "type": "string",
            "minLength": 1,
            "maxLength": 4096,
            "description": "working directory; default /workspace"
          },
          "timeout_seconds": {
            "type": "integer",
            "minimum": 1,
            "maximum": 3600,
            "default": 300,
            "description": "killed after this long"
          }
        },
        "additionalProperties": false
      }
    },
    "Trace": {
      "run_id": "run_7Qx2Lm9KpR4sTz1a",
      "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
      "spans": [
        {
          "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
          "span_id": "00f067aa0ba902b7",
          "parent_span_id": null,
          "name": "run.turn lead",
          "start_time": "2026-11-22T20:55:06.080Z",
          "duration_ms": 5231.4,
          "attributes": {
            "crewhouse.role": "lead"
          }
        }
      ]
    },
    "TraceSpan": {
      "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
      "span_id": "00f067aa0ba902b7",
      "parent_span_id": null,
      "name": "run.turn lead",
      "start_time": "2026-11-22T20:55:06.080Z",
      "duration_ms": 5231.4,
      "attributes": {
        "crewhouse.role": "lead"
      }
    },
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
    },
    "VersionMeta": {
      "version": 2,
      "note": "run the tests",
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:01.695Z"
    }
  },
  "operations": {
    "getOpenApiJson": {
      "answer": {
        "openapi": "3.1.0",
        "info": {
          "title": "Crewhouse Console API",
          "version": "0.1.0"
        },
        "paths": {
          "/me": {
            "get": {
              "operationId": "getMe",
              "summary": "Who am I"
            }
          }
        }
      }
    },
    "getOpenApiYaml": {
      "answer": "openapi: 3.1.0\ninfo:\n  title: Crewhouse Console API\n  version: 0.1.0\npaths:\n  /me:\n    get:\n      operationId: getMe\n      summary: Who am I\n"
    },
    "getSpend": {
      "answer": {
        "days": 2,
        "series": [
          {
            "date": "2026-11-21",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          },
          {
            "date": "2026-11-22",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          }
        ],
        "totals": {
          "spend_usd": 0,
          "tokens": 0,
          "requests": 0
        },
        "budget_usd_per_day": 20,
        "teams": [
          {
            "team": "docs-team",
            "budget_usd_per_day": 20,
            "state": "normal",
            "series": [
              {
                "date": "2026-11-21",
                "spend_usd": 0,
                "tokens": 0,
                "requests": 0
              },
              {
                "date": "2026-11-22",
                "spend_usd": 0,
                "tokens": 0,
                "requests": 0
              }
            ],
            "totals": {
              "spend_usd": 0,
              "tokens": 0,
              "requests": 0
            }
          }
        ]
      }
    },
    "getTeamBudget": {
      "answer": {
        "team": "docs-team",
        "budget_usd_per_day": 20,
        "spent_today_usd": 0,
        "state": "normal",
        "days": 2,
        "series": [
          {
            "date": "2026-11-21",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          },
          {
            "date": "2026-11-22",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          }
        ],
        "totals": {
          "spend_usd": 0,
          "tokens": 0,
          "requests": 0
        }
      }
    },
    "getTeamRoleEgress": {
      "answer": {
        "team": "docs-team",
        "role": "dev",
        "override": {
          "mode": "allowlist",
          "destinations": [
            "github-api"
          ],
          "upstream_deny_cidrs": [],
          "report_only": false
        }
      }
    },
    "listTeamSkills": {
      "answer": {
        "items": [
          {
            "name": "release-notes",
            "version": 3,
            "status": "curated",
            "source": "agent",
            "updated_at": "2026-11-22T19:40:00.000Z"
          }
        ],
        "next_cursor": null
      }
    },
    "putTeamLink": {
      "body": {
        "surface": "tracker_a",
        "external_id": "ACME/docs",
        "label": "Docs board"
      }
    },
    "putTeamRoleEgress": {
      "answer": {
        "team": "docs-team",
        "role": "dev",
        "override": {
          "mode": "allowlist",
          "destinations": [
            "github-api"
          ],
          "upstream_deny_cidrs": [],
          "report_only": false
        }
      }
    }
  },
  "params": {
    "integrations.kind": "code_host",
    "agents.name": "coder",
    "agents.version": 2,
    "agents.doc": "style.md",
    "users.id": 2,
    "session.id": 7,
    "secrets.name": "platform/github_token",
    "destinations.name": "github-api",
    "environments.name": "small-vm",
    "skills.name": "changelog",
    "team-templates.name": "web-team",
    "team-templates.version": 2,
    "teams.name": "docs-team",
    "teams.role": "dev",
    "teams.surface": "tracker_a",
    "teams.external_id": "ACME/docs",
    "teams.doc": "glossary.md",
    "mcp-servers.id": "docs-team/issues",
    "mcp-servers.team": "docs-team",
    "mcp-servers.name": "issues",
    "runs.id": "run_7Qx2Lm9KpR4sTz1a"
  }
};

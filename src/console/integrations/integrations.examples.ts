import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of integrations (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const integrationsExamples: Partial<ContractExamples> = {
  "shapes": {
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
    }
  },
  "params": {
    "integrations.kind": "code_host"
  }
};

import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of agents (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const agentsExamples: Partial<ContractExamples> = {
  "shapes": {
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
    "EgressInput": {
      "mode": "allowlist",
      "destinations": [
        "github-api"
      ],
      "upstream_deny_cidrs": [],
      "report_only": false
    },
    "VersionMeta": {
      "version": 2,
      "note": "run the tests",
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:01.695Z"
    }
  },
  "params": {
    "agents.name": "coder",
    "agents.version": 2,
    "agents.doc": "style.md"
  }
};

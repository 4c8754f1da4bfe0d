import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of teams (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const teamsExamples: Partial<ContractExamples> = {
  "shapes": {
    "Link": {
      "surface": "tracker_a",
      "external_id": "ACME/docs",
      "label": "Docs board",
      "verified": false,
      "verification": "unverified"
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
    "TeamUpgrade": {
      "version": 2
    }
  },
  "operations": {
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
    "teams.name": "docs-team",
    "teams.role": "dev",
    "teams.surface": "tracker_a",
    "teams.external_id": "ACME/docs",
    "teams.doc": "glossary.md"
  }
};

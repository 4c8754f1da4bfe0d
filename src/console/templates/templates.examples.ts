import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of templates (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const templatesExamples: Partial<ContractExamples> = {
  "shapes": {
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
    }
  },
  "params": {
    "team-templates.name": "web-team",
    "team-templates.version": 2
  }
};

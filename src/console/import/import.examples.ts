import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of import (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const importExamples: Partial<ContractExamples> = {
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
    }
  }
};

import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of catalog (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const catalogExamples: Partial<ContractExamples> = {
  "shapes": {
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
    }
  }
};

import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of environments (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const environmentsExamples: Partial<ContractExamples> = {
  "shapes": {
    "Checkpoint": {
      "id": "ckpt-node22",
      "used_by": [
        {
          "kind": "environment",
          "name": "small-vm"
        }
      ]
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
    }
  },
  "params": {
    "environments.name": "small-vm"
  }
};

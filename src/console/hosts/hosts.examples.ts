import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of hosts (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const hostsExamples: Partial<ContractExamples> = {
  "shapes": {
    "SandboxHost": {
      "id": "host_5f0c2a9e41d7b3c8",
      "address": "build-1",
      "providers": [
        "local"
      ],
      "status": "live",
      "started_at": "2026-11-26T23:02:11.482Z",
      "heartbeat_at": "2026-11-26T23:40:31.907Z",
      "capacity": {
        "vcpus": 2,
        "vcpus_shared": 8,
        "memory_mib": 2048,
        "disk_gib": 40
      },
      "used": {
        "vcpus": 2,
        "memory_mib": 2048,
        "disk_gib": 20
      },
      "sandboxes": {
        "awake": 2,
        "asleep": 0
      },
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
          "providers": [
            "local"
          ],
          "status": "live",
          "started_at": "2026-11-26T23:02:11.482Z",
          "heartbeat_at": "2026-11-26T23:40:31.907Z",
          "capacity": {
            "vcpus": 2,
            "vcpus_shared": 8,
            "memory_mib": 2048,
            "disk_gib": 40
          },
          "used": {
            "vcpus": 2,
            "memory_mib": 2048,
            "disk_gib": 20
          },
          "sandboxes": {
            "awake": 2,
            "asleep": 0
          },
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
    }
  }
};

import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of audit (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const auditExamples: Partial<ContractExamples> = {
  "shapes": {
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
    }
  }
};

import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of webhooks (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const webhooksExamples: Partial<ContractExamples> = {
  "shapes": {
    "WebhookDelivery": {
      "id": "72d3162e-cc78-11e3-81ab-4c9367dc0958",
      "event": "issues.labeled",
      "received_at": "2026-11-22T21:30:00.000Z",
      "signature_valid": true,
      "times_received": 1,
      "outcome": "processed",
      "detail": null,
      "run_id": "run_wvWx5TNrONHxpeDx"
    }
  }
};

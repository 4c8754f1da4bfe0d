import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of spend (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const spendExamples: Partial<ContractExamples> = {
  "operations": {
    "getSpend": {
      "answer": {
        "days": 2,
        "series": [
          {
            "date": "2026-11-21",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          },
          {
            "date": "2026-11-22",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          }
        ],
        "totals": {
          "spend_usd": 0,
          "tokens": 0,
          "requests": 0
        },
        "budget_usd_per_day": 20,
        "teams": [
          {
            "team": "docs-team",
            "budget_usd_per_day": 20,
            "state": "normal",
            "series": [
              {
                "date": "2026-11-21",
                "spend_usd": 0,
                "tokens": 0,
                "requests": 0
              },
              {
                "date": "2026-11-22",
                "spend_usd": 0,
                "tokens": 0,
                "requests": 0
              }
            ],
            "totals": {
              "spend_usd": 0,
              "tokens": 0,
              "requests": 0
            }
          }
        ]
      }
    },
    "getTeamBudget": {
      "answer": {
        "team": "docs-team",
        "budget_usd_per_day": 20,
        "spent_today_usd": 0,
        "state": "normal",
        "days": 2,
        "series": [
          {
            "date": "2026-11-21",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          },
          {
            "date": "2026-11-22",
            "spend_usd": 0,
            "tokens": 0,
            "requests": 0
          }
        ],
        "totals": {
          "spend_usd": 0,
          "tokens": 0,
          "requests": 0
        }
      }
    }
  }
};

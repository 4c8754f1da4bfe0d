import type { ContractExamples } from '../../http/openapi.ts';

/** The contract's examples of runs (see `ContractExamples`), checked against their schemas by console/examples.test.ts. */
export const runsExamples: Partial<ContractExamples> = {
  "shapes": {
    "Post": {
      "seq": 1,
      "kind": "task",
      "role": "lead",
      "text": "Add a getting-started page to the docs",
      "data": {
        "by": "admin",
        "from": "person"
      },
      "created_at": "2026-11-22T20:55:05.988Z"
    },
    "ReplyAccepted": {
      "run_id": "run_7Qx2Lm9KpR4sTz1a",
      "seq": 3,
      "state": "running"
    },
    "ReplyInput": {
      "text": "Yes, with the login command first.",
      "in_reply_to": 2
    },
    "Run": {
      "id": "run_7Qx2Lm9KpR4sTz1a",
      "team": "docs-team",
      "work_item_id": "cc66e648-6032-407d-a591-1121227f7935",
      "state": "running",
      "surface": "console",
      "text": "Add a getting-started page to the docs",
      "lead": "lead",
      "cost_usd": 0,
      "waiting_for": null,
      "open_question": null,
      "failure_reason": null,
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:05.988Z",
      "updated_at": "2026-11-22T20:55:06.420Z",
      "finished_at": null,
      "tasks": [
        {
          "id": "task_irkiuF0e6vUX",
          "role": "lead",
          "state": "queued",
          "agent_version": 1,
          "iterations": 0,
          "cost_usd": 0,
          "created_at": "2026-11-22T20:55:05.988Z",
          "started_at": "2026-11-22T20:55:06.080Z",
          "finished_at": null
        }
      ],
      "delivery": null,
      "agent_versions": {
        "dev": 2,
        "lead": 1
      },
      "chat_thread_url": null,
      "origin_url": null,
      "jaeger_url": null
    },
    "RunSummary": {
      "id": "run_7Qx2Lm9KpR4sTz1a",
      "team": "docs-team",
      "work_item_id": "cc66e648-6032-407d-a591-1121227f7935",
      "state": "waiting",
      "surface": "console",
      "text": "Add a getting-started page to the docs",
      "lead": "lead",
      "cost_usd": 0,
      "waiting_for": {
        "role": "lead",
        "kind": "question",
        "since": "2026-11-22T20:55:06.158Z"
      },
      "open_question": {
        "seq": 2,
        "role": "lead",
        "text": "Should the page cover the CLI too?\n(options: yes / no)"
      },
      "failure_reason": null,
      "created_by": "admin",
      "created_at": "2026-11-22T20:55:05.988Z",
      "updated_at": "2026-11-22T20:55:06.116Z",
      "finished_at": null
    },
    "TaskAccepted": {
      "run_id": "run_7Qx2Lm9KpR4sTz1a",
      "work_item_id": "cc66e648-6032-407d-a591-1121227f7935",
      "state": "running"
    },
    "TaskInput": {
      "text": "Add a getting-started page to the docs"
    },
    "Trace": {
      "run_id": "run_7Qx2Lm9KpR4sTz1a",
      "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
      "spans": [
        {
          "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
          "span_id": "00f067aa0ba902b7",
          "parent_span_id": null,
          "name": "run.turn lead",
          "start_time": "2026-11-22T20:55:06.080Z",
          "duration_ms": 5231.4,
          "attributes": {
            "crewhouse.role": "lead"
          }
        }
      ]
    },
    "TraceSpan": {
      "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736",
      "span_id": "00f067aa0ba902b7",
      "parent_span_id": null,
      "name": "run.turn lead",
      "start_time": "2026-11-22T20:55:06.080Z",
      "duration_ms": 5231.4,
      "attributes": {
        "crewhouse.role": "lead"
      }
    }
  },
  "params": {
    "runs.id": "run_7Qx2Lm9KpR4sTz1a"
  }
};

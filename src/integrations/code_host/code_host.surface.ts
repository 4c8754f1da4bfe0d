import type { RunsService } from '../../console/runs/runs.service.ts';
import type { Db } from '../../db/database.ts';
import type { Surface } from '../surface.ts';
import * as store from './code_host.store.ts';
import type { CodeHostDelivery } from './delivery.ts';
import { issueOfTaskText } from './events.ts';

/**
 * The code host as a surface: work comes in as labelled issues and addressed comments (an
 * answer to the run's question, `/crewhouse approve` or `refuse` for a confirmation, or a
 * follow-up), progress goes back as comments on the issue (each keyed by a hidden marker), and
 * the link back is the issue.
 */
export function createCodeHostSurface(deps: { db: Db; runs: Pick<RunsService, 'textOf'>; inbound: Pick<Surface, 'takeIn'>; delivery: Pick<CodeHostDelivery, 'progress'> }): Surface {
  return {
    kind: 'code_host',
    takeIn: (eventRow, event) => deps.inbound.takeIn(eventRow, event),
    progress: (runId, progress, seq) => deps.delivery.progress(runId, progress, seq),
    async originOf(runId) {
      const work = await store.workOfRun(deps.db, runId);
      if (!work || work.issue_number === null) return null;
      // The task's text, not the presented run: presenting a run asks for its origin (origin_url).
      const text = await deps.runs.textOf(runId);
      return { surface: 'code_host', place: `${work.repository}#${work.issue_number}`, url: issueOfTaskText(text)?.url ?? null };
    },
  };
}

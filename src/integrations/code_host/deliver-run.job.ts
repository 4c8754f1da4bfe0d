import { Type } from 'typebox';
import { defineJob } from '../../queue/queue.ts';
import type { CodeHostDelivery } from './delivery.ts';

/** A succeeded run's delivery: its pull request opened, then the issue told. */
export const deliverRunJob = defineJob({
  kind: 'code_host.deliver-run',
  payload: Type.Object({ run_id: Type.String({ minLength: 1, maxLength: 64 }), seq: Type.Integer({ minimum: 0 }) }),
  perform: (delivery: Pick<CodeHostDelivery, 'deliver'>, p) => delivery.deliver(p.run_id, p.seq),
});

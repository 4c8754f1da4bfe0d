import assert from 'node:assert/strict';
import fs from 'node:fs/promises';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { RENAMED_KINDS, up as renameKinds } from './db/migrations/0730-job-kinds.ts';
import { JOB_KINDS, jobLanes } from './jobs.ts';
import { enqueue, getJob } from './queue/queue.ts';
import { testApp, type TestApp } from '../test/harness.ts';

const src = path.dirname(fileURLToPath(import.meta.url));

/** Every `*.job.ts` file under src/. */
async function jobFiles(): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await fs.readdir(src, { recursive: true, withFileTypes: true })) {
    if (entry.isFile() && entry.name.endsWith('.job.ts')) out.push(path.join(entry.parentPath, entry.name));
  }
  return out.sort();
}

const camel = (stem: string) => stem.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());

describe('the table of jobs', () => {
  it('lists the one job of every *.job.ts file, named by one scheme, and no other', async () => {
    const files = await jobFiles();
    assert.ok(files.length >= 10, `found ${files.length} job files`);
    const declared: string[] = [];
    for (const file of files) {
      const stem = path.basename(file, '.job.ts');
      const folder = path.basename(path.dirname(file));
      const module = folder === 'jobs' ? path.basename(path.dirname(path.dirname(file))) : folder;
      const exports = (await import(pathToFileURL(file).href)) as Record<string, unknown>;
      const jobs = Object.entries(exports).filter(([, v]) => typeof v === 'object' && v !== null && 'kind' in v && 'handler' in v && 'enqueue' in v) as Array<[string, { kind: string }]>;
      const where = path.relative(src, file);
      assert.deepEqual(
        jobs.map(([name, job]) => [name, job.kind]),
        [[`${camel(stem)}Job`, `${module}.${stem}`]],
        `${where} declares one job, exported as ${camel(stem)}Job, of kind ${module}.${stem}`,
      );
      declared.push(jobs[0][1].kind);
    }
    assert.deepEqual([...JOB_KINDS].sort(), declared.sort(), 'src/jobs.ts lists every declared job once');
  });

  it('gives runs and the chat servers\' jobs slots of their own, each kind in one lane at most', () => {
    const lanes = jobLanes({ runConcurrency: 64, jobConcurrency: 4 });
    const kinds = lanes.flatMap((l) => l.kinds);
    assert.equal(new Set(kinds).size, kinds.length, 'no kind is in two lanes');
    for (const k of kinds) assert.ok(JOB_KINDS.includes(k), `${k} is a job kind`);
    assert.deepEqual(lanes.find((l) => l.kinds.includes('engine.advance-run')), { kinds: ['engine.advance-run'], concurrency: 64 });
    const chat = JOB_KINDS.filter((k) => k.startsWith('chat'));
    assert.deepEqual(lanes.find((l) => l.kinds.includes('chat.mirror-thread'))?.kinds.sort(), chat.sort(), 'every chat job shares the chat lane, and nothing else does');
  });

  describe('jobs stored under a former kind', () => {
    let t: TestApp;
    before(async () => {
      t = await testApp();
    });
    after(() => t.close());

    it('take the new kind (and keys made of it) and still run', async () => {
      for (const [, to] of RENAMED_KINDS) assert.ok(JOB_KINDS.includes(to), `${to} is in the table`);
      // As the previous version queued them.
      const span = { trace_id: 'a'.repeat(32), span_id: 'b'.repeat(16), parent_span_id: null, name: 'turn', kind: 'internal', start: new Date().toISOString(), end: new Date().toISOString(), status: 'ok', attributes: {} };
      const spans = await enqueue(t.db, { kind: 'trace.export', payload: { spans: [span] }, key: `trace:${span.trace_id}:${span.span_id}` });
      const later = new Date(Date.now() + 3_600_000);
      const progress = await enqueue(t.db, { kind: 'code_host.progress', payload: { run_id: 'run_x', event: 'started', seq: 1 }, key: 'code_host.progress:run_x:started:1', runAt: later });
      await renameKinds(t.db);
      const renamed = await getJob(t.db, progress.id);
      assert.deepEqual([renamed?.kind, renamed?.key, renamed?.state], ['code_host.post-progress', 'code_host.post-progress:run_x:started:1', 'queued']);
      // No collector is configured here: the spans are dropped and the job is done, by the worker's table.
      await t.drainJobs();
      const done = await getJob(t.db, spans.id);
      assert.deepEqual([done?.kind, done?.key, done?.state], ['telemetry.export-spans', `trace:${span.trace_id}:${span.span_id}`, 'done']);
    });
  });
});

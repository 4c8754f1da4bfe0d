import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { testDb, type TestDb } from '../../test/harness.ts';
import type { PushCommand } from './git-push.ts';
import { acceptedRefs, pushesOf, pushRecorder } from './pushes.ts';

const pkt = (text: string | Buffer) => {
  const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0'), 'latin1'), body]);
};
const FLUSH = Buffer.from('0000', 'latin1');
const report = (...lines: string[]) => Buffer.concat([...lines.map((l) => pkt(`${l}\n`)), FLUSH]);
/** The report inside side band 1, cut in pieces, with progress on band 2 between them. */
const sideband = (inner: Buffer) => Buffer.concat([pkt(Buffer.concat([Buffer.from([2]), Buffer.from('Resolving deltas\n')])), pkt(Buffer.concat([Buffer.from([1]), inner.subarray(0, 7)])), pkt(Buffer.concat([Buffer.from([1]), inner.subarray(7)])), FLUSH]);

const A = 'a'.repeat(40);
const B = 'b'.repeat(40);
const Z = '0'.repeat(40);
const commands: PushCommand[] = [
  { old: A, new: B, ref: 'refs/heads/crewhouse/run-1', kind: 'update' },
  { old: Z, new: A, ref: 'refs/heads/crewhouse/new', kind: 'create' },
  { old: A, new: Z, ref: 'refs/heads/old', kind: 'delete' },
];

describe('the gateway\'s record of pushes', () => {
  it('reads the refs the upstream accepted from its report, in side band 1 or not', () => {
    const r = report('unpack ok', 'ok refs/heads/crewhouse/run-1', 'ng refs/heads/crewhouse/new non-fast-forward', 'ok refs/heads/old');
    const want = [{ ref: 'refs/heads/crewhouse/run-1', old: A, new: B }];
    assert.deepEqual(acceptedRefs(r, commands, false), want, 'a rejected ref and a deletion record nothing');
    assert.deepEqual(acceptedRefs(sideband(r), commands, true), want);
  });

  it('records nothing of a push the upstream did not take, nor of a ref nobody pushed, nor of a cut answer', () => {
    assert.deepEqual(acceptedRefs(report('unpack index-pack failed', 'ng refs/heads/crewhouse/run-1 unpacker error'), commands, false), []);
    assert.deepEqual(acceptedRefs(report('unpack ok', 'ok refs/heads/main'), commands, false), [], 'a ref not among the push commands');
    assert.deepEqual(acceptedRefs(Buffer.from('garbage'), commands, false), []);
    assert.deepEqual(acceptedRefs(report('unpack ok', 'ok refs/heads/crewhouse/run-1').subarray(0, 20), commands, false), []);
    // Without side band asked, band-1 framing is not unwrapped: the report must be the answer itself.
    assert.deepEqual(acceptedRefs(sideband(report('unpack ok', 'ok refs/heads/crewhouse/run-1')), commands, false), []);
  });

  it('follows report-status-v2 options naming the ref and commits the upstream really updated', () => {
    const r = report('unpack ok', 'ok refs/heads/crewhouse/run-1', `option refname refs/heads/crewhouse/renamed`, `option new-oid ${A}`);
    assert.deepEqual(acceptedRefs(r, commands, false), [{ ref: 'refs/heads/crewhouse/renamed', old: A, new: A }]);
  });

  describe('stored', () => {
    let db: TestDb;
    before(async () => {
      db = await testDb();
    });
    after(() => db.close());

    it('keeps what the upstream accepted, by sandbox, for the run engine to read after a cursor', async () => {
      const who = { sandboxId: 'sb_pushes_test', teamId: 7, teamName: 'pushers', role: 'coder' };
      const rec = pushRecorder(db.db, pino({ level: 'silent' }), who, { destination: 'git', repository: 'git.example/repo.git', commands, capabilities: ['report-status', 'side-band-64k'] });
      const answer = sideband(report('unpack ok', 'ok refs/heads/crewhouse/run-1', 'ok refs/heads/crewhouse/new'));
      for (let i = 0; i < answer.length; i += 5) rec.observe(answer.subarray(i, i + 5));
      await rec.finish();
      const rows = await pushesOf(db.db, who.sandboxId);
      assert.deepEqual(
        rows.map((r) => [r.role, r.destination, r.repository, r.ref, r.old_commit, r.new_commit]),
        [
          ['coder', 'git', 'git.example/repo.git', 'refs/heads/crewhouse/run-1', A, B],
          ['coder', 'git', 'git.example/repo.git', 'refs/heads/crewhouse/new', Z, A],
        ],
      );
      assert.deepEqual(await pushesOf(db.db, who.sandboxId, rows[0].id), [rows[1]]);
      assert.deepEqual(await pushesOf(db.db, 'sb_other'), []);
      const refused = pushRecorder(db.db, pino({ level: 'silent' }), { ...who, sandboxId: 'sb_refused' }, { destination: 'git', repository: 'r', commands, capabilities: ['report-status'] });
      refused.observe(report('unpack ok', 'ng refs/heads/crewhouse/run-1 hook declined'));
      await refused.finish();
      assert.deepEqual(await pushesOf(db.db, 'sb_refused'), []);
    });
  });
});

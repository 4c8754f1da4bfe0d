import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sign } from '@octokit/webhooks-methods';
import { listJobs } from '../../queue/queue.ts';
import { makeIntegration } from '../../../test/factories.ts';
import { testApp, type TestApp } from '../../../test/harness.ts';
import { processDeliveryJob } from './process-delivery.job.ts';
import { UNSIGNED_REFUSALS_PER_MINUTE } from './refusal-cap.ts';

const SECRET = 'whsec-test-0123456789';

async function deliver(t: TestApp, opts: { surface?: string; event: string; payload: unknown; id?: string; secret?: string; signature?: string | null; raw?: string }) {
  const raw = opts.raw ?? JSON.stringify(opts.payload);
  const headers: Record<string, string> = { 'content-type': 'application/json', 'x-github-event': opts.event, 'x-github-delivery': opts.id ?? crypto.randomUUID() };
  const signature = opts.signature === undefined ? await sign(opts.secret ?? SECRET, raw) : opts.signature;
  if (signature !== null) headers['x-hub-signature-256'] = signature;
  return t.request({ method: 'POST', url: `/webhooks/${opts.surface ?? 'code_host'}`, headers, raw });
}


describe('POST /webhooks/<surface>', () => {
  let t: TestApp;
  before(async () => {
    t = await testApp();
  });
  after(async () => {
    await t.close();
  });

  it('answers 404 for an unknown surface and 409 while the integration is not enabled, recording the delivery', async () => {
    const unknown = await deliver(t, { surface: 'nope', event: 'ping', payload: {} });
    assert.equal(unknown.status, 404);
    const off = await deliver(t, { event: 'ping', payload: {}, id: 'off-1' });
    assert.equal(off.status, 409);
    assert.match(off.body.detail, /not enabled/);
    const list = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries', token: t.adminToken });
    assert.equal(list.status, 200);
    assert.deepEqual(
      list.body.items.map((d: any) => [d.id, d.outcome, d.signature_valid]),
      [['off-1', 'refused', false]],
    );
  });

  describe('with the integration enabled', () => {
    before(async () => {
      const appKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
      await makeIntegration(t, 'code_host', { settings: { app_id: '1234', installation_id: '5678' }, secrets: { app_key: appKey, webhook_secret: SECRET } });
    });

    it('refuses and records a delivery with a bad or missing signature, before reading its body', async () => {
      const forged = await deliver(t, { event: 'issues', payload: { action: 'opened', issue: { number: 7, labels: [{ name: 'crewhouse' }] }, repository: { full_name: 'acme/app' } }, id: 'forged-1', secret: 'not-the-secret' });
      assert.equal(forged.status, 401);
      assert.equal(forged.headers['content-type'], 'application/problem+json; charset=utf-8');
      const unsigned = await deliver(t, { event: 'issues', payload: {}, id: 'unsigned-1', signature: null });
      assert.equal(unsigned.status, 401);
      // A body that is not even JSON is refused for its signature, not for its syntax.
      const garbage = await deliver(t, { event: 'issues', payload: null, raw: '{not json', id: 'garbage-1', signature: 'sha256=00' });
      assert.equal(garbage.status, 401);
      const list = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=3', token: t.adminToken });
      assert.deepEqual(
        list.body.items.map((d: any) => [d.id, d.signature_valid, d.outcome]),
        [
          ['garbage-1', false, 'refused'],
          ['unsigned-1', false, 'refused'],
          ['forged-1', false, 'refused'],
        ],
      );
      assert.ok(list.body.next_cursor);
      const jobs = await listJobs(t.db, { kind: processDeliveryJob.kind, limit: 10 });
      assert.equal(jobs.length, 0);
      assert.ok(!t.logs.some((l) => l.includes(SECRET)));
    });

    it('a signed but malformed delivery is a 400 naming the problem', async () => {
      const notJson = await deliver(t, { event: 'issues', payload: null, raw: '{not json', id: 'nojson-1' });
      assert.equal(notJson.status, 400);
      assert.match(notJson.body.detail, /not JSON/);
      const noId = await deliver(t, { event: 'issues', payload: {}, id: 'bad id with spaces' });
      assert.equal(noId.status, 400);
      assert.equal(noId.body.errors[0].field, 'X-GitHub-Delivery');
    });

    it('a signed body PostgreSQL cannot keep (a NUL, half a surrogate pair, nesting past the limit) is a recorded 400 naming where, not a 500 or an unrecorded database error', async () => {
      const cases: Array<[string, string, RegExp, string]> = [
        ['nul-1', '{"issue":{"title":"a\\u0000b"}}', /at issue\.title holds a NUL character/, 'issue.title'],
        ['nulkey-1', '{"\\u0000":1}', /at \\u0000 holds a NUL character/, '\\u0000'],
        ['surrogate-1', '{"comment":{"body":"\\ud83d"}}', /at comment\.body holds half of a surrogate pair/, 'comment.body'],
        ['deep-1', '['.repeat(5000) + ']'.repeat(5000), /nests deeper than 100 levels/, '0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0'],
      ];
      for (const [id, raw, detail, field] of cases) {
        const res = await deliver(t, { event: 'issues', payload: null, raw, id });
        assert.equal(res.status, 400, `${id}: ${JSON.stringify(res.body)}`);
        assert.match(res.body.detail, detail);
        assert.equal(res.body.errors[0].field, field);
      }
      const list = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=4', token: t.adminToken });
      assert.deepEqual(
        list.body.items.map((d: any) => [d.id, d.signature_valid, d.outcome]),
        cases.map(([id]) => [id, true, 'refused']).reverse(),
      );
      assert.ok(!t.logs.some((l) => l.includes('"level":50')));
    });

    it('a delivery replayed ten times is recorded once, counted ten times, and queued once', async () => {
      const payload = { zen: 'Keep it logically awesome.', hook_id: 1, repository: { full_name: 'acme/app' } };
      const answers = [];
      for (let i = 0; i < 10; i++) answers.push(await deliver(t, { event: 'ping', payload, id: 'replayed-1' }));
      assert.deepEqual(
        answers.map((a) => [a.status, a.body.outcome]),
        [[202, 'accepted'], ...Array(9).fill([202, 'duplicate'])],
      );
      const jobs = (await listJobs(t.db, { kind: processDeliveryJob.kind, limit: 50 })).filter((j) => j.key === 'webhook:code_host:replayed-1');
      assert.equal(jobs.length, 1);
      await t.drainJobs();
      const list = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=200', token: t.adminToken });
      const rows = list.body.items.filter((d: any) => d.id === 'replayed-1');
      assert.equal(rows.length, 1);
      assert.equal(rows[0].times_received, 10);
      assert.equal(rows[0].signature_valid, true);
      assert.equal(rows[0].event, 'ping');
      // Processed once: no code-host app is configured, so its work is acknowledged and ignored.
      assert.equal(rows[0].outcome, 'ignored');
    });

    it('an oversized delivery is a 413, recorded', async () => {
      const big = JSON.stringify({ pad: 'x'.repeat(t.config.bodyLimit + 10) });
      const res = await deliver(t, { event: 'issues', payload: null, raw: big, id: 'big-1' });
      assert.equal(res.status, 413);
      const list = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=1', token: t.adminToken });
      assert.deepEqual([list.body.items[0].id, list.body.items[0].outcome], ['big-1', 'refused']);
    });

    it('each surface is verified in its own format: a tracker delivery signed like the code host\'s is refused; chat kinds have none; other kinds are 404', async () => {
      await makeIntegration(t, 'tracker_a', { secrets: { access_token: 'tracker-token', webhook_secret: SECRET } });
      const res = await deliver(t, { surface: 'tracker_a', event: 'issue', payload: { action: 'create' }, id: 'tr-1' });
      assert.equal(res.status, 401);
      assert.match(res.body.detail, /Linear-Signature is missing/);
      const list = await t.request({ method: 'GET', url: '/api/v1/integrations/tracker_a/deliveries', token: t.adminToken });
      assert.deepEqual(list.body.items.map((d: any) => [d.outcome, d.signature_valid]), [['refused', false]]);
      assert.deepEqual((await t.request({ method: 'GET', url: '/api/v1/integrations/chat_a/deliveries', token: t.adminToken })).body.items, []);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/integrations/nope/deliveries', token: t.adminToken })).status, 404);
    });

    it('deliveries are for viewers and up, paginated the shared way', async () => {
      const viewer = await t.user('viewer');
      const first = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=2', token: viewer.token });
      assert.equal(first.status, 200);
      const second = await t.request({ method: 'GET', url: `/api/v1/integrations/code_host/deliveries?limit=2&cursor=${first.body.next_cursor}`, token: viewer.token });
      assert.equal(second.status, 200);
      const ids = [...first.body.items, ...second.body.items].map((d: any) => d.id);
      assert.equal(new Set(ids).size, 4);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries' })).status, 401);
      assert.equal((await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?cursor=zzz', token: viewer.token })).status, 400);
    });

    it('a signed delivery refused at receipt (malformed, or stale) is recorded each time and does not stand for its id: the sender\'s good attempt with that id is still taken in', async () => {
      for (let i = 0; i < 2; i++) {
        const bad = await deliver(t, { event: 'ping', payload: null, raw: '{not json', id: 'retried-1' });
        assert.equal(bad.status, 400, JSON.stringify(bad.body));
        assert.match(bad.body.detail, /not JSON/);
      }
      const good = await deliver(t, { event: 'ping', payload: { zen: 'x' }, id: 'retried-1' });
      assert.deepEqual([good.status, good.body.outcome], [202, 'accepted']);
      assert.deepEqual([(await deliver(t, { event: 'ping', payload: { zen: 'x' }, id: 'retried-1' })).body.outcome], ['duplicate']);
      const jobs = (await listJobs(t.db, { kind: processDeliveryJob.kind, limit: 100 })).filter((j) => j.key === 'webhook:code_host:retried-1');
      assert.equal(jobs.length, 1);
      const list = await t.request({ method: 'GET', url: '/api/v1/integrations/code_host/deliveries?limit=3', token: t.adminToken });
      assert.deepEqual(
        list.body.items.map((d: any) => [d.id, d.signature_valid, d.outcome, d.times_received]),
        [['retried-1', true, 'accepted', 2], ['retried-1', true, 'refused', 1], ['retried-1', true, 'refused', 1]],
      );

      // Linear's attempt signed too long ago, then its retry with the same delivery id, signed now.
      const linear = async (at: number) => {
        const raw = JSON.stringify({ type: 'Issue', action: 'create', webhookTimestamp: at });
        const signature = crypto.createHmac('sha256', SECRET).update(raw).digest('hex');
        return t.request({ method: 'POST', url: '/webhooks/tracker_a', headers: { 'content-type': 'application/json', 'linear-delivery': 'linear-retried-1', 'linear-event': 'Issue', 'linear-signature': signature }, raw });
      };
      // (tracker_a was enabled with the same secret above)
      assert.equal((await linear(Date.now() - 5 * 60_000)).status, 401);
      const fresh = await linear(Date.now());
      assert.deepEqual([fresh.status, fresh.body.outcome], [202, 'accepted']);
    });

    /** The jobs (the work) queued for these delivery ids of a surface. */
    const jobsOf = async (surface: string, ids: string[]) => (await listJobs(t.db, { kind: processDeliveryJob.kind, limit: 500 })).filter((j) => ids.some((id) => j.key === `webhook:${surface}:${id}`)).map((j) => j.key);
    const rowsOf = async (surface: string, ids: string[]) => (await t.request({ method: 'GET', url: `/api/v1/integrations/${surface}/deliveries?limit=200`, token: t.adminToken })).body.items.filter((d: any) => ids.includes(d.id));

    it('a captured signed comment posted again under a new delivery id is answered duplicate, recorded, and not taken in again (GitHub, Jira, Linear)', async () => {
      // The same signed bytes under other delivery ids: what someone who captured one delivery can send.
      const comment = { action: 'created', issue: { number: 12 }, comment: { id: 4242, body: '@crewhouse also the docs' }, repository: { full_name: 'acme/app' }, sender: { login: 'alice' } };
      const raw = JSON.stringify(comment);
      const signature = await sign(SECRET, raw);
      const first = await deliver(t, { event: 'issue_comment', payload: comment, raw, signature, id: 'comment-first' });
      assert.deepEqual([first.status, first.body.outcome], [202, 'accepted']);
      const replayed = await deliver(t, { event: 'issue_comment', payload: comment, raw, signature, id: 'comment-replayed' });
      assert.deepEqual([replayed.status, replayed.body], [202, { delivery_id: 'comment-replayed', outcome: 'duplicate' }]);
      // The sender's own retry (the same id) is counted as ever; another comment, and the comment edited, are their own deliveries.
      assert.equal((await deliver(t, { event: 'issue_comment', payload: comment, raw, signature, id: 'comment-first' })).body.outcome, 'duplicate');
      assert.equal((await deliver(t, { event: 'issue_comment', payload: { ...comment, comment: { ...comment.comment, id: 4243 } }, id: 'comment-other' })).body.outcome, 'accepted');
      assert.equal((await deliver(t, { event: 'issue_comment', payload: { ...comment, action: 'edited' }, id: 'comment-edited' })).body.outcome, 'accepted');
      assert.deepEqual((await jobsOf('code_host', ['comment-first', 'comment-replayed', 'comment-other', 'comment-edited'])).sort(), ['webhook:code_host:comment-edited', 'webhook:code_host:comment-first', 'webhook:code_host:comment-other']);
      const rows = await rowsOf('code_host', ['comment-first', 'comment-replayed']);
      assert.deepEqual(
        rows.map((d: any) => [d.id, d.signature_valid, d.outcome, d.times_received]),
        [['comment-replayed', true, 'duplicate', 1], ['comment-first', true, 'accepted', 2]],
      );
      assert.match(rows[0].detail, /reports what delivery comment-first reported .*under another delivery id/);

      // Jira (tracker_b): X-Hub-Signature over the body, X-Atlassian-Webhook-Identifier outside it.
      await makeIntegration(t, 'tracker_b', { settings: { client_id: 'c', cloud_id: 'cloud', account_id: 'agent-1', api_url: 'http://127.0.0.1:9', auth_url: 'http://127.0.0.1:9' }, secrets: { client_secret: 's', webhook_secret: SECRET } });
      const jiraRaw = JSON.stringify({ timestamp: 1, webhookEvent: 'comment_created', comment: { id: '10077', body: 'please also the docs', author: { accountId: 'bob' } }, issue: { id: '100', key: 'OPS-1' } });
      const jira = (id: string) => t.request({ method: 'POST', url: '/webhooks/tracker_b', headers: { 'content-type': 'application/json', 'x-atlassian-webhook-identifier': id, 'x-hub-signature': `sha256=${crypto.createHmac('sha256', SECRET).update(jiraRaw).digest('hex')}` }, raw: jiraRaw });
      assert.equal((await jira('jira-first')).body.outcome, 'accepted');
      assert.equal((await jira('jira-replayed')).body.outcome, 'duplicate');
      assert.deepEqual(await jobsOf('tracker_b', ['jira-first', 'jira-replayed']), ['webhook:tracker_b:jira-first']);
      assert.deepEqual((await rowsOf('tracker_b', ['jira-replayed'])).map((d: any) => d.outcome), ['duplicate']);

      // Linear (tracker_a): a copy within the minute its signed timestamp allows.
      const linearRaw = JSON.stringify({ type: 'Comment', action: 'create', webhookTimestamp: Date.now(), data: { id: 'c0ffee-1', body: '@crewhouse also the docs', issueId: 'i-1', userId: 'u-1' } });
      const linear = (id: string) => t.request({ method: 'POST', url: '/webhooks/tracker_a', headers: { 'content-type': 'application/json', 'linear-delivery': id, 'linear-event': 'Comment', 'linear-signature': crypto.createHmac('sha256', SECRET).update(linearRaw).digest('hex') }, raw: linearRaw });
      assert.equal((await linear('linear-first')).body.outcome, 'accepted');
      assert.equal((await linear('linear-replayed')).body.outcome, 'duplicate');
      assert.deepEqual(await jobsOf('tracker_a', ['linear-first', 'linear-replayed']), ['webhook:tracker_a:linear-first']);
    });

    it('two copies of a signed comment under different delivery ids at once: one is taken in, the other answered duplicate', async () => {
      const comment = { action: 'created', issue: { number: 13 }, comment: { id: 5151, body: '@crewhouse go' }, repository: { full_name: 'acme/app' }, sender: { login: 'alice' } };
      const raw = JSON.stringify(comment);
      const signature = await sign(SECRET, raw);
      const ids = ['racing-1', 'racing-2', 'racing-3'];
      const answers = await Promise.all(ids.map((id) => deliver(t, { event: 'issue_comment', payload: comment, raw, signature, id })));
      assert.deepEqual(answers.map((a) => a.status), [202, 202, 202]);
      assert.deepEqual(answers.map((a) => a.body.outcome).sort(), ['accepted', 'duplicate', 'duplicate']);
      const taken = answers.find((a) => a.body.outcome === 'accepted')!.body.delivery_id;
      assert.deepEqual(await jobsOf('code_host', ids), [`webhook:code_host:${taken}`]);
    });
  });
});

describe('refusals anyone can send are recorded up to a cap; old refusals are deleted', () => {
  let t: TestApp;
  // The cap counts minutes on this clock, so a real minute turning mid-test changes nothing.
  let at = Date.UTC(2026, 0, 5, 12, 0, 10);
  before(async () => {
    t = await testApp({ webhooksClock: () => at });
    const appKey = crypto.generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' }) as string;
    await makeIntegration(t, 'code_host', { settings: { app_id: '1234', installation_id: '5678' }, secrets: { app_key: appKey, webhook_secret: SECRET } });
  });
  after(async () => {
    await t.close();
  });
  const refusedRows = async (surface: string) => Number((await t.db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll().as('n')).where('surface', '=', surface).where('taken', '=', false).executeTakeFirstOrThrow()).n);
  const unrecordedMetric = async (surface: string) => {
    const text = (await t.request({ method: 'GET', url: '/metrics' })).text;
    return Number(new RegExp(`^crewhouse_webhook_refusals_unrecorded_total\\{surface="${surface}"\\} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  };

  it(`past ${UNSIGNED_REFUSALS_PER_MINUTE} forged deliveries a minute, each is answered 401 and counted, not recorded; a valid one is recorded and processed, a signed refusal recorded, and the next minute records again and logs how many were left out`, async () => {
    const k = 5;
    const statuses = [];
    for (let i = 0; i < UNSIGNED_REFUSALS_PER_MINUTE + k; i++) {
      const forged = i % 2 === 0 ? { secret: 'not-the-secret' } : { signature: null };
      statuses.push((await deliver(t, { event: 'issues', payload: { action: 'opened' }, id: `forged-${i}`, ...forged })).status);
    }
    assert.deepEqual(new Set(statuses), new Set([401]));
    assert.equal(await refusedRows('code_host'), UNSIGNED_REFUSALS_PER_MINUTE);
    assert.equal(await unrecordedMetric('code_host'), k);
    assert.equal(t.logs.filter((l) => l.includes('webhook delivery refused')).length, UNSIGNED_REFUSALS_PER_MINUTE);

    // Past the cap, a delivery signed with the secret is taken in and its work done as ever.
    const good = await deliver(t, { event: 'ping', payload: { zen: 'x', repository: { full_name: 'acme/app' } }, id: 'good-after-cap' });
    assert.deepEqual([good.status, good.body.outcome], [202, 'accepted']);
    await t.drainJobs();
    const row = await t.db.selectFrom('webhook_deliveries').selectAll().where('delivery_id', '=', 'good-after-cap').executeTakeFirstOrThrow();
    assert.deepEqual([row.taken, row.signature_valid, row.outcome], [true, true, 'ignored']);
    // A signed refusal (its sender holds the secret) is recorded past the cap too.
    assert.equal((await deliver(t, { event: 'ping', payload: null, raw: '{not json', id: 'signed-bad' })).status, 400);
    assert.equal(await refusedRows('code_host'), UNSIGNED_REFUSALS_PER_MINUTE + 1);
    // An oversized body is not signed either: counted past the cap.
    assert.equal((await deliver(t, { event: 'issues', payload: null, raw: JSON.stringify({ pad: 'x'.repeat(t.config.bodyLimit + 10) }), id: 'big-past-cap' })).status, 413);
    assert.equal(await refusedRows('code_host'), UNSIGNED_REFUSALS_PER_MINUTE + 1);
    assert.equal(await unrecordedMetric('code_host'), k + 1);
    assert.ok(!t.logs.some((l) => l.includes('were not recorded')));

    // The next minute: recorded again, and one line says how many the last one left out.
    at += 60_000;
    assert.equal((await deliver(t, { event: 'issues', payload: {}, id: 'forged-next-minute', signature: null })).status, 401);
    assert.equal(await refusedRows('code_host'), UNSIGNED_REFUSALS_PER_MINUTE + 2);
    const summary = t.logs.filter((l) => l.includes('were not recorded'));
    assert.equal(summary.length, 1);
    assert.match(summary[0], new RegExp(`"unrecorded":${k + 1}\\b`));
    assert.match(summary[0], /"surface":"code_host"/);
    assert.equal(await unrecordedMetric('code_host'), k + 1);
  });

  it('two service processes on one database share the cap: together they record at most the cap a minute', async () => {
    // Another minute of the shared clock, so the test above leaves nothing counted in it.
    at += 10 * 60_000;
    const second = await testApp({ webhooksClock: () => at, shareWith: t });
    try {
      const before = await refusedRows('code_host');
      const metricsBefore = await unrecordedMetric('code_host');
      const k = 6;
      for (let i = 0; i < UNSIGNED_REFUSALS_PER_MINUTE + k; i++) {
        const app = i % 2 === 0 ? t : second;
        assert.equal((await deliver(app, { event: 'issues', payload: { action: 'opened' }, id: `two-apps-${i}`, signature: null })).status, 401);
      }
      assert.equal(await refusedRows('code_host'), before + UNSIGNED_REFUSALS_PER_MINUTE);
      const secondMetric = Number(/^crewhouse_webhook_refusals_unrecorded_total\{surface="code_host"\} (\d+)$/m.exec((await second.request({ method: 'GET', url: '/metrics' })).text)?.[1] ?? 0);
      assert.equal(await unrecordedMetric('code_host') - metricsBefore + secondMetric, k, 'what neither recorded is counted by the one that refused it');
    } finally {
      await second.close();
    }
  });

  it('deletes refusals older than 30 days; deliveries taken in stay, however old, and recent refusals stay', async () => {
    const now = Date.now();
    const daysAgo = (d: number) => new Date(now - d * 86_400_000).toISOString();
    const base = { surface: 'tracker_b', event: 'jira:issue_created', action: null, outcome: 'refused', detail: 'x' };
    await t.db
      .insertInto('webhook_deliveries')
      .values([
        { ...base, delivery_id: 'old-forged', signature_valid: false, taken: false, received_at: daysAgo(31) },
        { ...base, delivery_id: 'old-signed-refused', signature_valid: true, taken: false, received_at: daysAgo(45) },
        { ...base, delivery_id: 'recent-forged', signature_valid: false, taken: false, received_at: daysAgo(29) },
        { ...base, delivery_id: 'old-taken', signature_valid: true, taken: true, outcome: 'processed', received_at: daysAgo(400) },
        { ...base, delivery_id: 'old-taken-refused-by-adapter', signature_valid: true, taken: true, outcome: 'refused', received_at: daysAgo(90) },
      ])
      .execute();
    assert.equal(await t.services.webhooks.pruneRefused(now), 2);
    const left = await t.db.selectFrom('webhook_deliveries').select('delivery_id').where('surface', '=', 'tracker_b').orderBy('delivery_id').execute();
    assert.deepEqual(
      left.map((r) => r.delivery_id),
      ['old-taken', 'old-taken-refused-by-adapter', 'recent-forged'],
    );
    assert.equal(await t.services.webhooks.pruneRefused(now), 0);
  });
});

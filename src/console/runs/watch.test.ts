import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { makeTeam } from '../../../test/factories.ts';
import { testApp, uniq, type TestApp } from '../../../test/harness.ts';
import { WATCHER_BUFFER_BYTES } from './watch.ts';

type Event = { id: number | null; event: string; data: any };

/** Parses a server-sent event stream's blocks (comments skipped). */
function parseEvents(text: string): { events: Event[]; rest: string } {
  const events: Event[] = [];
  let end;
  while ((end = text.indexOf('\n\n')) >= 0) {
    const block = text.slice(0, end);
    text = text.slice(end + 2);
    const fields = Object.fromEntries(block.split('\n').filter((l) => !l.startsWith(':') && l.includes(':')).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
    if (fields.event === undefined) continue;
    events.push({ id: fields.id === undefined ? null : Number(fields.id), event: fields.event, data: JSON.parse(fields.data) });
  }
  return { events, rest: text };
}

// A run's watchers (GET /runs/{id}/posts as text/event-stream): the run never waits on one.
describe('run post watchers', () => {
  let t: TestApp;
  let port: number;
  before(async () => {
    t = await testApp({ modelProxy: true });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as AddressInfo).port;
  });
  after(() => t.close());

  const newRun = async () => {
    const team = await t.services.teams.mustGetLive((await makeTeam(t)).name);
    const id = uniq('run');
    await t.db.insertInto('runs').values({ id, team_id: team.id, team_name: team.name, state: 'running', text: 'watch me', created_by: 'admin@example.com' }).execute();
    return id;
  };
  const request = (runId: string, headers: Record<string, string> = {}) =>
    `GET /api/v1/runs/${runId}/posts HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${t.adminToken}\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}\r\n`)
      .join('')}\r\n`;

  /** A watcher that reads everything, until `until` holds. */
  const reader = (runId: string, headers: Record<string, string>, until: (events: Event[]) => boolean) =>
    new Promise<Event[]>((resolve, reject) => {
      const req = http.get({ agent: false, host: '127.0.0.1', port, path: `/api/v1/runs/${runId}/posts`, headers: { accept: 'text/event-stream', authorization: `Bearer ${t.adminToken}`, ...headers } }, (res) => {
        if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
        const events: Event[] = [];
        let buf = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          const parsed = parseEvents(buf + c);
          buf = parsed.rest;
          events.push(...parsed.events);
          if (until(events)) {
            req.destroy();
            resolve(events);
          }
        });
        res.on('end', () => resolve(events));
        res.on('error', () => {});
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    });

  /** A watcher as EventSource is one: when its stream ends it reconnects with Last-Event-ID, until it has post `last`. */
  const follow = async (runId: string, last: number, from: number | null = null) => {
    const posts: Event[] = [];
    let drops = 0;
    while (posts.at(-1)?.id !== last) {
      const lastId = posts.at(-1)?.id ?? from;
      const got = await reader(runId, lastId ? { 'last-event-id': String(lastId) } : {}, (events) => events.at(-1)?.id === last);
      if (got.at(-1)?.event === 'overflow') drops++;
      posts.push(...got.filter((e) => e.id !== null));
    }
    return { posts, drops };
  };

  /** A watcher that reads until closed; `until` waits for what it has read to satisfy a condition. */
  const watch = async (runId: string) => {
    const events: Event[] = [];
    const checks = new Set<() => void>();
    let buf = '';
    const req = http.get({ agent: false, host: '127.0.0.1', port, path: `/api/v1/runs/${runId}/posts`, headers: { accept: 'text/event-stream', authorization: `Bearer ${t.adminToken}` } });
    await new Promise<void>((resolve, reject) => {
      req.on('response', (res) => {
        if (res.statusCode !== 200) return reject(new Error(`status ${res.statusCode}`));
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          const parsed = parseEvents(buf + c);
          buf = parsed.rest;
          events.push(...parsed.events);
          for (const check of checks) check();
        });
        res.on('error', () => {});
        // The server subscribes the stream to the run's signal before it sends the head.
        resolve();
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    });
    const until = (holds: (events: Event[]) => boolean) =>
      new Promise<void>((resolve) => {
        const check = () => {
          if (!holds(events)) return;
          checks.delete(check);
          resolve();
        };
        checks.add(check);
        check();
      });
    return { events, until, close: () => req.destroy() };
  };
  const has = (seq: number) => (events: Event[]) => events.some((e) => e.id === seq);

  it('refuses a Last-Event-ID that is not a seq, naming it, instead of starting over', async () => {
    const runId = await newRun();
    const bad = await t.request({ method: 'GET', url: `/api/v1/runs/${runId}/posts`, token: t.adminToken, headers: { accept: 'text/event-stream', 'last-event-id': 'abc' } });
    assert.equal(bad.status, 400, bad.text);
    assert.match(JSON.stringify(bad.body.errors), /last-event-id/i);
  });

  it('a Last-Event-ID of 0 wins over cursor, as the contract says the header does: the stream starts from the first post', async () => {
    const runId = await newRun();
    for (const i of [1, 2]) await t.services.runJournal.notice(runId, `note ${i}`, `lei0:${i}`);
    const fromStart = await new Promise<Event[]>((resolve, reject) => {
      const req = http.get({ agent: false, host: '127.0.0.1', port, path: `/api/v1/runs/${runId}/posts?cursor=1`, headers: { accept: 'text/event-stream', authorization: `Bearer ${t.adminToken}`, 'last-event-id': '0' } }, (res) => {
        let buf = '';
        const events: Event[] = [];
        res.setEncoding('utf8');
        res.on('data', (c: string) => {
          const parsed = parseEvents(buf + c);
          buf = parsed.rest;
          events.push(...parsed.events);
          if (events.length >= 1) {
            req.destroy();
            resolve(events);
          }
        });
        res.on('error', () => {});
      });
      req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
    });
    assert.equal(fromStart[0]!.id, 1, 'the first post, not the one after cursor');
  });

  it('a watcher that stops reading holds up neither the run nor another watcher; it is dropped with an overflow event and resumes with Last-Event-ID', async () => {
    const runId = await newRun();
    // Far more than the kernel's socket buffers and the watcher's own bound hold.
    const text = 'x'.repeat(200_000);
    const count = 120;

    // The stalled watcher: it sends its request and then reads nothing.
    const stalled = net.connect(port, '127.0.0.1');
    stalled.pause();
    stalled.write(request(runId));
    // A watcher that reads: a burst of large posts may leave it behind too (then it resumes).
    const live = follow(runId, count);

    // The run posts every one of them; none of these waits on a watcher.
    for (let i = 1; i <= count; i++) await t.services.runJournal.notice(runId, `${i} ${text}`, `bench:${i}`);
    const followed = await live;
    const seen = followed.posts;
    assert.deepEqual(
      seen.map((e) => e.id),
      seen.map((e) => e.data.seq),
      'ids are seqs',
    );
    assert.deepEqual(
      seen.map((e) => Number(e.data.text.split(' ')[0])),
      Array.from({ length: count }, (_, i) => i + 1),
      'the reading watcher got every post once, in order',
    );

    // The stalled watcher now reads what was left for it: posts in order, then the overflow event, then the end.
    stalled.setEncoding('utf8');
    let got = '';
    stalled.on('data', (c: string) => (got += c));
    stalled.resume();
    await new Promise<void>((resolve) => stalled.on('end', resolve));
    const body = got.slice(got.indexOf('\r\n\r\n') + 4);
    // Chunked transfer framing: drop the chunk-size lines.
    const unchunked = body.replace(/\r\n[0-9a-f]+\r\n/g, '').replace(/^[0-9a-f]+\r\n/, '');
    const { events } = parseEvents(unchunked);
    const posts = events.filter((e) => e.event === 'notice');
    assert.ok(posts.length > 0 && posts.length < count, `the stalled watcher was dropped part way (${posts.length} of ${count})`);
    assert.deepEqual(
      posts.map((e) => e.id),
      Array.from({ length: posts.length }, (_, i) => i + 1),
      'what it had got is in order',
    );
    // Its last event says why the stream ended, when it read it before the grace ran out (the
    // connection of a client that reads nothing more is destroyed after it).
    const last = events.at(-1)!;
    if (last.event === 'overflow') {
      assert.equal(last.id, null, 'the overflow event carries no id: Last-Event-ID stays the last post seen');
      assert.equal(last.data.last_event_id, posts.at(-1)!.id);
      assert.match(last.data.detail, new RegExp(`${WATCHER_BUFFER_BYTES} bytes.*Last-Event-ID: ${posts.at(-1)!.id}`));
    }
    // The reading watcher was dropped too whenever it fell that far behind, and said so.

    // Resuming from there gives the rest, nothing lost or repeated.
    const rest = (await follow(runId, count, posts.at(-1)!.id)).posts;
    assert.deepEqual(
      [...posts, ...rest].map((e) => e.id),
      Array.from({ length: count }, (_, i) => i + 1),
    );
    stalled.destroy();
  });

  it("a watcher caught up is handed the run's new posts as the database stored them, without reading them back", { timeout: 60_000 }, async () => {
    const runId = await newRun();
    await t.services.runJournal.notice(runId, 'first', 'handed:1');
    const live = await watch(runId);
    await live.until(has(1));
    // jsonb orders an object's keys its own way: what a watcher is handed is what a read gives.
    await t.services.runJournal.notice(runId, 'second', 'handed:2', { zeta: 1, alpha: { y: 2, b: 3 } });
    // The run's next transaction starts at once and holds the embedded database's one connection
    // until the watcher has the post: a watcher that read it back would wait for it (forever).
    await t.db.transaction().execute(async (trx) => {
      await trx.selectFrom('runs').select('id').where('id', '=', runId).forUpdate().execute();
      await live.until(has(2));
    });
    live.close();
    const reread = await watch(runId);
    await reread.until(has(2));
    reread.close();
    assert.deepEqual(
      live.events.map((e) => JSON.stringify(e)),
      reread.events.map((e) => JSON.stringify(e)),
      'the same events, keys in the same order',
    );
  });

  it("another process's posts reach a watcher by its poll, and one handed over after a gap is not written before the post it follows", { timeout: 60_000 }, async () => {
    // A second service on the same database: its posts signal its own watchers, not these.
    const other = await testApp({ shareWith: t });
    try {
      const runId = await newRun();
      const w = await watch(runId);
      await other.services.runJournal.notice(runId, 'from the other process', 'other:1');
      await w.until(has(1));
      // Post 2 from the other process, then post 3 from this one: this process hands the stream
      // only post 3, which does not follow on from what it wrote, so it reads 2 and 3.
      await other.services.runJournal.notice(runId, 'from the other process again', 'other:2');
      await t.services.runJournal.notice(runId, 'from this process', 'this:3');
      await w.until(has(3));
      w.close();
      assert.deepEqual(
        w.events.map((e) => [e.id, e.data.text]),
        [
          [1, 'from the other process'],
          [2, 'from the other process again'],
          [3, 'from this process'],
        ],
      );
    } finally {
      await other.close();
    }
  });
});

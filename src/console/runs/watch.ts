/**
 * A run's posts as server-sent events (`GET /runs/{id}/posts` with `Accept: text/event-stream`):
 * each post once, in order, from after a seq; new posts as they come (this process's signal
 * wakes the loop at once, with the posts when its publisher had them; a poll finds what other
 * processes wrote), comments that keep the connection alive, and an end when the client goes.
 * The route only hands the request over.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Post } from './runs.schemas.ts';

const HEARTBEAT_MS = 15_000;
const POLL_MS = 1_000;
const PAGE = 200;
/**
 * What a watcher may have waiting in its connection (beyond what the kernel holds) before it is
 * dropped: a client that stops reading costs the server this much memory at most, never a wait.
 */
export const WATCHER_BUFFER_BYTES = 1024 * 1024;
/** How long a dropped watcher's connection may take to take its last event before it is destroyed. */
const DROP_GRACE_MS = 10_000;

/** What the stream reads of a run: its posts after a seq, and the signal that it has new ones. */
export interface PostSource {
  /** The posts after a seq; rejects with a 404 for an unknown run. */
  posts(runId: string, after: number, limit: number): Promise<{ items: Post[]; next_cursor: string | null }>;
  /** The same without looking the run up (the stream's reads, after its first). */
  postsAfter(runId: string, after: number, limit: number): Promise<{ items: Post[]; next_cursor: string | null }>;
  /** This process's signal that a run changed, after the change: with the posts it added, when its publisher had them (else none). */
  onPosts(runId: string, listener: (posts: Post[]) => void): () => void;
}

type Page = Awaited<ReturnType<PostSource['posts']>>;
/**
 * Reads in flight per source, by run and position: the watchers of a run that are caught up sit
 * at the same seq, and a new post wakes them all at once, so they share one read of the database
 * instead of making one each (the run's own writes wait behind every read on the embedded database).
 */
const inFlight = new WeakMap<PostSource, Map<string, Promise<Page>>>();
function sharedRead(source: PostSource, runId: string, after: number): Promise<Page> {
  let reads = inFlight.get(source);
  if (!reads) inFlight.set(source, (reads = new Map()));
  const key = `${runId}:${after}`;
  let read = reads.get(key);
  if (!read) {
    read = source.postsAfter(runId, after, PAGE).finally(() => reads.delete(key));
    reads.set(key, read);
  }
  return read;
}

/**
 * Each post's event, made once, as the bytes written: the watchers that shared a read (or were
 * handed the same posts) hold the same post objects, so the first to write one encodes it for
 * all of them, and every connection writes the same buffer (a string would be measured and
 * encoded again for each).
 */
const encoded = new WeakMap<Post, Buffer>();
function eventOf(p: Post): Buffer {
  let event = encoded.get(p);
  if (event === undefined) {
    event = Buffer.from(`id: ${p.seq}\nevent: ${p.kind}\ndata: ${JSON.stringify(p)}\n\n`);
    encoded.set(p, event);
  }
  return event;
}

/**
 * Streams a run's posts after `after` until the client closes; a 404 (unknown run) is answered
 * before the stream starts. The run never waits on a watcher: each reads on its own (one caught
 * up writes the posts this process's publisher handed it, without a read), and one that falls
 * more than `maxBuffered` bytes behind what it has read (a client that stopped reading) gets
 * an `overflow` event naming the last seq written and the stream ends; it resumes with
 * `Last-Event-ID` (what EventSource sends when it reconnects) without losing or repeating a post.
 */
export async function watchPosts(req: FastifyRequest, reply: FastifyReply, runs: PostSource, runId: string, after: number, opts: { maxBuffered?: number } = {}): Promise<void> {
  const maxBuffered = opts.maxBuffered ?? WATCHER_BUFFER_BYTES;
  let seen = after;
  await runs.posts(runId, seen, 1); // 404 before the stream starts
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write(': stream of run posts\n\n');
  let closed = false;
  let overflowed = false;
  let wake: (() => void) | null = null;
  // The posts this process's publisher handed over since the last read: written instead of
  // reading them back when they follow on from `seen`. A signal without posts, a gap, more than
  // a page (or `maxBuffered` characters of text), or a signal while the connection is full make
  // the next turn read the database instead: what a watcher keeps here stays bounded.
  let handed: Post[] = [];
  let handedText = 0;
  let mustRead = true;
  let draining = false;
  const unsubscribe = runs.onPosts(runId, (posts) => {
    for (const p of posts) handedText += p.text.length;
    if (posts.length === 0 || draining || handed.length + posts.length > PAGE || handedText > maxBuffered) {
      handed = [];
      handedText = 0;
      mustRead = true;
    } else handed.push(...posts);
    wake?.();
  });
  /** The handed posts after `seen`, when they follow on from it without a gap; null when the database must be read. */
  const takeHanded = (): Post[] | null => {
    const posts = handed.filter((p) => p.seq > seen);
    handed = [];
    handedText = 0;
    if (mustRead || posts.some((p, i) => p.seq !== seen + 1 + i)) return null;
    return posts;
  };
  const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
  const onClose = () => {
    closed = true;
    wake?.();
  };
  req.raw.on('close', onClose);
  res.on('close', onClose);
  /** Until the connection has taken what it holds (or the client goes): the next page is read only then. */
  const drained = () => {
    draining = true;
    return new Promise<void>((resolve) => {
      wake = resolve;
      res.once('drain', resolve);
    }).finally(() => {
      res.off('drain', wake!);
      wake = null;
      draining = false;
      mustRead = true;
    });
  };
  try {
    while (!closed) {
      const own = takeHanded();
      let page: Page;
      if (own) page = { items: own, next_cursor: null };
      else {
        mustRead = false;
        page = await sharedRead(runs, runId, seen);
      }
      // What a read brought goes in one write (one system call per watcher, not one per post).
      const out: Buffer[] = [];
      let bytes = 0;
      for (const p of page.items) {
        if (closed) break;
        const event = eventOf(p);
        out.push(event);
        bytes += event.length;
        seen = p.seq;
        if (res.writableLength + bytes > maxBuffered) {
          overflowed = true;
          break;
        }
      }
      if (out.length && !closed) res.write(out.length === 1 ? out[0] : Buffer.concat(out, bytes));
      if (overflowed) {
        req.log.info({ run: runId, seq: seen, buffered: res.writableLength }, 'a run post watcher fell too far behind and was dropped');
        res.write(`event: overflow\ndata: ${JSON.stringify({ detail: `this client read too slowly (more than ${maxBuffered} bytes waited for it); reconnect with Last-Event-ID: ${seen} to resume`, last_event_id: seen })}\n\n`);
        break;
      }
      if (closed) break;
      if (res.writableNeedDrain) {
        await drained();
        continue;
      }
      // More to read, or posts handed over (or a signal) while this turn read: the next turn at once.
      if (page.next_cursor || mustRead || handed.length) {
        mustRead ||= page.next_cursor !== null;
        continue;
      }
      await new Promise<void>((resolve) => {
        const t = setTimeout(() => {
          // Another process's posts come with no signal here: a poll reads them.
          mustRead = true;
          resolve();
        }, POLL_MS);
        wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      wake = null;
    }
  } catch (err) {
    req.log.warn({ err, run: runId }, 'post stream ended by an error');
  } finally {
    clearInterval(heartbeat);
    unsubscribe();
    req.raw.off('close', onClose);
    res.end();
    if (overflowed && !closed) {
      // The connection ends too (once it has taken what waits in it), so the client sees the end
      // and reconnects; one that reads nothing more would hold it, and what waits in it, forever.
      res.socket?.end();
      setTimeout(() => res.destroy(), DROP_GRACE_MS).unref();
    }
  }
}

/**
 * A run's posts as server-sent events (`GET /runs/{id}/posts` with `Accept: text/event-stream`):
 * each post once, in order, from after a seq; new posts as they come (this process's signal
 * wakes the loop at once, a poll finds what other processes wrote), comments that keep the
 * connection alive, and an end when the client goes. The route only hands the request over.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Post } from './runs.schemas.ts';

const HEARTBEAT_MS = 15_000;
const POLL_MS = 1_000;
const PAGE = 200;

/** What the stream reads of a run: its posts after a seq, and the signal that it has new ones. */
export interface PostSource {
  posts(runId: string, after: number, limit: number): Promise<{ items: Post[]; next_cursor: string | null }>;
  onPosts(runId: string, listener: () => void): () => void;
}

/** Streams a run's posts after `after` until the client closes; a 404 (unknown run) is answered before the stream starts. */
export async function watchPosts(req: FastifyRequest, reply: FastifyReply, runs: PostSource, runId: string, after: number): Promise<void> {
  let seen = after;
  await runs.posts(runId, seen, 1); // 404 before the stream starts
  reply.hijack();
  const res = reply.raw;
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', connection: 'keep-alive', 'x-accel-buffering': 'no' });
  res.write(': stream of run posts\n\n');
  let closed = false;
  let wake: (() => void) | null = null;
  const unsubscribe = runs.onPosts(runId, () => wake?.());
  const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
  req.raw.on('close', () => {
    closed = true;
    wake?.();
  });
  try {
    while (!closed) {
      const page = await runs.posts(runId, seen, PAGE);
      for (const p of page.items) {
        if (!res.write(`id: ${p.seq}\nevent: ${p.kind}\ndata: ${JSON.stringify(p)}\n\n`)) await new Promise((r) => res.once('drain', r));
        seen = p.seq;
      }
      if (page.next_cursor) continue;
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, POLL_MS);
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
    res.end();
  }
}

// The watchers bench's clients, in a process of their own: a run's watchers are browsers on other
// machines, and their reading (a data event per post per watcher, the search for the last post)
// would otherwise run on the event loop of the server and the run they watch, and count as a cost
// of the run's posts that a real watcher never charges to it.
//
// Told a run and its last post over IPC, it opens the watchers (and one that sends its request and
// then reads nothing), answers `ready` once every reading watcher has the stream's first bytes
// (the server subscribes a watcher before it writes them), then answers the moment (ms since the
// epoch, from performance.timeOrigin) at which the last of them had the last post.
import http from 'node:http';
import net from 'node:net';

const { port, token, watchers } = JSON.parse(process.argv[2]) as { port: number; token: string; watchers: number };
const stalled: net.Socket[] = [];

/** A watcher: resolves `open` when the stream starts and `seen` when it has post `last`. */
function watcher(runId: string, last: number) {
  const needle = Buffer.from(`id: ${last}\n`);
  let opened!: () => void;
  const open = new Promise<void>((resolve) => (opened = resolve));
  const seen = new Promise<number>((resolve, reject) => {
    const req = http.get({ agent: false, host: '127.0.0.1', port, path: `/api/v1/runs/${runId}/posts`, headers: { accept: 'text/event-stream', authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) return reject(new Error(`the post stream answered ${res.statusCode}`));
      let tail = Buffer.alloc(0);
      res.on('data', (c: Buffer) => {
        opened();
        const joined = Buffer.concat([tail, c]);
        if (joined.includes(needle)) {
          resolve(performance.timeOrigin + performance.now());
          req.destroy();
        }
        tail = joined.subarray(-needle.length);
      });
      res.on('error', () => {});
    });
    req.on('error', (err) => (req.destroyed ? undefined : reject(err)));
  });
  return { open, seen };
}

process.on('message', async (m: { runId: string; last: number }) => {
  const s = net.connect(port, '127.0.0.1');
  s.pause();
  s.write(`GET /api/v1/runs/${m.runId}/posts HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  stalled.push(s);
  const all = Array.from({ length: watchers }, () => watcher(m.runId, m.last));
  await Promise.all(all.map((w) => w.open));
  process.send!('ready');
  process.send!(Math.max(...(await Promise.all(all.map((w) => w.seen)))));
});
process.on('disconnect', () => {
  for (const s of stalled) s.destroy();
  process.exit(0);
});
process.send!('started');

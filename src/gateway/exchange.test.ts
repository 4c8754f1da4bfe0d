import assert from 'node:assert/strict';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import zlib from 'node:zlib';
import { forward, serveConnection, type Exchange } from './exchange.ts';
import { createUpstreamPool } from './upstreams.ts';

/**
 * The gateway's HTTP/1.1 data path between real sockets: a client (Node's http client, or raw
 * bytes where the test needs exact framing), serveConnection with a handler that forwards
 * every request, and upstreams (Node's http server, or raw sockets for framings it would not
 * produce).
 */

const SECRET = 'sekrit-value-0123456789';

describe('gateway data path (HTTP/1.1 between real sockets)', () => {
  let proxy: net.Server;
  let proxyPort = 0;
  let upstream: http.Server;
  let upstreamPort = 0;
  let raw: net.Server;
  let rawPort = 0;
  /** What the raw upstream answers next (strings of bytes, latin1, written as they are, then optionally the connection closed). */
  let rawAnswer: { bytes: string[]; close?: boolean } = { bytes: [] };
  const upstreamConnections = new Set<net.Socket>();
  const seen: Array<{ method: string; url: string; headers: http.IncomingHttpHeaders; body: string }> = [];
  const pool = createUpstreamPool([], 5000);

  const handle = async (x: Exchange) => {
    const url = new URL(x.target);
    const port = Number(url.port);
    const secrets = url.pathname.startsWith('/secret') ? [SECRET] : [];
    const done = await forward(x, pool, { upstream: { scheme: 'http', address: '127.0.0.1', port, servername: null }, method: x.method, path: url.pathname, headers: [['host', url.host], ...x.headers.filter(([n]) => n === 'content-type')], secrets });
    if (!done.ok) x.answer(502, [], `failed: ${done.error.code}: ${done.error.message}`);
  };

  before(async () => {
    upstream = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('latin1');
      req.on('data', (c) => (body += c));
      req.on('end', () => {
        seen.push({ method: req.method!, url: req.url!, headers: req.headers, body });
        if (req.url === '/chunked' || req.url === '/secret-chunked') {
          res.writeHead(200, { 'content-type': 'text/plain', 'x-echo': req.url === '/secret-chunked' ? `token ${SECRET}` : 'none' });
          // The secret split across two chunks.
          res.write(`before ${SECRET.slice(0, 7)}`);
          setTimeout(() => res.end(`${SECRET.slice(7)} after`), 5);
          return;
        }
        if (req.url === '/nocontent') return res.writeHead(204).end();
        const answer = `${req.method} ${req.url} ${body.length}`;
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': Buffer.byteLength(answer) }).end(req.method === 'HEAD' ? undefined : answer);
      });
    });
    upstream.on('connection', (s) => {
      upstreamConnections.add(s);
      s.on('close', () => upstreamConnections.delete(s));
    });
    upstream.keepAliveTimeout = 30_000;
    await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
    upstreamPort = (upstream.address() as net.AddressInfo).port;
    raw = net.createServer((s) => {
      s.once('data', () => {
        for (const b of rawAnswer.bytes) s.write(Buffer.from(b, 'latin1'));
        if (rawAnswer.close) s.end();
      });
    });
    await new Promise<void>((r) => raw.listen(0, '127.0.0.1', r));
    rawPort = (raw.address() as net.AddressInfo).port;
    // A head must arrive within 300 ms here (60 s in the gateway).
    proxy = net.createServer((s) => serveConnection(s, { request: handle, connect: (_h, sock) => sock.destroy(), malformed: () => {}, failed: (err) => console.error(err) }, 300));
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyPort = (proxy.address() as net.AddressInfo).port;
  });

  after(async () => {
    pool.close();
    upstream.closeAllConnections();
    await Promise.all([new Promise((r) => proxy.close(r)), new Promise((r) => upstream.close(r)), new Promise((r) => raw.close(r))]);
  });

  /** A request through the proxy with Node's http client. */
  const viaProxy = (path: string, opts: { method?: string; body?: string; chunked?: boolean; agent?: http.Agent; port?: number; headers?: Record<string, string> } = {}) =>
    new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: proxyPort, method: opts.method ?? 'GET', path: `http://127.0.0.1:${opts.port ?? upstreamPort}${path}`, agent: opts.agent, headers: opts.headers });
      req.on('response', (res) => {
        let body = '';
        res.setEncoding('latin1');
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      });
      req.on('error', reject);
      if (opts.body !== undefined && opts.chunked) {
        req.write(opts.body.slice(0, 3));
        setTimeout(() => req.end(opts.body!.slice(3)), 5);
      } else req.end(opts.body);
    });

  /** Raw bytes to the proxy; everything that comes back until the proxy closes (or `ms` pass). */
  const rawExchange = (bytes: string, ms = 1000) =>
    new Promise<string>((resolve) => {
      const s = net.connect(proxyPort, '127.0.0.1', () => s.write(bytes));
      let got = '';
      s.setEncoding('latin1');
      s.on('data', (c) => (got += c));
      const timer = setTimeout(() => s.destroy(), ms);
      s.on('close', () => {
        clearTimeout(timer);
        resolve(got);
      });
    });

  test('kept-alive on both sides: several requests over one client connection reuse one upstream connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    for (let i = 0; i < 5; i++) {
      const r = await viaProxy(`/k${i}`, { agent });
      assert.equal(r.status, 200);
      assert.equal(r.body, `GET /k${i} 0`);
    }
    assert.equal(upstreamConnections.size, 1);
    agent.destroy();
  });

  test('request bodies: a length-framed one as it is, a chunked one framed again; the upstream reads the same payload', async () => {
    const a = await viaProxy('/len', { method: 'POST', body: 'hello world', headers: { 'content-type': 'text/plain' } });
    assert.equal(a.body, 'POST /len 11');
    const b = await viaProxy('/chunk', { method: 'POST', body: 'hello chunked world', chunked: true });
    assert.equal(b.body, 'POST /chunk 19');
    assert.equal(seen.find((s) => s.url === '/chunk')?.headers['transfer-encoding'], 'chunked');
    assert.equal(seen.find((s) => s.url === '/chunk')?.body, 'hello chunked world');
  });

  test('answers: chunked passed to an HTTP/1.1 client, decoded for an HTTP/1.0 one; HEAD and 204 have no body and the connection goes on', async () => {
    const c = await viaProxy('/chunked');
    assert.equal(c.headers['transfer-encoding'], 'chunked');
    assert.equal(c.body, `before ${SECRET} after`);
    const old = await rawExchange(`GET http://127.0.0.1:${upstreamPort}/chunked HTTP/1.0\r\n\r\n`);
    assert.match(old, /^HTTP\/1\.1 200 /);
    assert.doesNotMatch(old, /transfer-encoding/i);
    assert.match(old, /connection: close/i);
    assert.ok(old.endsWith(`before ${SECRET} after`), old);
    const both = await rawExchange(`HEAD http://127.0.0.1:${upstreamPort}/h HTTP/1.1\r\nHost: x\r\n\r\nGET http://127.0.0.1:${upstreamPort}/nocontent HTTP/1.1\r\nHost: x\r\n\r\nGET http://127.0.0.1:${upstreamPort}/last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
    const statuses = [...both.matchAll(/^HTTP\/1\.1 (\d+)/gm)].map((m) => m[1]);
    assert.deepEqual(statuses, ['200', '204', '200'], both);
    assert.match(both, /content-length: 9\r\n/i);
    assert.ok(both.endsWith('GET /last 0'), both);
  });

  test('with a credential injected, the answer is decoded and scrubbed of it, across chunks and in headers', async () => {
    const r = await viaProxy('/secret-chunked');
    assert.equal(r.body, 'before [redacted by the gateway] after');
    assert.equal(r.headers['x-echo'], 'token [redacted by the gateway]');
  });

  test('with a credential injected, a compressed answer is decoded before it is scrubbed; a coding the gateway cannot decode is not passed on', async () => {
    const plain = `before ${SECRET} middle ${Buffer.from(SECRET).toString('base64')} after`;
    for (const [coding, bytes] of [
      ['gzip', zlib.gzipSync(plain)],
      ['deflate', zlib.deflateSync(plain)],
      ['deflate', zlib.deflateRawSync(plain)],
      ['br', zlib.brotliCompressSync(plain)],
      ['gzip, br', zlib.brotliCompressSync(zlib.gzipSync(plain))],
    ] as const) {
      // Chunked, in pieces of 5 bytes: the compressed stream, and so the secret in it, split across chunks.
      const pieces: string[] = [];
      for (let i = 0; i < bytes.length; i += 5) pieces.push(bytes.subarray(i, i + 5).toString('latin1'));
      rawAnswer = { bytes: [`HTTP/1.1 200 OK\r\ncontent-encoding: ${coding}\r\ntransfer-encoding: chunked\r\n\r\n`, ...pieces.map((p) => `${Buffer.byteLength(p, 'latin1').toString(16)}\r\n${p}\r\n`), '0\r\n\r\n'], close: true };
      const r = await viaProxy('/secret-compressed', { port: rawPort });
      assert.equal(r.status, 200, coding);
      assert.equal(r.headers['content-encoding'], undefined, `${coding}: the answer goes on decoded`);
      assert.equal(r.body, 'before [redacted by the gateway] middle [redacted by the gateway] after', coding);
    }
    // The status line's reason and a header's name are scrubbed as well as values.
    rawAnswer = { bytes: [`HTTP/1.1 200 OK ${SECRET}\r\nx-${SECRET}: 1\r\nx-b64: ${Buffer.from(SECRET).toString('base64')}\r\ncontent-length: 2\r\n\r\nok`], close: true };
    const head = await rawExchange(`GET http://127.0.0.1:${rawPort}/secret-head HTTP/1.1\r\nHost: x\r\n\r\n`, 5000);
    assert.match(head, /^HTTP\/1\.1 200 OK \[redacted by the gateway\]\r\n/);
    assert.match(head, /x-redacted-by-the-gateway: 1\r\n/);
    assert.match(head, /x-b64: \[redacted by the gateway\]\r\n/);
    assert.ok(!head.includes(SECRET), head);

    // Without a credential the bytes pass untouched, encoded as they came.
    const gz = zlib.gzipSync('no secret here');
    rawAnswer = { bytes: [`HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: ${gz.length}\r\n\r\n${gz.toString('latin1')}`], close: true };
    const untouched = await viaProxy('/open', { port: rawPort });
    assert.equal(untouched.headers['content-encoding'], 'gzip');
    assert.equal(zlib.gunzipSync(Buffer.from(untouched.body, 'latin1')).toString(), 'no secret here');

    rawAnswer = { bytes: ['HTTP/1.1 200 OK\r\ncontent-encoding: zstd\r\ncontent-length: 4\r\n\r\nabcd'], close: true };
    const zstd = await viaProxy('/secret-zstd', { port: rawPort });
    assert.equal(zstd.status, 502);
    assert.match(zstd.body, /^failed: EGATEWAY_ENCODING: the upstream answered in the content encoding "zstd", which the gateway cannot decode/);
    // A coding the gateway does not know is not named (it could be the echoed credential).
    rawAnswer = { bytes: [`HTTP/1.1 200 OK\r\ncontent-encoding: ${SECRET}\r\ncontent-length: 4\r\n\r\nabcd`], close: true };
    const odd = await viaProxy('/secret-odd', { port: rawPort });
    assert.equal(odd.status, 502);
    assert.match(odd.body, /^failed: EGATEWAY_ENCODING: the upstream answered in a content encoding the gateway does not know/);
    assert.ok(!odd.body.includes(SECRET));
    // A body that claims gzip and is not: the head is sent, so the client connection ends rather than pass it on.
    const notGzip = `not gzip at all, ${SECRET.slice(0, 12)}`;
    rawAnswer = { bytes: [`HTTP/1.1 200 OK\r\ncontent-encoding: gzip\r\ncontent-length: ${notGzip.length}\r\n\r\n${notGzip}`], close: true };
    const broken = await rawExchange(`GET http://127.0.0.1:${rawPort}/secret-broken HTTP/1.1\r\nHost: x\r\n\r\n`, 5000);
    assert.match(broken, /^HTTP\/1\.1 200 /);
    assert.ok(!broken.includes('not gzip'), broken);
  });

  test('Expect: 100-continue is answered by the gateway when it forwards the body', async () => {
    const out = await rawExchange(`POST http://127.0.0.1:${upstreamPort}/expect HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\nConnection: close\r\n\r\nabc`);
    assert.match(out, /^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    assert.ok(out.endsWith('POST /expect 3'));
  });

  test('a close-delimited answer reaches the client whole, and then its connection closes', async () => {
    rawAnswer = { bytes: ['HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\npart one, ', 'part two'], close: true };
    const out = await rawExchange(`GET http://127.0.0.1:${rawPort}/x HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.match(out, /connection: close/i);
    assert.ok(out.endsWith('part one, part two'), out);
  });

  test('an upstream that hangs up mid-answer ends the client connection; one that answers garbage is a 502', async () => {
    rawAnswer = { bytes: ['HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nshort'], close: true };
    const cut = await rawExchange(`GET http://127.0.0.1:${rawPort}/x HTTP/1.1\r\nHost: x\r\n\r\n`);
    assert.match(cut, /content-length: 100/);
    assert.ok(cut.endsWith('short'));
    rawAnswer = { bytes: ['SMTP ready\r\n\r\n'], close: true };
    const garbage = await viaProxy('/x', { port: rawPort });
    assert.equal(garbage.status, 502);
    assert.match(garbage.body, /HPE_UPSTREAM/);
  });

  test('a kept-alive upstream connection the upstream has closed is replaced without the client seeing it', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    assert.equal((await viaProxy('/before', { agent })).status, 200);
    // The upstream ends its idle connections (as a server's keep-alive timeout would).
    for (const s of upstreamConnections) s.destroy();
    await new Promise((r) => setTimeout(r, 50));
    const r = await viaProxy('/after', { agent });
    assert.equal(r.status, 200);
    assert.equal(r.body, 'GET /after 0');
    agent.destroy();
  });

  test('a request that does not parse is a 400 naming why, and the connection closes', async () => {
    const out = await rawExchange('GET / HTTP/1.1\r\nBad Header\r\n\r\n');
    assert.match(out, /^HTTP\/1\.1 400 Bad Request/);
    assert.match(out, /no name \[rule: bad_request\]/);
    const smuggle = await rawExchange(`POST http://127.0.0.1:${upstreamPort}/s HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n`);
    assert.match(smuggle, /^HTTP\/1\.1 400 .*[\s\S]*both Transfer-Encoding and Content-Length/);
    assert.equal(seen.filter((s) => s.url === '/s').length, 0);
  });

  test('a client that dribbles a head past the deadline is answered 408 and cut off', async () => {
    const out = await new Promise<string>((resolve) => {
      const s = net.connect(proxyPort, '127.0.0.1', () => s.write('GET http://127.0.0.1/ HTTP/1.1\r\n'));
      let got = '';
      s.setEncoding('latin1');
      s.on('data', (c) => (got += c));
      s.on('close', () => resolve(got));
      // One more byte well after the deadline: the gateway looks at the clock when bytes arrive.
      setTimeout(() => s.write('X'), 600);
    });
    assert.match(out, /^HTTP\/1\.1 408 Request Timeout/);
    assert.match(out, /did not arrive within 0\.3 s/);
  });
});

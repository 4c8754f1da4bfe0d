// The upstream client against real servers: TLS with Node's CA store, kept-alive connections,
// the idle timeout, and a cancelled call closing its connection.
import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import { after, describe, it } from 'node:test';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../gateway/certificates.ts';
import { post, readBody, UpstreamNetworkError } from './upstream.ts';

const listen = async (server: http.Server) => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
};

describe('model proxy: the upstream client', () => {
  const servers: http.Server[] = [];
  after(() => {
    for (const s of servers) s.close();
    for (const s of servers) s.closeAllConnections();
  });

  it('speaks TLS trusting Node\'s CA store only, and keeps one connection alive for calls one after another', async () => {
    const ca = mintCertificateAuthority('Test upstream CA');
    const leaf = mintLeaf(issuerOf(ca), '127.0.0.1');
    let connections = 0;
    const server = https.createServer({ cert: leaf.certPem, key: leaf.keyPem }, (req, res) => {
      let body = '';
      req.on('data', (c) => (body += c));
      req.on('end', () => res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req-1' }).end(JSON.stringify({ echoed: JSON.parse(body), auth: req.headers.authorization })));
    });
    server.on('secureConnection', () => connections++);
    servers.push(server);
    const url = `https://127.0.0.1:${await listen(server)}/v1/chat/completions`;

    // A CA the process does not trust: the handshake fails, as unreachable.
    await assert.rejects(post(url, {}, '{}', { idleTimeoutMs: 5_000 }).response, (err: unknown) => err instanceof UpstreamNetworkError && !err.timedOut && /could not be reached/.test(err.message));

    // The same store NODE_EXTRA_CA_CERTS adds to.
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), ca.certPem]);
    for (let i = 0; i < 3; i++) {
      const res = await post(url, { authorization: 'Bearer sk-test' }, JSON.stringify({ n: i }), { idleTimeoutMs: 5_000 }).response;
      assert.equal(res.statusCode, 200);
      assert.equal(res.header('x-request-id'), 'req-1');
      assert.deepEqual(JSON.parse((await readBody(res)).toString()), { echoed: { n: i }, auth: 'Bearer sk-test' });
      // The connection is free again once undici's own bookkeeping after the answer ran (this turn).
      await new Promise((r) => setImmediate(r));
    }
    assert.equal(connections, 1);
  });

  it('an upstream silent past the idle timeout is a timeout, before its headers and between two chunks of its body', async () => {
    const server = http.createServer((req, res) => {
      if (req.url === '/v1/stall-body') res.writeHead(200, { 'content-type': 'application/json' }).write('{"partial":');
      // Otherwise: never answers.
    });
    servers.push(server);
    const port = await listen(server);
    await assert.rejects(post(`http://127.0.0.1:${port}/v1/silent`, {}, '{}', { idleTimeoutMs: 200 }).response, (err: unknown) => err instanceof UpstreamNetworkError && err.timedOut);
    const res = await post(`http://127.0.0.1:${port}/v1/stall-body`, {}, '{}', { idleTimeoutMs: 200 }).response;
    assert.equal(res.statusCode, 200);
    await assert.rejects(readBody(res), (err: unknown) => err instanceof UpstreamNetworkError && err.timedOut);
    assert.equal(res.complete, false);
  });

  it('a cancelled call rejects with an AbortError and closes its connection; a streamed body ends with it', async () => {
    let closed = 0;
    let arrived!: () => void;
    let requests = new Promise<void>((resolve) => (arrived = resolve));
    const server = http.createServer((req, res) => {
      req.socket.on('close', () => closed++);
      if (req.url === '/v1/stream') res.writeHead(200, { 'content-type': 'text/event-stream' }).write('data: {"a":1}\n\n');
      arrived();
    });
    servers.push(server);
    const port = await listen(server);

    const call = post(`http://127.0.0.1:${port}/v1/silent`, {}, '{}', { idleTimeoutMs: 60_000 });
    await requests;
    call.cancel();
    await assert.rejects(call.response, { name: 'AbortError' });

    requests = new Promise<void>((resolve) => (arrived = resolve));
    const streamed = post(`http://127.0.0.1:${port}/v1/stream`, {}, '{}', { idleTimeoutMs: 60_000 });
    const res = await streamed.response;
    const ended = new Promise<{ chunks: string; error: Error | null }>((resolve) => {
      let chunks = '';
      res.consume({
        data: (c) => {
          chunks += c.toString();
          streamed.cancel();
        },
        end: (error) => resolve({ chunks, error }),
      });
    });
    const { chunks, error } = await ended;
    assert.equal(chunks, 'data: {"a":1}\n\n');
    assert.equal(error?.name, 'AbortError');
    assert.equal(res.complete, false);
    await new Promise<void>((resolve) => {
      const check = () => (closed === 2 ? resolve() : setImmediate(check));
      check();
    });
  });
});

import assert from 'node:assert/strict';
import http from 'node:http';
import https from 'node:https';
import net, { type AddressInfo } from 'node:net';
import tls from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { startScriptedModel, type ScriptedModel } from '../../test/fakes/scripted-model.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf } from '../gateway/certificates.ts';
import { callModel, ModelError, proxyFor } from './model.ts';

const portOf = (server: net.Server) => (server.address() as AddressInfo).port;
const listen = (server: net.Server) => new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
const close = async (server: net.Server) => {
  (server as http.Server).closeAllConnections?.();
  await new Promise((r) => server.close(r));
};

describe('the runtime\'s model client', () => {
  let model: ScriptedModel;
  /** An HTTP proxy as the credential gateway is to a sandbox: absolute-form requests, relayed. */
  let proxy: http.Server;
  let proxyUrl: string;
  const seen: Array<{ url: string; host: string | undefined }> = [];
  let held: http.ServerResponse | null = null;
  let connections = 0;

  before(async () => {
    model = await startScriptedModel((req) => (req.body.messages.some((m) => m.content === 'refuse') ? { status: 429, body: JSON.stringify({ error: { message: 'slow down' } }) } : { content: `hello ${req.body.stream ? 'streamed' : 'whole'}`, tool_calls: [{ name: 'shell', arguments: { command: 'ls' } }] }) as never);
    proxy = http.createServer((req, res) => {
      seen.push({ url: req.url ?? '', host: req.headers.host });
      if (req.url?.includes('hold')) {
        held = res;
        return;
      }
      const target = new URL(req.url ?? '/');
      const up = http.request(model.baseUrl.replace(/\/v1$/, ''), { method: req.method, path: target.pathname, headers: { ...req.headers, host: new URL(model.baseUrl).host } }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      req.pipe(up);
    });
    proxy.on('connection', () => connections++);
    await listen(proxy);
    proxyUrl = `http://127.0.0.1:${portOf(proxy)}`;
  });
  after(async () => {
    held?.destroy();
    await close(proxy);
    await model.close();
  });

  const ask = (over: Partial<Parameters<typeof callModel>[0]> = {}) =>
    callModel({ baseUrl: 'http://llm.sandbox.invalid/v1', model: 'fake', messages: [{ role: 'user', content: 'hi' }], tools: [], stream: false, timeoutMs: 10_000, env: { HTTP_PROXY: proxyUrl }, ...over });

  it('goes through the environment\'s HTTP proxy with the absolute URL, whole and streamed, on one kept-alive connection', async () => {
    seen.length = 0;
    connections = 0;
    const whole = await ask();
    assert.equal(whole.content, 'hello whole');
    assert.deepEqual(whole.tool_calls.map((c) => c.name), ['shell']);
    const streamed = await ask({ stream: true });
    assert.equal(streamed.content, 'hello streamed');
    assert.deepEqual(seen, [
      { url: 'http://llm.sandbox.invalid/v1/chat/completions', host: 'llm.sandbox.invalid' },
      { url: 'http://llm.sandbox.invalid/v1/chat/completions', host: 'llm.sandbox.invalid' },
    ]);
    assert.equal(connections, 1);
  });

  it('connects directly without a proxy, and names refusals and unreachable endpoints in words', async () => {
    assert.equal((await ask({ baseUrl: model.baseUrl, env: {} })).content, 'hello whole');
    await assert.rejects(ask({ messages: [{ role: 'user', content: 'refuse' }] }), (err: ModelError) => err.retryable && /answered 429: slow down/.test(err.message));
    await assert.rejects(ask({ env: { HTTP_PROXY: 'http://127.0.0.1:1' } }), (err: ModelError) => err.retryable && /did not answer/.test(err.message));
  });

  it('gives up on an answer that does not come within the timeout, and stops at once on a cancel', async () => {
    await assert.rejects(ask({ baseUrl: 'http://llm.sandbox.invalid/hold', timeoutMs: 200 }), (err: ModelError) => err.retryable && /did not answer/.test(err.message));
    const cancel = new AbortController();
    const call = ask({ baseUrl: 'http://llm.sandbox.invalid/hold', signal: cancel.signal });
    setTimeout(() => cancel.abort(), 50);
    await assert.rejects(call, (err: Error) => err.name === 'AbortError');
  });

  it('reads the proxy and its exceptions from the environment as curl does', () => {
    const u = new URL('http://llm.crewhouse.internal/v1');
    assert.equal(proxyFor(u, {}), null);
    assert.equal(proxyFor(u, { HTTP_PROXY: 'http://10.0.0.1:3128' })?.host, '10.0.0.1:3128');
    assert.equal(proxyFor(u, { http_proxy: '10.0.0.1:3128' })?.host, '10.0.0.1:3128', 'a proxy without a scheme is http');
    assert.equal(proxyFor(u, { HTTP_PROXY: 'http://p:1', NO_PROXY: '' })?.host, 'p:1');
    for (const no of ['*', 'llm.crewhouse.internal', '.crewhouse.internal', 'crewhouse.internal', 'other, llm.crewhouse.internal:80']) assert.equal(proxyFor(u, { HTTP_PROXY: 'http://p:1', NO_PROXY: no }), null, no);
    for (const no of ['llm.crewhouse.internal:8080', 'xcrewhouse.internal', 'other']) assert.equal(proxyFor(u, { HTTP_PROXY: 'http://p:1', NO_PROXY: no })?.host, 'p:1', no);
    // https: its own proxy variable, else the http one (as fetch's environment proxy agent); its default port is 443.
    const s = new URL('https://llm.crewhouse.internal/v1');
    assert.equal(proxyFor(s, { HTTPS_PROXY: 'http://tls:1', HTTP_PROXY: 'http://p:1' })?.host, 'tls:1');
    assert.equal(proxyFor(s, { https_proxy: 'http://tls:1' })?.host, 'tls:1');
    assert.equal(proxyFor(s, { HTTP_PROXY: 'http://p:1' })?.host, 'p:1');
    assert.equal(proxyFor(u, { HTTPS_PROXY: 'http://tls:1' }), null, 'the https proxy is not the http one');
    assert.equal(proxyFor(s, { HTTPS_PROXY: 'http://tls:1', NO_PROXY: 'llm.crewhouse.internal:443' }), null);
    assert.equal(proxyFor(s, { HTTPS_PROXY: 'http://tls:1', NO_PROXY: 'llm.crewhouse.internal:80' })?.host, 'tls:1');
  });

  it('settles a streamed answer at [DONE], without waiting for the response to end, and still reuses its connection', async () => {
    const open: http.ServerResponse[] = [];
    let sockets = 0;
    const server = http.createServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: 'early' }, finish_reason: null }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`);
      res.write(`data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 1 } })}\n\ndata: [DONE]\n\n`);
      // The end is held back: only [DONE] says the answer is whole.
      open.push(res);
    });
    server.on('connection', () => sockets++);
    await listen(server);
    try {
      const base = `http://127.0.0.1:${portOf(server)}/v1`;
      const reply = await ask({ baseUrl: base, env: {}, stream: true });
      assert.deepEqual(reply, { content: 'early', tool_calls: [], usage: { prompt_tokens: 3, completion_tokens: 1 }, finish_reason: 'stop' });
      // Once the response does end, its connection serves the next call.
      open.shift()!.end();
      await new Promise((r) => setTimeout(r, 50));
      const again = ask({ baseUrl: base, env: {}, stream: true });
      assert.equal((await again).content, 'early');
      open.shift()!.end();
      assert.equal(sockets, 1);
    } finally {
      for (const res of open) res.destroy();
      await close(server);
    }
  });
});

describe('the runtime\'s model client over https', () => {
  let model: ScriptedModel;
  /** The model behind TLS, with a certificate from a CA made here, for its IP address and for a name only the proxy resolves. */
  let server: https.Server;
  /** A second endpoint whose certificate no trusted CA signed. */
  let stranger: https.Server;
  /** An HTTP proxy as the credential gateway is to a sandbox: CONNECT tunnels, to the endpoint whatever the name asked. */
  let proxy: http.Server;
  let proxyUrl: string;
  const tunnels: string[] = [];
  /** The tunnels' sockets, which a server's close does not end. */
  const piped = new Set<net.Socket>();
  let handshakes = 0;
  let trusted: string[];

  before(async () => {
    model = await startScriptedModel((req) => ({ content: `secure ${req.body.stream ? 'streamed' : 'whole'}` }));
    const ca = mintCertificateAuthority('model client test CA');
    const byIp = mintLeaf(issuerOf(ca), '127.0.0.1');
    const byName = mintLeaf(issuerOf(ca), 'llm.tls.invalid');
    // Trusted as the sandbox's CA is (NODE_EXTRA_CA_CERTS adds it to the default store).
    trusted = tls.getCACertificates('default');
    tls.setDefaultCACertificates([...trusted, ca.certPem]);
    const relay = (req: http.IncomingMessage, res: http.ServerResponse) => {
      const up = http.request(`${model.url}${req.url}`, { method: req.method, headers: { ...req.headers, host: new URL(model.url).host } }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      req.pipe(up);
    };
    server = https.createServer({ cert: byIp.certPem, key: byIp.keyPem, SNICallback: (name, cb) => cb(null, tls.createSecureContext(name === 'llm.tls.invalid' ? { cert: byName.certPem, key: byName.keyPem } : { cert: byIp.certPem, key: byIp.keyPem })) }, relay);
    server.on('secureConnection', () => handshakes++);
    const other = mintLeaf(issuerOf(mintCertificateAuthority('nobody trusts this CA')), '127.0.0.1');
    stranger = https.createServer({ cert: other.certPem, key: other.keyPem }, relay);
    proxy = http.createServer((_req, res) => res.writeHead(405).end());
    proxy.on('connect', (req: http.IncomingMessage, socket: net.Socket, head: Buffer) => {
      tunnels.push(req.url ?? '');
      piped.add(socket);
      if (req.url?.startsWith('refused.tls.invalid')) return void socket.end('HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\n\r\n');
      const port = req.url?.startsWith('stranger.tls.invalid') ? portOf(stranger) : portOf(server);
      const up = net.connect(port, '127.0.0.1', () => {
        socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
        if (head.length) up.write(head);
        up.pipe(socket).pipe(up);
      });
      up.on('error', () => socket.destroy());
      socket.on('error', () => up.destroy());
    });
    for (const s of [server, stranger, proxy]) await listen(s);
    proxyUrl = `http://127.0.0.1:${portOf(proxy)}`;
  });
  after(async () => {
    tls.setDefaultCACertificates(trusted);
    for (const socket of piped) socket.destroy();
    for (const s of [proxy, server, stranger]) await close(s);
    await model.close();
  });

  const ask = (over: Partial<Parameters<typeof callModel>[0]> = {}) =>
    callModel({ baseUrl: `https://127.0.0.1:${portOf(server)}/v1`, model: 'fake', messages: [{ role: 'user', content: 'hi' }], tools: [], stream: false, timeoutMs: 10_000, env: {}, ...over });

  it('connects directly, whole and streamed, on one kept-alive TLS connection', async () => {
    handshakes = 0;
    assert.equal((await ask()).content, 'secure whole');
    assert.equal((await ask({ stream: true })).content, 'secure streamed');
    assert.equal(handshakes, 1);
  });

  it('goes through the environment\'s proxy in a CONNECT tunnel (the proxy sees the host and port only), kept alive across calls', async () => {
    tunnels.length = 0;
    handshakes = 0;
    const env = { HTTPS_PROXY: proxyUrl, HTTP_PROXY: 'http://127.0.0.1:1' };
    assert.equal((await ask({ baseUrl: 'https://llm.tls.invalid/v1', env })).content, 'secure whole');
    assert.equal((await ask({ baseUrl: 'https://llm.tls.invalid/v1', env, stream: true })).content, 'secure streamed');
    assert.deepEqual(tunnels, ['llm.tls.invalid:443']);
    assert.equal(handshakes, 1);
    // Only the http proxy set: https goes through it too.
    assert.equal((await ask({ baseUrl: 'https://llm.tls.invalid:8443/v1', env: { http_proxy: proxyUrl } })).content, 'secure whole');
    assert.deepEqual(tunnels, ['llm.tls.invalid:443', 'llm.tls.invalid:8443']);
  });

  it('names a certificate it does not trust, and a tunnel the proxy refuses, as endpoints that did not answer', async () => {
    await assert.rejects(ask({ baseUrl: `https://127.0.0.1:${portOf(stranger)}/v1` }), (err: ModelError) => err.retryable && /did not answer: .*(certificate|self.signed)/i.test(err.message));
    await assert.rejects(ask({ baseUrl: 'https://stranger.tls.invalid/v1', env: { HTTPS_PROXY: proxyUrl } }), (err: ModelError) => err.retryable && /did not answer: .*(certificate|self.signed)/i.test(err.message));
    await assert.rejects(ask({ baseUrl: 'https://refused.tls.invalid/v1', env: { HTTPS_PROXY: proxyUrl } }), (err: ModelError) => err.retryable && /did not answer: the proxy 127\.0\.0\.1:\d+ refused a tunnel to refused\.tls\.invalid:443 \(403\)/.test(err.message));
  });
});

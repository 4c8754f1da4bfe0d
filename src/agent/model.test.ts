import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startScriptedModel, type ScriptedModel } from '../../test/fakes/scripted-model.ts';
import { callModel, ModelError, proxyFor } from './model.ts';

describe('the runtime\'s model client', () => {
  let model: ScriptedModel;
  /** An HTTP proxy as the credential gateway is to a sandbox: absolute-form requests, relayed. */
  let proxy: http.Server;
  let proxyUrl: string;
  const seen: Array<{ url: string; host: string | undefined }> = [];
  let held: http.ServerResponse | null = null;

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
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  after(async () => {
    held?.destroy();
    proxy.closeAllConnections();
    await new Promise((r) => proxy.close(r));
    await model.close();
  });

  const ask = (over: Partial<Parameters<typeof callModel>[0]> = {}) =>
    callModel({ baseUrl: 'http://llm.sandbox.invalid/v1', model: 'fake', messages: [{ role: 'user', content: 'hi' }], tools: [], stream: false, timeoutMs: 10_000, env: { HTTP_PROXY: proxyUrl }, ...over });

  it('goes through the environment\'s HTTP proxy with the absolute URL, whole and streamed, on one kept-alive connection', async () => {
    seen.length = 0;
    const whole = await ask();
    assert.equal(whole.content, 'hello whole');
    assert.deepEqual(whole.tool_calls.map((c) => c.name), ['shell']);
    const streamed = await ask({ stream: true });
    assert.equal(streamed.content, 'hello streamed');
    assert.deepEqual(seen, [
      { url: 'http://llm.sandbox.invalid/v1/chat/completions', host: 'llm.sandbox.invalid' },
      { url: 'http://llm.sandbox.invalid/v1/chat/completions', host: 'llm.sandbox.invalid' },
    ]);
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
  });
});

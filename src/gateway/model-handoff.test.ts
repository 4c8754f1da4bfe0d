// The gateway hands a sandbox's model request to the model proxy of its own process: no second
// HTTP hop (the proxy's server sees no connection), and everything the hop did still holds: the
// request id naming the sandbox, the role's key (and a 401 without a valid one), both
// components' request log and metrics, streaming as events come, a sandbox leaving mid-answer
// (the proxy's 499: what was streamed charged, the reservation released), the proxy's error
// format and body limit. A gateway told the proxy's address in another spelling (as for a proxy
// elsewhere) still goes over HTTP. Real sockets on loopback: the "sandbox" connects from its own
// 127.x address, which is how the gateway knows it.
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { captureLogger, dbKind, sharedServices, testApp, testConfig, uniq, waitFor, type TestApp } from '../../test/harness.ts';
import { makeTeam } from '../../test/factories.ts';
import { startFakeOpenAI, type FakeOpenAI } from '../../test/fakes/openai-upstream.ts';
import { hashToken } from '../auth/credentials.ts';
import { BUILTIN_HOSTS } from '../egress/builtins.ts';
import { Registry } from '../metrics.ts';
import { createModelProxyClient } from '../modelproxy/client.ts';
import { sandboxRequestPrefix } from '../modelproxy/sandbox-spend.ts';
import { startGateway, type RunningGateway } from './gateway.component.ts';

const LLM = `http://${BUILTIN_HOSTS.llm}`;

describe(`the gateway hands model requests to the model proxy in its process (${dbKind})`, () => {
  let t: TestApp;
  let fake: FakeOpenAI;
  let gw: RunningGateway;
  let metrics: Registry;
  let gatewayLog: string[];
  let team: { name: string };
  const sandbox = { id: uniq('sbx'), address: `127.${10 + crypto.randomInt(200)}.${crypto.randomInt(250)}.2` };
  const agents: http.Agent[] = [];

  /** A kept-alive client in the sandbox: the gateway as its proxy (absolute-form requests). */
  const sandboxAgent = () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1, localAddress: sandbox.address });
    agents.push(agent);
    return agent;
  };
  type Answer = { status: number; headers: http.IncomingHttpHeaders; body: string; socket: net.Socket };
  /** One request through the gateway; the whole answer. */
  const request = (method: string, path: string, opts: { body?: string; headers?: Record<string, string>; agent?: http.Agent } = {}) =>
    new Promise<Answer>((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: gw.port, method, path: `${LLM}${path}`, agent: opts.agent ?? sandboxAgent(), headers: { host: BUILTIN_HOSTS.llm, ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}), ...opts.headers } }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body, socket: res.socket }));
        res.on('error', reject);
      });
      req.on('error', reject);
      req.end(opts.body);
    });
  const chat = (body: Record<string, unknown>, opts: { headers?: Record<string, string>; agent?: http.Agent } = {}) => request('POST', '/v1/chat/completions', { ...opts, body: JSON.stringify(body) });
  const hello = { model: 'fast', messages: [{ role: 'user', content: 'Say hello' }] };
  /** Connections the proxy's server accepts while `fn` runs (the console's own client to the proxy is idle meanwhile). */
  const proxyConnectionsDuring = async <T>(fn: () => Promise<T>): Promise<[T, number]> => {
    let accepted = 0;
    const count = () => accepted++;
    t.modelProxy!.app.server.on('connection', count);
    try {
      return [await fn(), accepted];
    } finally {
      t.modelProxy!.app.server.off('connection', count);
    }
  };
  const proxyMetrics = async () => (await t.modelProxy!.app.inject({ method: 'GET', url: '/metrics' })).body;
  const logRow = (requestId: string) => waitFor(`the proxy's log line of ${requestId}`, () => t.db.selectFrom('mp_request_log').selectAll().where('request_id', '=', requestId).executeTakeFirst());
  const roleKey = async () => (await t.db.selectFrom('mp_keys').selectAll().where('key_hash', '=', hashToken((await t.services.teamsDirectory.roleModelKey(team.name, 'lead'))!)).executeTakeFirstOrThrow());

  before(async () => {
    fake = await startFakeOpenAI({ words: 3 });
    const models = JSON.stringify([{ alias: 'fast', model: 'gpt-fake-1', api: 'openai', base_url: fake.baseUrl, api_key_secret: null, input_usd_per_mtok: 1000, output_usd_per_mtok: 2000, max_output_tokens: 50 }]);
    t = await testApp({ modelProxy: true, config: { SERVICE_MODELS: models } });
    team = await makeTeam(t);
    const teamRow = await t.db.selectFrom('teams').select('id').where('name', '=', team.name).executeTakeFirstOrThrow();
    await t.db
      .insertInto('sandboxes')
      .values({ id: sandbox.id, team_id: teamRow.id, role: 'lead', replica: 0, provider: 'local', state: 'running', host_id: 'test', host_address: '127.0.0.1', sandbox_address: sandbox.address })
      .execute();
    metrics = new Registry();
    // The proxy's address as the test app gives it: the one it registered in this process.
    const config = testConfig({ SERVICE_MODELS: models, SERVICE_MODEL_PROXY_URL: t.modelProxy!.url });
    const captured = captureLogger();
    gatewayLog = captured.lines;
    gw = await startGateway({ config, db: t.db, logger: captured.logger, metrics, ...sharedServices(config, t.db), listen: { host: '127.0.0.1', port: 0 } });
  });

  after(async () => {
    for (const a of agents) a.destroy();
    await gw?.stop();
    await t?.close();
    await fake?.close();
  });

  test("a completion: answered by the proxy without a connection to it, under the gateway's request id naming the sandbox, with the role's key, logged and counted by both", async () => {
    const agent = sandboxAgent();
    // Whatever id the sandbox sends, the proxy sees the gateway's.
    const [r, connections] = await proxyConnectionsDuring(() => chat(hello, { agent, headers: { 'x-request-id': 'chosen-by-the-sandbox' } }));
    assert.equal(r.status, 200, r.body);
    assert.equal(connections, 0, 'no HTTP connection to the proxy');
    assert.equal(JSON.parse(r.body).choices[0].message.content, 'word0 word1 word2');
    const id = String(r.headers['x-request-id']);
    assert.ok(id.startsWith(sandboxRequestPrefix(sandbox.id)), id);

    // The same connection goes on: a second request, and a GET.
    const again = await chat(hello, { agent });
    assert.equal(again.status, 200, again.body);
    assert.equal(again.socket, r.socket, 'the sandbox connection was kept alive');
    const models = await request('GET', '/v1/models', { agent });
    assert.equal(models.status, 200, models.body);
    assert.deepEqual(JSON.parse(models.body).data.map((m: { id: string }) => m.id), ['fast']);

    // The role's key authenticated it (the proxy's log line is the key's), and the upstream got the proxy's own request.
    const row = await logRow(id);
    const key = await roleKey();
    assert.deepEqual([row.status, row.team, row.role, row.key_id], [200, key.team, 'lead', key.key_id]);
    assert.ok(Number(row.cost_usd) > 0);
    assert.equal(fake.requests.at(-1)!.headers.authorization, undefined, 'the role key stays with the proxy');
    assert.match(await proxyMetrics(), /modelproxy_http_requests_total\{method="POST",route="\/v1\/chat\/completions",status="200"\} [2-9]/);
    assert.match(metrics.render(), /gateway_requests_total\{decision="allow"\} [3-9]/);
    const line = gatewayLog.map((l) => JSON.parse(l)).find((l) => l.msg === 'egress' && l.destination === 'llm' && l.path === '/v1/chat/completions');
    assert.ok(line, 'the gateway logged the request');
    assert.equal(line.sandbox, sandbox.id);
    const key0 = (await t.services.teamsDirectory.roleModelKey(team.name, 'lead'))!;
    for (const text of [r.body, JSON.stringify(r.headers), models.body, gatewayLog.join('')]) assert.ok(!text.includes(key0), 'the role key reached the sandbox or the log');
  });

  test("errors in the proxy's format: an unknown model, a body that is not a request, one over the proxy's limit (which ends the connection)", async () => {
    const [unknown, connections] = await proxyConnectionsDuring(() => chat({ ...hello, model: 'nope' }));
    assert.equal(connections, 0);
    assert.equal(unknown.status, 404, unknown.body);
    assert.equal(JSON.parse(unknown.body).error.code, 'model_not_found');
    const invalid = await chat({ model: 'fast' });
    assert.equal(invalid.status, 400, invalid.body);
    assert.equal(JSON.parse(invalid.body).error.type, 'invalid_request_error');

    // Announced larger than the limit: refused before the body is read, and the connection closes.
    const socket = net.connect({ host: '127.0.0.1', port: gw.port, localAddress: sandbox.address });
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (c) => (got += c));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.write(`POST ${LLM}/v1/chat/completions HTTP/1.1\r\nHost: ${BUILTIN_HOSTS.llm}\r\nContent-Type: application/json\r\nContent-Length: ${64 * 1024 * 1024}\r\n\r\n{"model":`);
    await closed;
    assert.match(got, /^HTTP\/1\.1 413 /);
    assert.equal(JSON.parse(got.slice(got.indexOf('{'), got.lastIndexOf('}') + 1)).error.code, 'body_too_large');
  });

  test('a stream reaches the sandbox event by event; a sandbox that leaves mid-answer ends the upstream call, is charged what was streamed, and its reservation is released', async () => {
    // The first word is due only a minute after the stream's first event (the role): that event must arrive on its own.
    fake.options.chunkDelayMs = 60_000;
    try {
      const socket = net.connect({ host: '127.0.0.1', port: gw.port, localAddress: sandbox.address });
      const body = JSON.stringify({ ...hello, stream: true });
      let got = '';
      socket.setEncoding('utf8');
      const firstEvent = new Promise<void>((resolve) =>
        socket.on('data', (c: string) => {
          got += c;
          if (/data: \{.*"role":"assistant"/.test(got)) resolve();
        }),
      );
      socket.write(`POST ${LLM}/v1/chat/completions HTTP/1.1\r\nHost: ${BUILTIN_HOSTS.llm}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
      await firstEvent;
      assert.match(got, /^HTTP\/1\.1 200 [\s\S]*content-type: text\/event-stream/i);
      assert.doesNotMatch(got, /word0|\[DONE\]/);
      const id = /x-request-id: (\S+)/i.exec(got)![1];
      // The call holds a reservation while it streams (the embedded ledger writes it behind, within a moment).
      await waitFor('the reservation to be held', async () => Number((await roleKey()).reserved) > 0);
      socket.destroy();

      const row = await logRow(id);
      assert.equal(row.status, 499);
      assert.equal(row.error, 'the client closed the stream');
      assert.ok(Number(row.cost_usd) > 0, 'the prompt estimate and what was streamed are charged');
      await waitFor('the reservation to be released', async () => Number((await roleKey()).reserved) === 0);
    } finally {
      fake.options.chunkDelayMs = 0;
    }
  });

  test('a gateway that reaches the proxy at another address (as one on another machine) forwards over HTTP, as before', async () => {
    const port = new URL(t.modelProxy!.url).port;
    const config = testConfig({ SERVICE_MODEL_PROXY_URL: `http://localhost:${port}` });
    const other = await startGateway({ config, db: t.db, logger: captureLogger().logger, metrics: new Registry(), ...sharedServices(config, t.db), listen: { host: '127.0.0.1', port: 0 } });
    try {
      const [r, connections] = await proxyConnectionsDuring(() => new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = http.request({ host: '127.0.0.1', port: other.port, method: 'POST', path: `${LLM}/v1/chat/completions`, localAddress: sandbox.address, headers: { host: BUILTIN_HOSTS.llm, 'content-type': 'application/json' } }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve({ status: res.statusCode!, body }));
        });
        req.on('error', reject);
        req.end(JSON.stringify(hello));
      }));
      assert.equal(r.status, 200, r.body);
      assert.equal(connections, 1, 'the gateway connected to the proxy');
    } finally {
      await other.stop();
    }
  });

  test('a role whose key the proxy no longer takes is answered 401 in the proxy format', async () => {
    const client = createModelProxyClient(t.config, { baseUrl: t.modelProxy!.url });
    await client.revokeKey((await roleKey()).key_id);
    const r = await chat(hello);
    assert.equal(r.status, 401, r.body);
    assert.equal(JSON.parse(r.body).error.code, 'invalid_api_key');
    assert.match(await proxyMetrics(), /modelproxy_http_requests_total\{method="POST",route="\/v1\/chat\/completions",status="401"\} 1/);
  });
});

// One sandbox cannot hold the gateway's descriptors: the connections of each sandbox (each link:
// the gateway's and the sandbox's address) are capped, and past the cap a connection is answered
// 429 with the reason and recorded, while the sandbox's open connections and every other sandbox
// go on. Real sockets on loopback: each "sandbox" connects from its own 127.x address, which is
// how the gateway knows a sandbox (by the addresses of its link).
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { captureLogger, dbKind, sharedServices, testApp, testConfig, uniq, waitFor, type TestApp } from '../../test/harness.ts';
import { makeTeam } from '../../test/factories.ts';
import { Registry } from '../metrics.ts';
import { egressEventsOf } from './events.ts';
import { startGateway, type RunningGateway } from './gateway.component.ts';

const CAP = 8;

describe(`the gateway's connection cap per sandbox (${dbKind})`, () => {
  let t: TestApp;
  let gw: RunningGateway;
  let metrics: Registry;
  // Two sandboxes on this host, each known by its own address on loopback.
  const net16 = `127.${10 + crypto.randomInt(200)}.${crypto.randomInt(250)}`;
  const greedy = { id: uniq('sbx'), address: `${net16}.2` };
  const other = { id: uniq('sbx'), address: `${net16}.3` };
  const sockets: net.Socket[] = [];

  /** A connection to the gateway from `local`, once it is established. */
  const connectFrom = (local: string) =>
    new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port: gw.port, localAddress: local }, () => resolve(s));
      s.once('error', reject);
      sockets.push(s);
    });
  /** Everything the gateway sends on `s` until it closes the connection. */
  const readAll = (s: net.Socket) =>
    new Promise<string>((resolve) => {
      let got = '';
      s.setEncoding('latin1');
      s.on('data', (c) => (got += c));
      s.on('error', () => {});
      s.on('close', () => resolve(got));
    });
  /** One whole request on a new connection from `local`, and the whole answer. */
  const requestFrom = async (local: string) => {
    const s = await connectFrom(local);
    const answer = readAll(s);
    s.write('GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0.0.1:9\r\nConnection: close\r\n\r\n');
    return answer;
  };

  before(async () => {
    t = await testApp({ modelProxy: true });
    const team = await makeTeam(t);
    const teamRow = await t.db.selectFrom('teams').select('id').where('name', '=', team.name).executeTakeFirstOrThrow();
    for (const s of [greedy, other]) {
      await t.db
        .insertInto('sandboxes')
        .values({ id: s.id, team_id: teamRow.id, role: 'lead', replica: 0, provider: 'local', state: 'running', host_id: 'test', host_address: '127.0.0.1', sandbox_address: s.address })
        .execute();
    }
    metrics = new Registry();
    const config = testConfig({ SERVICE_GATEWAY_MAX_CONNECTIONS_PER_SANDBOX: String(CAP) });
    gw = await startGateway({ config, db: t.db, logger: captureLogger().logger, metrics, ...sharedServices(config, t.db), listen: { host: '127.0.0.1', port: 0 } });
  });

  after(async () => {
    for (const s of sockets) s.destroy();
    await gw?.stop();
    await t?.close();
  });

  test('past the cap a connection is answered 429 with the reason and recorded; the held ones and another sandbox are served', async () => {
    // The attack: request heads begun and never finished, each holding a connection open.
    const held: net.Socket[] = [];
    for (let i = 0; i < CAP; i++) {
      const s = await connectFrom(greedy.address);
      s.write('GET http://127.0.0.1:9/ HTTP/1.1\r\nHost: 127.0');
      held.push(s);
    }
    const refused = await requestFrom(greedy.address);
    assert.match(refused, /^HTTP\/1\.1 429 Too Many Requests\r\n/);
    assert.match(refused, new RegExp(`the sandbox already holds ${CAP} connections to the gateway`));
    assert.match(refused, /\[rule: connections\]/);
    assert.match(refused, /connection: close/i);

    // Another sandbox is served as usual (here refused by its policy, which is an answer from the gateway that knows it).
    const served = await requestFrom(other.address);
    assert.match(served, /^HTTP\/1\.1 403 /);
    assert.match(served, /\(role lead\).*\[rule: internal_address\]/);

    // The greedy sandbox's own open connections still work.
    const finishing = readAll(held[0]);
    held[0].write('.0.1:9\r\nConnection: close\r\n\r\n');
    assert.match(await finishing, /^HTTP\/1\.1 403 [\s\S]*\[rule: internal_address\]/);

    const recorded = await waitFor('the refusal to be recorded', async () => (await egressEventsOf(t.db, greedy.id, '0', 100)).find((e) => e.rule === 'connections'));
    assert.equal(recorded.role, 'lead');
    assert.match(recorded.reason, /finish or close connections it no longer uses/);
    assert.equal((await egressEventsOf(t.db, other.id, '0', 100)).filter((e) => e.rule === 'connections').length, 0);
    assert.match(metrics.render(), /gateway_refusals_total\{rule="connections"\} [1-9]/);

    // Once the sandbox closes what it held, it may connect again (the gateway sees the closes as they come).
    for (const s of held) s.destroy();
    const again = await waitFor('a new connection to be served after the others closed', async () => {
      const answer = await requestFrom(greedy.address);
      return /^HTTP\/1\.1 403 /.test(answer) && answer;
    });
    assert.match(again, /\[rule: internal_address\]/);
  });
});

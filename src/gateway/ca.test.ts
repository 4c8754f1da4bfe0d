import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { dbKind, testConfig, testDb, type TestDb } from '../../test/harness.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { createLeafIssuer, deploymentCaCertificate, loadDeploymentCa } from './ca.ts';

describe(`the deployment CA (${dbKind})`, () => {
  let tdb: TestDb;
  before(async () => {
    tdb = await testDb();
  });
  after(() => tdb.close());

  test('made once, even by two first starts at once; its key sealed, never stored in the clear', async () => {
    const cipher = loadCipher(testConfig());
    const [a, b] = await Promise.all([loadDeploymentCa(tdb.db, cipher), loadDeploymentCa(tdb.db, cipher)]);
    assert.equal(a.certPem, b.certPem);
    assert.equal(a.keyPem, b.keyPem);
    assert.equal(await deploymentCaCertificate(tdb.db, cipher), a.certPem);
    const rows = await tdb.db.selectFrom('gateway_ca').selectAll().execute();
    assert.equal(rows.length, 1);
    const keyBody = a.keyPem.replace(/-----[A-Z ]+-----|\s+/g, '');
    assert.ok(!rows[0].key_sealed.includes(keyBody.slice(0, 40)));
    const cert = new crypto.X509Certificate(a.certPem);
    assert.ok(cert.ca);
    assert.ok(crypto.createPublicKey(a.keyPem).equals(cert.publicKey), 'the key opens back to the certificate\'s');
    // Another secret key cannot open it.
    const other = loadCipher(testConfig({ SERVICE_SECRET_KEY: Buffer.alloc(32, 9).toString('base64') }));
    await assert.rejects(loadDeploymentCa(tdb.db, other));
  });

  test('leaf contexts are made once per host and kept', async () => {
    const ca = await loadDeploymentCa(tdb.db, loadCipher(testConfig()));
    const leaves = createLeafIssuer(ca);
    const one = leaves.contextFor('a.example.com');
    assert.equal(leaves.contextFor('a.example.com'), one);
    assert.notEqual(leaves.contextFor('b.example.com'), one);
  });
});

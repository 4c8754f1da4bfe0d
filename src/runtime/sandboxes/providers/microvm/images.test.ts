import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import fsp from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ConfigError, loadConfig } from '../../../../config.ts';
import { createLogger } from '../../../../logger.ts';
import { createImagesService } from '../../../../console/environments/images.service.ts';
import { microvmSkipReason, randomLink } from '../../../../../test/microvm-image.ts';
import { buildImage, cpioNewc } from './images.ts';
import { createMicrovmProvider } from './index.ts';

const logger = createLogger({ level: 'silent' });
const tools = ['/bin/busybox', '/usr/sbin/mke2fs', '/usr/bin/apt-get', '/usr/bin/dpkg'].find((f) => !fs.existsSync(f));
// No database here: run once, in the embedded-database pass.
const skip = process.env.SERVICE_TEST_DATABASE_URL ? 'no database involved; runs in the embedded-database pass' : tools ? `needs ${tools}` : false;

describe('microVM images', () => {
  const dirs: string[] = [];
  after(async () => {
    for (const d of dirs) await fsp.rm(d, { recursive: true, force: true });
  });

  test('crewhouse images with a wrong verb or variant exits 2 with its usage; the settings are checked', () => {
    const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../..');
    for (const args of [['images', 'frob'], ['images', 'build', '--variant', 'alpine'], ['images', 'build', '--name', '../x']]) {
      let status = 0;
      let stderr = '';
      try {
        execFileSync(path.join(root, 'node_modules/.bin/node'), [path.join(root, 'src/main.ts'), ...args], { encoding: 'utf8', stdio: 'pipe', env: { PATH: process.env.PATH, SERVICE_DATA_DIR: os.tmpdir() } });
      } catch (err) {
        status = (err as { status: number }).status;
        stderr = (err as { stderr: string }).stderr;
      }
      assert.equal(status, 2, args.join(' '));
      assert.match(stderr, /images build|--name/);
    }
    assert.throws(() => loadConfig({ SERVICE_MICROVM_ACCEL: 'hvf' }), (e: Error) => e instanceof ConfigError && /SERVICE_MICROVM_ACCEL/.test(e.message));
    assert.throws(() => loadConfig({ SERVICE_MICROVM_SNAPSHOT_BUDGET_MIB: '-1' }), (e: Error) => e instanceof ConfigError && /SNAPSHOT_BUDGET/.test(e.message));
    const c = loadConfig({ SERVICE_DATA_DIR: '/srv/ch', SERVICE_MICROVM_SNAPSHOT_BUDGET_MIB: '10' });
    assert.equal(c.microvmDir, '/srv/ch/sandboxes/microvm');
    assert.equal(c.microvmSnapshotBudgetBytes, 10 * 1024 * 1024);
    assert.equal(c.microvmAccel, 'auto');
  });

  test('the initramfs is a newc archive the kernel (and cpio) can read', async (t) => {
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'cpio-'));
    dirs.push(tmp);
    const gz = cpioNewc([
      { name: 'bin', mode: 0o40755 },
      { name: 'bin/hello', mode: 0o100755, data: Buffer.from('#!/bin/sh\necho hi\n') },
      { name: 'odd', mode: 0o100644, data: Buffer.from('abc') },
    ]);
    await fsp.writeFile(path.join(tmp, 'a.cpio.gz'), gz);
    if (!fs.existsSync('/bin/busybox')) return t.skip('needs busybox (Debian package busybox-static) to read it back');
    execFileSync('/bin/sh', ['-c', `cd ${tmp} && /bin/busybox gunzip -c a.cpio.gz | /bin/busybox cpio -id 2>/dev/null`]);
    assert.equal(await fsp.readFile(path.join(tmp, 'bin/hello'), 'utf8'), '#!/bin/sh\necho hi\n');
    assert.equal((await fsp.stat(path.join(tmp, 'bin/hello'))).mode & 0o777, 0o755);
    assert.equal(await fsp.readFile(path.join(tmp, 'odd'), 'utf8'), 'abc');
  });

  test('a build that fails leaves no manifest; the re-run reuses the finished steps and writes one GET /images serves', { skip }, async () => {
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'img-'));
    dirs.push(tmp);
    const imagesDir = path.join(tmp, 'images');
    const lines: string[] = [];
    const progress = (l: string) => lines.push(l);
    await assert.rejects(buildImage({ imagesDir, name: 'try', variant: 'minimal', nodeBinary: path.join(tmp, 'no-node'), progress }));
    assert.deepEqual((await fsp.readdir(imagesDir)).filter((f) => !f.startsWith('.')), []);
    assert.ok(fs.existsSync(path.join(imagesDir, '.build-try', 'kernel.done')));

    lines.length = 0;
    const m = await buildImage({ imagesDir, name: 'try', variant: 'minimal', progress });
    assert.ok(lines.some((l) => /^kernel.*reused/.test(l)), lines.join('\n'));
    assert.ok(lines.some((l) => /^initramfs.*reused/.test(l)), lines.join('\n'));
    const served = await createImagesService({ dir: imagesDir, logger }).current();
    assert.equal(served?.name, 'try');
    assert.equal(served?.version, m.version);
    assert.deepEqual(served?.rootfs, m.rootfs);
    assert.deepEqual((await fsp.readdir(imagesDir)).filter((f) => f.endsWith('.tmp')), []);
  });

  // The full Debian image takes minutes (mmdebstrap): opt in with SERVICE_TEST_FULL_IMAGE=1 (as root).
  const fullSkip = process.env.SERVICE_TEST_FULL_IMAGE !== '1' ? 'opt in with SERVICE_TEST_FULL_IMAGE=1 (builds the full Debian image: minutes)' : microvmSkipReason();
  test('crewhouse images build: a Debian image with git, build tools, Node and the deployment CA boots and runs them', { skip: fullSkip ?? false, timeout: 30 * 60_000 }, async () => {
    const tmp = await fsp.mkdtemp(path.join(os.tmpdir(), 'img-full-'));
    dirs.push(tmp);
    const ca = path.join(tmp, 'ca.pem');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', path.join(tmp, 'ca.key'), '-out', ca, '-days', '1', '-subj', '/CN=Crewhouse Full Image Test CA'], { stdio: 'ignore' });
    const imagesDir = path.join(tmp, 'images');
    await buildImage({ imagesDir, name: 'full', variant: 'debian', caPem: ca });
    const p = createMicrovmProvider({ dir: path.join(tmp, 'sbx'), imagesDir, logger, snapshotBudgetBytes: 8 * 1024 ** 3 });
    try {
      await p.create({ id: 'full', vcpus: 1, memoryMib: 512, diskGib: 4, image: 'full', env: {}, network: randomLink() });
      const h = await p.exec('full', { argv: ['sh', '-c', 'git --version && gcc --version >/dev/null && /opt/crewhouse/node -v && grep -c "BEGIN CERT" /usr/local/share/ca-certificates/crewhouse-deployment-ca.crt && df -m / | tail -1'] });
      let out = '';
      h.stdout.on('data', (b: Buffer) => (out += b));
      h.stdin.end();
      assert.equal(await h.exit, 0);
      assert.match(out, /git version/);
      assert.match(out, /v24\./);
      const sizeMib = Number(out.trim().split('\n').pop()!.split(/\s+/)[1]);
      assert.ok(sizeMib > 3500, `the root file system grew to the 4 GiB disk (${sizeMib} MiB)`);
    } finally {
      await p.destroy('full');
    }
  });
});

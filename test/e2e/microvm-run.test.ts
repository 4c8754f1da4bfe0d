// A run whose team's environment is a microVM: the agent runtime runs inside the guest from the
// files the image carries (the image's own Node), its model calls leave through the gateway,
// and the run succeeds with the file the agent wrote in the guest's workspace. One short run:
// a boot is slow without KVM.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { ScriptedAnswer, ScriptedRequest } from '../fakes/scripted-model.ts';
import { microvmSkipReason, testImagesDir } from '../microvm-image.ts';
import { startStack, stackSkip, type Stack } from './stack.ts';

const skip = stackSkip || microvmSkipReason() || false;

describe('a run in a microvm sandbox', { skip }, () => {
  let stack: Stack;
  let microvmDir: string;

  function script(req: ScriptedRequest): ScriptedAnswer {
    const results = req.body.messages.filter((m) => m.role === 'tool').map((m) => String(m.content ?? ''));
    if (results.length === 0) return { tool_calls: [{ name: 'write_file', arguments: { path: 'guest.txt', content: 'written in the guest\n' } }] };
    if (results.length === 1) return { tool_calls: [{ name: 'read_file', arguments: { path: 'guest.txt' } }] };
    return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: `read back: ${results[1].includes('written in the guest') ? 'same' : 'different'}` } }] };
  }

  before(async () => {
    microvmDir = fs.mkdtempSync(path.join(os.tmpdir(), 'crewhouse-microvm-run-'));
    stack = await startStack({ script, config: { SERVICE_IMAGES_DIR: await testImagesDir(), SERVICE_MICROVM_DIR: microvmDir } });
  });

  after(async () => {
    await stack?.stop();
    if (microvmDir) {
      // QEMU runs daemonized (a VM outlives its host): the test's own VMs are stopped here.
      for (const id of fs.existsSync(microvmDir) ? fs.readdirSync(microvmDir) : []) {
        const pidFile = path.join(microvmDir, id, 'qemu.pid');
        const pid = fs.existsSync(pidFile) ? Number(fs.readFileSync(pidFile, 'utf8').trim()) : 0;
        if (pid > 0) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // already gone
          }
        }
      }
      fs.rmSync(microvmDir, { recursive: true, force: true });
    }
  });

  it('runs the agent runtime the image carries and succeeds', async () => {
    const team = await stack.makeTeam({
      roles: { lead: { tools: ['write_file', 'read_file', 'finish'] } },
      environment: { provider: 'microvm', vcpus: 1, memory_mib: 512, disk_gib: 1 },
    });
    const runId = await stack.giveTask(team, 'Write guest.txt and read it back.');
    const run = await stack.waitForState(runId, 'succeeded').catch((err: Error) => {
      // What the guest said (its console's last lines are in the provider's log) makes a failure readable.
      throw new Error(`${err.message}\n${stack.logLines.filter((l) => l.includes('microvm')).join('').slice(-4000)}`);
    });
    const posts = await stack.posts(runId);
    assert.equal(posts.at(-1)?.kind, 'completed');
    assert.equal(posts.at(-1)?.text, 'read back: same');
    assert.ok(posts.some((p) => p.kind === 'working' && p.data?.tool === 'write_file' && p.data?.ok === true));
    assert.equal(run.tasks.length, 1);
    // It ran in a microVM (the provider keeps each one's files under its directory), not in a local sandbox.
    assert.ok(fs.readdirSync(stack.t.config.microvmDir).length > 0, 'a microVM was made');
    assert.ok(!fs.readdirSync(stack.sandboxDir, { recursive: true }).some((f) => String(f).endsWith('guest.txt')), 'no local sandbox holds the file');
  });
});

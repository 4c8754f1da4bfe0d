// The OOM counter read from both cgroup versions' files, as the kernel writes them, in a
// directory laid out like /sys/fs/cgroup (this machine has one version; hosts have either).
// local.test.ts counts a real OOM kill on this machine's cgroups.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import { Cgroup } from './cgroups.ts';

test('oomKills reads oom_kill from memory.events (v2) and memory.oom_control (v1); 0 when the cgroup is gone', async () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'chcg-'));
  try {
    fs.mkdirSync(path.join(root, 'crewhouse', 'v2'), { recursive: true });
    fs.writeFileSync(path.join(root, 'crewhouse', 'v2', 'memory.events'), 'low 0\nhigh 0\nmax 41\noom 3\noom_kill 2\noom_group_kill 7\n');
    assert.equal(await new Cgroup(2, 'v2', root).oomKills(), 2);

    fs.mkdirSync(path.join(root, 'memory', 'crewhouse', 'v1'), { recursive: true });
    fs.writeFileSync(path.join(root, 'memory', 'crewhouse', 'v1', 'memory.oom_control'), 'oom_kill_disable 0\nunder_oom 0\noom_kill 5\n');
    assert.equal(await new Cgroup(1, 'v1', root).oomKills(), 5);

    assert.equal(await new Cgroup(2, 'gone', root).oomKills(), 0);
    assert.equal(await new Cgroup(1, 'gone', root).oomKills(), 0);
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
});

// Shared helpers of the sandbox tests: whether this machine can run the local provider, unique
// addresses for links (other tests make links on the same machine at the same time), and a
// command run to its end inside a sandbox.
import crypto from 'node:crypto';
import fs from 'node:fs';
import { sql } from 'kysely';
import type { Db } from '../src/db/database.ts';
import { findProgram } from '../src/runtime/sandboxes/system.ts';
import type { SandboxNetwork, SandboxProvider } from '../src/runtime/sandboxes/provider.ts';
import { hostInterfaceName } from '../src/runtime/sandboxes/network.ts';
import type { TeamDirectory } from '../src/runtime/sandboxes/placement.ts';
import { createServices, loadShared } from '../src/services.ts';
import { captureLogger, testConfig } from './harness.ts';

/** Why the local provider cannot run here (a test skips with it), or null when it can. */
export function localSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, veth pairs, cgroups); CI runs it as root';
  for (const tool of ['bwrap', 'ip', 'nft', 'nsenter', 'setpriv']) if (!findProgram(tool)) return `needs ${tool} (apt-get install bubblewrap iproute2 nftables util-linux)`;
  // The workspace volume: needed wherever loop devices are (without them the provider falls back to a directory).
  if (fs.existsSync('/dev/loop-control') && !findProgram('mkfs.ext4')) return 'needs mkfs.ext4 for the workspace volume (apt-get install e2fsprogs)';
  return null;
}

/** A random /24 inside 10.128.0.0/9 as a SERVICE_SANDBOX_SUBNET value, unlikely to meet another test's. */
export function randomSubnet(): string {
  const b = crypto.randomBytes(2);
  return `10.${128 + (b[0] % 120)}.${b[1]}.0/24`;
}

/** A link inside a random /24, for tests that call a provider without a host. */
export function randomLink(sandboxId: string): SandboxNetwork {
  const [a, b, c] = randomSubnet().split('.');
  const base = `${a}.${b}.${c}`;
  return { hostAddress: `${base}.1`, sandboxAddress: `${base}.2`, hostInterface: hostInterfaceName(sandboxId) };
}

export const sandboxId = (prefix = 'sb') => `${prefix}-${crypto.randomBytes(6).toString('hex')}`;

/** Runs a command in a sandbox to its end: exit code, stdout, stderr. */
export async function execText(p: Pick<SandboxProvider, 'exec'>, id: string, argv: string[], input = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  const h = await p.exec(id, { argv });
  let stdout = '';
  let stderr = '';
  h.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  h.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  h.stdin.end(input);
  const code = await h.exit;
  return { code, stdout, stderr };
}

/** Every domain service on a test database, as the composition root builds them. */
export function testServices(db: Db) {
  const config = testConfig();
  return createServices({ config, db, logger: captureLogger().logger, ...loadShared(config) });
}

/** What the teams, templates and environments services tell placement and the sandbox host, as the composition root wires it. */
export function teamDirectory(db: Db): TeamDirectory {
  return testServices(db).sandboxDirectory;
}

/** Rows of a team with one role on an environment of the given size: what placement reads. */
export async function makeTeamRows(
  db: Db,
  o: { provider?: string; replicasMax?: number; concurrentRuns?: number; vcpus?: number | null; memoryMib?: number | null; diskGib?: number | null; idleAfter?: number; deepAfter?: number } = {},
): Promise<{ teamId: number; team: string; role: string; environment: string }> {
  const suffix = crypto.randomBytes(4).toString('hex');
  const environment = `env-${suffix}`;
  const provider = o.provider ?? 'local';
  await db
    .insertInto('environments')
    .values({ name: environment, provider: provider as 'local', profile: 'small', vcpus: o.vcpus === undefined ? 1 : o.vcpus, memory_mib: o.memoryMib === undefined ? 256 : o.memoryMib, disk_gib: o.diskGib === undefined ? 1 : o.diskGib, checkpoint_id: provider === 'hosted' ? 'ckpt-1' : null, idle_after_seconds: o.idleAfter ?? 600, deep_sleep_after_seconds: o.deepAfter ?? 3600 })
    .execute();
  const team = `team-${suffix}`;
  const row = await db
    .insertInto('teams')
    .values({ name: team, status: 'active', template_name: 'tpl', template_version: null, template_hash: 'h', lead: 'lead', home_surface: 'console', budget_usd_per_day: 10, idle_after_seconds: o.idleAfter ?? 600, deep_sleep_after_seconds: o.deepAfter ?? 3600, isolation: 'shared', rework_rounds: 2, created_by: 'test' })
    .returning('id')
    .executeTakeFirstOrThrow();
  await db
    .insertInto('team_roles')
    .values({ team_id: row.id, role: 'lead', agent: 'a', model: 'fast', vm: environment, profile: 'small', provider, checkpoint_id: null, replicas_max: o.replicasMax ?? 1, concurrent_runs: o.concurrentRuns ?? 1, max_iterations: null, confirmation_policy: null, max_budget: null, budget_duration: null, rpm_limit: null, tpm_limit: null, pipeline_next_role: null })
    .execute();
  return { teamId: row.id, team, role: 'lead', environment };
}

/**
 * A registered host row (a host process elsewhere, as far as placement can tell). A live one's
 * heartbeat is dated an hour ahead, as if it kept beating: a slow machine can take longer than
 * the dead-after window (30 s) between making it and using it, and a test that means a host to
 * die dates its heartbeat back itself.
 */
export async function makeHostRow(db: Db, o: { providers?: string[]; vcpus?: number; memoryMib?: number; diskGib?: number; microvmViaLocal?: boolean; dead?: boolean } = {}): Promise<string> {
  const id = `host_${crypto.randomBytes(8).toString('hex')}`;
  await db
    .insertInto('sandbox_hosts')
    .values({ id, address: `${id}.test`, providers: o.providers ?? ['local'], microvm_via_local: o.microvmViaLocal ?? false, vcpus: o.vcpus ?? 8, memory_mib: o.memoryMib ?? 16384, disk_gib: o.diskGib ?? 100, heartbeat_at: o.dead ? sql`now() - interval '1 hour'` : sql`now() + interval '1 hour'` })
    .execute();
  return id;
}

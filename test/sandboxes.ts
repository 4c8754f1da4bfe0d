// Shared helpers of the sandbox tests: whether this machine can run the local provider, unique
// addresses for links (other tests make links on the same machine at the same time), and a
// command run to its end inside a sandbox.
import crypto from 'node:crypto';
import { findProgram } from '../src/runtime/sandboxes/system.ts';
import type { SandboxNetwork, SandboxProvider } from '../src/runtime/sandboxes/provider.ts';
import { hostInterfaceName } from '../src/runtime/sandboxes/network.ts';

/** Why the local provider cannot run here (a test skips with it), or null when it can. */
export function localSkipReason(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, veth pairs, cgroups); CI runs it as root';
  for (const tool of ['bwrap', 'ip', 'nft', 'nsenter', 'setpriv']) if (!findProgram(tool)) return `needs ${tool} (apt-get install bubblewrap iproute2 nftables util-linux)`;
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

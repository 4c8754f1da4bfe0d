import type { Db } from '../db/database.ts';
import type { Services } from '../services.ts';
import { parseInjectSecret } from '../egress/gateway-keys.ts';
import type { EffectivePolicy, PolicyDestination } from '../egress/policy.ts';
import { sandboxByAddress, type SandboxIdentity } from '../runtime/sandboxes/identify.ts';

/** A credential the gateway puts on a request: one header and its value (never logged). */
export interface Credential {
  header: string;
  value: string;
  /** The secret inside an encoded value (a basic-auth password), scrubbed from answers as well. */
  bare?: string;
}

/** What the gateway asks of the rest of the service. */
export interface GatewaySources {
  /** The sandbox whose link a connection arrived on (its local and remote address). */
  identify(hostAddress: string, sandboxAddress: string): Promise<SandboxIdentity | null>;
  /** The role's effective egress and the team's code-host repository. */
  policyFor(who: SandboxIdentity): Promise<{ policy: EffectivePolicy; repository: string | null }>;
  /**
   * Tells `listener` when what policyFor answered for a sandbox may have changed at once (a run
   * began a turn there, and the egress is its pinned agent version's), where this process knows;
   * answers the unsubscribe. Other changes are read again within the gateway's cache time.
   */
  onPolicyStale?(listener: (sandboxId: string) => void): () => void;
  /** The credential a destination's `inject_secret` names, or why there is none. */
  credential(who: SandboxIdentity, injectSecret: string, use: 'git' | 'api'): Promise<{ ok: true; credential: Credential } | { ok: false; reason: string }>;
  /** The MCP server `name` as the sandbox's role may use it: where it is, the destination whose address rules apply, its credential. */
  mcpServer(
    who: SandboxIdentity,
    name: string,
  ): Promise<{ ok: true; url: string; destination: string; rules: PolicyDestination | null; credential: Credential | null } | { ok: false; reason: string }>;
}

type McpRow = { name: string; auth: string; auth_header: string | null; secret: string | null };

/** The gateway's sources: the shared services (teams, destinations, links, MCP servers, secrets). */
export function createGatewaySources(deps: { db: Db; services: Services }): GatewaySources {
  const { services } = deps;
  const bearer = (value: string): Credential => ({ header: 'authorization', value: `Bearer ${value}` });
  /** An MCP server's credential: its secret, as a bearer token or in its own header. */
  async function serverCredential(server: McpRow): Promise<{ ok: true; credential: Credential | null } | { ok: false; reason: string }> {
    if (server.auth === 'none' || !server.secret) return { ok: true, credential: null };
    const value = await services.secrets.reveal(server.secret.replace(/^secret:/, ''));
    if (!value) return { ok: false, reason: `the secret of the MCP server "${server.name}" has no value` };
    return { ok: true, credential: server.auth === 'header' && server.auth_header ? { header: server.auth_header.toLowerCase(), value } : bearer(value) };
  }
  return {
    async identify(hostAddress, sandboxAddress) {
      const sandbox = await sandboxByAddress(deps.db, hostAddress, sandboxAddress);
      const teamName = sandbox ? await services.teamsDirectory.nameById(sandbox.teamId) : null;
      return sandbox && teamName ? { ...sandbox, teamName } : null;
    },

    async policyFor(who) {
      // The egress of the agent version the sandbox's run started with, not of a newer one made since.
      const pinned = await services.runJournal.pinnedVersionInSandbox(who.sandboxId, who.role);
      const roles = await services.teamsDirectory.rolesWithEgress(who.teamName, pinned === null ? {} : { [who.role]: pinned });
      const role = roles.find((r) => r.role === who.role);
      // A role the team no longer has reaches nothing but the built-ins.
      const policy = await services.destinations.policyFor(role ? role.egress : { mode: 'allowlist', destinations: [] });
      // The team's code_host link, else its repo_url when that is on the code host.
      return { policy, repository: await services.integrations.codeHostRepositoryOf(who.teamName) };
    },

    onPolicyStale: (listener) => services.runJournal.onTurnBegun(listener),

    async credential(who, injectSecret, use) {
      const ref = parseInjectSecret(injectSecret);
      if (ref.kind === 'gateway' && ref.name === 'model_proxy_key') {
        const key = await services.teamsDirectory.roleModelKey(who.teamName, who.role);
        return key ? { ok: true, credential: bearer(key) } : { ok: false, reason: `role "${who.role}" of team "${who.teamName}" has no model-proxy key` };
      }
      if (ref.kind === 'gateway' && ref.name === 'code_host_installation_token') {
        const got = await services.codeHostDelivery.tokenForTeam(who.teamName);
        if (!got.ok) return got;
        // Git takes the token as a basic-auth password of the user x-access-token; the API as `token <token>`.
        const credential: Credential =
          use === 'git'
            ? { header: 'authorization', value: `Basic ${Buffer.from(`x-access-token:${got.token}`).toString('base64')}`, bare: got.token }
            : { header: 'authorization', value: `token ${got.token}`, bare: got.token };
        return { ok: true, credential };
      }
      if (ref.kind === 'secret') {
        const value = await services.secrets.reveal(ref.name);
        return value ? { ok: true, credential: bearer(value) } : { ok: false, reason: `the secret "${ref.name}" has no value` };
      }
      if (ref.kind === 'mcp') {
        const server = await services.mcpServers.get({ team: null, name: ref.name }).catch(() => null);
        if (!server) return { ok: false, reason: `there is no platform MCP server "${ref.name}"` };
        const got = await serverCredential(server);
        if (!got.ok) return got;
        return got.credential ? { ok: true, credential: got.credential } : { ok: false, reason: `the MCP server "${ref.name}" takes no credential` };
      }
      return { ok: false, reason: `"${injectSecret}" names no credential` };
    },

    async mcpServer(who, name) {
      const server = (await services.mcpServers.usableBy(who.teamName, who.role)).find((s) => s.name === name);
      if (!server) return { ok: false, reason: `role "${who.role}" of team "${who.teamName}" has no MCP server "${name}"` };
      const got = await serverCredential(server);
      if (!got.ok) return got;
      // The destination's rules as this deployment has them (a dev-only one only where those are on).
      const own = await services.destinations.policyFor({ mode: 'allowlist', destinations: [server.destination] });
      const rules = own.destinations.find((d) => d.name === server.destination && !d.builtin) ?? null;
      return { ok: true, url: server.url, destination: server.destination, rules, credential: got.credential };
    },
  };
}

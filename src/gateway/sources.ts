import type { Db } from '../db/database.ts';
import type { Services } from '../services.ts';
import { parseInjectSecret } from '../egress/gateway-keys.ts';
import type { EffectivePolicy } from '../egress/policy.ts';
import { sandboxByAddress, type SandboxIdentity } from '../runtime/sandboxes/identify.ts';

/** A credential the gateway puts on a request: one header and its value (never logged). */
export interface Credential {
  header: string;
  value: string;
}

/** What the gateway asks of the rest of the service. */
export interface GatewaySources {
  /** The sandbox whose link a connection arrived on (its local and remote address). */
  identify(hostAddress: string, sandboxAddress: string): Promise<SandboxIdentity | null>;
  /** The role's effective egress and the team's code-host repository. */
  policyFor(who: SandboxIdentity): Promise<{ policy: EffectivePolicy; repository: string | null }>;
  /** The credential a destination's `inject_secret` names, or why there is none. */
  credential(who: SandboxIdentity, injectSecret: string): Promise<{ ok: true; credential: Credential } | { ok: false; reason: string }>;
}

/** The gateway's sources: the shared services (teams, destinations, links, MCP servers, secrets). */
export function createGatewaySources(deps: { db: Db; services: Services }): GatewaySources {
  const { services } = deps;
  const bearer = (value: string): Credential => ({ header: 'authorization', value: `Bearer ${value}` });
  return {
    async identify(hostAddress, sandboxAddress) {
      const sandbox = await sandboxByAddress(deps.db, hostAddress, sandboxAddress);
      const teamName = sandbox ? await services.teams.nameById(sandbox.teamId) : null;
      return sandbox && teamName ? { ...sandbox, teamName } : null;
    },

    async policyFor(who) {
      // The egress of the agent version the sandbox's run started with, not of a newer one made since.
      const pinned = await services.runs.pinnedVersionInSandbox(who.sandboxId, who.role);
      const roles = await services.teams.rolesWithEgress(who.teamName, pinned === null ? {} : { [who.role]: pinned });
      const role = roles.find((r) => r.role === who.role);
      // A role the team no longer has reaches nothing but the built-ins.
      const policy = await services.destinations.policyFor(role ? role.egress : { mode: 'allowlist', destinations: [] });
      const links = await services.links.list(who.teamName);
      const repo = links.find((l) => l.surface === 'code_host');
      return { policy, repository: repo ? repo.external_id : null };
    },

    async credential(who, injectSecret) {
      const ref = parseInjectSecret(injectSecret);
      if (ref.kind === 'gateway' && ref.name === 'model_proxy_key') {
        const key = await services.teams.roleModelKey(who.teamName, who.role);
        return key ? { ok: true, credential: bearer(key) } : { ok: false, reason: `role "${who.role}" of team "${who.teamName}" has no model-proxy key` };
      }
      if (ref.kind === 'gateway') return { ok: false, reason: 'the code-host integration is not set up: no installation token can be minted for this destination' };
      if (ref.kind === 'secret') {
        const value = await services.secrets.reveal(ref.name);
        return value ? { ok: true, credential: bearer(value) } : { ok: false, reason: `the secret "${ref.name}" has no value` };
      }
      if (ref.kind === 'mcp') {
        const server = await services.mcpServers.get({ team: null, name: ref.name }).catch(() => null);
        if (!server) return { ok: false, reason: `there is no platform MCP server "${ref.name}"` };
        if (server.auth === 'none' || !server.secret) return { ok: false, reason: `the MCP server "${ref.name}" takes no credential` };
        const value = await services.secrets.reveal(server.secret.replace(/^secret:/, ''));
        if (!value) return { ok: false, reason: `the secret of the MCP server "${ref.name}" has no value` };
        return { ok: true, credential: server.auth === 'header' && server.auth_header ? { header: server.auth_header.toLowerCase(), value } : bearer(value) };
      }
      return { ok: false, reason: `"${injectSecret}" names no credential` };
    },
  };
}

/**
 * Credentials the gateway mints itself, per request, and injects when a destination's
 * `inject_secret` names one. They are never stored in the secret store and never reach a
 * sandbox. The list is fixed: a destination naming anything else must use `secret:<name>`
 * or `mcp:<name>`.
 */
export const GATEWAY_KEYS = [
  {
    name: 'code_host_installation_token',
    what: "the code-host app's installation token for the team's repository, minted on demand and valid one hour",
  },
  {
    name: 'model_proxy_key',
    what: "the agent role's virtual key at the model proxy, capped by the team budget",
  },
] as const;

export type GatewayKey = (typeof GATEWAY_KEYS)[number]['name'];

export const isGatewayKey = (name: string): name is GatewayKey => GATEWAY_KEYS.some((k) => k.name === name);

/** What an `inject_secret` value refers to. */
export type InjectRef = { kind: 'gateway'; name: GatewayKey } | { kind: 'mcp'; name: string } | { kind: 'secret'; name: string } | { kind: 'invalid' };

export function parseInjectSecret(value: string): InjectRef {
  if (isGatewayKey(value)) return { kind: 'gateway', name: value };
  const m = /^(mcp|secret):(.+)$/.exec(value);
  if (!m) return { kind: 'invalid' };
  return { kind: m[1] as 'mcp' | 'secret', name: m[2] };
}

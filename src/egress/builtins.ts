import type { PolicyDestination } from './policy.ts';

/** The host names sandboxes reach the built-in destinations at, through the gateway. */
export const BUILTIN_HOSTS: Readonly<Record<string, string>> = {
  llm: 'llm.crewhouse.internal',
  mcp: 'mcp.crewhouse.internal',
  otel: 'otel.crewhouse.internal',
};

/**
 * The destinations every agent's egress holds. The gateway resolves their hosts itself (the
 * model proxy, the MCP servers the role may use, the telemetry collector), so they carry no
 * host here and no method rule.
 */
export const BUILTIN_DESTINATIONS: readonly PolicyDestination[] = [
  {
    name: 'llm',
    host: null,
    methods: [],
    paths: [],
    header_allowlist: [],
    inject_secret: 'model_proxy_key',
    git_push_ref_globs: [],
    what: "the model proxy (OpenAI-compatible), reached with the role's virtual key",
    builtin: true,
    github_scope: null,
    dev_only: false,
    policy_name: null,
  },
  {
    name: 'mcp',
    host: null,
    methods: [],
    paths: [],
    // MCP's Streamable HTTP transport: content negotiation, its session and protocol version, stream resumption.
    header_allowlist: ['accept', 'mcp-session-id', 'mcp-protocol-version', 'last-event-id'],
    inject_secret: null,
    git_push_ref_globs: [],
    what: "the MCP servers of the role's agent and team; each server's own credential is injected",
    builtin: true,
    github_scope: 'mcp',
    dev_only: false,
    policy_name: null,
  },
  {
    name: 'otel',
    host: null,
    methods: [],
    paths: [],
    header_allowlist: [],
    inject_secret: null,
    git_push_ref_globs: [],
    what: 'the OpenTelemetry collector for traces and metrics of the sandbox',
    builtin: true,
    github_scope: null,
    dev_only: false,
    policy_name: null,
  },
];

export const BUILTIN_NAMES: readonly string[] = BUILTIN_DESTINATIONS.map((d) => d.name);
export const isBuiltinDestination = (name: string) => BUILTIN_NAMES.includes(name);

import os from 'node:os';
import path from 'node:path';
import { parseHost } from './egress/hosts.ts';

/** Every SERVICE_* variable, parsed once at start. Nothing else reads process.env. */
export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl: string | null;
  publicBaseUrl: string;
  adminToken: string | null;
  secretKey: string | null;
  /** Earlier secret keys (base64, comma-separated) that still open values sealed under them until `crewhouse secrets rotate-key`. */
  secretKeyPrevious: string[];
  logLevel: string;
  /** Largest JSON body the console accepts, in bytes. */
  bodyLimit: number;
  modelProxyPort: number;
  modelProxyUrl: string | null;
  /** The model proxy's admin credential; derived from the secret key when unset. */
  modelProxyToken: string | null;
  gatewayPort: number;
  /** PEM file of extra trust anchors for the gateway's upstream TLS (besides the system store). */
  gatewayUpstreamCaFile: string | null;
  /** DNS servers the gateway resolves names through (`ip` or `ip:port`); empty: the system resolver. */
  gatewayDns: string[];
  /** `host:port` pairs (normal form) the gateway may send a credential to in cleartext, for a dev-only destination only; empty: none. */
  gatewayCleartextHosts: string[];
  /** Connections one sandbox may hold open to the gateway at once (tunnels included); more are refused. */
  gatewayMaxConnectionsPerSandbox: number;
  chatPort: number;
  /** Requests per user per window on the chat API (Zulip's `api_by_user` rule); null when off. */
  chatRateLimit: { calls: number; seconds: number } | null;
  /** The largest file POST /user_uploads takes, in MiB (Zulip's MAX_FILE_UPLOAD_SIZE). */
  chatMaxFileUploadMib: number;
  /** Days after which an upload no message links is deleted (0: never). */
  chatDeleteUnclaimedUploadsDays: number;
  egressDevDestinations: boolean;
  /** Jaeger query API a run's trace is read from (`GET /runs/{id}/trace`, `jaeger_url`); null when none. */
  jaegerUrl: string | null;
  /** OTLP/HTTP collector runs' spans are exported to (`{endpoint}/v1/traces`); null when none. */
  otlpEndpoint: string | null;
  imagesDir: string;
  /** Where microVM sandboxes keep their disks, sockets and snapshots. */
  microvmDir: string;
  /** Bytes the microVM memory snapshots on this host may take together. */
  microvmSnapshotBudgetBytes: number;
  /** auto probes KVM and falls back to TCG; kvm or tcg skip the probe. */
  microvmAccel: 'auto' | 'kvm' | 'tcg';
  models: string | null;
  webDir: string;
  trustProxy: boolean;
  /** Where the local provider keeps each sandbox (its /workspace, its state) and the host its id; null on an in-memory data dir. */
  sandboxDir: string | null;
  /** The IPv4 range each sandbox's /30 link is taken from. */
  sandboxSubnet: { base: number; prefix: number; text: string };
  /** How this host is reached by other processes; registered with the host. */
  sandboxHostAddress: string;
  /** Seconds without a heartbeat after which a sandbox host is dead. */
  sandboxHostDeadAfter: number;
  sandboxPool: number;
  /** `local` lets the local provider serve microvm environments when KVM is unusable; `none` refuses them. */
  sandboxMicrovmFallback: 'none' | 'local';
  /** Capacity this host offers; 0 means measured (CPUs, memory, free disk under the sandbox dir). */
  sandboxCapacity: { vcpus: number; memoryMib: number; diskGib: number };
  /** Awake sandboxes' vCPUs a host takes per vCPU it offers (vCPUs are shared; memory and disk are not). */
  sandboxVcpuOvercommit: number;
  /** Jobs the worker performs at once. */
  jobConcurrency: number;
  /** Runs each worker process drives at once: job slots of their own (the engine's `engine.advance-run`). */
  runConcurrency: number;
  /** Seconds a worker holds a job without renewing it: how soon another takes over a dead worker's jobs. */
  jobLeaseSeconds: number;
  /** The configuration repository `POST /import` reads (docs/import.md); null when none is set. */
  importRepository: ImportRepository | null;
}

/** Where the configuration repository is: a git URL and ref, or a local directory. */
export type ImportRepository =
  | { kind: 'git'; url: string; ref: string; caFile: string | null; deployKeySecret: string | null }
  | { kind: 'directory'; path: string };

export class ConfigError extends Error {}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, fallback: number, min = 0, max = 65535): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw)) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
  const value = Number(raw);
  if (value < min || value > max) throw new ConfigError(`${name} must be between ${min} and ${max}`);
  return value;
}

/** A decimal setting such as 1.5, between min and max. */
function ratio(env: Env, name: string, fallback: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = /^\d+(\.\d+)?$/.test(raw) ? Number(raw) : NaN;
  if (!(value >= min && value <= max)) throw new ConfigError(`${name} must be a number from ${min} to ${max} (such as 1.5), got "${raw}"`);
  return value;
}

/** An http(s) URL setting without its trailing slashes, or null when unset. */
function httpUrl(env: Env, name: string): string | null {
  const raw = str(env, name);
  if (raw === null) return null;
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new ConfigError(`${name} is not a URL: "${raw}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`${name} must be an http or https URL, got "${raw}"`);
  return raw.replace(/\/+$/, '');
}

function str(env: Env, name: string): string | null {
  const raw = env[name];
  return raw === undefined || raw === '' ? null : raw;
}

function bool(env: Env, name: string): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return false;
  if (['1', 'true', 'yes', 'on'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', 'off'].includes(raw.toLowerCase())) return false;
  throw new ConfigError(`${name} must be 1 or 0, got "${raw}"`);
}

/** The variables, their defaults and meanings; the README's table is this list. */
export const configReference: Array<{ name: string; default: string; meaning: string }> = [
  { name: 'SERVICE_PORT', default: '8080', meaning: 'port of the console (API, web console, webhooks, health, metrics)' },
  { name: 'SERVICE_HOST', default: '0.0.0.0', meaning: 'address the servers listen on' },
  { name: 'SERVICE_DATA_DIR', default: './data', meaning: 'where the embedded database and the key file live' },
  { name: 'SERVICE_DATABASE_URL', default: '(unset)', meaning: 'PostgreSQL connection string; when set, the embedded database is not used' },
  { name: 'SERVICE_PUBLIC_BASE_URL', default: 'http://localhost:8080', meaning: 'the address people and external services reach the console at (setup links, webhook URLs)' },
  { name: 'SERVICE_ADMIN_TOKEN', default: '(unset)', meaning: 'on an empty database, becomes the first admin\'s bearer token' },
  { name: 'SERVICE_SECRET_KEY', default: '(unset: a key file is created)', meaning: 'base64 of 32 bytes; the key that encrypts secrets at rest' },
  { name: 'SERVICE_SECRET_KEY_PREVIOUS', default: '(unset)', meaning: 'comma-separated earlier keys that still decrypt secrets until `crewhouse secrets rotate-key` re-encrypts them' },
  { name: 'SERVICE_LOG_LEVEL', default: 'info', meaning: 'pino log level' },
  { name: 'SERVICE_BODY_LIMIT', default: '1048576', meaning: 'largest request body in bytes' },
  { name: 'SERVICE_MODEL_PROXY_PORT', default: '8081', meaning: 'port of the model proxy' },
  { name: 'SERVICE_MODEL_PROXY_URL', default: '(unset: the local proxy)', meaning: 'where the console reaches the model proxy\'s admin API' },
  { name: 'SERVICE_MODEL_PROXY_TOKEN', default: '(unset: derived from the secret key)', meaning: 'service credential of the model proxy\'s admin API; set the same value on the console and the proxy' },
  { name: 'SERVICE_GATEWAY_PORT', default: '8082', meaning: 'port of the credential gateway (the sandboxes\' HTTP proxy)' },
  { name: 'SERVICE_GATEWAY_UPSTREAM_CA_FILE', default: '(unset)', meaning: 'PEM file of extra certificate authorities the gateway trusts for upstreams, besides the system store (a private git server)' },
  { name: 'SERVICE_GATEWAY_DNS', default: '(unset: the system resolver)', meaning: 'comma-separated DNS servers (ip or ip:port) the gateway resolves names through' },
  { name: 'SERVICE_GATEWAY_CLEARTEXT_HOSTS', default: '(unset: none)', meaning: 'comma-separated host:port pairs of dev-only destinations the gateway may send an injected credential to over plain HTTP (a test server on loopback); logged at start. Every other credential goes only over TLS the gateway verified' },
  { name: 'SERVICE_GATEWAY_MAX_CONNECTIONS_PER_SANDBOX', default: '256', meaning: 'connections one sandbox may hold open to the gateway at once (tunnels included); beyond it a connection is answered 429 and closed, and the refusal recorded' },
  { name: 'SERVICE_CHAT_PORT', default: '8083', meaning: 'port of the chat server' },
  { name: 'SERVICE_CHAT_MAX_FILE_UPLOAD_SIZE_MIB', default: '100', meaning: 'the largest file a chat user may upload, in MiB (as Zulip\'s MAX_FILE_UPLOAD_SIZE); 0 turns uploads off' },
  { name: 'SERVICE_CHAT_DELETE_UNCLAIMED_UPLOADS_DAYS', default: '35', meaning: 'days after which a chat upload that no message links is deleted (as Zulip\'s delete_old_unclaimed_attachments, 5 weeks); 0 keeps them' },
  { name: 'SERVICE_CHAT_RATE_LIMIT', default: '200/60', meaning: 'chat API requests each user may make per window, as <calls>/<seconds>; 0 turns the limit off' },
  { name: 'SERVICE_OTLP_ENDPOINT', default: 'unset', meaning: 'base URL of an OpenTelemetry collector (OTLP/HTTP, JSON): the spans of runs, their tasks and their model and tool calls are exported to `{endpoint}/v1/traces` through the job queue, retried while it is down' },
  { name: 'SERVICE_JAEGER_URL', default: 'unset', meaning: 'base URL of a Jaeger query service: `GET /runs/{id}/trace` reads spans from it and runs link to it (`jaeger_url`)' },
  { name: 'SERVICE_EGRESS_DEV_DESTINATIONS', default: '0', meaning: '1 puts dev-only (loopback or private) destinations into egress policies' },
  { name: 'SERVICE_IMAGES_DIR', default: '<data dir>/images', meaning: 'where `crewhouse images build` writes agent images and their manifests, and where microVMs boot them from' },
  { name: 'SERVICE_MICROVM_DIR', default: '<data dir>/sandboxes/microvm', meaning: 'where microVM sandboxes keep their disks, control sockets and sleep snapshots' },
  { name: 'SERVICE_MICROVM_SNAPSHOT_BUDGET_MIB', default: '20480', meaning: 'disk (MiB) all microVM memory snapshots on this host may take; a sleep past it becomes a deep sleep' },
  { name: 'SERVICE_MICROVM_ACCEL', default: 'auto', meaning: 'auto uses KVM when a probe guest actually runs under it, otherwise TCG (logged once); kvm or tcg skip the probe' },
  { name: 'SERVICE_MODELS', default: '(built-in set)', meaning: 'path of a JSON or YAML file of model aliases, or inline JSON' },
  { name: 'SERVICE_WEB_DIR', default: './dist/web', meaning: 'the built web console' },
  { name: 'SERVICE_TRUST_PROXY', default: '0', meaning: '1 trusts X-Forwarded-* headers from a reverse proxy' },
  { name: 'SERVICE_SANDBOX_DIR', default: '<data dir>/sandboxes', meaning: 'where the local provider keeps each sandbox (its /workspace and state) and the host its id' },
  { name: 'SERVICE_SANDBOX_SUBNET', default: '10.213.0.0/16', meaning: 'IPv4 range each sandbox\'s /30 link to its host is taken from' },
  { name: 'SERVICE_SANDBOX_HOST_ADDRESS', default: '(the machine\'s host name)', meaning: 'how other processes reach this sandbox host; registered with it' },
  { name: 'SERVICE_SANDBOX_POOL', default: '2', meaning: 'network links (namespace, veth pair, firewall) the local provider keeps made ahead of demand, so a create only names and addresses one; with any pool the spare /workspace volume is mounted ahead too; 0 makes links on demand and leaves the spare unmounted' },
  { name: 'SERVICE_SANDBOX_HOST_DEAD_AFTER', default: '30', meaning: 'seconds without a heartbeat after which a sandbox host is dead and its sandboxes are re-placed' },
  { name: 'SERVICE_SANDBOX_MICROVM_FALLBACK', default: 'none', meaning: '`local` lets the local provider serve microvm environments on a host where KVM is unusable (logged at start); `none` refuses them' },
  { name: 'SERVICE_SANDBOX_VCPUS', default: '0 (the CPU count)', meaning: 'vCPUs this host offers to sandboxes' },
  { name: 'SERVICE_SANDBOX_MEMORY_MIB', default: '0 (total memory)', meaning: 'memory in MiB this host offers to sandboxes' },
  { name: 'SERVICE_SANDBOX_VCPU_OVERCOMMIT', default: '4', meaning: 'how many times its vCPUs a host shares out to awake sandboxes (a decimal from 1 to 64); memory is held by awake sandboxes only, disk by all' },
  { name: 'SERVICE_SANDBOX_DISK_GIB', default: '0 (free disk under the sandbox dir)', meaning: 'disk in GiB this host offers to sandboxes' },
  { name: 'SERVICE_JOB_CONCURRENCY', default: '4', meaning: 'jobs (revoking keys, destroying sandboxes, outbound calls to trackers and the code host) each worker process performs at once, besides the runs it drives; the chat servers\' jobs have as many slots again of their own' },
  { name: 'SERVICE_RUN_CONCURRENCY', default: '64', meaning: 'runs each worker process drives at once (a run holds one while its agents work; one waiting for a person or for room on a host holds none); slots of their own, so slow outbound jobs never hold a run up' },
  { name: 'SERVICE_IMPORT_REPOSITORY', default: '(unset)', meaning: 'the configuration repository `POST /import` reads: a git URL (https, http, ssh or user@host:path) or an absolute local directory (docs/import.md)' },
  { name: 'SERVICE_IMPORT_REF', default: 'main', meaning: 'the branch, tag or commit of a git configuration repository that is imported' },
  { name: 'SERVICE_IMPORT_DEPLOY_KEY', default: '(unset)', meaning: 'name of a stored secret holding an SSH private key (a deploy key) for an ssh configuration repository; an https repository on the code host uses the installation token instead' },
  { name: 'SERVICE_IMPORT_CA_FILE', default: '(unset)', meaning: 'PEM file of extra certificate authorities trusted when fetching an https configuration repository (a private git server)' },
  { name: 'SERVICE_JOB_LEASE_SECONDS', default: '60', meaning: "how long a worker holds a job without renewing it (renewed every third of it); a dead worker's jobs, runs included, are taken over after this" },
];

/** SERVICE_IMPORT_*: the configuration repository, a git URL or an absolute directory. */
function importRepository(env: Env): ImportRepository | null {
  const source = str(env, 'SERVICE_IMPORT_REPOSITORY');
  const ref = str(env, 'SERVICE_IMPORT_REF') ?? 'main';
  const caFile = str(env, 'SERVICE_IMPORT_CA_FILE');
  const deployKeySecret = str(env, 'SERVICE_IMPORT_DEPLOY_KEY');
  if (source === null) {
    if (caFile !== null || deployKeySecret !== null) throw new ConfigError('SERVICE_IMPORT_CA_FILE and SERVICE_IMPORT_DEPLOY_KEY need SERVICE_IMPORT_REPOSITORY (the configuration repository) to be set');
    return null;
  }
  if (!/^[A-Za-z0-9._/@^~-]{1,200}$/.test(ref) || ref.startsWith('-') || ref.includes('..')) throw new ConfigError(`SERVICE_IMPORT_REF must be a branch, tag or commit name, got "${ref}"`);
  if (/^(https?|ssh):\/\//.test(source) || /^[A-Za-z0-9._-]+@[A-Za-z0-9.-]+:/.test(source)) {
    if (/^https?:\/\/[^/]*@/.test(source)) throw new ConfigError('SERVICE_IMPORT_REPOSITORY must not carry a user or password in the URL: use the code host installation or a deploy key (SERVICE_IMPORT_DEPLOY_KEY)');
    return { kind: 'git', url: source, ref, caFile: caFile === null ? null : path.resolve(caFile), deployKeySecret };
  }
  if (!path.isAbsolute(source)) throw new ConfigError(`SERVICE_IMPORT_REPOSITORY must be a git URL (https://, http://, ssh://, user@host:path) or an absolute directory, got "${source}"`);
  return { kind: 'directory', path: source };
}

/** SERVICE_SANDBOX_SUBNET: an IPv4 CIDR of at least a /30. */
function sandboxSubnet(env: Env): Config['sandboxSubnet'] {
  const text = str(env, 'SERVICE_SANDBOX_SUBNET') ?? '10.213.0.0/16';
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})\/(\d{1,2})$/.exec(text);
  const octets = m ? m.slice(1, 5).map(Number) : [];
  const prefix = m ? Number(m[5]) : -1;
  if (!m || octets.some((o) => o > 255) || prefix < 8 || prefix > 30) throw new ConfigError(`SERVICE_SANDBOX_SUBNET must be an IPv4 range from /8 to /30 (for example 10.213.0.0/16), got "${text}"`);
  const mask = prefix === 0 ? 0 : (0xffffffff << (32 - prefix)) >>> 0;
  const base = (((octets[0] << 24) | (octets[1] << 16) | (octets[2] << 8) | octets[3]) >>> 0) & mask;
  return { base: base >>> 0, prefix, text };
}

function choice<T extends string>(env: Env, name: string, allowed: readonly T[], fallback: T): T {
  const raw = str(env, name) ?? fallback;
  if (!(allowed as readonly string[]).includes(raw)) throw new ConfigError(`${name} must be one of ${allowed.join(', ')}, got "${raw}"`);
  return raw as T;
}

/** SERVICE_ADMIN_TOKEN must be usable as a bearer token, and long enough not to be guessed. */
function adminToken(env: Env): string | null {
  const raw = str(env, 'SERVICE_ADMIN_TOKEN');
  if (raw !== null && !/^[A-Za-z0-9._~+/=-]{16,512}$/.test(raw)) {
    throw new ConfigError('SERVICE_ADMIN_TOKEN must be 16 to 512 characters of A-Z a-z 0-9 . _ ~ + / = -');
  }
  return raw;
}

/** SERVICE_GATEWAY_DNS: comma-separated IP addresses, each with an optional port. */
function dnsServers(env: Env): string[] {
  const raw = str(env, 'SERVICE_GATEWAY_DNS');
  if (raw === null) return [];
  const out = raw.split(',').map((s) => s.trim()).filter(Boolean);
  for (const server of out) {
    const m = /^(?:\[([0-9a-f:.]+)\]|(\d{1,3}(?:\.\d{1,3}){3}))(?::(\d{1,5}))?$/i.exec(server) ?? /^([0-9a-f:]+)$/i.exec(server);
    if (!m || (m[3] !== undefined && (Number(m[3]) < 1 || Number(m[3]) > 65535))) throw new ConfigError(`SERVICE_GATEWAY_DNS must be IP addresses with optional ports (1.1.1.1, 10.0.0.2:53, [::1]:53), got "${server}"`);
  }
  return out;
}

/** SERVICE_GATEWAY_CLEARTEXT_HOSTS: comma-separated `host:port`, each with its port; answered in normal form (`name:port`, `[v6]:port`). */
function cleartextHosts(env: Env): string[] {
  const raw = str(env, 'SERVICE_GATEWAY_CLEARTEXT_HOSTS');
  if (raw === null) return [];
  const out: string[] = [];
  for (const item of raw.split(',').map((s) => s.trim()).filter(Boolean)) {
    const h = parseHost(item);
    if (!h.ok || h.wildcard || h.port === null) throw new ConfigError(`SERVICE_GATEWAY_CLEARTEXT_HOSTS must be host:port pairs, each with its port and no wildcard (git.test:8080, 127.0.0.1:9000), got "${item}"`);
    out.push(hostPortKey(h.host, h.port));
  }
  return out;
}

/** How a host and port are written in SERVICE_GATEWAY_CLEARTEXT_HOSTS's normal form (the host as parseHost gives it). */
export const hostPortKey = (host: string, port: number) => `${host.includes(':') ? `[${host}]` : host}:${port}`;

/** SERVICE_CHAT_RATE_LIMIT: `<calls>/<seconds>`, or 0 for no limit. */
function chatRateLimit(env: Env): { calls: number; seconds: number } | null {
  const raw = str(env, 'SERVICE_CHAT_RATE_LIMIT') ?? '200/60';
  if (raw === '0') return null;
  const m = /^(\d{1,6})\/(\d{1,6})$/.exec(raw);
  if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) throw new ConfigError(`SERVICE_CHAT_RATE_LIMIT must be <calls>/<seconds> (for example 200/60) or 0, got "${raw}"`);
  return { calls: Number(m[1]), seconds: Number(m[2]) };
}

function microvmAccel(env: Env): 'auto' | 'kvm' | 'tcg' {
  const raw = str(env, 'SERVICE_MICROVM_ACCEL') ?? 'auto';
  if (raw !== 'auto' && raw !== 'kvm' && raw !== 'tcg') throw new ConfigError(`SERVICE_MICROVM_ACCEL must be auto, kvm or tcg, got "${raw}"`);
  return raw;
}

export function loadConfig(env: Env = process.env): Config {
  const port = int(env, 'SERVICE_PORT', 8080);
  const rawDataDir = str(env, 'SERVICE_DATA_DIR') ?? './data';
  // ':memory:' is the in-memory embedded database (tests), not a folder.
  const dataDir = rawDataDir === ':memory:' ? rawDataDir : path.resolve(rawDataDir);
  const publicBaseUrl = (str(env, 'SERVICE_PUBLIC_BASE_URL') ?? `http://localhost:${port}`).replace(/\/+$/, '');
  try {
    new URL(publicBaseUrl);
  } catch {
    throw new ConfigError(`SERVICE_PUBLIC_BASE_URL is not a URL: "${publicBaseUrl}"`);
  }
  return {
    port,
    host: str(env, 'SERVICE_HOST') ?? '0.0.0.0',
    dataDir,
    databaseUrl: str(env, 'SERVICE_DATABASE_URL'),
    publicBaseUrl,
    adminToken: adminToken(env),
    secretKey: str(env, 'SERVICE_SECRET_KEY'),
    secretKeyPrevious: (str(env, 'SERVICE_SECRET_KEY_PREVIOUS') ?? '').split(',').map((k) => k.trim()).filter(Boolean),
    logLevel: str(env, 'SERVICE_LOG_LEVEL') ?? 'info',
    bodyLimit: int(env, 'SERVICE_BODY_LIMIT', 1024 * 1024, 1024, 64 * 1024 * 1024),
    modelProxyPort: int(env, 'SERVICE_MODEL_PROXY_PORT', 8081),
    modelProxyUrl: str(env, 'SERVICE_MODEL_PROXY_URL'),
    modelProxyToken: str(env, 'SERVICE_MODEL_PROXY_TOKEN'),
    gatewayPort: int(env, 'SERVICE_GATEWAY_PORT', 8082),
    gatewayUpstreamCaFile: str(env, 'SERVICE_GATEWAY_UPSTREAM_CA_FILE') === null ? null : path.resolve(str(env, 'SERVICE_GATEWAY_UPSTREAM_CA_FILE')!),
    gatewayDns: dnsServers(env),
    gatewayCleartextHosts: cleartextHosts(env),
    gatewayMaxConnectionsPerSandbox: int(env, 'SERVICE_GATEWAY_MAX_CONNECTIONS_PER_SANDBOX', 256, 1, 1_000_000),
    chatPort: int(env, 'SERVICE_CHAT_PORT', 8083),
    chatRateLimit: chatRateLimit(env),
    chatMaxFileUploadMib: int(env, 'SERVICE_CHAT_MAX_FILE_UPLOAD_SIZE_MIB', 100, 0, 1024),
    chatDeleteUnclaimedUploadsDays: int(env, 'SERVICE_CHAT_DELETE_UNCLAIMED_UPLOADS_DAYS', 35, 0, 36_500),
    egressDevDestinations: bool(env, 'SERVICE_EGRESS_DEV_DESTINATIONS'),
    jaegerUrl: httpUrl(env, 'SERVICE_JAEGER_URL'),
    otlpEndpoint: httpUrl(env, 'SERVICE_OTLP_ENDPOINT'),
    imagesDir: path.resolve(str(env, 'SERVICE_IMAGES_DIR') ?? path.join(dataDir, 'images')),
    microvmDir: path.resolve(str(env, 'SERVICE_MICROVM_DIR') ?? path.join(dataDir, 'sandboxes', 'microvm')),
    microvmSnapshotBudgetBytes: int(env, 'SERVICE_MICROVM_SNAPSHOT_BUDGET_MIB', 20480, 0, 64 * 1024 * 1024) * 1024 * 1024,
    microvmAccel: microvmAccel(env),
    models: str(env, 'SERVICE_MODELS'),
    webDir: path.resolve(str(env, 'SERVICE_WEB_DIR') ?? './dist/web'),
    trustProxy: bool(env, 'SERVICE_TRUST_PROXY'),
    sandboxDir: str(env, 'SERVICE_SANDBOX_DIR') ? path.resolve(str(env, 'SERVICE_SANDBOX_DIR')!) : dataDir === ':memory:' ? null : path.join(dataDir, 'sandboxes'),
    sandboxSubnet: sandboxSubnet(env),
    sandboxHostAddress: str(env, 'SERVICE_SANDBOX_HOST_ADDRESS') ?? os.hostname(),
    sandboxHostDeadAfter: int(env, 'SERVICE_SANDBOX_HOST_DEAD_AFTER', 30, 3, 86_400),
    sandboxPool: int(env, 'SERVICE_SANDBOX_POOL', 2, 0, 64),
    sandboxMicrovmFallback: choice(env, 'SERVICE_SANDBOX_MICROVM_FALLBACK', ['none', 'local'] as const, 'none'),
    sandboxCapacity: {
      vcpus: int(env, 'SERVICE_SANDBOX_VCPUS', 0, 0, 4096),
      memoryMib: int(env, 'SERVICE_SANDBOX_MEMORY_MIB', 0, 0, 64 * 1024 * 1024),
      diskGib: int(env, 'SERVICE_SANDBOX_DISK_GIB', 0, 0, 1024 * 1024),
    },
    sandboxVcpuOvercommit: ratio(env, 'SERVICE_SANDBOX_VCPU_OVERCOMMIT', 4, 1, 64),
    jobConcurrency: int(env, 'SERVICE_JOB_CONCURRENCY', 4, 1, 256),
    runConcurrency: int(env, 'SERVICE_RUN_CONCURRENCY', 64, 1, 4096),
    jobLeaseSeconds: int(env, 'SERVICE_JOB_LEASE_SECONDS', 60, 5, 3600),
    importRepository: importRepository(env),
  };
}

/**
 * The one interface the run engine sees of a sandbox, whatever runs it (`local`: namespaces on
 * this host; `microvm`: a QEMU microvm guest). A provider is a few verbs with explicit states;
 * a verb asked in the wrong state is refused with a SandboxError, never guessed at.
 */
import type { Readable, Writable } from 'node:stream';

export type ProviderName = 'local' | 'microvm' | 'hosted';

/** running: can exec; sleeping: memory snapshot on disk; deep_sleep: disk only; destroyed: gone. */
export type SandboxState = 'starting' | 'running' | 'sleeping' | 'deep_sleep' | 'destroyed';

/** The size and sleep settings a sandbox is made with (from the environment the role's `vm` names). */
export interface SandboxSpec {
  /** Stable id chosen by the caller (the sandboxes row id); names every host-side resource. */
  id: string;
  vcpus: number;
  memoryMib: number;
  diskGib: number;
  /** Image name for microvm (a manifest under SERVICE_IMAGES_DIR; null: the current image); ignored by local. */
  image: string | null;
  /** Environment variables for every exec (proxy variables, CA paths); never a secret. */
  env: Record<string, string>;
  /** The link to set up, allocated by the host (unique among its sandboxes). */
  network: SandboxNetwork;
  /**
   * The deployment CA (PEM) the gateway intercepts TLS under, to be trusted at SANDBOX_CA_PATH.
   * Optional: a microvm image carries it already; the local provider writes it.
   */
  caPem?: string | null;
}

/** Where a sandbox's trust store file is; SSL_CERT_FILE and its kin point at it. */
export const SANDBOX_CA_PATH = '/etc/ssl/certs/ca-certificates.crt';

/**
 * The network identity of a sandbox, set up by the provider and not spoofable from inside:
 * its only interface is a point-to-point link whose host end is `hostAddress` (where the
 * gateway answers it) and whose sandbox end is `sandboxAddress`. The gateway identifies a
 * connection by this pair (its local and remote address), never by anything it sends.
 */
export interface SandboxNetwork {
  hostAddress: string;
  sandboxAddress: string;
  /** The host-side interface name (veth or tap). */
  hostInterface: string;
}

export interface ExecRequest {
  argv: string[];
  cwd?: string;
  env?: Record<string, string>;
  /** Kills the command (and its process group) when aborted. */
  signal?: AbortSignal;
}

export interface ExecHandle {
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Resolves with the exit code (128 + signal number when killed). */
  exit: Promise<number>;
}

export interface SandboxStatus {
  state: SandboxState;
  network: SandboxNetwork | null;
  /** True after a wake that had to cold-boot (snapshot missing or unusable): running conversations are lost. */
  coldBooted?: boolean;
}

export interface SandboxProvider {
  readonly name: ProviderName;
  /** Throws SandboxError('unavailable') naming the Debian package to install when the host cannot run it. */
  check(): Promise<void>;
  create(spec: SandboxSpec): Promise<SandboxStatus>;
  exec(id: string, req: ExecRequest): Promise<ExecHandle>;
  /** Writes files under the sandbox's /workspace (paths relative to it). */
  copyIn(id: string, files: Array<{ path: string; content: Buffer | string; mode?: number }>): Promise<void>;
  sleep(id: string, depth: 'sleep' | 'deep'): Promise<SandboxStatus>;
  wake(id: string): Promise<SandboxStatus>;
  /** Frees everything the sandbox holds on the host; a sandbox already gone is not an error (the host calls it again after a crash). */
  destroy(id: string): Promise<void>;
  status(id: string): Promise<SandboxStatus>;
  /** Releases what the provider made ahead of demand (the local provider's network pool); sandboxes keep running. */
  close?(): Promise<void>;
  /** After a host restart: the ids this provider still has resources for (to adopt or clean up). */
  list(): Promise<string[]>;
  /** How many processes the sandbox's memory limit has killed since it was made (a count that only rises), where the provider can tell. */
  oomKills?(id: string): Promise<number>;
}

export type SandboxErrorCode = 'unavailable' | 'not_found' | 'wrong_state' | 'image' | 'resources' | 'failed';

export class SandboxError extends Error {
  readonly code: SandboxErrorCode;
  constructor(code: SandboxErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = 'SandboxError';
  }
}

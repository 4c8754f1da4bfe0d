import net from 'node:net';
import tls from 'node:tls';

/** Where a request goes: exactly the address the gateway checked, and the name its certificate must carry. */
export interface UpstreamAddress {
  scheme: 'http' | 'https';
  address: string;
  port: number;
  /** The TLS server name (SNI, and what the certificate is verified against); null for an IP literal. */
  servername: string | null;
}

/** Who is using an upstream connection: its events go there. */
export interface UpstreamOwner {
  data(chunk: Buffer): void;
  /** The upstream ended the connection, or it closed. */
  ended(): void;
  error(err: Error): void;
  /** Nothing came or went for the connection's idle time. */
  timeout(): void;
}

/**
 * A connection to an upstream. Its listeners are attached once, when it is made, and pass
 * events to whoever holds it (an exchange) or, while it waits in the pool, close it: a
 * request costs no listener bookkeeping and no timer re-arming.
 */
export class UpstreamConnection {
  readonly socket: net.Socket;
  /** Whether it has carried an exchange before (a kept-alive one the upstream may have closed meanwhile). */
  reused = false;
  owner: UpstreamOwner | null = null;
  /** While idle in the pool: when it went there. */
  idleSince = 0;
  readonly key: string;

  constructor(socket: net.Socket, key: string, idleMs: number, onIdleEvent: (c: UpstreamConnection) => void) {
    this.socket = socket;
    this.key = key;
    socket.setNoDelay(true);
    socket.setTimeout(idleMs);
    socket.on('data', (chunk: Buffer) => (this.owner ? this.owner.data(chunk) : onIdleEvent(this)));
    socket.on('end', () => (this.owner ? this.owner.ended() : onIdleEvent(this)));
    socket.on('close', () => (this.owner ? this.owner.ended() : onIdleEvent(this)));
    socket.on('error', (err) => (this.owner ? this.owner.error(err) : onIdleEvent(this)));
    socket.on('timeout', () => (this.owner ? this.owner.timeout() : onIdleEvent(this)));
  }

  get usable(): boolean {
    return !this.socket.destroyed && this.socket.readable && this.socket.writable;
  }

  destroy() {
    this.owner = null;
    this.socket.destroy();
  }
}

/** How long a kept-alive upstream connection waits in the pool for its next request. */
const POOL_IDLE_MS = 30_000;
const MAX_IDLE_PER_UPSTREAM = 256;

/**
 * Kept-alive connections to upstreams, by the exact address, port and TLS name they were made
 * to: a request reuses one only where it would have dialled the same. Upstream certificates
 * are verified (the system store plus the operator's CA file) against the name.
 * `idleMs`: a connection in use that sees no bytes for this long is given up on.
 */
export function createUpstreamPool(ca: string[], idleMs: number) {
  const secureContext = tls.createSecureContext({ ca });
  const idle = new Map<string, UpstreamConnection[]>();
  const keyOf = (u: UpstreamAddress) => `${u.scheme}\n${u.address}\n${u.port}\n${u.servername ?? ''}`;
  /** A pooled connection that hears anything (bytes, an end, an error) is closed and forgotten. */
  const dropIdle = (c: UpstreamConnection) => {
    const list = idle.get(c.key);
    const i = list ? list.indexOf(c) : -1;
    if (i >= 0) list!.splice(i, 1);
    if (list && list.length === 0) idle.delete(c.key);
    c.destroy();
  };
  // Connections idle longer than POOL_IDLE_MS are closed by a sweep, not a timer each.
  const sweeper = setInterval(() => {
    const now = Date.now();
    for (const list of [...idle.values()]) for (const c of [...list]) if (now - c.idleSince > POOL_IDLE_MS) dropIdle(c);
  }, POOL_IDLE_MS / 2).unref();

  function dial(u: UpstreamAddress, key: string): Promise<UpstreamConnection> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      const ready = () => {
        socket.off('error', onError);
        resolve(new UpstreamConnection(socket, key, idleMs, dropIdle));
      };
      const socket =
        u.scheme === 'https'
          ? tls.connect({ host: u.address, port: u.port, servername: u.servername ?? undefined, secureContext, ALPNProtocols: ['http/1.1'] }, ready)
          : net.connect({ host: u.address, port: u.port }, ready);
      socket.once('error', onError);
    });
  }

  return {
    /** A kept-alive connection to `u` if one is idle, else a new one; it is the caller's (`owner`) until given back. */
    take(u: UpstreamAddress): UpstreamConnection | Promise<UpstreamConnection> {
      const key = keyOf(u);
      const list = idle.get(key);
      while (list && list.length) {
        const c = list.pop()!;
        if (list.length === 0) idle.delete(key);
        if (c.usable) return c;
        c.destroy();
      }
      return dial(u, key);
    },
    /** Gives a connection back after a complete exchange. */
    give(c: UpstreamConnection) {
      c.owner = null;
      const list = idle.get(c.key) ?? [];
      if (!c.usable || list.length >= MAX_IDLE_PER_UPSTREAM) {
        c.destroy();
        return;
      }
      c.reused = true;
      c.idleSince = Date.now();
      list.push(c);
      idle.set(c.key, list);
    },
    close() {
      clearInterval(sweeper);
      for (const list of idle.values()) for (const c of list) c.destroy();
      idle.clear();
    },
  };
}

export type UpstreamPool = ReturnType<typeof createUpstreamPool>;

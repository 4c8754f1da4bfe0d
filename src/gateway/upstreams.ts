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

/** An upstream connection, and whether it has carried a request before (a kept-alive one the upstream may have closed meanwhile). */
export interface Lease {
  socket: net.Socket;
  reused: boolean;
}

/** How long a kept-alive upstream connection waits for its next request before it is closed. */
const IDLE_MS = 30_000;
const MAX_IDLE_PER_UPSTREAM = 256;

/**
 * Kept-alive connections to upstreams, by the exact address, port and TLS name they were made
 * to: a request reuses one only where it would have dialled the same. Upstream certificates
 * are verified (the system store plus the operator's CA file) against the name.
 */
export function createUpstreamPool(ca: string[]) {
  const secureContext = tls.createSecureContext({ ca });
  const idle = new Map<string, net.Socket[]>();
  const keyOf = (u: UpstreamAddress) => `${u.scheme}\n${u.address}\n${u.port}\n${u.servername ?? ''}`;
  const forget = (key: string, socket: net.Socket) => {
    const list = idle.get(key);
    const i = list ? list.indexOf(socket) : -1;
    if (i >= 0) list!.splice(i, 1);
    if (list && list.length === 0) idle.delete(key);
  };

  function dial(u: UpstreamAddress): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const onError = (err: Error) => reject(err);
      let socket: net.Socket;
      if (u.scheme === 'https') {
        socket = tls.connect({ host: u.address, port: u.port, servername: u.servername ?? undefined, secureContext, ALPNProtocols: ['http/1.1'] }, () => {
          socket.off('error', onError);
          resolve(socket);
        });
      } else {
        socket = net.connect({ host: u.address, port: u.port }, () => {
          socket.off('error', onError);
          resolve(socket);
        });
      }
      socket.setNoDelay(true);
      socket.once('error', onError);
    });
  }

  return {
    /** A kept-alive connection to `u` if one is idle, else a new one. */
    async take(u: UpstreamAddress): Promise<Lease> {
      const key = keyOf(u);
      const list = idle.get(key);
      while (list && list.length) {
        const socket = list.pop()!;
        if (list.length === 0) idle.delete(key);
        const parked = socket as net.Socket & { parkedListeners?: () => void };
        parked.parkedListeners?.();
        if (!socket.destroyed && socket.readable && socket.writable) return { socket, reused: true };
        socket.destroy();
      }
      return { socket: await dial(u), reused: false };
    },
    /** Gives a connection back after a complete exchange; it waits idle, and is closed if the upstream speaks or hangs up meanwhile. */
    give(u: UpstreamAddress, socket: net.Socket) {
      const key = keyOf(u);
      const list = idle.get(key) ?? [];
      if (socket.destroyed || list.length >= MAX_IDLE_PER_UPSTREAM) {
        socket.destroy();
        return;
      }
      const drop = () => {
        forget(key, socket);
        socket.destroy();
      };
      // Nothing may arrive between exchanges: bytes now are a protocol error or a close.
      socket.on('data', drop);
      socket.on('end', drop);
      socket.on('error', drop);
      socket.setTimeout(IDLE_MS, drop);
      (socket as net.Socket & { parkedListeners?: () => void }).parkedListeners = () => {
        socket.off('data', drop);
        socket.off('end', drop);
        socket.off('error', drop);
        socket.setTimeout(0);
        (socket as net.Socket & { parkedListeners?: () => void }).parkedListeners = undefined;
      };
      list.push(socket);
      idle.set(key, list);
    },
    close() {
      for (const list of idle.values()) for (const s of list) s.destroy();
      idle.clear();
    },
  };
}

export type UpstreamPool = ReturnType<typeof createUpstreamPool>;

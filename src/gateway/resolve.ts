import dns from 'node:dns';
import net from 'node:net';
import { ttlCache } from '../ttl-cache.ts';

/** Resolves a name to every address it has, once; the gateway checks them all and dials one of exactly those. */
export type Resolve = (host: string) => Promise<string[]>;

/**
 * The gateway's resolver: the system's (getaddrinfo, /etc/hosts included) or, with
 * `servers` (SERVICE_GATEWAY_DNS), those DNS servers asked directly for A and AAAA records.
 */
export function createResolver(servers: string[]): Resolve {
  return remembered(lookupWith(servers));
}

/**
 * Answers are kept for a second: what is kept is what was resolved, and every use checks and
 * dials exactly it, so a name that changes its answer cannot slip another address in between.
 */
function remembered(resolve: Resolve, ttlMs = 1000): Resolve {
  const cache = ttlCache<string[]>(ttlMs);
  return (host) => cache(host, () => resolve(host));
}

function lookupWith(servers: string[]): Resolve {
  if (servers.length === 0) {
    return async (host) => {
      if (net.isIP(host)) return [host];
      const found = await dns.promises.lookup(host, { all: true, verbatim: true });
      return found.map((a) => a.address);
    };
  }
  const resolver = new dns.promises.Resolver({ timeout: 3000, tries: 2 });
  resolver.setServers(servers);
  const none = (err: NodeJS.ErrnoException) => {
    if (err.code === 'ENODATA' || err.code === 'ENOTFOUND') return [] as string[];
    throw err;
  };
  return async (host) => {
    if (net.isIP(host)) return [host];
    const [v4, v6] = await Promise.all([resolver.resolve4(host).catch(none), resolver.resolve6(host).catch(none)]);
    const all = [...v4, ...v6];
    if (all.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' });
    return all;
  };
}

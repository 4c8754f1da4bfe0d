import dns from 'node:dns';
import net from 'node:net';

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
function remembered(resolve: Resolve, ttlMs = 1000, max = 10_000): Resolve {
  const cache = new Map<string, { at: number; addresses: Promise<string[]> }>();
  return (host) => {
    const hit = cache.get(host);
    if (hit && Date.now() - hit.at < ttlMs) return hit.addresses;
    if (cache.size >= max) cache.clear();
    const addresses = resolve(host);
    cache.set(host, { at: Date.now(), addresses });
    addresses.catch(() => cache.delete(host));
    return addresses;
  };
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

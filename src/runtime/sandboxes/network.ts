/**
 * The host side of a sandbox's network, shared by the providers: /30 links carved from
 * SERVICE_SANDBOX_SUBNET, a network namespace joined to the host by a veth pair, and the
 * firewall that lets a sandbox reach its gateway listener and nothing else on the host.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { run } from './system.ts';
import type { SandboxNetwork } from './provider.ts';

const ipText = (n: number) => [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.');
const ipNumber = (text: string) => text.split('.').reduce((acc, o) => ((acc << 8) | Number(o)) >>> 0, 0);

/** A short, stable name part for host resources (interface names are at most 15 bytes). */
export function resourceTag(sandboxId: string): string {
  return crypto.createHash('sha256').update(sandboxId).digest('hex').slice(0, 10);
}

/** The host interface name a sandbox's link gets. */
export const hostInterfaceName = (sandboxId: string) => `chv${resourceTag(sandboxId)}`;

/** The /30 links of a subnet: link i has host end base+4i+1 and sandbox end base+4i+2. */
export function subnetLinks(subnet: { base: number; prefix: number }) {
  const count = 2 ** (32 - subnet.prefix) / 4;
  return {
    count,
    link(i: number, sandboxId: string): SandboxNetwork {
      const at = subnet.base + i * 4;
      return { hostAddress: ipText(at + 1), sandboxAddress: ipText(at + 2), hostInterface: hostInterfaceName(sandboxId) };
    },
    /** Which link a sandbox address belongs to, or null when it is outside the subnet. */
    indexOf(sandboxAddress: string): number | null {
      const off = ipNumber(sandboxAddress) - subnet.base;
      return off >= 0 && off < count * 4 ? Math.floor(off / 4) : null;
    },
  };
}

const linkExists = (name: string) => fs.existsSync(`/sys/class/net/${name}`);
const netnsExists = (name: string) => fs.existsSync(`/run/netns/${name}`) || fs.existsSync(`/var/run/netns/${name}`);

/**
 * What ensureVethNamespace and makePooledLink run, as one shell on the host (each process started
 * costs milliseconds; this was eight `ip` processes): the namespace is made where missing; inside
 * it (nsenter) IPv6 goes off, then one `ip -batch` makes the veth pair there, eth0 inside and the
 * host end moved out at once to the host's namespace (the service's own, by its pid), addresses
 * eth0 (unless no address is given: a pooled link is addressed when taken) and brings eth0 and
 * loopback up; on the host IPv6 goes off on the host end while it is still down (no link-local
 * address is ever made), then one `ip -batch` addresses it (likewise) and brings it up. Every
 * value is a positional parameter, never part of the script's text.
 */
const VETH_SCRIPT = `set -e
ip=$1 nsenter=$2 netns=$3 host_if=$4 host_addr=$5 sandbox_addr=$6 host_pid=$7
[ -e "/run/netns/$netns" ] || [ -e "/var/run/netns/$netns" ] || "$ip" netns add "$netns"
"$nsenter" "--net=/run/netns/$netns" /bin/sh -c '
set -e
echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6
echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6
printf "%s\\n" "link add eth0 type veth peer name $2 netns $4" \${3:+"addr add $3/30 dev eth0"} "link set eth0 up" "link set lo up" | "$1" -batch -
' sh "$ip" "$host_if" "$sandbox_addr" "$host_pid"
echo 1 > "/proc/sys/net/ipv6/conf/$host_if/disable_ipv6"
printf '%s\n' \${host_addr:+"addr add $host_addr/30 dev $host_if"} "link set $host_if up" | "$ip" -batch -
`;

/** Whether a namespace and its link's host end are both in place. */
export const vethInPlace = (netns: string, hostInterface: string) => netnsExists(netns) && linkExists(hostInterface);

/**
 * Makes (or completes) a namespace whose one interface, eth0, is the sandbox end of a veth
 * pair: loopback up, no default route, IPv6 off on both ends. Safe to call again: a link in
 * place is kept (its pair lives and dies with the namespace).
 */
export async function ensureVethNamespace(tools: { ip: string; nsenter: string }, netns: string, net: SandboxNetwork): Promise<void> {
  if (vethInPlace(netns, net.hostInterface)) return;
  await run('/bin/sh', ['-c', VETH_SCRIPT, 'sh', tools.ip, tools.nsenter, netns, net.hostInterface, net.hostAddress, net.sandboxAddress, String(process.pid)]);
}

/**
 * A link made ahead of demand (the local provider's pool): a namespace and veth pair as
 * ensureVethNamespace makes them, without addresses, under names of its own, and its firewall
 * (which names the host end by its index and the address by the interface, so both hold when
 * the link is renamed and addressed as it is taken). `link` is at most 15 bytes.
 */
export interface PooledLink {
  netns: string;
  link: string;
}

export async function makePooledLink(tools: { ip: string; nsenter: string; nft: string }, item: PooledLink, gatewayPort: number): Promise<void> {
  await run('/bin/sh', ['-c', VETH_SCRIPT, 'sh', tools.ip, tools.nsenter, item.netns, item.link, '', '', String(process.pid)]);
  await applyFirewall(tools.nft, tableName(item.link), { in: `iif "${item.link}"`, out: `oif "${item.link}"`, toHost: 'fib daddr . iif type local' }, gatewayPort);
}

/**
 * Gives a pooled link to a sandbox: the host end takes the sandbox's interface name (it must be
 * down to be renamed) and its address, eth0 inside takes the sandbox's; two `ip` processes at once.
 */
export async function claimPooledLink(ip: string, item: PooledLink, net: SandboxNetwork): Promise<void> {
  const i = net.hostInterface;
  await Promise.all([
    run(ip, ['-batch', '-'], { input: `link set dev ${item.link} down\nlink set dev ${item.link} name ${i}\naddr add ${net.hostAddress}/30 dev ${i}\nlink set dev ${i} up\n` }),
    run(ip, ['-n', item.netns, 'addr', 'add', `${net.sandboxAddress}/30`, 'dev', 'eth0']),
  ]);
}

/** Removes a pooled link wherever it is (a namespace, a host end under either name, its firewall). */
export async function removePooledLink(tools: { ip: string; nft: string }, item: PooledLink, hostInterface?: string): Promise<void> {
  await removeVethNamespace(tools.ip, item.netns, item.link);
  if (hostInterface && linkExists(hostInterface)) await run(tools.ip, ['link', 'del', hostInterface], { allowFail: true });
  await removeFirewall(tools.nft, item.link);
}

/** Whether a pooled link is whole: its namespace, its host end (not yet renamed) and its firewall. */
export async function pooledLinkWhole(nft: string, item: PooledLink): Promise<boolean> {
  return netnsExists(item.netns) && linkExists(item.link) && (await firewallExists(nft, item.link));
}

/** Removes the namespace (its veth pair goes with it) and a host end left behind. */
export async function removeVethNamespace(ip: string, netns: string, hostInterface: string): Promise<void> {
  if (netnsExists(netns)) await run(ip, ['netns', 'del', netns], { allowFail: true });
  if (linkExists(hostInterface)) await run(ip, ['link', 'del', hostInterface], { allowFail: true });
}

const tableName = (hostInterface: string) => `crewhouse_${hostInterface}`;

/**
 * One nftables table per sandbox link: what arrives on its host interface may reach only
 * the gateway port on the link's host address (everything else is refused at once), and
 * nothing is forwarded to or from it. Replaces an earlier table of the same link.
 */
export async function ensureFirewall(nft: string, net: SandboxNetwork, gatewayPort: number): Promise<void> {
  const i = net.hostInterface;
  await applyFirewall(nft, tableName(i), { in: `iifname "${i}"`, out: `oifname "${i}"`, toHost: `ip daddr ${net.hostAddress}` }, gatewayPort);
}

/**
 * The rules of a link's table, however the link is named in them: `match.in`/`match.out` match
 * packets arriving on or leaving by it, `match.toHost` a packet for its host end's address.
 */
async function applyFirewall(nft: string, t: string, match: { in: string; out: string; toHost: string }, gatewayPort: number): Promise<void> {
  const rules = `table inet ${t} {}
delete table inet ${t}
table inet ${t} {
  chain input {
    type filter hook input priority -10; policy accept;
    ${match.in} ct state established,related accept
    ${match.in} ${match.toHost} tcp dport ${gatewayPort} accept
    ${match.in} meta l4proto tcp reject with tcp reset
    ${match.in} reject
  }
  chain forward {
    type filter hook forward priority -10; policy accept;
    ${match.in} drop
    ${match.out} drop
  }
}
`;
  await run(nft, ['-f', '-'], { input: rules });
}

export async function removeFirewall(nft: string, hostInterface: string): Promise<void> {
  await run(nft, ['delete', 'table', 'inet', tableName(hostInterface)], { allowFail: true });
}

/** Whether a link's firewall table is in place. */
export async function firewallExists(nft: string, hostInterface: string): Promise<boolean> {
  return (await run(nft, ['list', 'table', 'inet', tableName(hostInterface)], { allowFail: true })).code === 0;
}

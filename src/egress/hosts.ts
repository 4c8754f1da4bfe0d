import net from 'node:net';

/**
 * Where a host or address points. Anything but `public` is internal: a destination naming
 * it must be `dev_only`, and the gateway refuses to connect to it otherwise.
 */
export type HostKind = 'public' | 'loopback' | 'private' | 'link_local' | 'cgnat' | 'unique_local' | 'unspecified' | 'reserved';

export const isInternalKind = (kind: HostKind) => kind !== 'public';

export type ParsedHost =
  | { ok: true; host: string; port: number | null; wildcard: boolean; ip: 4 | 6 | null; kind: HostKind }
  | { ok: false; reason: string };

/** An address as 4 or 16 bytes. */
type Bytes = number[];

interface Range {
  bytes: Bytes;
  bits: number;
  kind: HostKind;
}

/** IPv4 text (dotted decimal only; callers normalize other spellings first) to bytes. */
function v4Bytes(text: string): Bytes | null {
  if (!net.isIPv4(text)) return null;
  return text.split('.').map(Number);
}

/** IPv6 text (any valid spelling, including an embedded dotted quad) to 16 bytes. */
function v6Bytes(text: string): Bytes | null {
  let addr = text.replace(/%.*$/, '');
  if (!net.isIPv6(addr)) return null;
  // An embedded dotted quad (::ffff:127.0.0.1) becomes its two hex groups.
  const quad = /(\d+\.\d+\.\d+\.\d+)$/.exec(addr);
  if (quad) {
    const b = v4Bytes(quad[1]);
    if (!b) return null;
    addr = addr.slice(0, quad.index) + `${((b[0] << 8) | b[1]).toString(16)}:${((b[2] << 8) | b[3]).toString(16)}`;
  }
  const [left, right] = addr.includes('::') ? addr.split('::') : [addr, null];
  const l = left ? left.split(':') : [];
  const r = right ? right.split(':') : [];
  const groups = right === null ? l : [...l, ...Array(8 - l.length - r.length).fill('0'), ...r];
  if (groups.length !== 8) return null;
  return groups.flatMap((g) => {
    const n = parseInt(g, 16);
    return [(n >> 8) & 0xff, n & 0xff];
  });
}

function inRange(bytes: Bytes, range: Range): boolean {
  if (bytes.length !== range.bytes.length) return false;
  let bits = range.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if ((bytes[i] & mask) !== (range.bytes[i] & mask)) return false;
  }
  return true;
}

const r = (cidr: string, kind: HostKind): Range => {
  const [addr, bits] = cidr.split('/');
  return { bytes: (addr.includes(':') ? v6Bytes(addr) : v4Bytes(addr))!, bits: Number(bits), kind };
};

const V4_RANGES: Range[] = [
  r('0.0.0.0/8', 'unspecified'),
  r('127.0.0.0/8', 'loopback'),
  r('10.0.0.0/8', 'private'),
  r('172.16.0.0/12', 'private'),
  r('192.168.0.0/16', 'private'),
  r('169.254.0.0/16', 'link_local'),
  r('100.64.0.0/10', 'cgnat'),
  r('192.0.0.0/24', 'reserved'),
  r('192.0.2.0/24', 'reserved'),
  r('198.18.0.0/15', 'reserved'),
  r('198.51.100.0/24', 'reserved'),
  r('203.0.113.0/24', 'reserved'),
  r('224.0.0.0/4', 'reserved'),
  r('240.0.0.0/4', 'reserved'),
];

const V6_RANGES: Range[] = [
  r('::/128', 'unspecified'),
  r('::1/128', 'loopback'),
  r('fe80::/10', 'link_local'),
  r('fc00::/7', 'unique_local'),
  r('fec0::/10', 'private'),
  r('ff00::/8', 'reserved'),
  r('2001:db8::/32', 'reserved'),
  r('100::/64', 'reserved'),
];

/** The CIDRs every policy denies by default: every internal range above, IPv4 and IPv6. */
export const INTERNAL_CIDRS: string[] = [
  '0.0.0.0/8', '127.0.0.0/8', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '100.64.0.0/10',
  '192.0.0.0/24', '192.0.2.0/24', '198.18.0.0/15', '198.51.100.0/24', '203.0.113.0/24', '224.0.0.0/4', '240.0.0.0/4',
  '::/128', '::1/128', 'fe80::/10', 'fc00::/7', 'fec0::/10', 'ff00::/8', '2001:db8::/32', '100::/64',
];

function classifyV4(bytes: Bytes): HostKind {
  return V4_RANGES.find((range) => inRange(bytes, range))?.kind ?? 'public';
}

function classifyV6(bytes: Bytes): HostKind {
  // IPv4 carried inside IPv6 reaches the IPv4 address: IPv4-mapped (::ffff:0:0/96),
  // IPv4-compatible (::/96), NAT64 (64:ff9b::/96) and 6to4 (2002::/16).
  if (bytes.slice(0, 10).every((b) => b === 0) && ((bytes[10] === 0xff && bytes[11] === 0xff) || (bytes[10] === 0 && bytes[11] === 0))) {
    if (bytes[10] === 0 && bytes.slice(12, 15).every((b) => b === 0) && bytes[15] <= 1) return bytes[15] === 1 ? 'loopback' : 'unspecified';
    return classifyV4(bytes.slice(12));
  }
  if (inRange(bytes, r('64:ff9b::/96', 'public'))) return classifyV4(bytes.slice(12));
  if (bytes[0] === 0x20 && bytes[1] === 0x02) return classifyV4(bytes.slice(2, 6));
  return V6_RANGES.find((range) => inRange(bytes, range))?.kind ?? 'public';
}

/** Classifies an IP address (IPv4 dotted decimal or any IPv6 spelling); the gateway calls it on every resolved address. */
export function classifyAddress(ip: string): HostKind | null {
  const v4 = v4Bytes(ip);
  if (v4) return classifyV4(v4);
  const v6 = v6Bytes(ip.replace(/^\[|\]$/g, ''));
  return v6 ? classifyV6(v6) : null;
}

/** Names that only resolve to this machine or an internal network. */
function classifyName(name: string): HostKind {
  if (name === 'localhost' || name.endsWith('.localhost') || name === 'localhost.localdomain') return 'loopback';
  // A single label resolves through the resolver's search domains: an internal host.
  if (!name.includes('.')) return 'private';
  if (/\.(local|internal|lan|intranet|home\.arpa)$/.test(name)) return 'private';
  return 'public';
}

const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/**
 * Parses a destination host: a DNS name (optionally `*.` for any subdomain), an IPv4 address
 * in any spelling a URL parser accepts (`127.1`, `0x7f.0.0.1`, `2130706433`, `017700000001`),
 * or an IPv6 address (bare or in brackets), each with an optional `:port`; trailing dots and
 * case do not matter. Answers the normal form and what it points at.
 */
export function parseHost(input: string): ParsedHost {
  let text = input.trim().toLowerCase();
  if (text === '' || text.length > 300) return { ok: false, reason: 'must be a host name or IP address' };
  let port: number | null = null;
  let v6: string | null = null;
  const bracket = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(text);
  if (bracket) {
    v6 = bracket[1];
    if (bracket[2] !== undefined) port = Number(bracket[2]);
  } else if ((text.match(/:/g) ?? []).length >= 2) {
    v6 = text;
  } else {
    const m = /^(.*):(\d{1,5})$/.exec(text);
    if (m) {
      text = m[1];
      port = Number(m[2]);
    }
  }
  if (port !== null && (port < 1 || port > 65535)) return { ok: false, reason: 'port must be 1 to 65535' };
  if (v6 !== null) {
    const bytes = v6Bytes(v6);
    if (!bytes) return { ok: false, reason: 'is not a valid IPv6 address' };
    const normal = new URL(`http://[${v6.replace(/%.*$/, '')}]/`).hostname.slice(1, -1);
    return { ok: true, host: normal, port, wildcard: false, ip: 6, kind: classifyV6(bytes) };
  }
  text = text.replace(/\.+$/, '');
  let wildcard = false;
  if (text.startsWith('*.')) {
    wildcard = true;
    text = text.slice(2);
  }
  if (text === '' || text.includes('*')) return { ok: false, reason: 'a wildcard may only be a leading "*."' };
  // Only what a host can hold: no user info, path, query or spaces for the URL parser to skip.
  if (!/^[a-z0-9._\-\u0080-\uffff]+$/.test(text)) return { ok: false, reason: 'is not a valid host name or IP address' };
  let normal: string;
  try {
    normal = new URL(`http://${text}/`).hostname;
  } catch {
    return { ok: false, reason: 'is not a valid host name or IP address' };
  }
  if (new URL(`http://${text}/`).port !== '' || normal === '') return { ok: false, reason: 'is not a valid host name or IP address' };
  if (net.isIPv4(normal)) {
    if (wildcard) return { ok: false, reason: 'a wildcard needs a DNS name, not an address' };
    return { ok: true, host: normal, port, wildcard: false, ip: 4, kind: classifyV4(v4Bytes(normal)!) };
  }
  normal = normal.replace(/\.+$/, '');
  if (normal.length > 253 || !normal.split('.').every((label) => LABEL.test(label))) return { ok: false, reason: 'is not a valid host name' };
  return { ok: true, host: (wildcard ? '*.' : '') + normal, port, wildcard, ip: null, kind: classifyName(normal) };
}

/** A CIDR in normal form, or null: `10.0.0.0/8`, `fd00::/8`; a bare address is a /32 or /128. */
export function parseCidr(text: string): { cidr: string; family: 4 | 6; bytes: Bytes; bits: number } | null {
  const m = /^([^/]+)(?:\/(\d{1,3}))?$/.exec(text.trim().toLowerCase());
  if (!m) return null;
  const v4 = v4Bytes(m[1]);
  const v6 = v4 ? null : v6Bytes(m[1]);
  const bytes = v4 ?? v6;
  if (!bytes) return null;
  const max = bytes.length * 8;
  const bits = m[2] === undefined ? max : Number(m[2]);
  if (bits > max) return null;
  const masked = bytes.map((b, i) => {
    const keep = Math.max(0, Math.min(8, bits - i * 8));
    return b & ((0xff << (8 - keep)) & 0xff);
  });
  const addr = v4 ? masked.join('.') : new URL(`http://[${masked.reduce<string[]>((g, b, i) => (i % 2 ? g : [...g, ((b << 8) | masked[i + 1]).toString(16)]), []).join(':')}]/`).hostname.slice(1, -1);
  return { cidr: `${addr}/${bits}`, family: v4 ? 4 : 6, bytes: masked, bits };
}

/** Whether an address falls inside a CIDR (an IPv4-mapped IPv6 address is also checked as IPv4). */
export function cidrContains(cidr: string, ip: string): boolean {
  const range = parseCidr(cidr);
  if (!range) return false;
  const v4 = v4Bytes(ip);
  const v6 = v4 ? null : v6Bytes(ip.replace(/^\[|\]$/g, ''));
  const asRange: Range = { bytes: range.bytes, bits: range.bits, kind: 'reserved' };
  if (v4) return inRange(v4, asRange);
  if (!v6) return false;
  if (inRange(v6, asRange)) return true;
  const mapped = v6.slice(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff;
  return mapped && inRange(v6.slice(12), asRange);
}

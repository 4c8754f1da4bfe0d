/**
 * Whether an Accept header asks for `type` over JSON: its quality is above zero and at least
 * that of application/json (or of the `application/*` and `*\/*` ranges that cover JSON).
 * A client that names both prefers the one with the higher q (RFC 9110, 12.5.1); a tie goes
 * to `type`, the one it named on purpose.
 */
export function prefers(accept: string | undefined, type: string): boolean {
  let wanted = 0;
  let json = 0;
  for (const part of (accept ?? '').split(',')) {
    const [range = '', ...params] = part.split(';').map((s) => s.trim().toLowerCase());
    const q = params.map((p) => /^q=([01](?:\.\d{0,3})?)$/.exec(p)).find(Boolean);
    const quality = q ? Number(q[1]) : 1;
    if (range === type) wanted = Math.max(wanted, quality);
    if (range === 'application/json' || range === 'application/*' || range === '*/*') json = Math.max(json, quality);
  }
  return wanted > 0 && wanted >= json;
}

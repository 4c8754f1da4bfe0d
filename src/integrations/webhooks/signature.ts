import crypto from 'node:crypto';

/**
 * Whether `hex` is the HMAC-SHA256 of the raw body with the secret, compared in constant time
 * (every surface that signs its webhooks does it this way; only the header and its prefix differ).
 */
export function hmacSha256Matches(secret: string, raw: Buffer, hex: string): boolean {
  if (!/^[0-9a-f]{64}$/i.test(hex)) return false;
  const expected = crypto.createHmac('sha256', secret).update(raw).digest();
  return crypto.timingSafeEqual(expected, Buffer.from(hex, 'hex'));
}

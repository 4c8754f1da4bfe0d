import tls from 'node:tls';
import type { Db } from '../db/database.ts';
import type { Cipher } from '../secrets/cipher.ts';
import { issuerOf, mintCertificateAuthority, mintLeaf, type KeyPair } from './certificates.ts';

const CA_AAD = 'crewhouse-gateway-ca';
const LEAF_CACHE_SIZE = 1000;
// Leaves live 30 days; one is minted again a week before that, so a cached leaf is never stale.
const LEAF_VALID_DAYS = 30;
const LEAF_REUSE_MS = 23 * 86_400_000;

/**
 * The deployment CA: made on the first start of any gateway (or of whatever asks for its
 * certificate first), its private key sealed with the secret key like a secret. Two first
 * starts at once agree: the first insert wins and both read it back.
 */
export async function loadDeploymentCa(db: Db, cipher: Cipher): Promise<KeyPair> {
  const read = () => db.selectFrom('gateway_ca').select(['certificate', 'key_sealed', 'key_id']).where('id', '=', 'deployment').executeTakeFirst();
  let row = await read();
  if (!row) {
    const made = mintCertificateAuthority('Crewhouse deployment CA');
    const sealed = cipher.seal(made.keyPem, CA_AAD);
    await db
      .insertInto('gateway_ca')
      .values({ id: 'deployment', certificate: made.certPem, key_sealed: sealed.blob, key_id: sealed.keyId })
      .onConflict((oc) => oc.column('id').doNothing())
      .execute();
    row = (await read())!;
  }
  return { certPem: row.certificate, keyPem: cipher.open({ keyId: row.key_id, blob: row.key_sealed }, CA_AAD) };
}

/** The PEM certificate every sandbox trusts (for the sandbox provider to place in its trust store). */
export async function deploymentCaCertificate(db: Db, cipher: Cipher): Promise<string> {
  return (await loadDeploymentCa(db, cipher)).certPem;
}

/** Issues leaf certificates per host under a CA, as TLS contexts; the most recently used are kept in memory. */
export function createLeafIssuer(ca: KeyPair) {
  const issuer = issuerOf(ca);
  const cache = new Map<string, { context: tls.SecureContext; at: number }>();
  return {
    caPem: ca.certPem,
    contextFor(host: string): tls.SecureContext {
      const hit = cache.get(host);
      if (hit && Date.now() - hit.at < LEAF_REUSE_MS) {
        // Map order is insertion order: re-inserting marks it most recently used.
        cache.delete(host);
        cache.set(host, hit);
        return hit.context;
      }
      const pair = mintLeaf(issuer, host, LEAF_VALID_DAYS);
      const context = tls.createSecureContext({ cert: pair.certPem + ca.certPem, key: pair.keyPem });
      cache.delete(host);
      cache.set(host, { context, at: Date.now() });
      if (cache.size > LEAF_CACHE_SIZE) cache.delete(cache.keys().next().value!);
      return context;
    },
  };
}

export type LeafIssuer = ReturnType<typeof createLeafIssuer>;

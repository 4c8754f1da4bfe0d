import crypto from 'node:crypto';
import type { Config } from '../config.ts';
import { decodeKey, keyFilePath, readKeyFile } from '../secrets/cipher.ts';

const LABEL = 'crewhouse model proxy admin v1';

/**
 * The service credential of the model proxy's admin API, which the console sends as a bearer
 * token. SERVICE_MODEL_PROXY_TOKEN when set; otherwise derived (HMAC-SHA256) from the secret
 * key both processes already share: SERVICE_SECRET_KEY, or the current key of the key file in
 * SERVICE_DATA_DIR. Null when there is neither (an in-memory data directory without a key):
 * then the admin API is off and the console treats the proxy as not configured.
 */
export function serviceCredential(config: Pick<Config, 'modelProxyToken' | 'secretKey' | 'dataDir'>): string | null {
  if (config.modelProxyToken) return config.modelProxyToken;
  let key: Buffer | null = null;
  if (config.secretKey) key = decodeKey(config.secretKey, 'SERVICE_SECRET_KEY');
  else if (config.dataDir !== ':memory:') {
    const file = readKeyFile(keyFilePath(config.dataDir));
    if (file) key = decodeKey(file.keys[file.current], 'the key file');
  }
  if (!key) return null;
  return 'chp_' + crypto.createHmac('sha256', key).update(LABEL).digest('base64url');
}

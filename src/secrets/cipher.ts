import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { Config } from '../config.ts';

/** A value as stored: which key encrypted it, and `v1.` + base64(iv | tag | ciphertext). */
export interface Sealed {
  keyId: string;
  blob: string;
}

export class CipherError extends Error {}

const IV_BYTES = 12;
const TAG_BYTES = 16;
const FORMAT = 'v1.';
export const KEY_FILE_NAME = 'secret-keys.json';

/** The id of a key: derived from the key itself, so the same key always has the same id wherever it is loaded from. */
export function keyIdOf(key: Buffer): string {
  return crypto.createHash('sha256').update('crewhouse-secret-key:').update(key).digest('hex').slice(0, 16);
}

/** Decodes a base64 key of exactly 32 bytes, or throws naming where it came from. */
export function decodeKey(b64: string, where: string): Buffer {
  const trimmed = b64.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(trimmed)) throw new CipherError(`${where} is not base64`);
  const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
  if (key.length !== 32) throw new CipherError(`${where} must be base64 of 32 bytes, got ${key.length} bytes`);
  return key;
}

export interface KeyFile {
  current: string;
  keys: Record<string, string>;
}

export function keyFilePath(dataDir: string): string {
  return path.join(dataDir, KEY_FILE_NAME);
}

/** Reads the key file, or null when there is none. */
export function readKeyFile(file: string): KeyFile | null {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw new CipherError(`cannot read the key file ${file}: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new CipherError(`the key file ${file} is not JSON`);
  }
  const p = parsed as KeyFile;
  if (!p || typeof p.current !== 'string' || typeof p.keys !== 'object' || p.keys === null || typeof p.keys[p.current] !== 'string') {
    throw new CipherError(`the key file ${file} is malformed: it needs "current" and "keys" holding the current key`);
  }
  for (const [id, b64] of Object.entries(p.keys)) {
    if (keyIdOf(decodeKey(String(b64), `key ${id} in ${file}`)) !== id) throw new CipherError(`key ${id} in ${file} does not match its id`);
  }
  return p;
}

/** Writes the key file atomically with mode 0600 (the directory is created 0700 when missing). */
export function writeKeyFile(file: string, content: KeyFile): void {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, JSON.stringify(content, null, 2) + '\n', { mode: 0o600 });
  fs.chmodSync(tmp, 0o600);
  fs.renameSync(tmp, file);
}

/** A fresh random key as a key file entry. */
export function newKey(): { id: string; b64: string } {
  const key = crypto.randomBytes(32);
  return { id: keyIdOf(key), b64: key.toString('base64') };
}

/**
 * AES-256-GCM with a key ring: every value is sealed under the current key and carries that
 * key's id, and any key of the ring opens what it sealed, so keys can be rotated
 * (`crewhouse secrets rotate-key`). The associated data binds a value to its name: a sealed
 * value copied to another name does not open.
 */
export function createCipher(keys: Map<string, Buffer>, currentId: string, source: string): Cipher {
  const current = keys.get(currentId);
  if (!current) throw new CipherError('the current key is not in the key ring');
  return {
    /** Where the current key came from: `env`, `file` or `ephemeral` (for logs; never the key). */
    source,
    keyId: currentId,
    keyIds: () => [...keys.keys()],
    /** The same ring with `key` added and made current (for rotation). */
    withCurrent(key: Buffer, newSource: string): Cipher {
      const ring = new Map(keys);
      ring.set(keyIdOf(key), key);
      return createCipher(ring, keyIdOf(key), newSource);
    },
    has: (keyId: string) => keys.has(keyId),
    seal(plaintext: string, aad: string): Sealed {
      const iv = crypto.randomBytes(IV_BYTES);
      const c = crypto.createCipheriv('aes-256-gcm', current, iv);
      c.setAAD(Buffer.from(aad, 'utf8'));
      const body = Buffer.concat([c.update(plaintext, 'utf8'), c.final()]);
      return { keyId: currentId, blob: FORMAT + Buffer.concat([iv, c.getAuthTag(), body]).toString('base64') };
    },
    open(sealed: Sealed, aad: string): string {
      const key = keys.get(sealed.keyId);
      if (!key) throw new CipherError(`a secret is sealed under key ${sealed.keyId}, which is not loaded (set SERVICE_SECRET_KEY_PREVIOUS or restore the key file)`);
      if (!sealed.blob.startsWith(FORMAT)) throw new CipherError('a stored secret has an unknown format');
      const raw = Buffer.from(sealed.blob.slice(FORMAT.length), 'base64');
      if (raw.length < IV_BYTES + TAG_BYTES) throw new CipherError('a stored secret is truncated');
      const d = crypto.createDecipheriv('aes-256-gcm', key, raw.subarray(0, IV_BYTES));
      d.setAAD(Buffer.from(aad, 'utf8'));
      d.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      try {
        return Buffer.concat([d.update(raw.subarray(IV_BYTES + TAG_BYTES)), d.final()]).toString('utf8');
      } catch {
        throw new CipherError('a stored secret failed authentication: it was altered or sealed under another name');
      }
    },
  };
}

export interface Cipher {
  source: string;
  keyId: string;
  keyIds(): string[];
  withCurrent(key: Buffer, newSource: string): Cipher;
  has(keyId: string): boolean;
  seal(plaintext: string, aad: string): Sealed;
  open(sealed: Sealed, aad: string): string;
}

/**
 * The cipher of this process. The current key is SERVICE_SECRET_KEY when set; otherwise the
 * key file `<SERVICE_DATA_DIR>/secret-keys.json`, created (mode 0600) on first start. Keys of
 * SERVICE_SECRET_KEY_PREVIOUS and every key in the key file also open older values. With the
 * in-memory data directory and no key, the key is ephemeral (nothing outlives the process).
 */
export function loadCipher(config: Pick<Config, 'secretKey' | 'secretKeyPrevious' | 'dataDir'>): Cipher {
  const keys = new Map<string, Buffer>();
  const add = (key: Buffer) => {
    const id = keyIdOf(key);
    keys.set(id, key);
    return id;
  };
  const inMemory = config.dataDir === ':memory:';
  const file = inMemory ? null : keyFilePath(config.dataDir);
  const fromFile = file ? readKeyFile(file) : null;
  if (fromFile) for (const b64 of Object.values(fromFile.keys)) add(decodeKey(b64, 'the key file'));
  for (const b64 of config.secretKeyPrevious) add(decodeKey(b64, 'SERVICE_SECRET_KEY_PREVIOUS'));

  if (config.secretKey) return createCipher(keys, add(decodeKey(config.secretKey, 'SERVICE_SECRET_KEY')), 'env');
  if (fromFile) return createCipher(keys, fromFile.current, 'file');
  if (!file) return createCipher(keys, add(crypto.randomBytes(32)), 'ephemeral');
  const fresh = newKey();
  writeKeyFile(file, { current: fresh.id, keys: { [fresh.id]: fresh.b64 } });
  return createCipher(keys, add(Buffer.from(fresh.b64, 'base64')), 'file');
}

import { lockKey } from '../db/conditional.ts';
import type { Db } from '../db/database.ts';
import type { Config } from '../config.ts';
import { CipherError, keyFilePath, loadCipher, newKey, readKeyFile, writeKeyFile, type Cipher } from './cipher.ts';
import { secretAad } from './secrets.service.ts';

/** Opens every value sealed under another key and seals it under the cipher's current key, in one transaction. */
export async function resealAll(db: Db, cipher: Cipher): Promise<{ resealed: number; total: number }> {
  return db.transaction().execute(async (trx) => {
    await lockKey(trx, 'secrets:rotate');
    const rows = await trx.selectFrom('secrets').select(['name', 'value_sealed', 'key_id']).where('key_id', 'is not', null).forUpdate().execute();
    let resealed = 0;
    for (const row of rows) {
      if (row.key_id === cipher.keyId || row.value_sealed === null || row.key_id === null) continue;
      const plain = cipher.open({ keyId: row.key_id, blob: row.value_sealed }, secretAad(row.name));
      const sealed = cipher.seal(plain, secretAad(row.name));
      await trx.updateTable('secrets').set({ value_sealed: sealed.blob, key_id: sealed.keyId }).where('name', '=', row.name).execute();
      resealed++;
    }
    return { resealed, total: rows.length };
  });
}

/**
 * `crewhouse secrets rotate-key`. With SERVICE_SECRET_KEY set, that variable is the new key
 * and the old ones come from SERVICE_SECRET_KEY_PREVIOUS (or the key file): every value is
 * re-encrypted under SERVICE_SECRET_KEY. Without it, a new key joins the key file as
 * current and every secret is re-encrypted. Older keys stay in the file: other modules seal
 * their own values with the same cipher (chat API keys), and those must keep opening.
 * Restart running processes afterwards so they seal under the new key.
 */
export async function rotateSecretKey(db: Db, config: Pick<Config, 'secretKey' | 'secretKeyPrevious' | 'dataDir'>) {
  if (config.dataDir === ':memory:' && !config.secretKey) throw new CipherError('an in-memory service has an ephemeral key; there is nothing to rotate');
  const before = loadCipher(config);
  if (config.secretKey) return { keyId: before.keyId, source: before.source, ...(await resealAll(db, before)) };

  const file = keyFilePath(config.dataDir);
  const current = readKeyFile(file);
  if (!current) throw new CipherError(`no key file at ${file}`);
  const fresh = newKey();
  // The new key joins the file before any value uses it, so a crash midway loses nothing.
  const all = { ...current.keys, [fresh.id]: fresh.b64 };
  writeKeyFile(file, { current: fresh.id, keys: all });
  const after = before.withCurrent(Buffer.from(fresh.b64, 'base64'), 'file');
  return { keyId: fresh.id, source: after.source, ...(await resealAll(db, after)) };
}

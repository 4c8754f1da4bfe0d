import { systemActor } from '../audit/audit.ts';
import { ConfigError, type Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { createChatServices } from './app.ts';
import { loadDemoOrganization } from './demo.ts';
import { toDomainError } from '../errors/errors.ts';
import { ChatError } from './http/errors.ts';
import { realmByStringId } from './users/users.store.ts';

const DEFAULT_SUBDOMAIN = 'chat';

async function readStdinLine(stdin: NodeJS.ReadableStream): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of stdin) chunks.push(Buffer.isBuffer(c) ? c : Buffer.from(String(c)));
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0];
}

/** A chat failure a person acts on: a ConfigError (one line, exit 2) rather than a stack. */
async function plainly<T>(work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (err) {
    if (err instanceof ChatError) throw new ConfigError(err.message);
    const domain = toDomainError(err);
    // Another process created the same organization a moment earlier: the database said so.
    if (domain) throw new ConfigError(domain.message, { cause: err });
    throw err;
  }
}

export interface ChatInitOptions {
  email: string;
  name: string;
  org?: string;
  subdomain?: string;
  url?: string;
  /** Standard input to read the owner's password from (its first line), or none. */
  passwordFrom?: NodeJS.ReadableStream;
}

/** `crewhouse chat init`: creates a chat organization and its owner; returns what to print. */
export function chatInit(config: Config, db: Db, o: ChatInitOptions): Promise<string> {
  return plainly(async () => {
    const services = createChatServices({ db, cipher: loadCipher(config) });
    const password = o.passwordFrom ? await readStdinLine(o.passwordFrom) : null;
    if (password !== null && password.length < 6) throw new ConfigError('the password must be at least 6 characters');
    const subdomain = o.subdomain ?? DEFAULT_SUBDOMAIN;
    if (o.subdomain === undefined && (await realmByStringId(db, subdomain))) {
      throw new ConfigError(`a chat organization already exists on the default subdomain '${subdomain}'; to create another, give it its own with --subdomain S`);
    }
    const { realm, owner, apiKey } = await services.realms.createRealm(systemActor('cli'), {
      stringId: subdomain,
      name: o.org ?? subdomain,
      url: o.url ?? `http://localhost:${config.chatPort}`,
      ownerEmail: o.email,
      ownerName: o.name,
      ownerPassword: password,
    });
    return `organization: ${realm.name} (${realm.url})\nemail: ${owner.delivery_email}\napi_key: ${apiKey}\n`;
  });
}

/** `crewhouse chat demo`: loads a demo chat organization; returns what to print. */
export function chatDemo(config: Config, db: Db, o: { subdomain?: string; url?: string }): Promise<string> {
  return plainly(async () => {
    const services = createChatServices({ db, cipher: loadCipher(config) });
    const { realm, ownerEmail, apiKey } = await loadDemoOrganization(db, services, systemActor('cli'), { subdomain: o.subdomain ?? 'demo', url: o.url ?? `http://localhost:${config.chatPort}` });
    return `demo organization: ${realm.name} (${realm.url})\nemail: ${ownerEmail}\napi_key: ${apiKey}\n`;
  });
}

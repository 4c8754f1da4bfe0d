import { parseArgs } from 'node:util';
import { systemActor } from '../audit/audit.ts';
import { ConfigError, type Config } from '../config.ts';
import type { Db } from '../db/database.ts';
import { loadCipher } from '../secrets/cipher.ts';
import { createChatServices } from './app.ts';
import { loadDemoOrganization } from './demo.ts';
import { toDomainError } from '../errors/errors.ts';
import { ChatError } from './http/errors.ts';
import { realmByStringId } from './users/users.store.ts';

export const CHAT_USAGE = `  chat init --email E --name N [--org NAME] [--subdomain S] [--url U] [--password-stdin]
                                      create a chat organization and its owner; prints the owner's email and API key
  chat demo [--subdomain demo] [--url U]  load a demo chat organization; prints its owner's email and API key`;

const DEFAULT_SUBDOMAIN = 'chat';

async function readStdinLine(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of process.stdin) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8').split(/\r?\n/)[0];
}

/** `crewhouse chat …`: returns what to print. */
export async function runChatCommand(args: string[], config: Config, db: Db): Promise<string> {
  const [sub, ...rest] = args;
  const services = createChatServices({ db, cipher: loadCipher(config) });
  const defaultUrl = `http://localhost:${config.chatPort}`;
  try {
    if (sub === 'init') {
      const { values } = parseArgs({
        args: rest,
        options: { email: { type: 'string' }, name: { type: 'string' }, org: { type: 'string' }, subdomain: { type: 'string' }, url: { type: 'string' }, 'password-stdin': { type: 'boolean' } },
      });
      if (!values.email || !values.name) throw new ConfigError(`usage:\n${CHAT_USAGE}`);
      const password = values['password-stdin'] ? await readStdinLine() : null;
      if (password !== null && password.length < 6) throw new ConfigError('the password must be at least 6 characters');
      const subdomain = values.subdomain ?? DEFAULT_SUBDOMAIN;
      if (values.subdomain === undefined && (await realmByStringId(db, subdomain))) {
        throw new ConfigError(`a chat organization already exists on the default subdomain '${subdomain}'; to create another, give it its own with --subdomain S`);
      }
      const { realm, owner, apiKey } = await services.realms.createRealm(systemActor('cli'), {
        stringId: subdomain,
        name: values.org ?? subdomain,
        url: values.url ?? defaultUrl,
        ownerEmail: values.email,
        ownerName: values.name,
        ownerPassword: password,
      });
      return `organization: ${realm.name} (${realm.url})\nemail: ${owner.delivery_email}\napi_key: ${apiKey}\n`;
    }
    if (sub === 'demo') {
      const { values } = parseArgs({ args: rest, options: { subdomain: { type: 'string' }, url: { type: 'string' } } });
      const { realm, ownerEmail, apiKey } = await loadDemoOrganization(db, services, systemActor('cli'), { subdomain: values.subdomain ?? 'demo', url: values.url ?? defaultUrl });
      return `demo organization: ${realm.name} (${realm.url})\nemail: ${ownerEmail}\napi_key: ${apiKey}\n`;
    }
    throw new ConfigError(`usage:\n${CHAT_USAGE}`);
  } catch (err) {
    if (err instanceof ChatError) throw new ConfigError(err.message);
    const domain = toDomainError(err);
    // Another process created the same organization a moment earlier: the database said so.
    if (domain) throw new ConfigError(domain.message, { cause: err });
    throw err;
  }
}

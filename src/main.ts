import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { readAudit, recordAudit, systemActor } from './audit/audit.ts';
import { insertToken } from './auth/auth.store.ts';
import { hashToken, newSecret } from './auth/credentials.ts';
import { CHAT_USAGE, runChatCommand } from './chat/cli.ts';
import { chatComponent } from './chat/component.ts';
import type { Component, RunningComponent } from './components.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { consoleComponent } from './console/component.ts';
import { createUsersService } from './console/users/users.service.ts';
import { DatabaseLockedError, openDatabase, type OpenDatabase } from './db/database.ts';
import { migrateToLatest, MigrationError } from './db/migrate.ts';
import { Registry } from './http/metrics.ts';
import { createLogger } from './logger.ts';
import { gatewayComponent } from './gateway/gateway.component.ts';
import { modelProxyComponent } from './modelproxy/component.ts';
import { CipherError } from './secrets/cipher.ts';
import { rotateSecretKey } from './secrets/rotate.ts';

/** Every component `crewhouse serve` can run, in start order. */
export const COMPONENTS: Component[] = [consoleComponent, modelProxyComponent, chatComponent, gatewayComponent];

const USAGE = `crewhouse <command>

  serve [--only console,worker,...]   run the service (all components by default)
  migrate                             bring the database schema up to date and exit
  admin token --user NAME [--name L]  mint an API token for a user and print it
  audit [--limit N] [--action A]      print the audit log, newest first, as JSON lines
  secrets rotate-key                  re-encrypt every secret under a new key (see README)
${CHAT_USAGE}

Configuration comes from SERVICE_* environment variables; see README.md.`;

async function open(config: Config): Promise<OpenDatabase> {
  const opened = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(opened.db);
  return opened;
}

async function serve(config: Config, only: string | undefined) {
  const logger = createLogger({ level: config.logLevel });
  const names = only ? only.split(',').map((s) => s.trim()).filter(Boolean) : COMPONENTS.map((c) => c.name);
  const unknown = names.filter((n) => !COMPONENTS.some((c) => c.name === n));
  if (unknown.length) throw new ConfigError(`unknown component(s): ${unknown.join(', ')}; known: ${COMPONENTS.map((c) => c.name).join(', ')}`);
  if (!config.databaseUrl && only && names.length < COMPONENTS.length) {
    logger.warn('running some components alone on the embedded database: other processes cannot share it; set SERVICE_DATABASE_URL');
  }
  const { db, close } = await open(config);
  const users = createUsersService({ db, publicBaseUrl: config.publicBaseUrl });
  const first = await users.ensureFirstAdmin(systemActor('first-start'), config.adminToken);
  if (first.created && first.setupUrl) {
    // Printed once, on the first start only: the way in for the first admin.
    process.stdout.write(`\nCrewhouse is ready. Set the admin password at:\n  ${first.setupUrl}\n\n`);
  } else if (first.created) {
    logger.info('created the admin account with SERVICE_ADMIN_TOKEN as its token');
  }

  const metrics = new Registry();
  const running: Array<{ name: string; r: RunningComponent }> = [];
  for (const c of COMPONENTS.filter((c) => names.includes(c.name))) {
    const r = await c.start({ config, db, logger, metrics });
    running.push({ name: c.name, r });
    logger.info({ component: c.name, address: r.address }, 'component started');
  }

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => process.exit(1), 15_000).unref();
    for (const { r } of running.reverse()) await r.stop().catch((err) => logger.error({ err }, 'stop failed'));
    await close();
    clearTimeout(timer);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
}

async function main(argv: string[]) {
  const [command, ...rest] = argv;
  const config = loadConfig();
  switch (command) {
    case 'serve': {
      const { values } = parseArgs({ args: rest, options: { only: { type: 'string' } } });
      return serve(config, values.only);
    }
    case 'migrate': {
      const { close } = await open(config);
      await close();
      process.stdout.write('database is up to date\n');
      return;
    }
    case 'admin': {
      const { values, positionals } = parseArgs({ args: rest, allowPositionals: true, options: { user: { type: 'string' }, name: { type: 'string' } } });
      if (positionals[0] !== 'token' || !values.user) throw new ConfigError('usage: crewhouse admin token --user NAME [--name LABEL]');
      const { db, close } = await open(config);
      try {
        // Names are unique regardless of case, as at log-in.
        const user = await db.selectFrom('users').select(['id', 'name', 'disabled']).where(sql`lower(name)`, '=', values.user.toLowerCase()).executeTakeFirst();
        if (!user) throw new ConfigError(`no user named "${values.user}"`);
        if (user.disabled) throw new ConfigError(`user "${values.user}" is disabled`);
        const token = newSecret('chk_');
        await db.transaction().execute(async (trx) => {
          const row = await insertToken(trx, { user_id: user.id, name: values.name ?? 'cli', kind: 'api', prefix: token.slice(0, 8), token_hash: hashToken(token), expires_at: null });
          await recordAudit(trx, systemActor('cli'), 'token.create', { type: 'token', id: row.id }, { user: user.name, kind: 'api' });
        });
        process.stdout.write(`${token}\n`);
      } finally {
        await close();
      }
      return;
    }
    case 'chat': {
      const { db, close } = await open(config);
      try {
        process.stdout.write(await runChatCommand(rest, config, db));
      } finally {
        await close();
      }
      return;
    }
    case 'audit': {
      const { values } = parseArgs({ args: rest, options: { limit: { type: 'string', default: '100' }, action: { type: 'string' }, target: { type: 'string' } } });
      const { db, close } = await open(config);
      try {
        const rows = await readAudit(db, { limit: Math.min(Number(values.limit) || 100, 10_000), action: values.action, targetType: values.target });
        for (const r of rows) process.stdout.write(JSON.stringify(r) + '\n');
      } finally {
        await close();
      }
      return;
    }
    case 'secrets': {
      if (rest[0] !== 'rotate-key') throw new ConfigError('usage: crewhouse secrets rotate-key');
      const { db, close } = await open(config);
      try {
        const r = await rotateSecretKey(db, config);
        process.stdout.write(`re-encrypted ${r.resealed} of ${r.total} secret values; current key id ${r.keyId} (${r.source}); restart running consoles\n`);
      } finally {
        await close();
      }
      return;
    }
    case undefined:
    case 'help':
    case '--help':
      process.stdout.write(USAGE + '\n');
      return;
    default:
      throw new ConfigError(`unknown command "${command}"\n\n${USAGE}`);
  }
}

main(process.argv.slice(2)).catch((err) => {
  const known = err instanceof ConfigError || err instanceof DatabaseLockedError || err instanceof MigrationError || err instanceof CipherError;
  process.stderr.write(`crewhouse: ${known ? err.message : (err?.stack ?? String(err))}\n`);
  process.exit(known ? 2 : 1);
});

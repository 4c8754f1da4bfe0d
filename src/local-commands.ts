import fs from 'node:fs';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { readAudit, recordAudit, systemActor } from './audit/audit.ts';
import { insertToken } from './auth/auth.service.ts';
import { hashToken, newSecret } from './auth/credentials.ts';
import { CHAT_USAGE, runChatCommand } from './chat/cli.ts';
import { API_USAGE } from './cli/index.ts';
import { chatComponent } from './chat/component.ts';
import type { Component, RunningComponent } from './components.ts';
import { ConfigError, loadConfig, type Config } from './config.ts';
import { consoleComponent } from './console/component.ts';
import { DatabaseLockedError, openDatabase, type OpenDatabase } from './db/database.ts';
import { migrateToLatest, MigrationError } from './db/migrate.ts';
import { Registry } from './metrics.ts';
import { createLogger, flushLogs } from './logger.ts';
import { gatewayComponent } from './gateway/gateway.component.ts';
import { modelProxyComponent } from './modelproxy/component.ts';
import { CipherError } from './secrets/cipher.ts';
import { createUsersService } from './console/users/users.service.ts';
import { JOBS_USAGE, runJobsCommand } from './queue/cli.ts';
import { workerComponent } from './runtime/worker.component.ts';
import { SandboxError } from './runtime/sandboxes/provider.ts';
import { buildImage } from './runtime/sandboxes/providers/microvm/images.ts';
import { microvmProviderFromConfig } from './runtime/sandboxes/providers/microvm/index.ts';
import { createLocalProvider } from './runtime/sandboxes/providers/local.ts';
import { reachableSandboxDir } from './runtime/sandboxes/sandbox-dir.ts';
import type { SandboxProvider } from './runtime/sandboxes/provider.ts';
import { rotateSecretKey } from './secrets/rotate.ts';
import { supervise } from './supervisor.ts';
import { createServices, loadShared } from './services.ts';

/** Every component `crewhouse serve` can run, in start order. */
export const COMPONENTS: Component[] = [consoleComponent, modelProxyComponent, chatComponent, gatewayComponent, workerComponent];

// The components are listed from COMPONENTS, so the help names the ones that exist.
const USAGE = `crewhouse <command>     (crewhouse <command> --help for its options)

Through the API (crewhouse login --url URL --token T once, or CREWHOUSE_URL and CREWHOUSE_TOKEN):
${API_USAGE}

On this machine, opening the database (SERVICE_* variables):
  serve [--only ${COMPONENTS.map((c) => c.name).join(',')}]
                                      run the service (all components by default; --only a subset of them)
  migrate                             bring the database schema up to date and exit
  admin token --user NAME [--name L]  mint an API token for a user and print it
  audit [--limit N] [--action A]      print the audit log, newest first, as JSON lines
  secrets rotate-key                  re-encrypt every secret under a new key (see README)
${JOBS_USAGE}
  images build [--name N] [--ca FILE] build a microVM image into SERVICE_IMAGES_DIR (see README)
  sandboxes [list]                    the sandboxes of this deployment (they outlive a stop)
  sandboxes destroy ID | --all        remove one sandbox, or (service stopped) every one of this machine
${CHAT_USAGE}

The service's configuration comes from SERVICE_* environment variables; see README.md.`;

const SERVE_USAGE = `crewhouse serve [--only NAME,...] [--no-supervise]

Runs the components of the service: all of them by default, or those named. They run in a
child process that this one starts again when it dies (with backoff, logging why); SIGINT and
SIGTERM stop both. --no-supervise runs them in this process (for a supervisor of your own).

  console     Console API, web console, webhooks, health and metrics (SERVICE_PORT)
  modelproxy  the OpenAI-compatible model proxy (SERVICE_MODEL_PROXY_PORT)
  chat        the Zulip-compatible chat server (SERVICE_CHAT_PORT)
  worker      performs queued jobs (see crewhouse jobs); on PostgreSQL several workers share them`;

/** The usage of each command of this machine, printed with --help and after a wrong option. */
const LOCAL_USAGE: Record<string, string> = {
  migrate: 'crewhouse migrate\n\n  Brings the database schema up to date and exits.',
  admin: 'crewhouse admin token --user NAME [--name LABEL]\n\n  Mints an API token for a user and prints it (the service may be running only on PostgreSQL).',
  audit: 'crewhouse audit [--limit N] [--action A] [--target TYPE]\n\n  Prints the audit log, newest first, as JSON lines.',
  secrets: 'crewhouse secrets rotate-key\n\n  Re-encrypts every secret under a new key; restart running consoles after it.',
  images: 'crewhouse images build [--name N] [--ca CA.pem] [--variant debian|minimal]\n\n  Builds a microVM image into SERVICE_IMAGES_DIR; Ctrl-C stops it, and the same command goes on from the last finished step.',
  sandboxes:
    'crewhouse sandboxes [list]\ncrewhouse sandboxes destroy ID\ncrewhouse sandboxes destroy --all\n\n  Sandboxes outlive a stop of the service (the next start adopts them). list shows them; destroy ID removes one\n  (its role gets a new one on its next work); destroy --all removes every sandbox of this machine, once the\n  service is stopped.',
};

type Options = NonNullable<ParseArgsConfig['options']>;

/** A command's options; a wrong one is a usage error (exit 2) naming it, and --help prints the usage. */
function argsOf(command: string, rest: string[], options: Options): { values: Record<string, any>; positionals: string[] } | null {
  let parsed;
  try {
    parsed = parseArgs({ args: rest, allowPositionals: true, options: { ...options, help: { type: 'boolean', short: 'h' } } });
  } catch (err) {
    throw new ConfigError(`${(err as Error).message.split('. To specify')[0]}\n\nusage: ${LOCAL_USAGE[command]}`);
  }
  if (parsed.values.help) {
    process.stdout.write(`${LOCAL_USAGE[command]}\n`);
    return null;
  }
  return parsed as { values: Record<string, any>; positionals: string[] };
}

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
  // Loaded once (the key file is created here on a first start) and handed to every component.
  const shared = loadShared(config);
  const services = createServices({ config, db, logger, ...shared });
  const first = await services.users.ensureFirstAdmin(systemActor('first-start'), config.adminToken);
  if (first.created && first.setupUrl) {
    // Printed once, on the first start only: the way in for the first admin.
    process.stdout.write(
      `\nCrewhouse is ready. Set the admin password at:\n  ${first.setupUrl}\n` +
        `or log the CLI in with that link (it asks for the link, then the password to choose):\n  npx crewhouse login --url ${config.publicBaseUrl}\n\n`,
    );
  } else if (first.created) {
    logger.info('created the admin account with SERVICE_ADMIN_TOKEN as its token');
  }

  const metrics = new Registry();
  const running: Array<{ name: string; r: RunningComponent }> = [];
  for (const c of COMPONENTS.filter((c) => names.includes(c.name))) {
    const r = await c.start({ config, db, logger, metrics, ...shared, services });
    running.push({ name: c.name, r });
    logger.info({ component: c.name, address: r.address }, 'component started');
  }
  // Started by `crewhouse serve`'s supervisor (src/supervisor.ts), which listens on an IPC channel: tell it the service is up.
  const supervised = typeof process.send === 'function';
  if (supervised) process.send!({ type: 'ready' });

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down');
    const timer = setTimeout(() => process.exit(1), 15_000).unref();
    for (const { r } of running.reverse()) await r.stop().catch((err) => logger.error({ err }, 'stop failed'));
    await close();
    await flushLogs(logger);
    clearTimeout(timer);
    process.exit(0);
  };
  process.on('SIGTERM', () => void stop('SIGTERM'));
  process.on('SIGINT', () => void stop('SIGINT'));
  // A supervisor that is gone (killed) cannot restart us nor stop us: stop cleanly rather than linger.
  if (supervised) process.on('disconnect', () => void stop('supervisor gone'));
}

async function main(argv: string[]) {
  const [command, ...rest] = argv;
  const config = loadConfig();
  switch (command) {
    case 'serve': {
      let values;
      try {
        ({ values } = parseArgs({ args: rest, options: { only: { type: 'string' }, 'no-supervise': { type: 'boolean' }, help: { type: 'boolean', short: 'h' } } }));
      } catch (err) {
        throw new ConfigError(`${(err as Error).message}\n\n${SERVE_USAGE}`);
      }
      if (values.help) {
        process.stdout.write(SERVE_USAGE + '\n');
        return;
      }
      if (!values['no-supervise']) {
        // This process only supervises: the service (and the database it opens) is the child's.
        const code = await supervise({ argv: [process.execPath, ...process.execArgv.filter((f) => !f.startsWith('--inspect')), process.argv[1], 'serve', ...rest, '--no-supervise'], logger: createLogger({ level: config.logLevel }) });
        process.exit(code);
      }
      return serve(config, values.only);
    }
    case 'migrate': {
      if (!argsOf(command, rest, {})) return;
      const { close } = await open(config);
      await close();
      process.stdout.write('database is up to date\n');
      return;
    }
    case 'admin': {
      const parsed = argsOf(command, rest, { user: { type: 'string' }, name: { type: 'string' } });
      if (!parsed) return;
      const { values, positionals } = parsed;
      if (positionals[0] !== 'token' || !values.user) throw new ConfigError(`usage: ${LOCAL_USAGE.admin}`);
      const { db, close } = await open(config);
      try {
        // Names are unique regardless of case, as at log-in; an e-mail address is not a name here.
        const found = await createUsersService({ db, publicBaseUrl: config.publicBaseUrl }).byLogin(values.user);
        const user = found && found.name.toLowerCase() === values.user.toLowerCase() ? found : undefined;
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
      const parsed = argsOf(command, rest, { limit: { type: 'string', default: '100' }, action: { type: 'string' }, target: { type: 'string' } });
      if (!parsed) return;
      const { values } = parsed;
      const { db, close } = await open(config);
      try {
        const rows = await readAudit(db, { limit: Math.min(Number(values.limit) || 100, 10_000), action: values.action, targetType: values.target });
        for (const r of rows) process.stdout.write(JSON.stringify(r) + '\n');
      } finally {
        await close();
      }
      return;
    }
    case 'jobs': {
      const { db, close } = await open(config);
      try {
        process.stdout.write(await runJobsCommand(rest, db));
      } finally {
        await close();
      }
      return;
    }
    case 'secrets': {
      const parsed = argsOf(command, rest, {});
      if (!parsed) return;
      if (parsed.positionals[0] !== 'rotate-key') throw new ConfigError(`usage: ${LOCAL_USAGE.secrets}`);
      const { db, close } = await open(config);
      try {
        const r = await rotateSecretKey(db, config);
        process.stdout.write(`re-encrypted ${r.resealed} of ${r.total} secret values; current key id ${r.keyId} (${r.source}); restart running consoles\n`);
      } finally {
        await close();
      }
      return;
    }
    case 'images': {
      const parsed = argsOf(command, rest, { name: { type: 'string', default: 'crewhouse-agent' }, ca: { type: 'string' }, variant: { type: 'string', default: 'debian' } });
      if (!parsed) return;
      const { values, positionals } = parsed;
      if (positionals[0] !== 'build' || (values.variant !== 'debian' && values.variant !== 'minimal')) throw new ConfigError(`usage: ${LOCAL_USAGE.images}`);
      if (!/^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/.test(values.name)) throw new ConfigError('--name must be a short name (letters, digits, . _ + -)');
      // Ctrl-C stops the step under way; what finished is kept and a re-run goes on from there.
      const ac = new AbortController();
      process.once('SIGINT', () => ac.abort());
      process.once('SIGTERM', () => ac.abort());
      const started = Date.now();
      try {
        const m = await buildImage({ imagesDir: config.imagesDir, name: values.name, variant: values.variant, caPem: values.ca ?? null, signal: ac.signal, progress: (line) => process.stdout.write(`${line}\n`) });
        process.stdout.write(`built ${m.name} ${m.version} in ${Math.round((Date.now() - started) / 1000)} s\n`);
      } catch (err) {
        if (ac.signal.aborted) throw new ConfigError('interrupted; run the same command again to go on from the last finished step');
        if (err instanceof SandboxError) throw new ConfigError(`image build failed: ${err.message}`);
        throw err;
      }
      return;
    }
    case 'sandboxes': {
      const parsed = argsOf(command, rest, { all: { type: 'boolean' } });
      if (!parsed) return;
      return sandboxesCommand(config, parsed.positionals, parsed.values.all === true);
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

/**
 * `crewhouse sandboxes`: what a stopped (or running, on PostgreSQL) deployment's sandboxes are,
 * and removing them. Only this machine's providers can remove what they run; a row whose
 * sandbox lives elsewhere is marked, and its host frees it on its next sweep.
 */
async function sandboxesCommand(config: Config, positionals: string[], all: boolean) {
  const [verb = 'list', id] = positionals;
  if (!['list', 'destroy'].includes(verb) || (verb === 'destroy' && !id === !all) || (verb === 'list' && (id || all))) throw new ConfigError(`usage: ${LOCAL_USAGE.sandboxes}`);
  const logger = createLogger({ level: 'warn' });
  const dir = (await reachableSandboxDir(config)).dir;
  const idFile = dir ? path.join(dir, 'host-id') : null;
  const hostId = idFile && fs.existsSync(idFile) ? fs.readFileSync(idFile, 'utf8').trim() : null;
  const providers: SandboxProvider[] = [];
  if (dir) providers.push(createLocalProvider({ root: dir, gatewayPort: config.gatewayPort, logger }));
  if (fs.existsSync(config.microvmDir)) providers.push(microvmProviderFromConfig(config, { logger }));
  const { db, close } = await open(config);
  try {
    const services = createServices({ config, db, logger, ...loadShared(config) });
    const rows = await services.sandboxes.list();
    if (verb === 'list') {
      if (rows.length === 0) return void process.stdout.write('No sandboxes.\n');
      const head = ['ID', 'TEAM ID', 'ROLE', 'PROVIDER', 'STATE', 'ENVIRONMENT', 'HOST', 'LAST ACTIVE'];
      const cells = [head, ...rows.map((r) => [r.id, String(r.team_id), r.role, r.provider, r.state, r.environment ?? '-', r.host_id === hostId ? `${r.host_id} (this machine)` : (r.host_id ?? '-'), new Date(r.last_active_at).toISOString()])];
      const widths = head.map((_, i) => Math.max(...cells.map((c) => c[i].length)));
      process.stdout.write(cells.map((c) => c.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd()).join('\n') + '\n');
      return;
    }
    const removeHere = async (sid: string) => {
      for (const p of providers) if ((await p.list()).includes(sid)) await p.destroy(sid);
    };
    if (id) {
      const row = rows.find((r) => r.id === id);
      if (!row) throw new ConfigError(`no sandbox ${id} (crewhouse sandboxes lists them)`);
      const here = row.host_id === hostId;
      if (here) await removeHere(id);
      await services.sandboxes.markDestroyed(id, here);
      process.stdout.write(here ? `destroyed ${id}\n` : `marked ${id} destroyed; its host ${row.host_id} removes it on its next heartbeat\n`);
      return;
    }
    if (hostId && (await services.sandboxes.hostAlive(hostId, config.sandboxHostDeadAfter))) {
      throw new ConfigError('the service is running on this machine: stop it first (Ctrl-C or its service manager), then run crewhouse sandboxes destroy --all again');
    }
    let n = 0;
    for (const p of providers) {
      for (const sid of await p.list()) {
        await p.destroy(sid);
        await services.sandboxes.markDestroyed(sid, true);
        n++;
      }
    }
    for (const r of rows.filter((x) => x.host_id === hostId)) if (await services.sandboxes.markDestroyed(r.id, true)) n++;
    process.stdout.write(`destroyed ${n} sandbox(es) of this machine; each role gets a new one on its next work\n`);
  } finally {
    await close();
  }
}

/** Runs a command of this machine (see USAGE); a known failure prints one line and exits 2. */
export async function runLocalCommand(argv: string[]): Promise<void> {
  await main(argv).catch((err) => {
    const known = err instanceof ConfigError || err instanceof DatabaseLockedError || err instanceof MigrationError || err instanceof CipherError;
    process.stderr.write(`crewhouse: ${known ? err.message : (err?.stack ?? String(err))}\n`);
    process.exit(known ? 2 : 1);
  });
}

import fs from 'node:fs';
import path from 'node:path';
import { readAudit, recordAudit, systemActor } from './audit/audit.ts';
import { insertToken } from './auth/auth.service.ts';
import { hashToken, newSecret } from './auth/credentials.ts';
import { chatDemo, chatInit } from './chat/cli.ts';
import type { Command, Ctx, Group } from './cli/command.ts';
import { CliError } from './cli/errors.ts';
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
import { JOB_STATES, listJobsCommand, retryJobCommand } from './queue/cli.ts';
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

async function open(config: Config): Promise<OpenDatabase> {
  const opened = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir });
  await migrateToLatest(opened.db);
  return opened;
}

async function serve(ctx: Ctx, config: Config, only: string | undefined) {
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
    ctx.out.stdout(
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

/**
 * `crewhouse sandboxes`: what a stopped (or running, on PostgreSQL) deployment's sandboxes are,
 * and removing them. Only this machine's providers can remove what they run; a row whose
 * sandbox lives elsewhere is marked, and its host frees it on its next sweep.
 */
async function sandboxesCommand(ctx: Ctx, config: Config, verb: 'list' | 'destroy', id: string | undefined) {
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
      if (rows.length === 0) return void ctx.out.stdout('No sandboxes.\n');
      const head = ['ID', 'TEAM ID', 'ROLE', 'PROVIDER', 'STATE', 'ENVIRONMENT', 'HOST', 'LAST ACTIVE'];
      const cells = [head, ...rows.map((r) => [r.id, String(r.team_id), r.role, r.provider, r.state, r.environment ?? '-', r.host_id === hostId ? `${r.host_id} (this machine)` : (r.host_id ?? '-'), new Date(r.last_active_at).toISOString()])];
      const widths = head.map((_, i) => Math.max(...cells.map((c) => c[i].length)));
      ctx.out.stdout(cells.map((c) => c.map((v, i) => v.padEnd(widths[i])).join('  ').trimEnd()).join('\n') + '\n');
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
      ctx.out.stdout(here ? `destroyed ${id}\n` : `marked ${id} destroyed; its host ${row.host_id} removes it on its next heartbeat\n`);
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
    ctx.out.stdout(`destroyed ${n} sandbox(es) of this machine; each role gets a new one on its next work\n`);
  } finally {
    await close();
  }
}

/** Runs one command of this machine with its configuration; a failure a person acts on prints one line (exit 2). */
function local(c: Omit<Command, 'run' | 'local'> & { run(ctx: Ctx, config: Config, args: string[], flags: Record<string, any>): Promise<number | void> }): Command {
  return {
    ...c,
    local: true,
    async run(ctx, args, flags) {
      try {
        return await c.run(ctx, loadConfig(ctx.env), args, flags);
      } catch (err) {
        const known = err instanceof ConfigError || err instanceof DatabaseLockedError || err instanceof MigrationError || err instanceof CipherError;
        if (known) throw new CliError(err.message);
        throw err;
      }
    },
  };
}

/** Opens the database, runs the work, closes it. */
async function withDb<T>(config: Config, work: (db: OpenDatabase['db']) => Promise<T>): Promise<T> {
  const { db, close } = await open(config);
  try {
    return await work(db);
  } finally {
    await close();
  }
}

const COMPONENT_SUMMARIES: Record<string, string> = {
  console: 'Console API, web console, webhooks, health and metrics (SERVICE_PORT)',
  modelproxy: 'the OpenAI-compatible model proxy (SERVICE_MODEL_PROXY_PORT)',
  chat: 'the Zulip-compatible chat server (SERVICE_CHAT_PORT)',
  gateway: 'the credential gateway, the sandboxes\' HTTP proxy (SERVICE_GATEWAY_PORT)',
  worker: 'performs queued jobs (see crewhouse jobs); on PostgreSQL several workers share them',
};

const SERVE_ABOUT = `Runs the components of the service: all of them by default, or those named. They run in a
child process that this one starts again when it dies (with backoff, logging why); SIGINT and
SIGTERM stop both. --no-supervise runs them in this process (for a supervisor of your own).

${COMPONENTS.map((c) => `${c.name.padEnd(10)}  ${COMPONENT_SUMMARIES[c.name] ?? ''}`.trimEnd()).join('\n')}`;

/** The commands of this machine, in the order help lists them; they open the database (SERVICE_* variables). */
export const LOCAL_GROUPS: Group[] = [
  {
    name: 'serve',
    summary: 'Run the service',
    commands: [
      local({
        name: '',
        // The components are listed from COMPONENTS, so the help names the ones that exist.
        synopsis: `[--only ${COMPONENTS.map((c) => c.name).join(',')}]`,
        summary: 'run the service (all components by default; --only a subset of them)',
        about: SERVE_ABOUT,
        options: { only: { type: 'string' }, 'no-supervise': { type: 'boolean' } },
        help: ['--only NAME,...    run only these components', '--no-supervise     run them in this process'],
        async run(ctx, config, _args, flags) {
          if (!flags['no-supervise']) {
            // This process only supervises: the service (and the database it opens) is the child's.
            const argv = [process.execPath, ...process.execArgv.filter((f) => !f.startsWith('--inspect')), process.argv[1], 'serve', ...(flags.only ? ['--only', flags.only] : []), '--no-supervise'];
            process.exit(await supervise({ argv, logger: createLogger({ level: config.logLevel }) }));
          }
          await serve(ctx, config, flags.only);
        },
      }),
    ],
  },
  {
    name: 'migrate',
    summary: 'Bring the database schema up to date',
    commands: [
      local({
        name: '',
        summary: 'bring the database schema up to date and exit',
        about: 'Brings the database schema up to date and exits.',
        async run(ctx, config) {
          await withDb(config, async () => {});
          ctx.out.stdout('database is up to date\n');
        },
      }),
    ],
  },
  {
    name: 'admin',
    summary: 'Administer this deployment',
    commands: [
      local({
        name: 'token',
        synopsis: '--user NAME [--name LABEL]',
        summary: 'mint an API token for a user and print it',
        about: 'Mints an API token for a user and prints it (the service may be running only on PostgreSQL).',
        options: { user: { type: 'string' }, name: { type: 'string' } },
        async run(ctx, config, _args, flags) {
          if (!flags.user) throw ctx.usageError('--user is needed');
          const login: string = flags.user;
          await withDb(config, async (db) => {
            // Names are unique regardless of case, as at log-in; an e-mail address is not a name here.
            const found = await createUsersService({ db, publicBaseUrl: config.publicBaseUrl }).byLogin(login);
            const user = found && found.name.toLowerCase() === login.toLowerCase() ? found : undefined;
            if (!user) throw new ConfigError(`no user named "${login}"`);
            if (user.disabled) throw new ConfigError(`user "${login}" is disabled`);
            const token = newSecret('chk_');
            await db.transaction().execute(async (trx) => {
              const row = await insertToken(trx, { user_id: user.id, name: flags.name ?? 'cli', kind: 'api', prefix: token.slice(0, 8), token_hash: hashToken(token), expires_at: null });
              await recordAudit(trx, systemActor('cli'), 'token.create', { type: 'token', id: row.id }, { user: user.name, kind: 'api' });
            });
            ctx.out.stdout(`${token}\n`);
          });
        },
      }),
    ],
  },
  {
    name: 'audit',
    summary: 'The audit log',
    commands: [
      local({
        name: '',
        synopsis: '[--limit N] [--action A] [--target TYPE]',
        summary: 'print the audit log, newest first, as JSON lines',
        options: { limit: { type: 'string', default: '100' }, action: { type: 'string' }, target: { type: 'string' } },
        async run(ctx, config, _args, flags) {
          await withDb(config, async (db) => {
            const rows = await readAudit(db, { limit: Math.min(Number(flags.limit) || 100, 10_000), action: flags.action, targetType: flags.target });
            for (const r of rows) ctx.out.stdout(JSON.stringify(r) + '\n');
          });
        },
      }),
    ],
  },
  {
    name: 'secrets',
    summary: 'Secrets at rest',
    commands: [
      local({
        name: 'rotate-key',
        summary: 're-encrypt every secret under a new key (see README)',
        about: 'Re-encrypts every secret under a new key; restart running consoles after it.',
        async run(ctx, config) {
          const r = await withDb(config, (db) => rotateSecretKey(db, config));
          ctx.out.stdout(`re-encrypted ${r.resealed} of ${r.total} secret values; current key id ${r.keyId} (${r.source}); restart running consoles\n`);
        },
      }),
    ],
  },
  {
    name: 'jobs',
    summary: 'Queued jobs',
    default: '',
    commands: [
      local({
        name: '',
        synopsis: '[--state S] [--kind K] [--limit N]',
        summary: `print jobs, newest first, as JSON lines (S: ${JOB_STATES.join('|')})`,
        options: { state: { type: 'string' }, kind: { type: 'string' }, limit: { type: 'string', default: '100' } },
        async run(ctx, config, _args, flags) {
          ctx.out.stdout(await withDb(config, (db) => listJobsCommand(db, flags)));
        },
      }),
      local({
        name: 'retry',
        args: 'ID',
        summary: 'put a failed job back in the queue, due now, with its attempts anew',
        async run(ctx, config, [id]) {
          ctx.out.stdout(await withDb(config, (db) => retryJobCommand(db, id)));
        },
      }),
    ],
  },
  {
    name: 'images',
    summary: 'MicroVM images',
    commands: [
      local({
        name: 'build',
        synopsis: '[--name N] [--ca FILE] [--variant debian|minimal]',
        summary: 'build a microVM image into SERVICE_IMAGES_DIR (see README)',
        about: 'Builds a microVM image into SERVICE_IMAGES_DIR; Ctrl-C stops it, and the same command goes on from the last finished step.',
        options: { name: { type: 'string', default: 'crewhouse-agent' }, ca: { type: 'string' }, variant: { type: 'string', default: 'debian' } },
        async run(ctx, config, _args, flags) {
          if (flags.variant !== 'debian' && flags.variant !== 'minimal') throw ctx.usageError(`--variant must be debian or minimal, not "${flags.variant}"`);
          if (!/^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$/.test(flags.name)) throw new ConfigError('--name must be a short name (letters, digits, . _ + -)');
          // Ctrl-C stops the step under way; what finished is kept and a re-run goes on from there.
          const ac = new AbortController();
          process.once('SIGINT', () => ac.abort());
          process.once('SIGTERM', () => ac.abort());
          const started = Date.now();
          try {
            const m = await buildImage({ imagesDir: config.imagesDir, name: flags.name, variant: flags.variant, caPem: flags.ca ?? null, signal: ac.signal, progress: (line) => ctx.out.stdout(`${line}\n`) });
            ctx.out.stdout(`built ${m.name} ${m.version} in ${Math.round((Date.now() - started) / 1000)} s\n`);
          } catch (err) {
            if (ac.signal.aborted) throw new ConfigError('interrupted; run the same command again to go on from the last finished step');
            if (err instanceof SandboxError) throw new ConfigError(`image build failed: ${err.message}`);
            throw err;
          }
        },
      }),
    ],
  },
  {
    name: 'sandboxes',
    summary: 'Sandboxes outlive a stop of the service (the next start adopts them)',
    default: 'list',
    commands: [
      local({
        name: 'list',
        summary: 'the sandboxes of this deployment (they outlive a stop)',
        run: (ctx, config) => sandboxesCommand(ctx, config, 'list', undefined),
      }),
      local({
        name: 'destroy',
        args: '[ID]',
        synopsis: '| --all',
        summary: 'remove one sandbox, or (service stopped) every one of this machine',
        about: 'Removes one sandbox (its role gets a new one on its next work), or with --all every sandbox of this\nmachine, once the service is stopped.',
        options: { all: { type: 'boolean' } },
        help: ['--all              every sandbox of this machine (the service stopped)'],
        async run(ctx, config, [id], flags) {
          if (!id === !flags.all) throw ctx.usageError(id ? 'an ID or --all, not both' : 'an ID or --all is needed');
          return sandboxesCommand(ctx, config, 'destroy', id);
        },
      }),
    ],
  },
  {
    name: 'chat',
    summary: 'The chat server\'s organizations',
    commands: [
      local({
        name: 'init',
        synopsis: '--email E --name N [--org NAME] [--subdomain S] [--url U] [--password-stdin]',
        summary: 'create a chat organization and its owner; prints the owner\'s email and API key',
        options: { email: { type: 'string' }, name: { type: 'string' }, org: { type: 'string' }, subdomain: { type: 'string' }, url: { type: 'string' }, 'password-stdin': { type: 'boolean' } },
        async run(ctx, config, _args, flags) {
          if (!flags.email || !flags.name) throw ctx.usageError('--email and --name are needed');
          const options = { email: flags.email, name: flags.name, org: flags.org, subdomain: flags.subdomain, url: flags.url, passwordFrom: flags['password-stdin'] ? ctx.stdin : undefined };
          ctx.out.stdout(await withDb(config, (db) => chatInit(config, db, options)));
        },
      }),
      local({
        name: 'demo',
        synopsis: '[--subdomain demo] [--url U]',
        summary: 'load a demo chat organization; prints its owner\'s email and API key',
        options: { subdomain: { type: 'string' }, url: { type: 'string' } },
        async run(ctx, config, _args, flags) {
          ctx.out.stdout(await withDb(config, (db) => chatDemo(config, db, flags)));
        },
      }),
    ],
  },
];

// A sandbox host in its own process, for the test that kills it with SIGKILL: it makes two
// teams' sandboxes, starts a process in one, prints what it made as one JSON line, and waits.
import fs from 'node:fs';
import { openDatabase } from '../src/db/database.ts';
import { migrateToLatest } from '../src/db/migrate.ts';
import { startSandboxHost } from '../src/runtime/sandboxes/host.ts';
import { captureLogger, testConfig } from './harness.ts';
import { makeTeamRows, teamDirectory } from './sandboxes.ts';

const args = JSON.parse(process.argv[2]) as { dbUrl: string | null; schema: string | null; dataDir: string; sandboxDir: string; subnet: string };
fs.mkdirSync(args.dataDir, { recursive: true });
const { db } = await openDatabase({ databaseUrl: args.dbUrl, dataDir: args.dataDir, searchPath: args.schema ?? undefined, poolSize: 2 });
if (!args.dbUrl) await migrateToLatest(db);
const { logger } = captureLogger();
const host = await startSandboxHost({ config: testConfig({ SERVICE_SANDBOX_DIR: args.sandboxDir, SERVICE_SANDBOX_SUBNET: args.subnet }), db, teams: teamDirectory(db), logger, tickMs: 3_600_000 });
const kept = await makeTeamRows(db);
const archived = await makeTeamRows(db);
const a = await host.place({ teamId: kept.teamId, role: kept.role, claimId: 'run-kept' });
const b = await host.place({ teamId: archived.teamId, role: archived.role, claimId: 'run-archived' });
await host.ensureRunning(a.sandboxId);
await host.ensureRunning(b.sandboxId);
// A command that runs on (each exec is its own PID namespace: a background process would end with its exec).
const loop = await host.exec(a.sandboxId, { argv: ['/bin/sh', '-c', 'while :; do date +%s%N > /workspace/tick; sleep 0.05; done'] });
loop.stdout.resume();
loop.stderr.resume();
loop.stdin.end();
process.stdout.write(`${JSON.stringify({ kept: a.sandboxId, archived: b.sandboxId, archivedTeam: archived.teamId, hostId: host.id })}\n`);
setInterval(() => {}, 60_000);

// The worker in its own process, for the test that kills it with SIGKILL mid-run: it starts
// `workerComponent` on the test's PostgreSQL schema with the stack's settings, prints "ready"
// once it takes jobs, and runs until it is killed.
import { openDatabase } from '../../src/db/database.ts';
import { Registry } from '../../src/metrics.ts';
import { workerComponent } from '../../src/runtime/worker.component.ts';
import { captureLogger, sharedServices, testConfig } from '../harness.ts';

const args = JSON.parse(process.argv[2]) as { dbUrl: string; schema: string; env: Record<string, string> };
const { db } = await openDatabase({ databaseUrl: args.dbUrl, dataDir: '', searchPath: args.schema, poolSize: 5 });
const config = testConfig(args.env);
const { logger } = captureLogger();
await workerComponent.start({ config, db, logger, metrics: new Registry(), ...sharedServices(config, db) });
process.stdout.write('ready\n');
setInterval(() => {}, 60_000);

// `node src/db/pglite-initdb.ts DIR [-c name=value ...]`: creates the embedded database's files
// in DIR (initdb) and exits. openDatabase runs this in a process of its own on a first start: the
// memory initdb takes (a second engine, its data directory copied through the JavaScript heap,
// several hundred MB at the peak) is then returned to the system when the process exits, where
// in the service's own process the C heap kept about 55 MB of it for good.
import { PGlite } from '@electric-sql/pglite';

// The parent holds stdin open while it waits: when it is gone, so is the reason to go on.
process.stdin.on('end', () => process.exit(1)).resume();

const [dataDir, ...startParams] = process.argv.slice(2);
if (!dataDir) throw new Error('usage: pglite-initdb.ts DIR [-c name=value ...]');
const pg = await PGlite.create({ dataDir, startParams: [...PGlite.defaultStartParams, ...startParams] });
await pg.close();
process.stdin.destroy();

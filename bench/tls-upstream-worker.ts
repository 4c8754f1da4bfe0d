// The upstream of the gateway bench in its own process: a small HTTPS (and a plain HTTP)
// server answering every request with the same 1 KiB body. Prints its ports as JSON.
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';

const { certPem, keyPem } = JSON.parse(process.argv[2]) as { certPem: string; keyPem: string };
const body = Buffer.alloc(1024, 'x');
const handler = (_req: http.IncomingMessage, res: http.ServerResponse) => {
  res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length }).end(body);
};
const secure = https.createServer({ cert: certPem, key: keyPem, keepAliveTimeout: 60_000 }, handler);
const plain = http.createServer({ keepAliveTimeout: 60_000 }, handler);
await new Promise<void>((r) => secure.listen(0, '127.0.0.1', () => r()));
await new Promise<void>((r) => plain.listen(0, '127.0.0.1', () => r()));
process.send!(JSON.stringify({ https: (secure.address() as AddressInfo).port, http: (plain.address() as AddressInfo).port }));
process.on('disconnect', () => process.exit(0));

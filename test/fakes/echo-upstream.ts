import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { KeyPair } from '../../src/gateway/certificates.ts';

/** What the upstream received: one entry per request. */
export interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * An upstream web server on 127.0.0.1 (HTTPS with the given certificate, or plain HTTP) that
 * answers with what it received, as JSON, so a test sees both sides. `/redirect?to=URL`
 * answers 302 to URL; `/reflect` puts the request's Authorization header in a response header too.
 */
export async function startEchoUpstream(tlsPair: KeyPair | null): Promise<{ port: number; seen: Seen[]; close(): Promise<void> }> {
  const seen: Seen[] = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') };
      seen.push(entry);
      const url = new URL(req.url ?? '/', 'http://x');
      if (url.pathname === '/redirect') {
        res.writeHead(302, { location: url.searchParams.get('to') ?? '/' }).end();
        return;
      }
      const body = JSON.stringify(entry);
      const headers: http.OutgoingHttpHeaders = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
      if (url.pathname.startsWith('/reflect')) headers['x-reflected-authorization'] = String(req.headers.authorization ?? '');
      res.writeHead(200, headers).end(body);
    });
  };
  const server = tlsPair ? https.createServer({ cert: tlsPair.certPem, key: tlsPair.keyPem }, handler) : http.createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return {
    port: (server.address() as AddressInfo).port,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import zlib from 'node:zlib';
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
 * `/reflect/encoded?as=C` answers the same JSON compressed with the content coding C (`gzip`,
 * `deflate`, `deflate-raw` sent as `deflate`, `br`, `zstd`), ignoring Accept-Encoding as a
 * hostile upstream may; with `as=text` it echoes the Authorization value in other encodings
 * (base64 and base64url of the value and of a longer text holding it, hex, URL-encoded), one
 * per line, each written as a separate chunk of its own.
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
      if (url.pathname === '/reflect/encoded') {
        const as = url.searchParams.get('as') ?? '';
        const auth = String(req.headers.authorization ?? '');
        if (as === 'text') {
          const b64 = (s: string) => Buffer.from(s).toString('base64');
          const lines = [
            `base64 ${b64(auth)}`,
            `base64url ${Buffer.from(auth).toString('base64url')}`,
            `base64-unaligned ${b64(`x-echo: ${auth}`)}`,
            `base64-unaligned2 ${b64(`xx-echo: ${auth}`)}`,
            `hex ${Buffer.from(auth).toString('hex')}`,
            `HEX ${Buffer.from(auth).toString('hex').toUpperCase()}`,
            `url ${encodeURIComponent(auth)}`,
          ];
          headers['x-reflected-base64'] = b64(auth);
          delete headers['content-length'];
          res.writeHead(200, { ...headers, 'content-type': 'text/plain' });
          // One small piece at a time, so every form is split across writes.
          const text = lines.join('\n') + '\n';
          for (let i = 0; i < text.length; i += 7) res.write(text.slice(i, i + 7));
          res.end();
          return;
        }
        const raw = Buffer.from(body);
        const coded: Record<string, [string, () => Buffer]> = {
          gzip: ['gzip', () => zlib.gzipSync(raw)],
          deflate: ['deflate', () => zlib.deflateSync(raw)],
          'deflate-raw': ['deflate', () => zlib.deflateRawSync(raw)],
          br: ['br', () => zlib.brotliCompressSync(raw)],
          zstd: ['zstd', () => zlib.zstdCompressSync(raw)],
        };
        const [coding, compress] = coded[as] ?? ['identity', () => raw];
        const out = compress();
        res.writeHead(200, { ...headers, 'content-encoding': coding, 'content-length': out.length }).end(out);
        return;
      }
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

// A load generator for the gateway bench, in its own process: each connection is a keep-alive
// HTTP/1.1 client, reaching the upstream directly, through a proxy as an absolute-form request
// (plain forwarding), or through a CONNECT tunnel with TLS inside. Each request is timed to the
// microsecond. With `hold`, it opens that many tunnels, reports, and keeps them open until told.
import net from 'node:net';
import tls from 'node:tls';

export interface ProxyLoadOptions {
  /** `direct`: straight to the upstream; `forward`: absolute-form through the proxy; `tunnel`: CONNECT, then TLS. */
  mode: 'direct' | 'forward' | 'tunnel';
  tls: boolean;
  upstream: { host: string; port: number; name: string };
  proxy?: { host: string; port: number };
  /** The trust anchor for the TLS inside (the gateway's CA, or the upstream's for squid and direct). */
  ca?: string;
  /** The address connections come from (the gateway knows the sandbox by it). */
  localAddress?: string;
  connections: number;
  seconds: number;
  hold?: number;
}

const o = JSON.parse(process.argv[2]) as ProxyLoadOptions;

async function open(): Promise<net.Socket> {
  const target = o.proxy && o.mode !== 'direct' ? o.proxy : { host: o.upstream.host, port: o.upstream.port };
  const raw = await new Promise<net.Socket>((resolve, reject) => {
    const s = net.connect({ host: target.host, port: target.port, localAddress: o.localAddress }, () => resolve(s));
    s.once('error', reject);
  });
  raw.setNoDelay(true);
  if (o.mode === 'tunnel') {
    await new Promise<void>((resolve, reject) => {
      raw.write(`CONNECT ${o.upstream.name}:${o.upstream.port} HTTP/1.1\r\nHost: ${o.upstream.name}:${o.upstream.port}\r\n\r\n`);
      let got = '';
      const onData = (c: Buffer) => {
        got += c.toString('latin1');
        if (!got.includes('\r\n\r\n')) return;
        raw.off('data', onData);
        raw.pause();
        if (/^HTTP\/1\.[01] 200/.test(got)) resolve();
        else reject(new Error(`CONNECT refused: ${got.split('\r\n')[0]}`));
      };
      raw.on('data', onData);
    });
  }
  if (!o.tls) return raw;
  return new Promise<net.Socket>((resolve, reject) => {
    const s = tls.connect({ socket: raw, servername: o.upstream.name, ca: o.ca, ALPNProtocols: ['http/1.1'] }, () => resolve(s));
    s.once('error', reject);
  });
}

/** One request on a kept-alive socket; resolves with the status when the whole body is in. */
function request(socket: net.Socket): Promise<number> {
  const path = o.mode === 'forward' ? `http://${o.upstream.name}:${o.upstream.port}/bench` : '/bench';
  return new Promise((resolve, reject) => {
    let buf: Buffer = Buffer.alloc(0);
    const onData = (c: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, c]) : c;
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = buf.toString('latin1', 0, end);
      const len = Number(/content-length: *(\d+)/i.exec(head)?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      socket.off('data', onData);
      socket.off('error', reject);
      resolve(Number(head.slice(9, 12)));
    };
    socket.on('data', onData);
    socket.once('error', reject);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${o.upstream.name}:${o.upstream.port}\r\nAccept: */*\r\n\r\n`);
  });
}

async function run() {
  const latencies: number[] = [];
  let errors = 0;
  let non2xx = 0;
  const until = performance.now() + o.seconds * 1000;
  await Promise.all(
    Array.from({ length: o.connections }, async () => {
      let socket: net.Socket | null = null;
      while (performance.now() < until) {
        try {
          socket ??= await open();
          const t0 = performance.now();
          const status = await request(socket);
          latencies.push(performance.now() - t0);
          if (status < 200 || status > 299) non2xx++;
        } catch {
          errors++;
          socket?.destroy();
          socket = null;
        }
      }
      socket?.destroy();
    }),
  );
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return { rps: latencies.length / o.seconds, p50: at(0.5), p90: at(0.9), p99: at(0.99), errors, non2xx };
}

if (o.hold) {
  const sockets: net.Socket[] = [];
  for (let i = 0; i < o.hold; i += 50) {
    sockets.push(...(await Promise.all(Array.from({ length: Math.min(50, o.hold - i) }, () => open()))));
  }
  // One request on each, so every tunnel has done its TLS and holds a kept-alive upstream.
  for (let i = 0; i < sockets.length; i += 100) await Promise.all(sockets.slice(i, i + 100).map((s) => request(s)));
  process.stdout.write(JSON.stringify({ open: sockets.length }) + '\n');
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
} else {
  process.stdout.write(JSON.stringify(await run()) + '\n');
}

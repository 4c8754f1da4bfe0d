import net from 'node:net';

/**
 * A TCP relay in front of an outside service (the test PostgreSQL): bytes pass as they are, and
 * `cut()` drops every connection through it at once, as a network failure or a server that
 * vanished without a word would. What crosses is the service's own wire protocol, untouched.
 */
export async function startTcpRelay(target: { host: string; port: number }): Promise<{
  port: number;
  /** Resets every connection through the relay now; new ones still pass. */
  cut(): void;
  close(): Promise<void>;
}> {
  const open = new Set<net.Socket>();
  const server = net.createServer((inbound) => {
    const outbound = net.connect(target.port, target.host);
    for (const s of [inbound, outbound]) {
      open.add(s);
      s.on('error', () => {});
      s.on('close', () => {
        open.delete(s);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const cut = () => {
    for (const s of open) s.resetAndDestroy();
  };
  return {
    port: (server.address() as net.AddressInfo).port,
    cut,
    close: async () => {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

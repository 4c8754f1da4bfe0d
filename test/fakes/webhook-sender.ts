import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One webhook delivery as a fake service sent it, and what the target answered (status 0: unreachable). */
export interface SentDelivery<P = Record<string, unknown>> {
  id: string;
  event: string;
  payload: P;
  status: number;
  response: string;
}

/**
 * The delivery log of a fake service that sends signed webhooks: each delivery is kept with its
 * exact bytes and headers, so a redelivery sends the same again (same id, same signature), as the
 * services' own "redeliver" and retries do.
 */
export function webhookSender<P = Record<string, unknown>>() {
  const sent: Array<SentDelivery<P> & { raw: string; headers: Record<string, string>; url: string }> = [];
  async function post(d: (typeof sent)[number]): Promise<SentDelivery<P>> {
    try {
      const res = await fetch(d.url, { method: 'POST', headers: { 'content-type': 'application/json; charset=utf-8', ...d.headers }, body: d.raw });
      d.status = res.status;
      d.response = await res.text();
    } catch (err) {
      d.status = 0;
      d.response = String(err);
    }
    return { id: d.id, event: d.event, payload: d.payload, status: d.status, response: d.response };
  }
  return {
    deliveries: sent as ReadonlyArray<SentDelivery<P>>,
    /** Sends a new delivery of `raw` (the JSON of `payload`) with the service's headers. */
    send(url: string, d: { id: string; event: string; payload: P; raw: string; headers: Record<string, string> }) {
      const entry = { ...d, url, status: 0, response: '' };
      sent.push(entry);
      return post(entry);
    },
    /** Sends a recorded delivery again, byte for byte. */
    redeliver(id: string) {
      const d = sent.find((x) => x.id === id);
      if (!d) throw new Error(`no delivery ${id}`);
      return post(d);
    },
  };
}

/** A server that keeps what is posted to it (for testing a fake's deliveries); answers `status`. */
export async function startCapture(status = 200) {
  const got: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      got.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(status).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, got, close: () => new Promise<void>((r) => server.close(() => r())) };
}

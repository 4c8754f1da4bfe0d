import dgram from 'node:dgram';
import net from 'node:net';

/**
 * A DNS server on 127.0.0.1 speaking the real wire protocol (UDP, RFC 1035) for the names a
 * test gives it. An answer may be a function of how many times the name was asked, to play a
 * name whose answer changes between two lookups. Counts every question per name and type.
 */
export interface FakeDns {
  server: string;
  asked(name: string, type?: 'A' | 'AAAA'): number;
  close(): Promise<void>;
}

type Answer = string[] | ((n: number) => string[]);

function readName(buf: Buffer, at: number): { name: string; end: number } {
  const labels: string[] = [];
  while (buf[at] !== 0) {
    labels.push(buf.toString('latin1', at + 1, at + 1 + buf[at]));
    at += 1 + buf[at];
  }
  return { name: labels.join('.').toLowerCase(), end: at + 1 };
}

function v6Bytes(ip: string): Buffer {
  const [head, tail = ''] = ip.split('::');
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = ip.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h;
  return Buffer.from(groups.flatMap((g) => [parseInt(g, 16) >> 8, parseInt(g, 16) & 0xff]));
}

export async function startFakeDns(records: Record<string, Answer>): Promise<FakeDns> {
  const counts = new Map<string, number>();
  const socket = dgram.createSocket('udp4');
  socket.on('message', (msg, rinfo) => {
    if (msg.length < 12) return;
    const { name, end } = readName(msg, 12);
    const qtype = msg.readUInt16BE(end);
    const type = qtype === 28 ? 'AAAA' : qtype === 1 ? 'A' : 'OTHER';
    const key = `${type} ${name}`;
    const n = (counts.get(key) ?? 0) + 1;
    counts.set(key, n);
    const spec = records[name];
    const all = spec === undefined ? null : typeof spec === 'function' ? spec(n) : spec;
    const family = type === 'A' ? 4 : type === 'AAAA' ? 6 : 0;
    const answers = (all ?? []).filter((ip) => net.isIP(ip) === family);
    const question = msg.subarray(12, end + 4);
    const header = Buffer.alloc(12);
    header.writeUInt16BE(msg.readUInt16BE(0), 0);
    header.writeUInt16BE(0x8180 | (all === null ? 3 : 0), 2); // response, recursion available; NXDOMAIN for unknown names
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(answers.length, 6);
    const rrs = answers.map((ip) => {
      const data = family === 4 ? Buffer.from(ip.split('.').map(Number)) : v6Bytes(ip);
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // the name: a pointer to the question's
      rr.writeUInt16BE(qtype, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(0, 6); // TTL 0: nobody may cache it
      rr.writeUInt16BE(data.length, 10);
      return Buffer.concat([rr, data]);
    });
    socket.send(Buffer.concat([header, question, ...rrs]), rinfo.port, rinfo.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', () => resolve()));
  return {
    server: `127.0.0.1:${socket.address().port}`,
    asked: (name, type = 'A') => counts.get(`${type} ${name.toLowerCase()}`) ?? 0,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}

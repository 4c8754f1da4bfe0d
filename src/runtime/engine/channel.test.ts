import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { PassThrough } from 'node:stream';
import { ChannelViolation, LineSplitter, MAX_EVENT_BYTES, readLines } from './channel.ts';

const text = (lines: Buffer[]) => lines.map((l) => l.toString('utf8'));

async function collect(it: AsyncGenerator<Buffer>): Promise<string[]> {
  const out: string[] = [];
  for await (const l of it) out.push(l.toString('utf8'));
  return out;
}

describe('the control channel line splitter', () => {
  it('splits lines across chunks, drops a CR before the newline, and keeps a last line without one', () => {
    const s = new LineSplitter(100);
    assert.deepEqual(text(s.push(Buffer.from('{"a":1}\n{"b"'))), ['{"a":1}']);
    assert.deepEqual(text(s.push(Buffer.from(':2}\r\n\n{"c":3}\n{"d"'))), ['{"b":2}', '', '{"c":3}']);
    assert.deepEqual(s.end()?.toString(), '{"d"');
    assert.equal(s.end(), null);
  });

  it('keeps multi-byte characters whole when a chunk cuts one in two', () => {
    const s = new LineSplitter(100);
    const bytes = Buffer.from('"héllo ✓"\n', 'utf8');
    const cut = bytes.indexOf(0xc3) + 1;
    assert.deepEqual(s.push(bytes.subarray(0, cut)), []);
    assert.deepEqual(text(s.push(bytes.subarray(cut))), ['"héllo ✓"']);
  });

  it('takes a line of exactly the bound and refuses one byte more, whether it came in one chunk or many', () => {
    assert.deepEqual(text(new LineSplitter(10).push(Buffer.from('0123456789\n'))), ['0123456789']);
    assert.deepEqual(text(new LineSplitter(10).push(Buffer.from('0123456789\r\n'))), ['0123456789']);
    assert.throws(() => new LineSplitter(10).push(Buffer.from('0123456789A\n')), ChannelViolation);
    const s = new LineSplitter(10);
    s.push(Buffer.from('01234'));
    s.push(Buffer.from('56789'));
    // No newline yet, but already over the bound: refused before the line ends.
    assert.throws(() => s.push(Buffer.from('A')), /the agent runtime sent a message larger than 10 bytes; the run was stopped so it cannot harm the service/);
  });

  it('names the documented bound in words', () => {
    const s = new LineSplitter();
    assert.throws(() => s.push(Buffer.alloc(MAX_EVENT_BYTES + 1, 0x61)), /larger than 8 MiB/);
  });
});

describe('reading the control channel', () => {
  it('reads lines in order and ends with the stream', async () => {
    const stream = new PassThrough();
    const r = readLines(stream, 100);
    stream.write('{"seq":1}\n{"se');
    stream.write('q":2}\n');
    stream.end('{"seq":3}');
    assert.deepEqual(await collect(r.lines), ['{"seq":1}', '{"seq":2}', '{"seq":3}']);
  });

  it('refuses an endless line without a newline after the bound, however it keeps coming, and holds no more than the bound', async () => {
    const stream = new PassThrough();
    const max = 1024 * 1024;
    const r = readLines(stream, max);
    // A writer that never stops (as a hostile agent writing into the runtime's stdout): 64 KiB at a time.
    const chunk = Buffer.alloc(64 * 1024, 0x41);
    let written = 0;
    const writer = setInterval(() => {
      for (let i = 0; i < 8 && !stream.destroyed; i++) {
        stream.write(chunk);
        written += chunk.length;
      }
    }, 1);
    try {
      await assert.rejects(collect(r.lines), (err: Error) => err instanceof ChannelViolation && /larger than 1 MiB/.test(err.message));
    } finally {
      clearInterval(writer);
      stream.destroy();
    }
    assert.ok(written > max);
  });

  it('a stream that errors or is destroyed ends the reading instead of throwing into the process', async () => {
    const broken = new PassThrough();
    const r1 = readLines(broken, 100);
    broken.write('{"seq":1}\n');
    setImmediate(() => broken.destroy(new Error('EPIPE')));
    assert.deepEqual(await collect(r1.lines), ['{"seq":1}']);
    // A later error on a stream nobody reads any more is handled too.
    broken.emit('error', new Error('late'));

    const cut = new PassThrough();
    const r2 = readLines(cut, 100);
    cut.write('{"seq":1}\n{"partial"');
    setImmediate(() => cut.destroy());
    assert.deepEqual(await collect(r2.lines), ['{"seq":1}', '{"partial"']);
  });

  it('after drain(), stops at the first quiet spell though the stream stays open (a process left behind holding it)', async () => {
    const held = new PassThrough();
    const r = readLines(held, 100);
    held.write('{"seq":1}\n');
    const got: string[] = [];
    for await (const l of r.lines) {
      got.push(l.toString());
      // The runtime exited: what still comes is read, then the reading ends though nobody closes the stream.
      if (got.length === 1) {
        r.drain(200);
        held.write('{"seq":2}\n');
      }
    }
    assert.deepEqual(got, ['{"seq":1}', '{"seq":2}']);
    assert.equal(held.destroyed, false);
    held.destroy();
  });

  it('a drain asked while waiting for output counts from then', async () => {
    const held = new PassThrough();
    const r = readLines(held, 100);
    const done = collect(r.lines);
    await new Promise((res) => setTimeout(res, 20));
    r.drain(100);
    assert.deepEqual(await done, []);
    held.destroy();
  });

  it('pauses the stream while a line is handled, so a slow reader holds the writer back', async () => {
    const stream = new PassThrough({ highWaterMark: 1024 });
    const r = readLines(stream, 1024 * 1024);
    const line = Buffer.from(`${'x'.repeat(1000)}\n`);
    let accepted = 0;
    // Writes while the stream takes them; a paused reader makes write() answer false.
    const fill = () => {
      while (accepted < 1000 && stream.write(line)) accepted++;
    };
    fill();
    const it = r.lines[Symbol.asyncIterator]();
    await it.next();
    // The reader holds one line and waits: the writer was stopped long before it wrote everything.
    await new Promise((res) => setTimeout(res, 50));
    fill();
    assert.ok(accepted < 100, `the writer was held back (${accepted} lines accepted)`);
    await it.return(undefined);
    stream.destroy();
  });
});

import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { describe, test } from 'node:test';
import { ChatError } from './errors.ts';
import { parseMultipart, streamedForm, type FileSink } from './multipart.ts';

const b = 'xYz-b0undary';
/** A form with text fields and a file whose bytes hold near-delimiters ("\r\n--xYz-b0und", "\r\n-"). */
function form() {
  const file = Buffer.concat([crypto.randomBytes(3000), Buffer.from(`\r\n--${b.slice(0, -2)}\r\n-`), crypto.randomBytes(70_000), Buffer.from('\r\n')]);
  const body = Buffer.concat([
    Buffer.from(`preamble\r\n--${b}\r\nContent-Disposition: form-data; name="note"\r\n\r\nhello ✓\r\n`),
    Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"; filename="a.bin"\r\nContent-Type: application/x-thing\r\n\r\n`),
    file,
    Buffer.from(`\r\n--${b}\r\nContent-Disposition: form-data; name="empty"\r\n\r\n\r\n--${b}--\r\nepilogue`),
  ]);
  return { file, body };
}

/** Reads `body` as a stream arriving in pieces of `size` bytes: the fields and files it gives. */
async function streamed(body: Buffer, size: number, limits = { limit: 1 << 20, fieldBytes: 1 << 10 }) {
  async function* pieces() {
    for (let at = 0; at < body.length; at += size) yield body.subarray(at, at + size);
  }
  const fields = new Map<string, string>();
  const files: Array<{ field: string; filename: string; contentType: string; data: Buffer }> = [];
  const tooLarge = () => new ChatError('too large', { status: 413 });
  await streamedForm(pieces(), b, { ...limits, tooLarge }, (k, v) => fields.set(k, v)).read(async (head) => {
    const parts: Buffer[] = [];
    const sink: FileSink = {
      write: async (data) => void parts.push(Buffer.from(data)),
      end: async () => void files.push({ ...head, data: Buffer.concat(parts) }),
    };
    return sink;
  });
  return { fields, files };
}

describe('multipart bodies read as they arrive', () => {
  test('a body cut in pieces of any size reads as the whole body does, delimiters split across pieces', async () => {
    const { file, body } = form();
    const whole = parseMultipart(body, b);
    assert.deepEqual([...whole.fields], [['note', 'hello ✓'], ['empty', '']]);
    assert.deepEqual(whole.files.map((f) => [f.field, f.filename, f.contentType]), [['file', 'a.bin', 'application/x-thing']]);
    assert.ok(whole.files[0].data.equals(file));
    for (const size of [1, 2, 7, 13, 64, 1000, 65_536, body.length]) {
      const got = await streamed(body, size);
      assert.deepEqual([...got.fields], [...whole.fields], `pieces of ${size}`);
      assert.equal(got.files.length, 1);
      assert.ok(got.files[0].data.equals(file), `pieces of ${size}`);
    }
  });

  test('a body past its limit, fields past theirs, or one that stops short is refused', async () => {
    const { body } = form();
    await assert.rejects(streamed(body, 4096, { limit: body.length - 1, fieldBytes: 1 << 10 }), (e: ChatError) => e.status === 413 && e.message === 'too large');
    await assert.rejects(streamed(body, 4096, { limit: 1 << 20, fieldBytes: 4 }), (e: ChatError) => e.status === 413 && /fields are larger/.test(e.message));
    for (const cut of [5, body.indexOf('a.bin'), body.length - 30]) {
      await assert.rejects(streamed(body.subarray(0, cut), 100), (e: ChatError) => e.status === 400 && e.message === 'Malformed multipart body', `cut at ${cut}`);
    }
    // Nothing but white space is an empty form, as before.
    assert.deepEqual(await streamed(Buffer.from(' \r\n '), 1), { fields: new Map(), files: [] });
  });
});

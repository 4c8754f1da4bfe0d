import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BodyReader, framingOf, MAX_HEAD_BYTES, parseHead, type Head } from './http1.ts';

const b = (s: string) => Buffer.from(s, 'latin1');
const head = (s: string, kind: 'request' | 'response' = 'request'): Head => {
  const r = parseHead(b(s), 0, kind);
  assert.equal(r.state, 'done', JSON.stringify(r));
  return (r as { head: Head }).head;
};
const bad = (s: string, kind: 'request' | 'response' = 'request') => {
  const r = parseHead(b(s), 0, kind);
  assert.equal(r.state, 'bad', s);
  return r as { reason: string; status: number };
};

describe('HTTP/1.1 heads', () => {
  test('a request head: method, target, version, headers in order with lower-case names', () => {
    const h = head('GET http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nX-Two: 1\r\nx-two:  2 \r\n\r\nbody');
    assert.equal(h.method, 'GET');
    assert.equal(h.target, 'http://a.test/x?y=1');
    assert.equal(h.minor, 1);
    assert.deepEqual(h.headers, [['host', 'a.test'], ['x-two', '1'], ['x-two', '2']]);
    const r = parseHead(b('GET / HTTP/1.0\r\n\r\nrest'), 0, 'request');
    assert.equal(r.state === 'done' && b('GET / HTTP/1.0\r\n\r\nrest').subarray(r.end).toString(), 'rest');
  });

  test('a head arrives in pieces: more until the empty line', () => {
    assert.equal(parseHead(b('GET / HTTP/1.1\r\nHost: a'), 0, 'request').state, 'more');
    assert.equal(parseHead(b('GET / HTTP/1.1\r\nHost: a\r\n'), 0, 'request').state, 'more');
  });

  test('what is ambiguous or malformed is refused, naming why', () => {
    assert.match(bad('NOT HTTP\r\n\r\n').reason, /request line/);
    assert.match(bad('GET / HTTP/2.0\r\n\r\n').reason, /request line/);
    assert.match(bad('GET  / HTTP/1.1\r\n\r\n').reason, /request line/);
    assert.match(bad('GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n').reason, /folded/);
    assert.match(bad('GET / HTTP/1.1\r\nBad Name: a\r\n\r\n').reason, /not a token/);
    assert.match(bad('GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n').reason, /CRLF/);
    assert.match(bad('GET / HTTP/1.1\r\nX: a\x00b\r\n\r\n').reason, /control/);
    assert.match(bad('GET / HTTP/1.1\r\n: nameless\r\n\r\n').reason, /no name/);
    assert.equal(bad(`GET / HTTP/1.1\r\nX: ${'a'.repeat(MAX_HEAD_BYTES)}\r\n\r\n`).status, 431);
    assert.equal(parseHead(b(`GET / HTTP/1.1\r\nX: ${'a'.repeat(MAX_HEAD_BYTES + 10)}`), 0, 'request').state, 'bad');
    assert.match(bad('HTTP/1.1 2000 OK\r\n\r\n', 'response').reason, /status line/);
  });

  test('a status line, with or without a reason', () => {
    const h = head('HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n', 'response');
    assert.equal(h.status, 404);
    assert.equal(h.reason, 'Not Found');
    assert.equal(head('HTTP/1.0 204\r\n\r\n', 'response').status, 204);
  });
});

describe('HTTP/1.1 framing', () => {
  const framing = (s: string, kind: 'request' | 'response' = 'request', method = 'GET') => framingOf(head(s, kind), kind, method);

  test('Content-Length, chunked, none and to-the-close', () => {
    assert.deepEqual(framing('POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\n'), { ok: true, framing: { kind: 'length', length: 5 } });
    assert.deepEqual(framing('POST / HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\n'), { ok: true, framing: { kind: 'length', length: 5 } });
    assert.deepEqual(framing('POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n'), { ok: true, framing: { kind: 'chunked' } });
    assert.deepEqual(framing('GET / HTTP/1.1\r\n\r\n'), { ok: true, framing: { kind: 'none' } });
    assert.deepEqual(framing('HTTP/1.1 200 OK\r\n\r\n', 'response'), { ok: true, framing: { kind: 'close' } });
    assert.deepEqual(framing('HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n', 'response', 'HEAD'), { ok: true, framing: { kind: 'none' } });
    assert.deepEqual(framing('HTTP/1.1 304 Not Modified\r\n\r\n', 'response'), { ok: true, framing: { kind: 'none' } });
  });

  test('smuggling shapes are refused: both headers, lengths that disagree, a length that is not a number, other codings', () => {
    assert.equal(framing('POST / HTTP/1.1\r\ncontent-length: 5\r\ntransfer-encoding: chunked\r\n\r\n').ok, false);
    assert.equal(framing('POST / HTTP/1.1\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\n').ok, false);
    assert.equal(framing('POST / HTTP/1.1\r\ncontent-length: 5, 6\r\n\r\n').ok, false);
    assert.equal(framing('POST / HTTP/1.1\r\ncontent-length: -1\r\n\r\n').ok, false);
    assert.equal(framing('POST / HTTP/1.1\r\ncontent-length: 0x10\r\n\r\n').ok, false);
    assert.equal(framing('POST / HTTP/1.1\r\ntransfer-encoding: gzip, chunked\r\n\r\n').ok, false);
    assert.equal(framing('POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\ntransfer-encoding: identity\r\n\r\n').ok, false);
  });
});

describe('HTTP/1.1 bodies', () => {
  /** Feeds `pieces` one after another; the payload, where the body stopped in the last piece, and whether it ended. */
  const read = (framing: ConstructorParameters<typeof BodyReader>[0], pieces: string[]) => {
    const payload: Buffer[] = [];
    const r = new BodyReader(framing, (p) => payload.push(Buffer.from(p)));
    let stop: number | { error: string } = 0;
    for (const p of pieces) {
      stop = r.feed(b(p), 0);
      if (typeof stop !== 'number') break;
    }
    return { payload: Buffer.concat(payload).toString('latin1'), stop, done: r.done };
  };

  test('a length-framed body stops at its length; what follows is the next message', () => {
    assert.deepEqual(read({ kind: 'length', length: 5 }, ['he', 'lloGET']), { payload: 'hello', stop: 3, done: true });
  });

  test('a chunked body is decoded across any split, extensions and trailers included', () => {
    const whole = '5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT';
    for (let cut = 1; cut < whole.length - 4; cut++) {
      const r = read({ kind: 'chunked' }, [whole.slice(0, cut), whole.slice(cut)]);
      assert.equal(r.payload, 'hello world', `cut at ${cut}`);
      assert.equal(r.done, true);
      assert.equal(r.stop, whole.length - cut - 4, `cut at ${cut}`);
    }
  });

  test('broken chunking is an error, not a guess', () => {
    assert.equal(typeof read({ kind: 'chunked' }, ['zz\r\n']).stop, 'object');
    assert.equal(typeof read({ kind: 'chunked' }, ['3\r\nabcd\r\n']).stop, 'object');
    assert.equal(typeof read({ kind: 'chunked' }, ['3\nabc\r\n']).stop, 'object');
    assert.equal(typeof read({ kind: 'chunked' }, [`1${'0'.repeat(12)}\r\n`]).stop, 'object');
  });

  test('a close-delimited body takes everything until the connection ends', () => {
    const payload: Buffer[] = [];
    const r = new BodyReader({ kind: 'close' }, (p) => payload.push(p));
    assert.equal(r.feed(b('abc'), 1), 3);
    assert.equal(r.done, false);
    assert.equal(r.finish(), true);
    assert.equal(Buffer.concat(payload).toString(), 'bc');
    const cut = new BodyReader({ kind: 'length', length: 5 }, () => {});
    cut.feed(b('ab'), 0);
    assert.equal(cut.finish(), false);
  });
});

import { isUtf8 } from 'node:buffer';
import { ChatError, chatErrors } from './errors.ts';

export interface UploadedFile {
  field: string;
  filename: string;
  contentType: string;
  data: Buffer;
}

/** A part's headers: its field name, its file name (null for a text field) and its type. */
export interface PartHead {
  field: string;
  filename: string | null;
  contentType: string;
}

/** What a multipart body is read into: a part begins, some of its bytes, it ends. */
export type MultipartEvent = { kind: 'part'; head: PartHead } | { kind: 'data'; data: Buffer } | { kind: 'end' };

const MAX_PARTS = 1000;
/** The most a part's headers may hold: Zulip's clients send two short lines. */
const MAX_HEAD_BYTES = 16 * 1024;

const malformed = () => chatErrors.bad('Malformed multipart body');

/** The boundary of a multipart/form-data content type, or null. */
export function boundaryOf(contentType: string): string | null {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : null;
}

function partHead(lines: string[]): PartHead {
  let field: string | null = null;
  let filename: string | null = null;
  let contentType = 'application/octet-stream';
  for (const h of lines) {
    const colon = h.indexOf(':');
    if (colon < 0) continue;
    const key = h.slice(0, colon).trim().toLowerCase();
    const value = h.slice(colon + 1).trim();
    if (key === 'content-disposition') {
      field = /\bname="([^"]*)"/i.exec(value)?.[1] ?? null;
      filename = /\bfilename="([^"]*)"/i.exec(value)?.[1] ?? null;
    } else if (key === 'content-type') {
      contentType = value;
    }
  }
  if (field === null) throw malformed();
  return { field, filename, contentType };
}

/**
 * Reads a multipart/form-data body (RFC 7578) as its bytes come, in pieces of any size: each
 * `push` answers what the bytes so far complete (a part's start, its bytes, its end), holding
 * back only what may be the start of the next delimiter. A part's bytes are never gathered
 * here, so a file can go on to its store as it arrives. Zulip clients (zulip-js among them)
 * send every POST this way.
 */
export class MultipartReader {
  readonly #delimiter: Buffer;
  /** The delimiter as it ends a part's bytes. */
  readonly #ending: Buffer;
  #pending = Buffer.alloc(0);
  #state: 'preamble' | 'delimited' | 'head' | 'body' | 'done' = 'preamble';
  /** Whether all the preamble read so far is white space: a body of nothing else is an empty form. */
  #blank = true;
  #parts = 0;

  constructor(boundary: string) {
    this.#delimiter = Buffer.from(`--${boundary}`);
    this.#ending = Buffer.from(`\r\n--${boundary}`);
  }

  push(bytes: Buffer): MultipartEvent[] {
    const events: MultipartEvent[] = [];
    if (this.#state === 'done') return events;
    let buf = this.#pending.length ? Buffer.concat([this.#pending, bytes]) : bytes;
    for (;;) {
      if (this.#state === 'preamble') {
        const at = buf.indexOf(this.#delimiter);
        const passed = at < 0 ? Math.max(buf.length - this.#delimiter.length + 1, 0) : at;
        this.#blank &&= !buf.subarray(0, passed).toString('latin1').trim();
        buf = buf.subarray(at < 0 ? passed : at + this.#delimiter.length);
        if (at < 0) break;
        this.#state = 'delimited';
      } else if (this.#state === 'delimited') {
        if (buf.length < 2) break;
        const next = buf.subarray(0, 2).toString('latin1');
        if (next === '--') {
          // What follows the last delimiter (an epilogue) is no part of the form.
          this.#state = 'done';
          buf = Buffer.alloc(0);
          break;
        }
        if (next !== '\r\n') throw malformed();
        buf = buf.subarray(2);
        this.#state = 'head';
      } else if (this.#state === 'head') {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          if (buf.length > MAX_HEAD_BYTES) throw malformed();
          break;
        }
        if (++this.#parts > MAX_PARTS) throw chatErrors.bad('Too many parameters');
        events.push({ kind: 'part', head: partHead(buf.subarray(0, end).toString('utf8').split('\r\n')) });
        buf = buf.subarray(end + 4);
        this.#state = 'body';
      } else if (this.#state === 'body') {
        const at = buf.indexOf(this.#ending);
        const passed = at < 0 ? Math.max(buf.length - this.#ending.length + 1, 0) : at;
        if (passed > 0) events.push({ kind: 'data', data: buf.subarray(0, passed) });
        buf = buf.subarray(at < 0 ? passed : at + this.#ending.length);
        if (at < 0) break;
        events.push({ kind: 'end' });
        this.#state = 'delimited';
      } else {
        break;
      }
    }
    // Kept as a copy: what is held back is small, and the piece it came from can go.
    this.#pending = Buffer.from(buf);
    return events;
  }

  /** The body has ended: it must have ended the form (or held nothing but white space). */
  finish(): void {
    if (this.#state === 'done') return;
    if (this.#state === 'preamble' && this.#blank && !this.#pending.toString('latin1').trim()) return;
    throw malformed();
  }
}

/** A part's text as a parameter: its bytes must be UTF-8. */
function fieldText(head: PartHead, pieces: Buffer[]): string {
  const data = Buffer.concat(pieces);
  if (!isUtf8(data)) throw chatErrors.notUtf8(head.field);
  return data.toString('utf8');
}

/**
 * Parses a multipart/form-data body that the body limit has already bounded, all of it at
 * once: text fields become parameters, parts with a filename become files.
 */
export function parseMultipart(body: Buffer, boundary: string): { fields: Map<string, string>; files: UploadedFile[] } {
  const fields = new Map<string, string>();
  const files: UploadedFile[] = [];
  const reader = new MultipartReader(boundary);
  const events = reader.push(body);
  reader.finish();
  let head: PartHead | null = null;
  let pieces: Buffer[] = [];
  for (const e of events) {
    if (e.kind === 'part') [head, pieces] = [e.head, []];
    else if (e.kind === 'data') pieces.push(e.data);
    else if (head!.filename !== null) files.push({ field: head!.field, filename: head!.filename, contentType: head!.contentType, data: Buffer.concat(pieces) });
    else fields.set(head!.field, fieldText(head!, pieces));
  }
  return { fields, files };
}

/** Where a streamed form's file goes as it arrives: its bytes in order, then the end. */
export interface FileSink {
  write(data: Buffer): Promise<void>;
  end(): Promise<void>;
}

/**
 * A multipart body not yet read, on a route that reads it as it arrives (an upload): at most
 * `limit` bytes in all, else `tooLarge`; its text fields at most `fieldBytes`.
 */
export interface StreamedForm {
  /**
   * Reads the body to its end: text fields become parameters, each file part's bytes go to the
   * sink `onFile` gives for it, as they arrive (each write awaited before more is read).
   */
  read(onFile: (head: PartHead & { filename: string }) => Promise<FileSink>): Promise<void>;
}

export function streamedForm(
  body: AsyncIterable<Buffer>,
  boundary: string,
  limits: { limit: number; fieldBytes: number; tooLarge: () => ChatError },
  onField: (name: string, value: string) => void,
): StreamedForm {
  let read = false;
  return {
    async read(onFile) {
      if (read) throw new Error('a streamed form is read once');
      read = true;
      const reader = new MultipartReader(boundary);
      let total = 0;
      let fieldBytes = 0;
      let head: PartHead | null = null;
      let pieces: Buffer[] = [];
      let sink: FileSink | null = null;
      for await (const bytes of cutOff(body)) {
        total += bytes.length;
        if (total > limits.limit) throw limits.tooLarge();
        for (const e of reader.push(bytes)) {
          if (e.kind === 'part') {
            [head, pieces] = [e.head, []];
            sink = head.filename === null ? null : await onFile({ ...head, filename: head.filename });
          } else if (e.kind === 'data' && sink) {
            await sink.write(e.data);
          } else if (e.kind === 'data') {
            fieldBytes += e.data.length;
            if (fieldBytes > limits.fieldBytes) throw new ChatError(`The form's fields are larger than ${limits.fieldBytes / 1024 / 1024} MiB`, { status: 413 });
            pieces.push(e.data);
          } else if (sink) {
            await sink.end();
            sink = null;
          } else {
            onField(head!.field, fieldText(head!, pieces));
          }
        }
      }
      reader.finish();
    },
  };
}

/** The body's bytes; a body that stops short (the client went away) is a 400, not a fault of ours. */
async function* cutOff(body: AsyncIterable<Buffer>): AsyncGenerator<Buffer> {
  try {
    yield* body;
  } catch {
    throw chatErrors.bad('The request body was cut off before its end');
  }
}

import { isUtf8 } from 'node:buffer';
import { chatErrors } from './errors.ts';

export interface UploadedFile {
  field: string;
  filename: string;
  contentType: string;
  data: Buffer;
}

const MAX_PARTS = 1000;

/** The boundary of a multipart/form-data content type, or null. */
export function boundaryOf(contentType: string): string | null {
  const m = /;\s*boundary=(?:"([^"]{1,70})"|([^\s;]{1,70}))/i.exec(contentType);
  return m ? (m[1] ?? m[2]) : null;
}

/**
 * Parses a multipart/form-data body (RFC 7578) that the body limit has already bounded:
 * text fields become parameters, parts with a filename become files. Zulip clients (zulip-js
 * among them) send every POST this way.
 */
export function parseMultipart(body: Buffer, boundary: string): { fields: Map<string, string>; files: UploadedFile[] } {
  const fields = new Map<string, string>();
  const files: UploadedFile[] = [];
  const delimiter = Buffer.from(`--${boundary}`);
  let pos = body.indexOf(delimiter);
  // An empty form (form-data sends no bytes at all for one) holds no parameters.
  if (pos < 0 && !body.toString('latin1').trim()) return { fields, files };
  if (pos < 0) throw chatErrors.bad('Malformed multipart body');
  let parts = 0;
  for (;;) {
    pos += delimiter.length;
    if (body.subarray(pos, pos + 2).toString() === '--') break;
    if (body.subarray(pos, pos + 2).toString() !== '\r\n') throw chatErrors.bad('Malformed multipart body');
    pos += 2;
    const headerEnd = body.indexOf('\r\n\r\n', pos);
    if (headerEnd < 0) throw chatErrors.bad('Malformed multipart body');
    const headers = body.subarray(pos, headerEnd).toString('utf8').split('\r\n');
    const next = body.indexOf(Buffer.concat([Buffer.from('\r\n'), delimiter]), headerEnd + 4);
    if (next < 0) throw chatErrors.bad('Malformed multipart body');
    const data = body.subarray(headerEnd + 4, next);
    if (++parts > MAX_PARTS) throw chatErrors.bad('Too many parameters');
    let name: string | null = null;
    let filename: string | null = null;
    let contentType = 'application/octet-stream';
    for (const h of headers) {
      const colon = h.indexOf(':');
      if (colon < 0) continue;
      const key = h.slice(0, colon).trim().toLowerCase();
      const value = h.slice(colon + 1).trim();
      if (key === 'content-disposition') {
        name = /\bname="([^"]*)"/i.exec(value)?.[1] ?? null;
        filename = /\bfilename="([^"]*)"/i.exec(value)?.[1] ?? null;
      } else if (key === 'content-type') {
        contentType = value;
      }
    }
    if (name === null) throw chatErrors.bad('Malformed multipart body');
    if (filename !== null) files.push({ field: name, filename, contentType, data: Buffer.from(data) });
    else if (!isUtf8(data)) throw chatErrors.notUtf8(name);
    else fields.set(name, data.toString('utf8'));
    pos = next + 2;
  }
  return { fields, files };
}

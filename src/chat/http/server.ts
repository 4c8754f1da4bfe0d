import { isUtf8 } from 'node:buffer';
import { Readable } from 'node:stream';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Type, type TSchema } from 'typebox';
import { methodsServing, type App } from '../../http/kernel.ts';
import type { Caller } from '../users/users.service.ts';
import { chatErrors, toChatError, type ChatError } from './errors.ts';
import { boundaryOf, parseMultipart, streamedForm, type StreamedForm, type UploadedFile } from './multipart.ts';
import { Params } from './params.ts';
import type { RateLimiter } from './rate-limit.ts';

/**
 * A body as received; parsed only after authentication, as Zulip does. On a route that reads
 * its multipart body as it arrives (`streamed`), that body is the request's stream, unread.
 */
type RawBody =
  | { kind: 'form' | 'multipart' | 'other'; text: string; buffer: Buffer; contentType: string }
  | { kind: 'stream'; stream: Readable; contentType: string; limits: StreamedLimits };

/** The bounds of a body read as it arrives: `limit` bytes in all (else `tooLarge`), `fieldBytes` of text fields. */
interface StreamedLimits {
  limit: number;
  fieldBytes: number;
  tooLarge: () => ChatError;
}

const MAX_PARAMS = 1000;

/**
 * Makes a Fastify app speak Zulip: form-encoded and multipart bodies on every method (other
 * bodies are ignored, as Django ignores them), the `{result, msg, code}` error envelope with
 * the status and headers each error carries, and 404 for unknown endpoints.
 */
export function useChatConventions(app: App) {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/x-www-form-urlencoded', { parseAs: 'buffer' }, (req, body, done) => {
    done(null, { kind: 'form', text: (body as Buffer).toString('utf8'), buffer: body as Buffer, contentType: String(req.headers['content-type']) } satisfies RawBody);
  });
  app.addContentTypeParser('multipart/form-data', { parseAs: 'buffer' }, (req, body, done) => {
    done(null, { kind: 'multipart', text: '', buffer: body as Buffer, contentType: String(req.headers['content-type']) } satisfies RawBody);
  });
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (req, body, done) => {
    done(null, { kind: 'other', text: '', buffer: body as Buffer, contentType: String(req.headers['content-type'] ?? '') } satisfies RawBody);
  });

  // A path some endpoint serves, called with another method, is a 405 listing the methods it
  // takes, as Zulip's rest_dispatch answers (a client learns it used the wrong verb, not that the
  // endpoint is missing); any other path is a 404.
  const notFoundOrWrongMethod = (req: FastifyRequest) => {
    // An `*_id` segment is digits (pathId): `/users/me/status` is not `/users/{user_id}/status`.
    // Zulip lists the methods without HEAD, which comes with GET.
    const served = methodsServing(app, req.url, (params) => Object.entries(params).every(([name, v]) => !name.endsWith('_id') || /^\d+$/.test(v))).filter((m) => m !== 'HEAD');
    const method = req.method === 'HEAD' ? 'GET' : req.method;
    return served.length && !served.includes(method) ? chatErrors.methodNotAllowed(served) : chatErrors.notFound();
  };

  app.setNotFoundHandler((req, reply) => {
    const e = notFoundOrWrongMethod(req);
    for (const [k, v] of Object.entries(e.headers)) void reply.header(k, v);
    void reply.status(e.status).send(e.body());
  });

  app.setErrorHandler((err: any, req, reply) => {
    let e = toChatError(err, req);
    // A path id that is not digits (pathId) may be another endpoint's fixed segment.
    if (e.status === 404 && e.code === 'BAD_REQUEST') e = notFoundOrWrongMethod(req);
    for (const [k, v] of Object.entries(e.headers)) void reply.header(k, v);
    return reply.status(e.status).send(e.body());
  });
}

/**
 * Collects the parameters of a request: the body's (form or multipart) over the query string's.
 * A streamed multipart body is read later, by the handler (`form`): its text fields join the
 * parameters as they are read.
 */
export function readParams(req: FastifyRequest): { params: Params; files: UploadedFile[]; form: StreamedForm | null } {
  const values = new Map<string, string>();
  const query = req.url.indexOf('?');
  if (query >= 0) readForm(req.url.slice(query + 1), values);
  // Path segments reach queries as they are: PostgreSQL cannot take a NUL in text.
  for (const [name, v] of Object.entries((req.params ?? {}) as Record<string, unknown>)) {
    if (typeof v === 'string' && v.includes('\u0000')) throw chatErrors.bad(`${name} contains NULL (0x00) characters.`);
  }
  let files: UploadedFile[] = [];
  let form: StreamedForm | null = null;
  const body = req.body as RawBody | undefined;
  if (body?.kind === 'form') {
    readForm(body.text, values, body.buffer);
  } else if (body?.kind === 'multipart') {
    const boundary = boundaryOf(body.contentType);
    if (!boundary) throw chatErrors.bad('Malformed multipart body');
    const parsed = parseMultipart(body.buffer, boundary);
    for (const [k, v] of parsed.fields) values.set(k, v);
    files = parsed.files;
  } else if (body?.kind === 'stream') {
    const boundary = boundaryOf(body.contentType);
    if (!boundary) throw chatErrors.bad('Malformed multipart body');
    form = streamedForm(body.stream, boundary, body.limits, (name, value) => {
      values.set(name, value);
      if (values.size > MAX_PARAMS) throw chatErrors.bad('Too many parameters');
    });
  }
  if (values.size > MAX_PARAMS) throw chatErrors.bad('Too many parameters');
  return { params: new Params(values), files, form };
}

/**
 * Reads a form-encoded string (a body, with its bytes; a query string) into `values`. Bytes that
 * are not UTF-8, raw or percent-escaped ("%ED%A0%80", "%FF"), are read as U+FFFD and would be
 * stored as if sent: where U+FFFD appears, each pair is read again strictly and the first that is
 * not UTF-8 is refused, named. Only a form with U+FFFD in it pays for the second reading.
 */
function readForm(form: string, values: Map<string, string>, bytes?: Buffer): void {
  let replaced = false;
  for (const [k, v] of new URLSearchParams(form)) {
    values.set(k, v);
    replaced ||= k.includes('\uFFFD') || v.includes('\uFFFD');
  }
  if (!replaced) return;
  // '&' is one byte that is never part of a character: the text's pairs are the bytes' pairs.
  const rawPairs: Buffer[] = [];
  for (let at = 0; bytes && at <= bytes.length; ) {
    const end = bytes.indexOf(0x26, at);
    rawPairs.push(bytes.subarray(at, end < 0 ? bytes.length : end));
    at = end < 0 ? bytes.length + 1 : end + 1;
  }
  form.split('&').forEach((pair, i) => {
    const eq = pair.indexOf('=');
    const name = new URLSearchParams(`${eq < 0 ? pair : pair.slice(0, eq)}=`).keys().next().value || '(a parameter name)';
    if (bytes && !isUtf8(rawPairs[i])) throw chatErrors.notUtf8(name);
    try {
      // A '%' not followed by two hex digits is itself, as URLSearchParams reads it.
      decodeURIComponent(pair.replaceAll('+', ' ').replace(/%(?![0-9A-Fa-f]{2})/g, '%25'));
    } catch {
      throw chatErrors.notUtf8(name);
    }
  });
}

export interface ChatContext {
  req: FastifyRequest;
  reply: FastifyReply;
  params: Params;
  files: UploadedFile[];
  /** A multipart body to read as it arrives, on a `streamed` route (else null). */
  form: StreamedForm | null;
}

export interface AuthedContext extends ChatContext {
  caller: Caller;
}

type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

interface RouteDef {
  method: Method;
  url: string;
  operationId: string;
  tags: string[];
  description?: string;
  /** Schema of the success body (also the whitelist of what leaves the server). */
  response?: TSchema;
  /** The largest body this route takes, in bytes, when it is not the server's. */
  bodyLimit?: number;
  /**
   * A multipart body is not gathered in memory but read by the handler as it arrives (ctx.form),
   * within these bounds; a body declared larger than `limit` is refused before it is read. Other
   * bodies keep the server's limit.
   */
  streamed?: StreamedLimits;
}

/** A file as a route answers it: its bytes (whole, or a stream of them) and the headers that describe them; a status other than 200 (206 for a range). */
export interface FileAnswer {
  body: Buffer | Readable;
  headers: Record<string, string>;
  status?: number;
}

export interface ChatRouter {
  /** A route for a signed-in account: Basic auth, then the per-user rate limit, then parameters. */
  authed(def: RouteDef, handler: (ctx: AuthedContext) => Promise<Record<string, unknown>>): void;
  /** A route anyone may call. */
  open(def: RouteDef, handler: (ctx: ChatContext) => Promise<Record<string, unknown>>): void;
  /** A route for a signed-in account that answers a file, not the JSON envelope (errors keep it). */
  authedFile(def: RouteDef, handler: (ctx: AuthedContext) => Promise<FileAnswer>): void;
  /** A route anyone may call that answers a file. */
  openFile(def: RouteDef, handler: (ctx: ChatContext) => Promise<FileAnswer>): void;
}

/** Wraps handlers in the success envelope, adding `ignored_parameters_unsupported` when something went unread. */
export function chatRouter(app: App, deps: { authenticate(header: string | undefined): Promise<Caller>; limiter: RateLimiter | null }): ChatRouter {
  const envelope = (params: Params, data: Record<string, unknown>) => {
    const ignored = params.ignored();
    return { result: 'success', msg: '', ...data, ...(ignored.length ? { ignored_parameters_unsupported: ignored } : {}) };
  };
  const schemaOf = (def: RouteDef) => ({ operationId: def.operationId, tags: def.tags, description: def.description, ...(def.response ? { response: { 200: def.response } } : {}) });
  const sendFile = (req: FastifyRequest, reply: FastifyReply, file: FileAnswer) => {
    for (const [k, v] of Object.entries(file.headers)) void reply.header(k, v);
    if (file.status) void reply.status(file.status);
    // HEAD answers the headers (Content-Length among them) without reading the file: Fastify
    // would read a stream to its end, so it is given an empty one.
    if (req.method === 'HEAD' && file.body instanceof Readable) {
      file.body.destroy();
      return reply.send(Readable.from([]));
    }
    return reply.send(file.body);
  };
  const signIn = async (req: FastifyRequest, reply: FastifyReply) => {
    const caller = await deps.authenticate(req.headers.authorization);
    if (deps.limiter) {
      const d = deps.limiter.hit(caller.user.id);
      void reply.header('X-RateLimit-Limit', String(d.limit));
      void reply.header('X-RateLimit-Remaining', String(d.remaining));
      void reply.header('X-RateLimit-Reset', String(Math.floor(Date.now() / 1000 + d.secondsToFreedom)));
      if (d.limited) throw chatErrors.rateLimited(d.secondsToFreedom);
    }
    return caller;
  };
  const route = (def: RouteDef, handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>) => {
    const options = { method: def.method, url: def.url, schema: schemaOf(def), ...(def.bodyLimit ? { bodyLimit: def.bodyLimit } : {}), handler };
    const limits = def.streamed;
    if (!limits) return void app.route(options);
    // A scope of its own, where a multipart body is handed on unread (other bodies as everywhere).
    void app.register(async (scope: App) => {
      scope.removeContentTypeParser('multipart/form-data');
      scope.addContentTypeParser('multipart/form-data', (req, payload, done) => {
        if (Number(req.headers['content-length'] ?? 0) > limits.limit) return done(limits.tooLarge(), undefined);
        done(null, { kind: 'stream', stream: payload as Readable, contentType: String(req.headers['content-type']), limits } satisfies RawBody);
      });
      scope.route(options);
    });
  };

  /**
   * Every chat route: signed in or open (`signIn`), answering the JSON envelope or a file
   * (`file`). Sign-in (and the rate limit) comes before the parameters are read, as Zulip's.
   */
  const serve = (def: RouteDef, how: { signIn: boolean; file: boolean }, handler: (ctx: AuthedContext) => Promise<unknown>) =>
    route(def, async (req, reply) => {
      const caller = how.signIn ? await signIn(req, reply) : undefined;
      const { params, files, form } = readParams(req);
      // An open route's handler takes a ChatContext: it is given no caller.
      const answer = await handler({ req, reply, params, files, form, ...(caller ? { caller } : {}) } as AuthedContext);
      return how.file ? sendFile(req, reply, answer as FileAnswer) : envelope(params, answer as Record<string, unknown>);
    });

  return {
    authed: (def, handler) => serve(def, { signIn: true, file: false }, handler),
    open: (def, handler) => serve(def, { signIn: false, file: false }, handler),
    authedFile: (def, handler) => serve(def, { signIn: true, file: true }, handler),
    openFile: (def, handler) => serve(def, { signIn: false, file: true }, handler),
  };
}

/**
 * A numeric path segment as Zulip's URL patterns take it (`[0-9]+`, any length); anything else is
 * an unknown endpoint. An id too large for any row still names the endpoint: it reaches the
 * service (whose `dbId` matches nothing) and is answered as that resource's unknown id.
 */
export function pathId(raw: string): number {
  if (!/^\d+$/.test(raw)) throw chatErrors.notFound();
  return Number(raw);
}

/** The success envelope's schema around an endpoint's own fields. */
export function Envelope(props: Record<string, TSchema> = {}, opts: { open?: boolean } = {}) {
  return Type.Object(
    { result: Type.Literal('success'), msg: Type.String(), ignored_parameters_unsupported: Type.Optional(Type.Array(Type.String())), ...props },
    { additionalProperties: opts.open ?? false },
  );
}

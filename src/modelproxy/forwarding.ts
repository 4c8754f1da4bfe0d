import type { OutgoingHttpHeaders } from 'node:http';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { hashToken } from '../auth/credentials.ts';
import { boundedMemo } from '../bounded-memo.ts';
import type { ModelAlias, ModelCatalog } from '../models/catalog.ts';
import { anthropicAdapter } from './anthropic.ts';
import { ProxyError, proxyErrors, sendProxyError } from './errors.ts';
import type * as store from './admission/admission.ts';
import { takeRawJson } from './raw-json.ts';
import { estimateTokens, post, readBody, storableText, tokenCount, upstreamError, UpstreamNetworkError, openaiAdapter, type Adapter, type ChatRequest, type Usage } from './upstream.ts';

/** What the forwarder needs: admission, the aliases, and upstream credentials by secret name. */
export interface ForwarderDeps {
  admission: store.Admission;
  catalog: ModelCatalog;
  credential(secretName: string): Promise<string | null>;
  /** How long a reservation may stay open before a sweeper releases it. */
  reservationTtlSeconds: number;
  upstreamIdleTimeoutMs: number;
}

const ADAPTERS: Record<ModelAlias['api'], Adapter> = { openai: openaiAdapter, anthropic: anthropicAdapter };

/**
 * The hash of a virtual key, kept for the keys in use: an agent calls with the same key every
 * step, and a SHA-256 as one call among a step's other work costs about 50 µs (cold caches),
 * where a look-up costs nothing. Whether the key is valid is still decided by admission each time.
 */
export const keyHashOf = boundedMemo(1024, hashToken);

const dollars = (alias: ModelAlias, tokensIn: number, tokensOut: number) => (tokensIn * alias.input_usd_per_mtok + tokensOut * alias.output_usd_per_mtok) / 1e6;

/** The answer to a refused admission. */
function reservationError(r: store.Reservation, model: string): ProxyError {
  switch (r.outcome) {
    case 'invalid_key':
      return proxyErrors.invalidKey();
    case 'model_not_allowed':
      return proxyErrors.modelNotAllowed(model);
    case 'rpm':
    case 'tpm':
      return proxyErrors.rateLimited(r.outcome, r.retryAfter ?? 1);
    case 'key_budget':
      return proxyErrors.keyBudget(r.retryAfter);
    case 'team_budget':
      return proxyErrors.teamBudget(r.retryAfter);
    default:
      return proxyErrors.internal();
  }
}

/**
 * The forwarding rules of a chat completion: resolve the alias, admit and reserve the worst
 * case, add the upstream credential, forward (whole or streamed), and settle exactly once with
 * what the request really cost, whatever happens on the way.
 */
export function createForwarder(deps: ForwarderDeps) {
  const { catalog, admission } = deps;

  /** Settles and queues the request log line; written after the answer went out, so off the request's path. */
  function finish(req: FastifyRequest, s: Omit<store.Settlement, 'requestId' | 'latencyMs'>, started: number) {
    // What an upstream said is stored only in a shape the database takes: one bad line must not hold up the others.
    admission.settle({
      ...s,
      tokensIn: tokenCount(s.tokensIn),
      tokensOut: tokenCount(s.tokensOut),
      cost: Number.isFinite(s.cost) && s.cost > 0 ? s.cost : 0,
      // A model is logged only when it is an alias; cleaned all the same, as the rest.
      model: s.model === null ? null : storableText(s.model, 200),
      error: s.error === null ? null : storableText(s.error),
      upstreamRequestId: s.upstreamRequestId === null ? null : storableText(s.upstreamRequestId, 200),
      requestId: req.id,
      latencyMs: Math.round(performance.now() - started),
    });
  }

  /** Forwards one completion for a caller that sent `key`; answers on `reply` (streamed answers hijack it). */
  async function complete(req: FastifyRequest, reply: FastifyReply, body: ChatRequest, key: string | null): Promise<FastifyReply> {
    const started = performance.now();
    const stream = body.stream === true;
    const base = { stream, reservation: null, keyId: null, team: null, role: null, model: body.model, cost: 0, tokensIn: 0, tokensOut: 0, upstreamRequestId: null, count: false };
    const keyHash = key === null ? null : keyHashOf(key);

    const alias = catalog.get(body.model);
    if (keyHash === null || !alias) {
      // Which aliases exist is shown to holders of a valid key only.
      const err = keyHash !== null && (await admission.authenticate(keyHash)) ? proxyErrors.modelNotFound(body.model) : proxyErrors.invalidKey();
      finish(req, { ...base, model: alias ? body.model : null, status: err.status, error: err.code }, started);
      return sendProxyError(reply, err);
    }
    const adapter = ADAPTERS[alias.api];
    // The worst case of the output: every one of the n choices as long as allowed.
    const maxOut = Math.min(body.max_completion_tokens ?? body.max_tokens ?? alias.max_output_tokens, alias.max_output_tokens) * (body.n ?? 1);
    // The credential is added below, after the reservation; the payload does not depend on it.
    // The body's bytes, when kept, are used here and let go of (a streamed answer may last minutes).
    const draft = adapter.request(body, alias, null, takeRawJson(body));
    const promptTokens = estimateTokens(Buffer.byteLength(draft.payload));
    const amount = dollars(alias, promptTokens, maxOut);

    const r = await admission.reserve({ keyHash, model: alias.alias, amount, tokens: promptTokens, ttlSeconds: deps.reservationTtlSeconds });
    const who = { keyId: r.keyId, team: r.team, role: r.role, model: alias.alias };
    if (r.outcome !== 'ok') {
      const err = reservationError(r, alias.alias);
      finish(req, { ...base, ...who, status: err.status, error: err.code }, started);
      return sendProxyError(reply, err);
    }
    let settled = false;
    /** Settles once: the first outcome of a request is the one charged and logged. */
    const settleWith = (status: number, usage: Usage | null, upstreamRequestId: string | null, error: string | null) => {
      if (settled) return;
      settled = true;
      finish(
        req,
        {
          ...base,
          ...who,
          reservation: r.reservation,
          status,
          tokensIn: usage?.tokensIn ?? 0,
          tokensOut: usage?.tokensOut ?? 0,
          cost: usage ? dollars(alias, usage.tokensIn, usage.tokensOut) : 0,
          upstreamRequestId,
          error,
          count: true,
        },
        started,
      );
    };
    const fail = (e: ProxyError, upstreamId: string | null = null, logged: string | null = e.code) => {
      settleWith(e.status, null, upstreamId, logged);
      return sendProxyError(reply, e);
    };

    // Whatever fails after the reservation, the reservation is released and the request logged.
    try {
      // Anthropic's API answers one choice per request: a client asking for more is told, not given one.
      if (alias.api === 'anthropic' && (body.n ?? 1) > 1) {
        return fail(proxyErrors.invalidRequest(`the model "${alias.alias}" answers one choice per request: leave n out or set it to 1`, 'n'));
      }
      let credential: string | null = null;
      if (alias.api_key_secret) {
        try {
          credential = await deps.credential(alias.api_key_secret);
        } catch (err) {
          req.log.error({ err, alias: alias.alias }, 'reading the upstream credential failed');
        }
        if (!credential) {
          return fail(proxyErrors.unavailable(`the upstream credential for "${alias.alias}" is not set: an admin must set the secret ${alias.api_key_secret}`, 'upstream_credential_missing'));
        }
      }

      const upstreamReq = credential ? { ...draft, headers: adapter.withCredential(draft.headers, credential) } : draft;
      const call = post(upstreamReq.url, upstreamReq.headers, upstreamReq.payload, { idleTimeoutMs: deps.upstreamIdleTimeoutMs });
      let clientClosed = false;
      reply.raw.on('close', () => {
        if (reply.raw.writableFinished) return;
        clientClosed = true;
        call.cancel();
      });

      let res;
      try {
        res = await call.response;
      } catch (err) {
        return fail(
          err instanceof UpstreamNetworkError
            ? proxyErrors.upstream(err.timedOut ? 504 : 502, err.message, err.timedOut ? 'upstream_timeout' : 'upstream_unreachable')
            : proxyErrors.upstream(499, 'the client closed the request', 'client_closed'),
        );
      }
      const upstreamId = res.header(adapter.requestIdHeader)?.slice(0, 200) ?? null;
      const status = res.statusCode;

      if (status < 200 || status >= 300) {
        // The error's body only words the message: without it the status still says what happened.
        const raw = await readBody(res, 1024 * 1024).catch((err) => {
          req.log.warn({ err, alias: alias.alias, status }, 'reading an upstream error body failed');
          return Buffer.alloc(0);
        });
        return fail(upstreamError(status, adapter.errorMessage(raw), alias, credential, res.header('retry-after')), upstreamId, `upstream ${status}`);
      }

      if (!stream) {
        let raw: Buffer;
        try {
          raw = await readBody(res);
        } catch (err) {
          req.log.warn({ err, alias: alias.alias }, 'the upstream broke off its answer');
          return fail(proxyErrors.upstream(502, `the upstream for "${alias.alias}" broke off its answer`, 'upstream_error'), upstreamId);
        }
        let out;
        try {
          out = adapter.response(raw, alias);
        } catch {
          return fail(proxyErrors.upstream(502, `the upstream for "${alias.alias}" answered with a body that is not JSON`, 'upstream_error'), upstreamId);
        }
        if (upstreamId) reply.header('x-upstream-request-id', upstreamId);
        reply.status(200).type('application/json').send(out.body);
        // Settled once the answer is on its way, not before it (the reservation holds meanwhile).
        // No usage reported: charge the worst case, so a silent upstream cannot spend past a budget.
        settleWith(200, out.usage ?? { tokensIn: promptTokens, tokensOut: maxOut, reported: false }, upstreamId, null);
        return reply;
      }

      const translator = adapter.stream({ clientWantsUsage: body.stream_options?.include_usage === true, alias, promptTokens });
      // The stream is written straight to the socket: events pass on as they arrive, a slow
      // client holds the upstream back (no buffering without bound), and Fastify's onResponse
      // hooks (metrics) still run when it ends.
      reply.hijack();
      const client = reply.raw;
      client.writeHead(200, {
        ...(reply.getHeaders() as OutgoingHttpHeaders),
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache',
        'x-accel-buffering': 'no',
        ...(upstreamId ? { 'x-upstream-request-id': upstreamId } : {}),
      });
      const send = (bytes: Buffer | string) => {
        if (client.destroyed || client.writableEnded || !bytes.length) return;
        if (!client.write(bytes)) {
          res.pause();
          client.once('drain', () => res.resume());
        }
      };
      let failed: string | null = null;
      // Events go on as they arrive, as the bytes that came unless the adapter had to change
      // them; what arrives in one turn of the event loop goes in one write.
      let pending: Buffer[] = [];
      const flush = () => {
        send(pending.length === 1 ? pending[0] : Buffer.concat(pending));
        pending = [];
      };
      // The upstream's own events may quote the credential (as its error messages do): never
      // pass it on. What the adapter answers is whole events, so a credential is never cut.
      const secret = credential ? Buffer.from(credential) : null;
      const scrub = (bytes: Buffer) => (secret && bytes.includes(secret) ? Buffer.from(bytes.toString('utf8').split(credential!).join('[redacted]')) : bytes);
      const queue = (out: Buffer[]) => {
        if (!out.length) return;
        if (!pending.length) setImmediate(flush);
        for (const bytes of out) pending.push(scrub(bytes));
      };
      // An event the adapter cannot translate (a field of a type no upstream should send) ends the
      // answer as a failed upstream: thrown here, after the head went out, it would leave the
      // client waiting for the rest and the reservation held.
      let untranslatable: string | null = null;
      const translate = (step: () => Buffer[]): Buffer[] => {
        if (untranslatable) return [];
        try {
          return step();
        } catch (err) {
          req.log.warn({ err, alias: alias.alias }, 'the upstream sent a stream event that could not be translated');
          untranslatable = `the upstream for "${alias.alias}" sent an event that could not be read`;
          return [];
        }
      };
      res.consume({
        data: (chunk) => {
          queue(translate(() => translator.push(chunk)));
          if (untranslatable) res.destroy(new UpstreamNetworkError(untranslatable, false));
        },
        end: (error) => {
          for (const bytes of translate(() => translator.end())) pending.push(scrub(bytes));
          flush();
          if (untranslatable && !clientClosed) failed = untranslatable;
          else if (error) failed = clientClosed ? 'the client closed the stream' : 'the upstream broke off the stream';
          if (failed && !clientClosed) send(`data: ${JSON.stringify(proxyErrors.upstream(502, failed, 'upstream_error').toJSON())}\n\n`);
          if (!client.destroyed && !client.writableEnded) client.end();
          const usage = translator.usage();
          const midStreamError = translator.error();
          const finalStatus = clientClosed ? 499 : failed || midStreamError ? 502 : 200;
          settleWith(finalStatus, usage ?? { tokensIn: promptTokens, tokensOut: 0, reported: false }, upstreamId, failed ?? (midStreamError && credential ? midStreamError.split(credential).join('[redacted]') : midStreamError));
        },
      });
      return reply;
    } catch (err) {
      settleWith(500, null, null, 'internal_error');
      throw err;
    }
  }

  return { complete };
}

export type Forwarder = ReturnType<typeof createForwarder>;

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { basic, chatTestServer, zulip, type ChatTestServer } from '../chat.testkit.ts';

describe('chat HTTP conventions', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer();
  });
  after(() => t.close());

  test('the chat server publishes its own OpenAPI at /api/v1/openapi.json, listing the message and event endpoints', async () => {
    const res = await fetch(`${t.base}/api/v1/openapi.json`);
    assert.equal(res.status, 200);
    const doc = (await res.json()) as any;
    assert.equal(doc.openapi, '3.1.0');
    for (const [path, method] of [['/messages', 'post'], ['/messages', 'get'], ['/register', 'post'], ['/events', 'get'], ['/users', 'get'], ['/invites', 'get'],
      ['/user_uploads', 'post'], ['/attachments', 'get'], ['/attachments/{attachment_id}', 'delete'], ['/streams/{stream_id}', 'get'], ['/streams/{stream_id}', 'patch'],
      ['/messages/{message_id}/history', 'get'], ['/messages/render', 'post'], ['/users/me/muted_users/{muted_user_id}', 'post'], ['/users/me/muted_users/{muted_user_id}', 'delete']]) {
      assert.ok(doc.paths[path]?.[method], `${method} ${path} is in the contract`);
    }
    assert.equal(doc.paths['/messages'].post.operationId, 'sendMessage');
  });

  const unauthorized = (res: { status: number; headers: Headers; body: any }, msg: string) => {
    assert.equal(res.status, 401);
    assert.deepEqual(res.body, { result: 'error', msg, code: 'UNAUTHORIZED' });
    assert.equal(res.headers.get('www-authenticate'), 'Basic realm="zulip"');
  };

  test('each authentication failure is a 401 UNAUTHORIZED with its own message and a Basic challenge', async () => {
    unauthorized(await t.raw('GET', '/users'), 'Not logged in: API authentication or user session required');
    unauthorized(await t.raw('GET', '/users', { auth: 'Basic' }), 'Invalid authorization header for basic auth');
    unauthorized(await t.raw('GET', '/users', { auth: 'Basic !!!notbase64' }), 'Invalid authorization header for basic auth');
    unauthorized(await t.raw('GET', '/users', { auth: `Basic ${Buffer.from('no-colon').toString('base64')}` }), 'Invalid authorization header for basic auth');
    unauthorized(await t.raw('GET', '/users', { auth: basic(t.owner.email, 'short') }), 'Malformed API key');
    unauthorized(await t.raw('GET', '/users', { auth: basic(t.owner.email, 'A'.repeat(32)) }), 'Invalid API key');
    const other = await t.account(400);
    // A right key with someone else's address is refused too.
    unauthorized(await t.raw('GET', '/users', { auth: basic(other.email, t.owner.apiKey) }), 'Invalid API key');
    const ok = await t.raw('GET', '/users/me', { auth: basic(t.owner.email.toUpperCase(), t.owner.apiKey) });
    assert.equal(ok.status, 200);

    const gone = await t.account(400);
    await t.raw('DELETE', `/users/${gone.id}`, { auth: t.owner });
    unauthorized(await t.raw('GET', '/users', { auth: gone }), 'Account is deactivated');
  });

  test('a NUL byte in a path segment is refused in Zulip\'s envelope before it reaches the database', async () => {
    for (const method of ['DELETE', 'POST']) {
      const res = await t.raw(method, '/realm/emoji/%00', { auth: t.owner });
      assert.equal(res.status, 400, method);
      assert.equal(res.body.result, 'error');
      assert.equal(res.body.code, 'BAD_REQUEST');
    }
    const del = await t.raw('DELETE', '/realm/emoji/a%00b', { auth: t.owner });
    assert.deepEqual(del.body, { result: 'error', msg: 'emoji_name contains NULL (0x00) characters.', code: 'BAD_REQUEST' });
  });

  test('a value the database would not keep as sent (bytes that are not UTF-8, half a surrogate pair or a NUL in a JSON value) is a 400 naming it', async () => {
    const bad = (res: { status: number; body: any }, msg: string) => {
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.deepEqual(res.body, { result: 'error', msg, code: 'BAD_REQUEST' });
    };
    const form = { 'content-type': 'application/x-www-form-urlencoded' };
    const notUtf8 = 'status_text is not valid UTF-8 text: send it encoded as UTF-8';
    // Percent-escaped (half a surrogate pair in UTF-8's bytes; a byte no UTF-8 has), raw in the body, in the query string.
    bad(await t.raw('POST', '/users/me/status', { auth: t.owner, headers: form, body: 'away=false&status_text=a%ED%A0%80b' }), notUtf8);
    bad(await t.raw('POST', '/users/me/status', { auth: t.owner, headers: form, body: Buffer.concat([Buffer.from('status_text=a'), Buffer.from([0xff]), Buffer.from('b')]) }), notUtf8);
    bad(await t.raw('POST', '/users/me/status?status_text=%FF', { auth: t.owner }), notUtf8);
    // In a JSON value, an escape says what form text cannot: the path in it is named.
    bad(
      await t.raw('POST', '/users/me/subscriptions', { auth: t.owner, form: { subscriptions: '[{"name":"ok"},{"name":"half \\ud800"}]' } }),
      'subscriptions.1.name must be Unicode text: it holds half of a surrogate pair (an escape such as "\\ud800" alone); send the whole character or leave it out',
    );
    bad(await t.raw('POST', '/users/me/subscriptions', { auth: t.owner, form: { subscriptions: '[{"name":"a\\u0000b"}]' } }), 'subscriptions.0.name contains NULL (0x00) characters.');
    // U+FFFD itself, sent as UTF-8, is text like any other.
    const ok = await t.raw('POST', '/users/me/status', { auth: t.owner, form: { status_text: 'a\uFFFDb' } });
    assert.equal(ok.status, 200, JSON.stringify(ok.body));
  });

  test('a non-Basic scheme is refused as Zulip does (400)', async () => {
    const res = await t.raw('GET', '/users', { auth: 'Bearer abc' });
    assert.equal(res.status, 400);
    assert.equal(res.body.msg, 'This endpoint requires HTTP basic authentication.');
  });

  test('a deactivated organization refuses its accounts', async () => {
    const s = await chatTestServer();
    try {
      await s.services.realms.setDeactivated(systemActor('test'), s.realm.id, true);
      unauthorized(await s.raw('GET', '/users', { auth: s.owner }), 'This organization has been deactivated');
    } finally {
      await s.close();
    }
  });

  test('typed parameters are JSON, parsed strictly, with Zulip\'s messages', async () => {
    const get = (query: Record<string, string>) => t.raw('GET', '/users', { auth: t.owner, query });
    const cases: Array<[Record<string, string>, string]> = [
      [{ user_ids: 'nope' }, 'user_ids is not valid JSON'],
      [{ user_ids: '{"a":1}' }, 'user_ids is not a list'],
      [{ user_ids: '["x"]' }, 'user_ids[0] is not an integer'],
      [{ user_ids: '[1, 2.5]' }, 'user_ids[1] is not an integer'],
      [{ client_gravatar: 'yes' }, 'client_gravatar is not valid JSON'],
      [{ client_gravatar: '1' }, 'client_gravatar is not a boolean'],
    ];
    for (const [query, msg] of cases) {
      const res = await get(query);
      assert.equal(res.status, 400, msg);
      assert.deepEqual(res.body, { result: 'error', msg, code: 'BAD_REQUEST' });
    }
    const res = await t.raw('PATCH', '/users/me/subscriptions/muted_topics', { auth: t.owner, form: { stream_id: '1.0', topic: 't', op: 'add' } });
    assert.equal(res.body.msg, 'stream_id is not an integer');
  });

  test('a JSON list longer than one database statement can bind is a 400 naming it, not a 503', async () => {
    const ids = (n: number) => JSON.stringify(Array.from({ length: n }, (_, i) => i + 1));
    const flags = await t.raw('POST', '/messages/flags', { auth: t.owner, form: { messages: ids(70_000), op: 'add', flag: 'read' } });
    assert.deepEqual([flags.status, flags.body], [400, { result: 'error', msg: 'messages is too long (limit: 50000 items)', code: 'BAD_REQUEST' }]);
    const bot = await t.account(400, { bot: { type: 1, ownerId: t.owner.id } });
    const keys = JSON.stringify(Array.from({ length: 70_000 }, (_, i) => `k${i}`));
    const storage = await t.raw('DELETE', '/bot_storage', { auth: bot, form: { keys } });
    assert.deepEqual([storage.status, storage.body.msg], [400, 'keys is too long (limit: 50000 items)']);
    // The longest list taken still fits in one statement.
    const most = await t.raw('POST', '/messages/flags', { auth: t.owner, form: { messages: ids(50_000), op: 'add', flag: 'read' } });
    assert.equal(most.status, 200, JSON.stringify(most.body));
  });

  test('a missing parameter is REQUEST_VARIABLE_MISSING with var_name; a bad choice is Invalid <name>', async () => {
    const missing = await t.raw('PATCH', '/users/me/subscriptions/muted_topics', { auth: t.owner, form: { stream_id: '1', topic: 't' } });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body, { result: 'error', msg: "Missing 'op' argument", code: 'REQUEST_VARIABLE_MISSING', var_name: 'op' });
    const invalid = await t.raw('PATCH', '/users/me/subscriptions/muted_topics', { auth: t.owner, form: { stream_id: '1', topic: 't', op: 'toggle' } });
    assert.equal(invalid.body.msg, 'Invalid op');
    const long = await t.raw('PATCH', '/users/me/subscriptions/muted_topics', { auth: t.owner, form: { stream_id: '1', topic: 'é'.repeat(61), op: 'add' } });
    assert.equal(long.body.msg, 'topic is too long (limit: 60 characters)');
    const nul = await t.raw('POST', '/users/me/status', { auth: t.owner, form: { status_text: 'a\u0000b' } });
    assert.equal(nul.status, 400);
  });

  test('parameters come from the query string or a form body on every method; the body wins', async () => {
    const viaQuery = await t.raw('POST', '/users/me/status', { auth: t.owner, query: { status_text: 'from query' } });
    assert.equal(viaQuery.status, 200);
    let status = await t.raw('GET', `/users/${t.owner.id}/status`, { auth: t.owner });
    assert.equal(status.body.status.status_text, 'from query');
    const both = await fetch(`${t.base}/api/v1/users/me/status?status_text=query`, {
      method: 'POST',
      headers: { authorization: basic(t.owner.email, t.owner.apiKey), 'content-type': 'application/x-www-form-urlencoded' },
      body: 'status_text=body',
    });
    assert.equal(both.status, 200);
    status = await t.raw('GET', `/users/${t.owner.id}/status`, { auth: t.owner });
    assert.equal(status.body.status.status_text, 'body');
    // A JSON body is not a parameter source, as in Zulip: nothing was passed.
    const json = await t.raw('POST', '/users/me/status', { auth: t.owner, headers: { 'content-type': 'application/json' }, body: '{"status_text":"x"}' });
    assert.equal(json.body.msg, 'Client did not pass any new values.');
  });

  test('unsupported parameters are reported, sorted, in ignored_parameters_unsupported', async () => {
    const res = await t.raw('GET', '/users/me', { auth: t.owner, query: { zeta: '1', alpha: '2', client_gravatar: 'true' } });
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.ignored_parameters_unsupported, ['alpha', 'client_gravatar', 'zeta']);
    const clean = await t.raw('GET', '/users', { auth: t.owner, query: { client_gravatar: 'false' } });
    assert.equal(clean.body.ignored_parameters_unsupported, undefined);
    assert.equal(clean.body.result, 'success');
    assert.equal(clean.body.msg, '');
  });

  test('multipart bodies (what zulip-js sends on POST) are parameters too', async () => {
    // Built by hand: zulip-js replaces the global FormData with the form-data package's.
    const b = 'xYzBoundary42';
    const part = (name: string, value: string) => `--${b}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
    const res = await fetch(`${t.base}/api/v1/users/me/status`, {
      method: 'POST',
      headers: { authorization: basic(t.owner.email, t.owner.apiKey), 'content-type': `multipart/form-data; boundary=${b}` },
      body: part('status_text', 'multipart ✓') + part('unknown_thing', 'x') + `--${b}--\r\n`,
    });
    const body = (await res.json()) as any;
    assert.equal(res.status, 200);
    assert.deepEqual(body.ignored_parameters_unsupported, ['unknown_thing']);
    const status = await t.raw('GET', `/users/${t.owner.id}/status`, { auth: t.owner });
    assert.equal(status.body.status.status_text, 'multipart ✓');
    const broken = await fetch(`${t.base}/api/v1/users/me/status`, {
      method: 'POST',
      headers: { authorization: basic(t.owner.email, t.owner.apiKey), 'content-type': `multipart/form-data; boundary=${b}` },
      body: `--${b}\r\nno headers end`,
    });
    assert.equal(broken.status, 400);
  });

  test('unknown endpoints and non-numeric ids are 404 in the envelope', async () => {
    const res = await t.raw('GET', '/no_such_thing', { auth: t.owner });
    assert.equal(res.status, 404);
    assert.equal(res.body.result, 'error');
    assert.equal((await t.raw('GET', '/users/abc', { auth: t.owner })).status, 404);
    const huge = await t.raw('GET', '/users/99999999999', { auth: t.owner });
    assert.equal(huge.body.msg, 'No such user');
    // Any run of digits is an id, as Zulip's `<int:...>` patterns: past any row it is that resource's unknown id.
    for (const digits of ['9999999999999', '99999999999999999999', '1'.repeat(60)]) {
      const user = await t.raw('GET', `/users/${digits}`, { auth: t.owner });
      assert.deepEqual([user.status, user.body.msg], [400, 'No such user'], digits);
      const invite = await t.raw('POST', `/invites/${digits}/resend`, { auth: t.owner });
      assert.deepEqual([invite.status, invite.body.code, invite.body.msg], [400, 'BAD_REQUEST', 'No such invitation'], digits);
      const message = await t.raw('GET', `/messages/${digits}`, { auth: t.owner });
      assert.deepEqual([message.status, message.body.msg], [400, 'Invalid message(s)'], digits);
    }
  });

  test('a known endpoint called with a method it does not take is a 405 naming the methods it takes, as Zulip answers', async () => {
    const status = await t.raw('GET', '/users/me/status', { auth: t.owner });
    assert.equal(status.status, 405);
    assert.deepEqual(status.body, { result: 'error', msg: 'Method Not Allowed', code: 'BAD_REQUEST', allowed_methods: ['POST'] });
    assert.equal(status.headers.get('allow'), 'POST');
    // Without credentials too (Zulip checks the method first), and with path ids and a query string.
    const messages = await t.raw('PUT', '/messages', { query: { anchor: 'newest' } });
    assert.deepEqual([messages.status, messages.body.allowed_methods], [405, ['GET', 'POST']]);
    const message = await t.raw('POST', '/messages/12', { auth: t.owner });
    assert.deepEqual([message.status, message.body.allowed_methods], [405, ['GET', 'PATCH', 'DELETE']]);
    const playground = await t.raw('GET', '/realm/playgrounds/3', { auth: t.owner });
    assert.deepEqual([playground.status, playground.body.allowed_methods], [405, ['DELETE']]);
    // A path no endpoint serves stays a 404.
    assert.equal((await t.raw('POST', '/users/me/no_such_thing', { auth: t.owner })).status, 404);
    assert.equal((await t.raw('GET', '/users/abc/status', { auth: t.owner })).status, 404);
  });

  test('GET /server_settings is public and reports feature level 494 or later', async () => {
    const client = await zulip({ realm: t.base, username: t.owner.email, apiKey: t.owner.apiKey });
    const settings = await client.server.settings();
    assert.equal(settings.result, 'success');
    assert.ok(settings.zulip_feature_level >= 494);
    assert.equal(settings.realm_url, t.base);
    assert.equal(settings.authentication_methods.password, true);
    const raw = await t.raw('GET', '/server_settings');
    assert.equal(raw.status, 200);
  });

  test('no credential reaches the logs', async () => {
    await t.raw('GET', '/users', { auth: t.owner, query: { api_key: t.owner.apiKey } });
    const all = t.logs.join('\n');
    assert.ok(!all.includes(t.owner.apiKey));
  });
});

describe('chat rate limiting', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer({ config: { SERVICE_CHAT_RATE_LIMIT: '3/60' } });
  });
  after(() => t.close());

  test('each user has a window of calls; past it RATE_LIMIT_HIT with Retry-After and X-RateLimit-* headers', async () => {
    const seen: number[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await t.raw('GET', '/users/me', { auth: t.owner });
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('x-ratelimit-limit'), '3');
      seen.push(Number(res.headers.get('x-ratelimit-remaining')));
      assert.ok(Number(res.headers.get('x-ratelimit-reset')) >= Math.floor(Date.now() / 1000));
    }
    assert.deepEqual(seen, [2, 1, 0]);
    const limited = await t.raw('GET', '/users/me', { auth: t.owner });
    assert.equal(limited.status, 429);
    assert.equal(limited.body.code, 'RATE_LIMIT_HIT');
    assert.equal(limited.body.msg, 'API usage exceeded rate limit');
    assert.ok(limited.body['retry-after'] > 0 && limited.body['retry-after'] <= 60);
    assert.ok(Number(limited.headers.get('retry-after')) > 0);
    assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
    // Another user has a window of their own.
    const other = await t.account(400);
    assert.equal((await t.raw('GET', '/users/me', { auth: other })).status, 200);
  });

  test('sending messages counts too: past the window a send is refused and nothing is stored', async () => {
    const sender = await t.account(400);
    const send = (n: number) => t.raw('POST', '/messages', { auth: sender, form: { type: 'direct', to: JSON.stringify([t.owner.id]), content: `note ${n}` } });
    for (let i = 0; i < 3; i++) assert.equal((await send(i)).status, 200);
    const refused = await send(3);
    assert.equal(refused.status, 429);
    assert.equal(refused.body.code, 'RATE_LIMIT_HIT');
    const stored = await t.db.selectFrom('chat_messages').select((eb) => eb.fn.countAll().as('n')).where('sender_id', '=', sender.id).executeTakeFirstOrThrow();
    assert.equal(Number(stored.n), 3);
  });
});


import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import http from 'node:http';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import * as uploadChunks from '../../db/migrations/0504-chat-upload-chunks.ts';
import { basic, chatTestServer, type Account, type ChatTestServer } from '../chat.testkit.ts';

/** A multipart form as Zulip's clients send an upload: each file part with its name and type. */
function multipart(files: Array<{ name: string; type: string; data: Buffer }>, fields: Record<string, string> = {}) {
  const b = 'upl0ad-b0undary';
  const parts: Buffer[] = [];
  for (const [k, v] of Object.entries(fields)) parts.push(Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="${k}"\r\n\r\n${v}\r\n`));
  for (const f of files) {
    parts.push(Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="file"; filename="${f.name}"\r\nContent-Type: ${f.type}\r\n\r\n`), f.data, Buffer.from('\r\n'));
  }
  parts.push(Buffer.from(`--${b}--\r\n`));
  return { headers: { 'content-type': `multipart/form-data; boundary=${b}` }, body: Buffer.concat(parts) };
}

describe('chat uploads', () => {
  let t: ChatTestServer;
  let member: Account;
  let guest: Account;
  before(async () => {
    // A 1 MiB limit, so the limit is tested without sending Zulip's default 100 MiB.
    t = await chatTestServer({ config: { SERVICE_CHAT_MAX_FILE_UPLOAD_SIZE_MIB: '1' } });
    member = await t.account(400);
    guest = await t.account(600);
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
    await member.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
  });
  after(() => t.close());

  const upload = (who: Account, files: Array<{ name: string; type: string; data: Buffer }>) => t.raw('POST', '/user_uploads', { auth: who, ...multipart(files) });
  const file = (url: string, auth?: Account | null) => fetch(`${t.base}${url}`, { headers: auth ? { authorization: basic(auth.email, auth.apiKey) } : {} });

  const attachmentEvents = (who: Account, queueId: string, count: number, op?: string) => t.events(who, queueId, count, (e) => e.type === 'attachment' && (op === undefined || e.op === op));

  test('an upload is stored, served to its owner only, and listed; /register gives the size limit', async () => {
    const reg = await t.raw('POST', '/register', { auth: member, form: { event_types: '["attachment"]', fetch_event_types: '["realm"]' } });
    assert.equal(reg.status, 200, JSON.stringify(reg.body));
    assert.deepEqual([reg.body.max_file_upload_size_mib, reg.body.realm_upload_quota_mib], [1, null]);

    const res = await upload(member, [{ name: 'my notes (1).txt', type: 'text/plain', data: Buffer.from('hello, files') }]);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertZulipResponse('POST', '/user_uploads', res.body);
    assert.match(res.body.url, new RegExp(`^/user_uploads/${t.realm.id}/[0-9a-f]{2}/[A-Za-z0-9_-]{24}/my-notes-1\\.txt$`));
    assert.equal(res.body.uri, res.body.url);
    assert.equal(res.body.filename, 'my notes (1).txt');

    const own = await file(res.body.url, member);
    assert.equal(own.status, 200);
    assert.equal(await own.text(), 'hello, files');
    assert.equal(own.headers.get('content-type'), 'text/plain');
    assert.match(own.headers.get('content-disposition')!, /^inline; filename\*=UTF-8''my%20notes%20\(1\)\.txt$/);
    assert.equal(own.headers.get('x-content-type-options'), 'nosniff');
    // Nobody else reads it until a message links it (403, as Zulip answers), without credentials nobody at all; an unknown file is a 404.
    assert.equal((await file(res.body.url, t.owner)).status, 403);
    assert.equal((await file(res.body.url.replace(/\/[A-Za-z0-9_-]{24}\//, '/AAAAAAAAAAAAAAAAAAAAAAAA/'), member)).status, 404);
    const download = await file(res.body.url.replace('/user_uploads/', '/user_uploads/download/'), member);
    assert.deepEqual([download.status, download.headers.get('content-disposition')?.split(';')[0]], [200, 'attachment']);
    const anonymous = await file(res.body.url, null);
    assert.equal(anonymous.status, 401);
    assert.equal(((await anonymous.json()) as { code: string }).code, 'UNAUTHORIZED');

    const list = await t.raw('GET', '/attachments', { auth: member });
    assert.equal(list.status, 200, JSON.stringify(list.body));
    assertZulipResponse('GET', '/attachments', list.body);
    const [a] = list.body.attachments;
    assert.deepEqual([a.name, a.path_id, a.size, a.messages], ['my notes (1).txt', res.body.url.slice('/user_uploads/'.length), 12, []]);
    assert.ok(list.body.upload_space_used >= 12);
    assert.deepEqual((await t.raw('GET', '/attachments', { auth: guest })).body.attachments, []);

    const [added] = await attachmentEvents(member, reg.body.queue_id, 1);
    assert.deepEqual([added.op, added.attachment.id, added.attachment.name], ['add', a.id, 'my notes (1).txt']);
  });

  test('a message linking an upload records it, and who can read the message can read the file', async () => {
    // Registered first, so the queue holds both the upload's event and the message's.
    const reg = await t.raw('POST', '/register', { auth: t.owner, form: { event_types: '["attachment"]' } });
    const up = (await upload(t.owner, [{ name: 'chart.png', type: 'image/png', data: Buffer.from('\x89PNG fake image') }])).body;
    const sent = await t.raw('POST', '/messages', { auth: t.owner, form: { type: 'stream', to: 'general', topic: 'charts', content: `Here: [chart.png](${up.url})` } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const [added, updated] = await attachmentEvents(t.owner, reg.body.queue_id, 2);
    assert.equal(added.op, 'add');
    assert.equal(updated.op, 'update');
    assert.deepEqual(updated.attachment.messages.map((m: any) => m.id), [sent.body.id]);
    const mine = (await t.raw('GET', '/attachments', { auth: t.owner })).body.attachments.find((x: any) => x.name === 'chart.png');
    assert.deepEqual(mine.messages.map((m: any) => m.id), [sent.body.id]);

    // A member reads public history; a guest outside the channel does not.
    const seen = await file(up.url, member);
    assert.equal(seen.status, 200);
    assert.equal(seen.headers.get('content-type'), 'image/png');
    assert.equal((await file(up.url, guest)).status, 403);

    // A temporary URL serves the file without credentials; a forged one does not.
    const rest = up.url.slice('/user_uploads/'.length);
    const temp = await t.raw('GET', `/user_uploads/${rest}`, { auth: member });
    assert.equal(temp.status, 200, JSON.stringify(temp.body));
    assertZulipResponse('GET', '/user_uploads/{realm_id_str}/{filename}', temp.body);
    assert.match(temp.body.url, /^\/user_uploads\/temporary\/[A-Za-z0-9_-]+\/chart\.png$/);
    const open = await file(temp.body.url, null);
    assert.equal(open.status, 200);
    assert.equal(await open.text(), '\x89PNG fake image');
    assert.equal((await file(temp.body.url.replace(/temporary\/[A-Za-z0-9_-]{8}/, 'temporary/AAAAAAAA'), null)).status, 403);
    assert.equal((await file(temp.body.url.replace(/chart\.png$/, 'other.png'), null)).status, 403);
    const refused = await t.raw('GET', `/user_uploads/${rest}`, { auth: guest });
    assert.deepEqual([refused.status, refused.body.msg], [403, 'You are not authorized to view this file.']);

    // An edit that drops the link lets the upload go; deleting the last message linking one deletes it.
    const edited = await t.raw('PATCH', `/messages/${sent.body.id}`, { auth: t.owner, form: { content: 'no chart after all' } });
    assert.equal(edited.status, 200, JSON.stringify(edited.body));
    const released = (await t.raw('GET', '/attachments', { auth: t.owner })).body.attachments.find((x: any) => x.name === 'chart.png');
    assert.deepEqual(released.messages, []);
    const again = await t.raw('POST', '/messages', { auth: t.owner, form: { type: 'stream', to: 'general', topic: 'charts', content: `Again: ${t.base}${up.url}` } });
    assert.equal((await t.raw('DELETE', `/messages/${again.body.id}`, { auth: t.owner })).status, 200);
    assert.equal((await t.raw('GET', '/attachments', { auth: t.owner })).body.attachments.find((x: any) => x.name === 'chart.png'), undefined);
    assert.equal((await file(up.url, t.owner)).status, 404);
  });

  test("Zulip's errors: no file, two files, too large; deleting someone else's attachment", async () => {
    const none = await t.raw('POST', '/user_uploads', { auth: member, ...multipart([], { note: 'x' }) });
    assert.deepEqual([none.status, none.body.msg, none.body.code], [400, 'You must specify a file to upload', 'BAD_REQUEST']);
    const two = await upload(member, [{ name: 'a.txt', type: 'text/plain', data: Buffer.from('a') }, { name: 'b.txt', type: 'text/plain', data: Buffer.from('b') }]);
    assert.deepEqual([two.status, two.body.msg], [400, 'You may only upload one file at a time']);
    const big = await upload(member, [{ name: 'big.bin', type: 'application/octet-stream', data: Buffer.alloc(1024 * 1024 + 1) }]);
    assert.deepEqual([big.status, big.body.msg], [400, "File is larger than this server's configured maximum upload size (1 MiB)."]);
    // A file at the limit fits, and a type not shown in place is served as a download.
    const fits = await upload(member, [{ name: 'fits.bin', type: 'application/x-what"ever', data: Buffer.alloc(1024 * 1024) }]);
    assert.equal(fits.status, 200, JSON.stringify(fits.body));
    const served = await file(fits.body.url, member);
    assert.deepEqual([served.headers.get('content-type'), served.headers.get('content-disposition')?.split(';')[0]], ['application/octet-stream', 'attachment']);

    const id = (await t.raw('GET', '/attachments', { auth: member })).body.attachments.find((x: any) => x.name === 'fits.bin').id;
    const reg = await t.raw('POST', '/register', { auth: member, form: { event_types: '["attachment"]' } });
    const foreign = await t.raw('DELETE', `/attachments/${id}`, { auth: t.owner });
    assert.deepEqual([foreign.status, foreign.body.msg, foreign.body.code], [400, 'Invalid attachment', 'BAD_REQUEST']);
    assert.equal((await t.raw('DELETE', '/attachments/99999999999', { auth: member })).body.msg, 'Invalid attachment');
    const gone = await t.raw('DELETE', `/attachments/${id}`, { auth: member });
    assert.equal(gone.status, 200, JSON.stringify(gone.body));
    // An upload's earlier event may reach a queue registered after it: the removal is looked for.
    const [removed] = await attachmentEvents(member, reg.body.queue_id, 1, 'remove');
    assert.deepEqual([removed.op, removed.attachment], ['remove', { id }]);
    assert.equal((await file(fits.body.url, member)).status, 404);
  });
});

describe('chat uploads stored in chunks, served as a stream', () => {
  const MiB = 1024 * 1024;
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer({ config: { SERVICE_CHAT_MAX_FILE_UPLOAD_SIZE_MIB: '3' } });
  });
  after(() => t.close());

  const upload = (files: Array<{ name: string; type: string; data: Buffer }>, fields: Record<string, string> = {}) => t.raw('POST', '/user_uploads', { auth: t.owner, ...multipart(files, fields) });
  const get = (url: string, headers: Record<string, string> = {}, method = 'GET') => fetch(`${t.base}${url}`, { method, headers: { authorization: basic(t.owner.email, t.owner.apiKey), ...headers } });
  const storedFiles = async () => Number((await t.db.selectFrom('chat_upload_files').select(({ fn }) => fn.countAll<string>().as('n')).executeTakeFirstOrThrow()).n);

  test('a file is stored in chunks of 1 MiB as it arrives, and served whole or by one byte range', async () => {
    const data = crypto.randomBytes(2.5 * MiB);
    // A text field before the file is read as a parameter (and, unused, reported).
    const res = await upload([{ name: 'big.bin', type: 'application/octet-stream', data }], { note: 'first' });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.ignored_parameters_unsupported, ['note']);
    const row = await t.db.selectFrom('chat_attachments').select(['file_id', 'size']).where('path_id', '=', res.body.url.slice('/user_uploads/'.length)).executeTakeFirstOrThrow();
    assert.equal(Number(row.size), data.length);
    const chunks = await t.db.selectFrom('chat_upload_chunks').select(['seq', sql<number>`octet_length(data)`.as('bytes')]).where('file_id', '=', row.file_id).orderBy('seq').execute();
    assert.deepEqual(chunks.map((c) => [c.seq, Number(c.bytes)]), [[0, MiB], [1, MiB], [2, MiB / 2]]);

    const whole = await get(res.body.url);
    assert.deepEqual([whole.status, whole.headers.get('content-length'), whole.headers.get('accept-ranges')], [200, String(data.length), 'bytes']);
    assert.ok(Buffer.from(await whole.arrayBuffer()).equals(data));

    // A range across two chunks, a suffix, an open end; one past the end is 416.
    const across = await get(res.body.url, { range: `bytes=${MiB - 10}-${MiB + 9}` });
    assert.deepEqual([across.status, across.headers.get('content-range'), across.headers.get('content-length')], [206, `bytes ${MiB - 10}-${MiB + 9}/${data.length}`, '20']);
    assert.ok(Buffer.from(await across.arrayBuffer()).equals(data.subarray(MiB - 10, MiB + 10)));
    const suffix = await get(res.body.url, { range: 'bytes=-5' });
    assert.ok(Buffer.from(await suffix.arrayBuffer()).equals(data.subarray(data.length - 5)));
    const open = await get(res.body.url, { range: `bytes=${2 * MiB}-` });
    assert.equal(open.headers.get('content-range'), `bytes ${2 * MiB}-${data.length - 1}/${data.length}`);
    assert.ok(Buffer.from(await open.arrayBuffer()).equals(data.subarray(2 * MiB)));
    const past = await get(res.body.url, { range: `bytes=${data.length}-` });
    assert.deepEqual([past.status, past.headers.get('content-range')], [416, `bytes */${data.length}`]);
    await past.body?.cancel();
    // HEAD says how long the file is, without it.
    const head = await get(res.body.url, {}, 'HEAD');
    assert.deepEqual([head.status, head.headers.get('content-length'), await head.text()], [200, String(data.length), '']);
    // An empty file is served empty.
    const empty = await upload([{ name: 'empty.txt', type: 'text/plain', data: Buffer.alloc(0) }]);
    const served = await get(empty.body.url);
    assert.deepEqual([served.status, served.headers.get('content-length'), await served.text()], [200, '0', '']);
  });

  test('a file over the limit is refused as it arrives and leaves nothing stored; a body declared larger is 413 before it is read', async () => {
    const storedBefore = await storedFiles();
    const big = await upload([{ name: 'big.bin', type: 'application/octet-stream', data: Buffer.alloc(3 * MiB + 1) }]);
    assert.deepEqual([big.status, big.body.msg], [400, "File is larger than this server's configured maximum upload size (3 MiB)."]);
    const two = await upload([{ name: 'a.txt', type: 'text/plain', data: Buffer.from('a') }, { name: 'b.txt', type: 'text/plain', data: Buffer.from('b') }]);
    assert.deepEqual([two.status, two.body.msg], [400, 'You may only upload one file at a time']);
    assert.equal(await storedFiles(), storedBefore);

    // Only the headers are sent: the answer comes before any of the body.
    const declared = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(`${t.base}/api/v1/user_uploads`, {
        method: 'POST',
        headers: { authorization: basic(t.owner.email, t.owner.apiKey), 'content-type': 'multipart/form-data; boundary=b', 'content-length': String(4 * MiB + 1) },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (d) => (text += d));
        res.on('end', () => {
          req.destroy();
          resolve({ status: res.statusCode!, body: JSON.parse(text) });
        });
      });
      req.on('error', reject);
      req.flushHeaders();
    });
    assert.equal(declared.status, 413);
    assert.match(declared.body.msg, /at most 3 MiB/);
  });

  test('housekeeping deletes uploads no message links after the days set, and stored files no upload has after a day', async () => {
    await t.owner.client.users.me.subscriptions.add({ subscriptions: JSON.stringify([{ name: 'general' }]) });
    const reg = await t.raw('POST', '/register', { auth: t.owner, form: { event_types: '["attachment"]' } });
    const unclaimed = (await upload([{ name: 'unclaimed.txt', type: 'text/plain', data: Buffer.from('never sent') }])).body;
    const claimed = (await upload([{ name: 'claimed.txt', type: 'text/plain', data: Buffer.from('sent') }])).body;
    const sent = await t.raw('POST', '/messages', { auth: t.owner, form: { type: 'stream', to: 'general', topic: 'files', content: `[claimed.txt](${claimed.url})` } });
    assert.equal(sent.status, 200, JSON.stringify(sent.body));
    const idOf = async (url: string) => (await t.raw('GET', '/attachments', { auth: t.owner })).body.attachments.find((a: any) => a.path_id === url.slice('/user_uploads/'.length))?.id;
    const unclaimedId = await idOf(unclaimed.url);
    // Bytes of an upload cut off two days ago: stored, no attachment points at them.
    const { id: orphan } = await t.db.insertInto('chat_upload_files').values({ realm_id: t.realm.id, created_at: new Date(Date.now() - 2 * 86_400_000).toISOString() }).returning('id').executeTakeFirstOrThrow();
    await t.db.insertInto('chat_upload_chunks').values({ file_id: orphan, seq: 0, data: Buffer.from('partial') }).execute();

    // Now: the uploads are new; the cut-off bytes go.
    assert.equal(await t.services.uploads.deleteUnclaimed(Date.now()), 1);
    assert.equal(await t.db.selectFrom('chat_upload_chunks').select('seq').where('file_id', '=', orphan).executeTakeFirst(), undefined);
    assert.ok(await idOf(unclaimed.url));

    // 35 days on (the default): the unclaimed one goes, with its bytes, and its owner hears; the linked one stays.
    const later = Date.now() + 35 * 86_400_000 + 60_000;
    assert.ok((await t.services.uploads.deleteUnclaimed(later)) >= 1);
    assert.equal(await idOf(unclaimed.url), undefined);
    assert.equal((await get(unclaimed.url)).status, 404);
    assert.ok(await idOf(claimed.url));
    assert.equal((await get(claimed.url)).status, 200);
    const [removed] = await t.events(t.owner, reg.body.queue_id, 1, (e) => e.type === 'attachment' && e.op === 'remove' && e.attachment.id === unclaimedId);
    assert.equal(removed.upload_space_used, (await t.raw('GET', '/attachments', { auth: t.owner })).body.upload_space_used);
    const audit = await t.db.selectFrom('audit_log').select(['actor', 'details']).where('action', '=', 'chat.attachment.delete').where('target', '=', String(unclaimedId)).execute();
    assert.deepEqual(audit.map((r) => [r.actor, r.details]), [['chat-housekeeping', { unclaimed_days: 35 }]]);
    assert.equal(await t.services.uploads.deleteUnclaimed(later), 0);
  });

  // Last: it takes the migration down and up again on this file's database.
  test('the chunks migration cuts the uploads made before it (one bytea each) into chunks, served as they were', async () => {
    const sizes = [0, 5, 2 * MiB + 3];
    const before = sizes.map((n) => crypto.randomBytes(n));
    await uploadChunks.down(t.db);
    const paths: string[] = [];
    for (const [i, content] of before.entries()) {
      const path = `${t.realm.id}/0${i}/${'A'.repeat(23)}${i}/old-${i}.bin`;
      paths.push(path);
      await sql`insert into chat_attachments (realm_id, owner_id, path_id, file_name, content_type, size, content) values (${t.realm.id}, ${t.owner.id}, ${path}, ${`old-${i}.bin`}, 'application/octet-stream', ${content.length}, ${content})`.execute(t.db);
    }
    await uploadChunks.up(t.db);
    for (const [i, path] of paths.entries()) {
      const res = await get(`/user_uploads/${path}`);
      assert.deepEqual([res.status, res.headers.get('content-length')], [200, String(sizes[i])]);
      assert.ok(Buffer.from(await res.arrayBuffer()).equals(before[i]), path);
    }
    const tail = await get(`/user_uploads/${paths[2]}`, { range: `bytes=${2 * MiB}-` });
    assert.ok(Buffer.from(await tail.arrayBuffer()).equals(before[2].subarray(2 * MiB)));
    // Files made after it take ids past the ones it made.
    const next = await upload([{ name: 'after.txt', type: 'text/plain', data: Buffer.from('after') }]);
    assert.equal(next.status, 200, JSON.stringify(next.body));
    assert.equal(await (await get(next.body.url)).text(), 'after');
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
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

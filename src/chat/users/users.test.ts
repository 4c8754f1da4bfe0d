import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { systemActor } from '../../audit/audit.ts';
import { assertZulipResponse } from '../../../test/zulip-openapi.ts';
import { chatTestServer, zulip, type ChatTestServer } from '../chat.testkit.ts';
import { loadDemoOrganization } from '../demo.ts';

describe('chat users', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer();
  });
  after(() => t.close());

  test('zulip-js logs in with a password through POST /fetch_api_key; a wrong one is AUTHENTICATION_FAILED', async () => {
    const client = await zulip({ realm: t.base, username: t.owner.email, password: 'owner-password' });
    assert.equal(client.config.apiKey, t.owner.apiKey);
    const me = await client.users.me.getProfile();
    assert.equal(me.user_id, t.owner.id);
    assert.equal(me.max_message_id, -1);
    const bad = await t.raw('POST', '/fetch_api_key', { form: { username: t.owner.email, password: 'wrong' } });
    assert.equal(bad.status, 401);
    assert.deepEqual(bad.body, { result: 'error', msg: 'Your username or password is incorrect', code: 'AUTHENTICATION_FAILED' });
  });

  test('GET /users answers the user object field by field', async () => {
    const res = await t.owner.client.users.retrieve({ client_gravatar: false });
    assert.equal(res.result, 'success');
    const me = res.members.find((m: any) => m.user_id === t.owner.id);
    const md5 = crypto.createHash('md5').update('owner@example.com').digest('hex');
    assert.deepEqual(Object.keys(me).sort(), [
      'avatar_url', 'avatar_version', 'date_joined', 'delivery_email', 'email', 'full_name', 'is_active', 'is_admin', 'is_bot', 'is_guest', 'is_imported_stub', 'is_owner', 'role', 'timezone', 'user_id',
    ]);
    assert.equal(me.email, 'owner@example.com');
    assert.equal(me.delivery_email, 'owner@example.com');
    assert.equal(me.full_name, 'Olivia Owner');
    assert.equal(me.role, 100);
    assert.equal(me.is_owner, true);
    assert.equal(me.is_admin, true);
    assert.equal(me.is_guest, false);
    assert.equal(me.is_bot, false);
    assert.equal(me.is_active, true);
    assert.equal(me.avatar_url, `https://secure.gravatar.com/avatar/${md5}?d=identicon&version=1`);
    assert.match(me.date_joined, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$/);
  });

  test('client_gravatar (default true) nulls avatar_url only for gravatars whose address the caller may see', async () => {
    const hidden = await t.account(400, { visibility: 3 });
    const member = await t.account(400);
    const res = await member.client.users.retrieve();
    const byId = (id: number) => res.members.find((m: any) => m.user_id === id);
    assert.equal(byId(t.owner.id).avatar_url, null);
    assert.equal(byId(hidden.id).delivery_email, null);
    assert.equal(byId(hidden.id).email, `user${hidden.id}@127.0.0.1`);
    assert.match(byId(hidden.id).avatar_url, /^https:\/\/secure\.gravatar\.com\/avatar\//);
    // An administrator sees the real address (the API email stays the fake one, as in Zulip).
    const asAdmin = await t.owner.client.users.retrieve();
    const h = asAdmin.members.find((m: any) => m.user_id === hidden.id);
    assert.equal(h.delivery_email, hidden.email);
    assert.equal(h.avatar_url, null);
    // Uploaded avatars always have a URL.
    const form = `--b\r\nContent-Disposition: form-data; name="file"; filename="a.png"\r\nContent-Type: image/png\r\n\r\n\x89PNG\r\n--b--\r\n`;
    const up = await t.raw('POST', '/users/me/avatar', { auth: member, headers: { 'content-type': 'multipart/form-data; boundary=b' }, body: form });
    assert.equal(up.status, 200);
    const again = await t.owner.client.users.retrieve();
    const m = again.members.find((x: any) => x.user_id === member.id);
    assert.equal(m.avatar_version, 2);
    assert.equal(m.avatar_url, up.body.avatar_url);
    const img = await fetch(m.avatar_url);
    assert.equal(img.status, 200);
    assert.equal(img.headers.get('content-type'), 'image/png');
  });

  test('email and delivery_email follow the target\'s visibility and the caller\'s role; PATCH /settings changes it', async () => {
    const target = await t.account(400);
    const guest = await t.account(600);
    const moderator = await t.account(300);
    const see = async (viewer: typeof guest) => (await viewer.client.callEndpoint(`/users/${target.id}`, 'GET')).user;
    assert.equal((await see(guest)).delivery_email, target.email);
    for (const [visibility, guestSees, modSees] of [[2, false, true], [5, false, true], [3, false, false], [4, false, false]] as const) {
      const r = await target.client.callEndpoint('/settings', 'PATCH', { email_address_visibility: visibility });
      assert.equal(r.result, 'success');
      assert.equal((await see(guest)).delivery_email, guestSees ? target.email : null);
      assert.equal((await see(moderator)).delivery_email, modSees ? target.email : null);
      assert.equal((await see(guest)).email, `user${target.id}@127.0.0.1`);
      assert.equal((await see(target)).delivery_email, target.email);
    }
    const bad = await target.client.callEndpoint('/settings', 'PATCH', { email_address_visibility: 9 });
    assert.equal(bad.msg, 'Invalid email_address_visibility');
    await target.client.callEndpoint('/settings', 'PATCH', { email_address_visibility: 1 });
    assert.equal((await see(guest)).email, target.email);
  });

  test('user_ids limits the result and unknown ids are dropped; deactivated users are included', async () => {
    const a = await t.account(400);
    const b = await t.account(400);
    await t.owner.client.callEndpoint(`/users/${b.id}`, 'DELETE');
    const res = await t.owner.client.users.retrieve({ user_ids: JSON.stringify([b.id, a.id, 987654]) });
    assert.deepEqual(res.members.map((m: any) => m.user_id), [a.id, b.id]);
    assert.equal(res.members[1].is_active, false);
    const all = await t.owner.client.users.retrieve();
    assert.ok(all.members.some((m: any) => m.user_id === b.id && m.is_active === false));
  });

  test('GET /users/{user_id}: one user, or "No such user"', async () => {
    const res = await t.owner.client.callEndpoint(`/users/${t.owner.id}`, 'GET', { client_gravatar: false });
    assert.equal(res.user.user_id, t.owner.id);
    assert.ok(res.user.avatar_url);
    const missing = await t.owner.client.callEndpoint('/users/424242', 'GET');
    assert.deepEqual(missing, { result: 'error', msg: 'No such user', code: 'BAD_REQUEST' });
  });

  test('GET /users/{email}: by the API email, by the dummy address for anyone, by the real one only when the caller may see it', async () => {
    const target = await t.account(400);
    const guest = await t.account(600);
    const get = async (viewer: typeof guest, email: string) => {
      const res = await t.raw('GET', `/users/${encodeURIComponent(email)}`, { auth: viewer, query: { include_custom_profile_fields: 'true' } });
      // zulip.yaml predates is_imported_stub (feature level 433, which spec/chat-api.md lists): checked without it.
      if (res.status === 200) {
        const { is_imported_stub: _stub, ...user } = res.body.user;
        assertZulipResponse('GET', '/users/{email}', { ...res.body, user });
      }
      return res;
    };
    const byReal = await get(guest, target.email);
    assert.equal(byReal.status, 200, JSON.stringify(byReal.body));
    assert.equal(byReal.body.user.user_id, target.id);
    assert.deepEqual(byReal.body.user.profile_data, {});
    assert.equal(byReal.body.ignored_parameters_unsupported, undefined);
    assert.equal((await get(guest, target.email.toUpperCase())).body.user.user_id, target.id, 'case does not matter');
    // Administrators only: the guest may no longer look the real address up, but the dummy one still finds them.
    await target.client.callEndpoint('/settings', 'PATCH', { email_address_visibility: 3 });
    assert.deepEqual((await get(guest, target.email)).body, { result: 'error', msg: 'No such user', code: 'BAD_REQUEST' });
    assert.equal((await get(t.owner, target.email)).body.user.user_id, target.id);
    const dummy = await get(guest, `user${target.id}@127.0.0.1`);
    assert.equal(dummy.status, 200, JSON.stringify(dummy.body));
    assert.equal(dummy.body.user.email, `user${target.id}@127.0.0.1`);
    assert.equal(dummy.body.user.delivery_email, null);
    // The dummy form works for people whose address everyone sees too; on another host it is just an unknown address.
    assert.equal((await get(target, `user${guest.id}@127.0.0.1`)).body.user.user_id, guest.id);
    assert.equal((await get(target, `user${guest.id}@elsewhere.example`)).status, 400);
    assert.deepEqual((await get(guest, 'nobody@example.com')).body, { result: 'error', msg: 'No such user', code: 'BAD_REQUEST' });
  });

  test('include_custom_profile_fields adds profile_data to people only, rendered where the type supports it', async () => {
    const bio = await t.owner.client.callEndpoint('/realm/profile_fields', 'POST', { name: 'Bio', field_type: 2 });
    const team = await t.owner.client.callEndpoint('/realm/profile_fields', 'POST', { name: 'Team', field_type: 3, field_data: JSON.stringify({ a: { text: 'A', order: '1' } }) });
    assert.equal(bio.result, 'success');
    const member = await t.account(400);
    const set = await member.client.callEndpoint('/users/me/profile_data', 'PATCH', { data: JSON.stringify([{ id: bio.id, value: 'Hi **there** <b>' }, { id: team.id, value: 'a' }]) });
    assert.equal(set.result, 'success');
    const badChoice = await member.client.callEndpoint('/users/me/profile_data', 'PATCH', { data: JSON.stringify([{ id: team.id, value: 'zzz' }]) });
    assert.equal(badChoice.msg, "'zzz' is not a valid choice for 'Team'.");
    const bot = await t.account(400, { bot: { type: 1, ownerId: member.id } });

    const res = await t.owner.client.users.retrieve({ include_custom_profile_fields: true });
    const m = res.members.find((x: any) => x.user_id === member.id);
    assert.deepEqual(m.profile_data[String(bio.id)], { value: 'Hi **there** <b>', rendered_value: '<p>Hi <strong>there</strong> &lt;b&gt;</p>' });
    assert.deepEqual(m.profile_data[String(team.id)], { value: 'a' });
    const b = res.members.find((x: any) => x.user_id === bot.id);
    assert.equal(b.profile_data, undefined);
    assert.equal(b.bot_type, 1);
    assert.equal(b.bot_owner_id, member.id);
    assert.equal(b.delivery_email, bot.email);
    const without = await t.owner.client.users.retrieve();
    assert.equal(without.members.find((x: any) => x.user_id === member.id).profile_data, undefined);
    assert.equal(without.members.find((x: any) => x.user_id === member.id).bot_type, undefined);
  });

  test('POST /users (administrators): the new account logs in, and date_joined becomes the first log-in time', async () => {
    const res = await t.owner.client.users.create({ email: 'newbie@example.com', password: 'secret-pass', full_name: 'New Bie' });
    assert.equal(res.result, 'success');
    const before = (await t.owner.client.callEndpoint(`/users/${res.user_id}`, 'GET')).user.date_joined;
    const dup = await t.owner.client.users.create({ email: 'NEWBIE@example.com', password: 'secret-pass', full_name: 'Again' });
    assert.equal(dup.msg, "Email 'NEWBIE@example.com' already in use");
    const member = await t.account(400);
    const denied = await member.client.users.create({ email: 'x@example.com', password: 'secret-pass', full_name: 'X' });
    assert.deepEqual(denied, { result: 'error', msg: 'Must be an organization administrator', code: 'UNAUTHORIZED_PRINCIPAL' });
    await new Promise((r) => setTimeout(r, 20));
    const client = await zulip({ realm: t.base, username: 'newbie@example.com', password: 'secret-pass' });
    const me = await client.users.me.getProfile();
    assert.equal(me.user_id, res.user_id);
    assert.ok(me.date_joined > before, `${me.date_joined} > ${before}`);
  });

  test('POST /bots answers the bot\'s API key, which works', async () => {
    const member = await t.account(400);
    const res = await member.client.callEndpoint('/bots', 'POST', { full_name: 'Helper', short_name: 'helper', bot_type: 3 });
    assert.equal(res.result, 'success');
    assert.match(res.api_key, /^[A-Za-z0-9]{32}$/);
    const bot = await zulip({ realm: t.base, username: 'helper-bot@127.0.0.1', apiKey: res.api_key });
    const me = await bot.users.me.getProfile();
    assert.equal(me.is_bot, true);
    assert.equal(me.bot_type, 3);
    assert.equal(me.bot_owner_id, member.id);
    const again = await member.client.callEndpoint('/bots', 'POST', { full_name: 'Helper', short_name: 'helper' });
    assert.equal(again.msg, 'Username already in use');
    const badType = await member.client.callEndpoint('/bots', 'POST', { full_name: 'X', short_name: 'x', bot_type: 7 });
    assert.equal(badType.msg, 'Invalid bot type');
    // Deactivating the bot (its owner may) stops its key.
    assert.equal((await member.client.callEndpoint(`/bots/${res.user_id}`, 'DELETE')).result, 'success');
    assert.equal((await t.raw('GET', '/users/me', { auth: { email: 'helper-bot@127.0.0.1', apiKey: res.api_key } as any })).status, 401);
  });

  test('deactivation: administrators only, never the last owner; reactivation restores access', async () => {
    const member = await t.account(400);
    const other = await t.account(400);
    const denied = await member.client.callEndpoint(`/users/${other.id}`, 'DELETE');
    assert.equal(denied.msg, 'Insufficient permission');
    const last = await t.owner.client.callEndpoint('/users/me', 'DELETE');
    assert.equal(last.code, 'CANNOT_DEACTIVATE_LAST_USER');
    assert.equal((await t.owner.client.callEndpoint(`/users/${other.id}`, 'DELETE')).result, 'success');
    assert.equal((await t.owner.client.callEndpoint(`/users/${other.id}`, 'DELETE')).msg, 'User is deactivated');
    assert.deepEqual(await t.owner.client.callEndpoint(`/users/${other.id}/reactivate`, 'POST', {}), { result: 'success', msg: '' });
    assert.equal((await other.client.users.me.getProfile()).is_active, true);
  });

  test('the demo organization shows every kind of account', async () => {
    const demo = await loadDemoOrganization(t.db, t.services, systemActor('test'), { subdomain: `demo${process.pid}`, url: t.base });
    const client = await zulip({ realm: t.base, username: demo.ownerEmail, apiKey: demo.apiKey });
    const { members } = await client.users.retrieve({ include_custom_profile_fields: true });
    const by = (email: string) => members.find((m: any) => m.delivery_email === email || m.email === email);
    assert.equal(by('deleted@127.0.0.1').is_deleted, true);
    assert.equal(by('deleted@127.0.0.1').is_active, false);
    assert.equal(by('imported@127.0.0.1').is_imported_stub, true);
    assert.equal(by('owner@127.0.0.1').is_deleted, undefined);
    assert.deepEqual(members.filter((m: any) => m.is_bot).map((m: any) => m.bot_type).sort(), [1, 2, 3, 4]);
    assert.equal(members.find((m: any) => m.bot_type === 4).bot_owner_id, null);
    assert.deepEqual(new Set(members.map((m: any) => m.role)), new Set([100, 200, 300, 400, 600]));
    assert.match(by('owner@127.0.0.1').profile_data[Object.keys(by('owner@127.0.0.1').profile_data)[1]].rendered_value, /<strong>Crewhouse<\/strong>/);
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { chatTestServer, type ChatTestServer } from '../chat.testkit.ts';

describe('chat invitations', () => {
  let t: ChatTestServer;
  before(async () => {
    t = await chatTestServer();
  });
  after(() => t.close());

  const list = async (who: { client: any }) => (await who.client.callEndpoint('/invites', 'GET')).invites as any[];
  const invite = (who: { client: any }, params: Record<string, unknown>) => who.client.callEndpoint('/invites', 'POST', { stream_ids: '[]', ...params });

  test('email invitations and reusable links: fields, manageability and expiry', async () => {
    const member = await t.account(400);
    assert.equal((await invite(member, { invitee_emails: 'a1@example.com, b1@example.com', notify_referrer_on_join: 'false' })).result, 'success');
    assert.equal((await invite(t.owner, { invitee_emails: 'c1@example.com', invite_expires_in_minutes: 'null', invite_as: 200 })).result, 'success');
    const link = await t.owner.client.callEndpoint('/invites/multiuse', 'POST', { invite_as: 600 });
    assert.match(link.invite_link, new RegExp(`^${t.base}/join/[a-z0-9]+/$`));

    const mine = await list(member);
    assert.deepEqual(mine.map((i) => i.email).sort(), ['a1@example.com', 'b1@example.com']);
    const a = mine.find((i) => i.email === 'a1@example.com');
    assert.deepEqual(Object.keys(a).sort(), ['email', 'expiry_date', 'id', 'invited', 'invited_as', 'invited_by_user_id', 'is_multiuse', 'notify_referrer_on_join']);
    assert.equal(a.invited_by_user_id, member.id);
    assert.equal(a.invited_as, 400);
    assert.equal(a.is_multiuse, false);
    assert.equal(a.notify_referrer_on_join, false);
    assert.ok(Math.abs(a.expiry_date - a.invited - 10 * 24 * 3600) <= 1);

    const all = await list(t.owner);
    assert.equal(all.length, 4);
    const c = all.find((i) => i.email === 'c1@example.com');
    assert.equal(c.expiry_date, null);
    const l = all.find((i) => i.is_multiuse);
    assert.equal(l.email, undefined);
    assert.equal(l.link_url, link.invite_link);
    assert.equal(l.invited_as, 600);

    const expiring = await t.account(400);
    await invite(expiring, { invitee_emails: 'soon@example.com', invite_expires_in_minutes: 1 });
    await t.db.updateTable('chat_invites').set({ expiry_date: new Date(Date.now() - 1000) }).where('email', '=', 'soon@example.com').execute();
    assert.deepEqual(await list(expiring), []);
  });

  test('an expiry beyond any date is refused in Zulip\'s envelope, for invitations and links', async () => {
    for (const minutes of ['999999999999', '0', '-5']) {
      const res = await t.raw('POST', '/invites', { auth: t.owner, form: { invitee_emails: 'far@example.com', stream_ids: '[]', invite_expires_in_minutes: minutes } });
      assert.equal(res.status, 400, minutes);
      assert.deepEqual(res.body, { result: 'error', msg: 'Invalid invite_expires_in_minutes', code: 'BAD_REQUEST' });
      const link = await t.raw('POST', '/invites/multiuse', { auth: t.owner, form: { invite_expires_in_minutes: minutes } });
      assert.equal(link.status, 400, minutes);
      assert.deepEqual(link.body, { result: 'error', msg: 'Invalid invite_expires_in_minutes', code: 'BAD_REQUEST' });
    }
    // A long but real lifetime is taken.
    const year = await t.raw('POST', '/invites/multiuse', { auth: t.owner, form: { invite_expires_in_minutes: String(365 * 24 * 60) } });
    assert.equal(year.status, 200);
  });

  test('POST /invites rules: roles, bad addresses, existing accounts, guests', async () => {
    const member = await t.account(400);
    assert.equal((await invite(member, { invitee_emails: 'x@example.com', invite_as: 200 })).msg, 'Must be an organization administrator');
    assert.equal((await invite(member, { invitee_emails: 'x@example.com', invite_as: 100 })).msg, 'Must be an organization owner');
    assert.equal((await invite(member, { invitee_emails: 'x@example.com', invite_as: 500 })).msg, 'Invalid invite_as');
    assert.equal((await invite(member, { invitee_emails: '' })).msg, 'You must specify at least one email address.');
    const bad = await invite(member, { invitee_emails: 'not-an-address' });
    assert.equal(bad.code, 'INVITATION_FAILED');
    assert.deepEqual(bad.errors, [['not-an-address', 'Invalid address.', false]]);
    const existing = await invite(member, { invitee_emails: 'owner@example.com' });
    assert.equal(existing.msg, "We weren't able to invite anyone.");
    const missing = await member.client.callEndpoint('/invites', 'POST', { invitee_emails: 'y@example.com' });
    assert.equal(missing.msg, "Missing 'stream_ids' argument");
    const guest = await t.account(600);
    assert.equal((await guest.client.callEndpoint('/invites', 'GET')).msg, 'Not allowed for guest users');
  });

  test('resend: email invitations the caller can manage; only an owner resends an owner invitation', async () => {
    const admin = await t.account(200);
    const member = await t.account(400);
    const other = await t.account(400);
    await invite(member, { invitee_emails: 'r1@example.com' });
    await invite(t.owner, { invitee_emails: 'boss@example.com', invite_as: 100 });
    const all = await list(t.owner);
    const r1 = all.find((i) => i.email === 'r1@example.com');
    const boss = all.find((i) => i.email === 'boss@example.com');
    const link = all.find((i) => i.is_multiuse);
    const resend = (who: { client: any }, id: number) => who.client.callEndpoint(`/invites/${id}/resend`, 'POST', {});
    assert.equal((await resend(member, r1.id)).result, 'success');
    assert.equal((await resend(admin, r1.id)).result, 'success');
    assert.equal((await resend(other, r1.id)).msg, 'Must be an organization administrator');
    assert.equal((await resend(admin, boss.id)).msg, 'Must be an organization owner');
    assert.equal((await resend(t.owner, boss.id)).result, 'success');
    assert.equal((await resend(t.owner, 999999)).msg, 'No such invitation');
    assert.deepEqual(await t.owner.client.callEndpoint(`/invites/${r1.id}`, 'DELETE'), { result: 'success', msg: '' });
    assert.equal((await resend(t.owner, r1.id)).msg, 'No such invitation');
    assert.equal((await t.owner.client.callEndpoint(`/invites/multiuse/${link.id}`, 'DELETE')).result, 'success');
    assert.equal((await list(t.owner)).some((i) => i.is_multiuse && i.id === link.id), false);
  });
});

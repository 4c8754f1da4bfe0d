import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { sql } from 'kysely';
import { makeTeam } from '../../../test/factories.ts';
import { textOfAdf, type FakeJira } from '../../../test/fakes/jira.ts';
import type { FakeLinear } from '../../../test/fakes/linear.ts';
import type { TestApp } from '../../../test/harness.ts';
import { trackerBench, type TrackerBench } from '../../../test/integrations.ts';
import { systemActor } from '../../audit/audit.ts';

// A person's message on the issue that the team cannot take is answered where it was written
// (Linear's agent session, a Jira comment), in words, once per message; a follow-up while the
// team's daily budget is spent is said to wait, and is taken when the day turns, once.
describe('trackers: refusals and waits said on the issue', () => {
  let bench: TrackerBench;
  let t: TestApp;
  let linear: FakeLinear;
  let jira: FakeJira;
  let engTeam: string;
  const drain = (now?: () => Date) => bench.drain(now);
  const rowOf = (kind: string, id: string) => bench.delivery(kind, id);
  const spendBudget = async (team: string, usd: number) => {
    const { id } = await t.db.selectFrom('teams').select('id').where('name', '=', team).where('status', '=', 'active').executeTakeFirstOrThrow();
    await t.db.updateTable('mp_teams').set({ day: sql`(now() at time zone 'utc')::date`, day_spend: usd }).where('team', '=', `${team}.${id}`).execute();
  };
  const linkedTeam = async (budget?: number) => {
    const team = (await makeTeam(t, budget ? { body: { budget_usd_per_day: budget } } : {})).name;
    return team;
  };
  const link = async (team: string, surface: string, id: string) => {
    const res = await t.request({ method: 'PUT', url: `/api/v1/teams/${team}/links`, token: t.adminToken, body: { surface, external_id: id } });
    assert.equal(res.status, 201, res.text);
  };

  before(async () => {
    bench = await trackerBench();
    ({ t, linear, jira } = bench);
    engTeam = linear.addTeam({ key: 'ENG', name: 'Engineering' }).id;
  });
  after(() => bench.close());

  it('Linear: a prompt to a cancelled run is answered in the session, in words, once however often it is delivered', async () => {
    const team = await linkedTeam();
    await link(team, 'tracker_a', 'ENG');
    const ada = linear.addUser({ name: 'Ada' });
    const issue = linear.addIssue({ teamId: engTeam, title: 'Fix the footer', creatorId: ada.id });
    const { session, delivery } = await linear.assignToApp(issue.id, ada.id);
    await drain();
    const runId = (await rowOf('tracker_a', delivery.id)).run_id as string;
    await t.services.runs.cancel(systemActor('test'), runId, 'console');
    await drain();
    const before = linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id).length;

    const prompt = await linear.prompt(session.id, ada.id, 'also fix the header');
    assert.equal(prompt.status, 202, prompt.response);
    await drain();
    assert.equal(JSON.parse((await linear.redeliver(prompt.id)).response).outcome, 'duplicate');
    await drain();
    const row = await rowOf('tracker_a', prompt.id);
    assert.deepEqual([row.outcome, row.run_id], ['refused', runId], row.detail);
    const ours = linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id).slice(before);
    assert.equal(ours.length, 1, JSON.stringify(ours));
    assert.equal(ours[0]!.content.type, 'error');
    assert.match(ours[0]!.content.body!, new RegExp(`^Crewhouse could not take Ada's follow-up: run ${runId} was cancelled; give the team a new task instead\\. For new work, assign the agent a new issue\\.$`));
  });

  it('Jira: a comment to the run of an archived team is answered with a comment mentioning its author, once', async () => {
    jira.addProject({ key: 'ARC', name: 'Archive' });
    const team = await linkedTeam();
    await link(team, 'tracker_b', 'ARC');
    const bob = jira.addUser('Bob');
    const issue = jira.addIssue({ projectKey: 'ARC', summary: 'Rotate the logs', reporter: bob.accountId });
    const assigned = await jira.assign(issue.key, jira.agent.accountId, bob.accountId);
    await drain();
    const runId = (await rowOf('tracker_b', assigned.id)).run_id as string;
    const { row_version } = await t.services.teams.get(team);
    await t.services.teams.archive(systemActor('test'), team, row_version);
    await drain();
    const before = jira.comments.filter((c) => c.issueId === issue.id && c.author === jira.agent.accountId).length;

    const said = await jira.comment(issue.key, bob.accountId, `[~accountid:${jira.agent.accountId}] one more thing`);
    await drain();
    assert.equal(JSON.parse((await jira.redeliver(said.id)).response).outcome, 'duplicate');
    await drain();
    const row = await rowOf('tracker_b', said.id);
    assert.deepEqual([row.outcome, row.run_id], ['refused', runId], row.detail);
    const ours = jira.comments.filter((c) => c.issueId === issue.id && c.author === jira.agent.accountId).slice(before);
    assert.equal(ours.length, 1);
    assert.ok(JSON.stringify(ours[0]!.body).includes(`"id":"${bob.accountId}"`), 'it mentions Bob');
    assert.match(textOfAdf(ours[0]!.body), new RegExp(`^@Bob Crewhouse could not take your follow-up: the team ${team} of run ${runId} was archived, so the run takes no more replies: give a live team a new task instead\\.\\nFor new work, assign the agent a new issue\\.$`));
  });

  it('Linear: a follow-up while the daily budget is spent is said to wait, and is taken when the day turns, once', async () => {
    const team = await linkedTeam(1);
    const key = `B${crypto.randomBytes(2).toString('hex').toUpperCase()}`;
    const lt = linear.addTeam({ key, name: 'Budget' }).id;
    await link(team, 'tracker_a', key);
    const ada = linear.addUser({ name: 'Ada' });
    const issue = linear.addIssue({ teamId: lt, title: 'Tune the cache', creatorId: ada.id });
    const { session, delivery } = await linear.assignToApp(issue.id, ada.id);
    await drain();
    const runId = (await rowOf('tracker_a', delivery.id)).run_id as string;
    await t.db.updateTable('runs').set({ state: 'failed', failure_reason: 'the budget is spent' }).where('id', '=', runId).execute();
    await spendBudget(team, 1);
    const before = linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id).length;

    const prompt = await linear.prompt(session.id, ada.id, 'try again with less');
    await drain();
    await drain();
    const waiting = await rowOf('tracker_a', prompt.id);
    assert.equal(waiting.outcome, 'accepted', waiting.detail);
    assert.match(waiting.detail, /has spent its daily budget: the follow-up is taken at /);
    const ours = linear.activities.filter((a) => a.sessionId === session.id && a.userId === linear.app.id).slice(before);
    assert.equal(ours.length, 1, JSON.stringify(ours));
    assert.equal(ours[0]!.content.type, 'thought');
    assert.match(ours[0]!.content.body!, new RegExp(`^Team \`${team}\` has spent its daily budget, so Ada's follow-up is taken at 00:00 UTC, when the budget is whole again\\. Nothing more to do: the team reports back here then\\.$`));
    assert.equal((await t.services.runs.get(runId)).run.state, 'failed');

    // The day turns (the queue's clock past midnight; the proxy's books start the day afresh).
    await spendBudget(team, 0);
    const d = new Date();
    const tomorrow = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1) + 60_000;
    await drain(() => new Date(tomorrow));
    await drain(() => new Date(tomorrow + 3_600_000));
    assert.equal(JSON.parse((await linear.redeliver(prompt.id)).response).outcome, 'duplicate');
    await drain(() => new Date(tomorrow + 7_200_000));
    const taken = await rowOf('tracker_a', prompt.id);
    assert.deepEqual([taken.outcome, taken.run_id], ['processed', runId], taken.detail);
    const replies = (await t.services.runs.posts(runId, 0, 100)).items.filter((p) => p.kind === 'reply');
    assert.deepEqual(replies.map((p) => p.text), ['try again with less']);
    assert.notEqual((await t.services.runs.get(runId)).run.state, 'failed');
  });

  it('Jira: a follow-up while the daily budget is spent says when it is taken, mentioning its author', async () => {
    jira.addProject({ key: 'BUD', name: 'Budget' });
    const team = await linkedTeam(1);
    await link(team, 'tracker_b', 'BUD');
    const bob = jira.addUser('Bob');
    const issue = jira.addIssue({ projectKey: 'BUD', summary: 'Shrink the image', reporter: bob.accountId });
    const assigned = await jira.assign(issue.key, jira.agent.accountId, bob.accountId);
    await drain();
    const runId = (await rowOf('tracker_b', assigned.id)).run_id as string;
    await t.db.updateTable('runs').set({ state: 'succeeded' }).where('id', '=', runId).execute();
    await spendBudget(team, 1);
    const before = jira.comments.filter((c) => c.issueId === issue.id && c.author === jira.agent.accountId).length;
    const said = await jira.comment(issue.key, bob.accountId, `[~accountid:${jira.agent.accountId}] smaller still`);
    await drain();
    const row = await rowOf('tracker_b', said.id);
    assert.equal(row.outcome, 'accepted', row.detail);
    const ours = jira.comments.filter((c) => c.issueId === issue.id && c.author === jira.agent.accountId).slice(before);
    assert.equal(ours.length, 1);
    assert.match(textOfAdf(ours[0]!.body), new RegExp(`^@Bob Team ${team} has spent its daily budget, so your follow-up is taken at 00:00 UTC, when the budget is whole again\\.\\nNothing more to do: the team comments here then\\.$`));

    // A new issue assigned while the budget is spent waits too: no run yet, and the issue says when it is taken.
    const next = jira.addIssue({ projectKey: 'BUD', summary: 'Trim the logs', reporter: bob.accountId });
    const again = await jira.assign(next.key, jira.agent.accountId, bob.accountId);
    await drain();
    const waiting = await rowOf('tracker_b', again.id);
    assert.deepEqual([waiting.outcome, waiting.run_id], ['accepted', null], waiting.detail);
    const told = jira.comments.filter((c) => c.issueId === next.id && c.author === jira.agent.accountId).map((c) => textOfAdf(c.body));
    assert.deepEqual(told.length, 1);
    assert.match(told[0]!, new RegExp(`^@Bob Team ${team} has spent its daily budget, so the team takes this issue at 00:00 UTC, when the budget is whole again\\.`));
  });
});

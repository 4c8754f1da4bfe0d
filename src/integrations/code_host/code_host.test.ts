import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { pullRequestText } from './delivery.ts';
import { addressedText, intentOf, issueOfTaskText, taskTextOf, teamOfLabel } from './events.ts';

const issueOpened = (labels: string[]) => ({
  action: 'opened',
  issue: { number: 7, title: 'Fix the thing', body: 'It is broken.', html_url: 'https://github.com/acme/app/issues/7', labels: labels.map((name) => ({ name })) },
  repository: { full_name: 'acme/app' },
  sender: { login: 'alice', type: 'User' },
});

describe('the code-host event rule', () => {
  it('takes labelled issues, addressed comments and closed pull requests; ignores the rest', () => {
    assert.equal(intentOf('issues', issueOpened([])).kind, 'ignore');
    const task = intentOf('issues', issueOpened(['bug', 'crewhouse']));
    assert.equal(task.kind, 'task');
    assert.equal(task.kind === 'task' && task.team, null);
    const named = intentOf('issues', { ...issueOpened([]), action: 'labeled', label: { name: 'crewhouse:web-team' } });
    assert.equal(named.kind === 'task' && named.team, 'web-team');
    assert.equal(intentOf('issues', { ...issueOpened(['crewhouse']), action: 'closed' }).kind, 'ignore');
    const comment = { action: 'created', issue: { number: 9, pull_request: { url: 'x' } }, comment: { body: '/crewhouse please add a test', user: { type: 'User' } }, repository: { full_name: 'acme/app' }, sender: { login: 'bob', type: 'User' } };
    const c = intentOf('issue_comment', comment);
    assert.deepEqual(c.kind === 'comment' && [c.on, c.text, c.number], ['pull_request', 'please add a test', 9]);
    assert.equal(intentOf('issue_comment', { ...comment, comment: { body: 'looks good' } }).kind, 'ignore');
    assert.equal(intentOf('issue_comment', { ...comment, sender: { login: 'crewhouse[bot]', type: 'Bot' } }).kind, 'ignore');
    const closed = intentOf('pull_request', { action: 'closed', pull_request: { number: 9, merged: true, html_url: 'u' }, repository: { full_name: 'acme/app' } });
    assert.deepEqual(closed.kind === 'pull_closed' && [closed.number, closed.merged], [9, true]);
    assert.equal(intentOf('push', { repository: { full_name: 'acme/app' } }).kind, 'ignore');
    assert.equal(intentOf('ping', {}).kind, 'ignore');
    assert.equal(teamOfLabel('Crewhouse'), null);
    assert.equal(teamOfLabel('crewhouse-ish'), undefined);
    assert.equal(addressedText('hey @crewhouse, go on'), 'hey go on');
    assert.equal(addressedText('email me at a@crewhouse.dev'), null);
  });
});

describe('the pull request text of a run', () => {
  it('says what the run did: summary, pushes, checks, refused egress, the issue it closes and a link', () => {
    const run = {
      id: 'run_abc',
      team: 'web',
      text: 'Issue #7 of acme/app: Fix the thing\nhttps://code.test/acme/app/issues/7\n\nIt is broken.',
      delivery: { branch: 'crewhouse/run_abc', commit: 'c0ffee', pull_request: null },
    } as unknown as Parameters<typeof pullRequestText>[0];
    const post = (seq: number, kind: string, text: string, data: Record<string, unknown> = {}, role: string | null = 'lead') => ({ seq, kind, role, text, data, created_at: '2026-01-01T00:00:00Z' }) as Parameters<typeof pullRequestText>[1][number];
    const { title, body } = pullRequestText(
      run,
      [
        post(1, 'task', 'Fix the thing', { from: 'person' }),
        post(2, 'task', 'Reviewed: the fix is right', { from: 'reviewer' }, 'lead'),
        post(3, 'working', 'shell: done', { tool: 'shell', ok: true }),
        post(4, 'notice', 'the gateway refused a request of the lead role to evil.example', { host: 'evil.example', rule: 'no_destination' }, null),
        post(5, 'artifact', 'pushed crewhouse/run_abc at c0ffee', { branch: 'crewhouse/run_abc' }),
        post(6, 'completed', 'Fixed the thing.'),
      ],
      'http://crewhouse.test/#/runs/run_abc',
      ['lead: GET evil.example/ (no_destination: not in the allowlist)'],
    );
    assert.equal(title, 'Fix the thing');
    assert.match(body, /^Fixed the thing\./);
    assert.match(body, /Closes #7/);
    assert.match(body, /### What changed\n- pushed crewhouse\/run_abc at c0ffee/);
    assert.match(body, /### How it was checked\n- lead: Reviewed: the fix is right\n- shell: done/);
    // From the gateway's record, once: the run's refusal notice says the same and is not repeated.
    assert.match(body, /### Refused egress\n- lead: GET evil\.example\/ \(no_destination: not in the allowlist\)\n\n/);
    assert.match(body, /\[run_abc\]\(http:\/\/crewhouse\.test\/#\/runs\/run_abc\)/);
  });
});

describe('the code host as a surface', () => {
  it("a task's text names the issue it came from: the link back", () => {
    const task = intentOf('issues', issueOpened(['crewhouse']));
    assert.ok(task.kind === 'task');
    assert.deepEqual(issueOfTaskText(taskTextOf(task)), { url: 'https://github.com/acme/app/issues/7', number: 7 });
    assert.equal(issueOfTaskText('Fix the thing, from the console'), null);
  });
});

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { Post, Run } from '../console/runs/runs.schemas.ts';
import { renderPost, renderStartFrom } from './chat/render.ts';
import { actorForPeople, SERVICE_NAMES, type SurfaceKind } from './surface.ts';
import { formatOf } from './chat/format.ts';
import { progressText } from './code_host/delivery.ts';
import type { ProgressNote } from './tracker/kind.ts';
import { activityOf } from './tracker_a/tracker_a.ts';
import { textOfAdf } from './tracker_b/adf.ts';
import { commentOf } from './tracker_b/tracker_b.ts';

// What each surface tells people of a run's progress says what to do next there, in words, and
// is right for where the work came from: a follow-up from the team's chat room is said to come
// from there (not from the Crewhouse console), and each next step names the place's own way
// (a comment mentioning /crewhouse on the code host, a reply in a Linear session or a comment
// mentioning the agent, a reply in the chat thread).
describe('the texts people read of a run, on each surface', () => {
  const URL = 'https://crewhouse.test/#/runs/run_x';
  const run = (over: Partial<Run>) => ({ id: 'run_x', team: 'payments', state: 'running', open_question: null, waiting_for: null, failure_reason: null, delivery: null, cost_usd: 0.5, ...over }) as Run;
  const reply = (by: string, text = 'keep the old colours') => ({ seq: 9, kind: 'reply', role: 'lead', text, data: { by }, created_at: '' }) as unknown as Post;

  it('the code host: a follow-up is named by where it was given; each text says what happens or what to do next', () => {
    const resumed = (by: string) => progressText(run({}), 'resumed', 9, reply(by), URL)!;
    assert.match(resumed('chat_a:@alice'), /^Team `payments` resumed work on a follow-up given in the team's chat room\. \[Run run_x\]\(.*\)\. The team comments here when it finishes or has a question\.$/);
    assert.match(resumed('chat_b:@bob'), /given in the team's chat room/);
    assert.match(resumed('admin'), /given in the Crewhouse console/);
    assert.match(resumed('code_host:bob'), /^Team `payments` resumed work on a follow-up from @bob:\n\n> keep the old colours\n\n\[Run run_x\]/);
    assert.equal(progressText(run({}), 'resumed', 9, reply('admin'), URL)!.includes('chat room'), false);
    assert.match(progressText(run({}), 'started', 3, undefined, URL)!, /is on it: .*\. The team comments here when it finishes or has a question\.$/);
    const pr = { branch: 'b', commit: null, pull_request: { url: 'https://code.test/acme/app/pull/4', number: 4, state: 'open' } };
    assert.match(progressText(run({ state: 'succeeded', delivery: pr }), 'finished', 12, undefined, URL)!, /finished\. Pull request: https:\/\/code\.test\/acme\/app\/pull\/4 \(review and merge it there\)\. .*For changes, comment here mentioning `\/crewhouse` with what to change\.$/);
    assert.match(progressText(run({ state: 'failed', failure_reason: 'the budget ran out' }), 'finished', 12, undefined, URL)!, /could not finish: the budget ran out\. .*To have it try again, comment here mentioning `\/crewhouse`/);
    assert.match(progressText(run({ state: 'cancelled' }), 'finished', 12, undefined, URL)!, /For new work, open an issue with the label `crewhouse`\.$/);
    assert.equal(progressText(run({}), 'resumed', 9, { ...reply('admin'), kind: 'answer' } as Post, URL), null, 'only a follow-up resumes');
  });

  const notes: ProgressNote[] = [
    { kind: 'started' },
    { kind: 'resumed', text: '', by: null, where: "the team's chat room" },
    { kind: 'delivered', summary: 'Painted it', pullUrl: 'https://code.test/acme/app/pull/4', branch: 'b' },
    { kind: 'failed', reason: 'the budget ran out', cause: null },
    { kind: 'cancelled' },
  ];
  const ctx = { team: 'payments', runId: 'run_x', runUrl: URL };
  const NEXT = /reports back here|comments here when|For changes, |To have it try again, |For new work, /;

  it('Linear: in a session each note says to reply in the session; as a comment, to comment mentioning the agent', () => {
    for (const note of notes) {
      const inSession = activityOf(note, ctx);
      const asComment = activityOf(note, ctx, false);
      const a = 'body' in inSession ? inSession.body : '';
      const c = 'body' in asComment ? asComment.body : '';
      assert.match(a, NEXT, `${note.kind}: ${a}`);
      assert.match(c, NEXT, `${note.kind}: ${c}`);
      if (note.kind === 'delivered' || note.kind === 'failed') {
        assert.match(a, /reply in this session/);
        assert.match(c, /comment on this issue mentioning the agent/);
      }
    }
    const resumed = activityOf(notes[1], ctx);
    assert.match('body' in resumed ? resumed.body : '', /resumed work on a follow-up given in the team's chat room\./);
  });

  it('Jira: each comment says what happens or what to do next on the issue', () => {
    for (const note of notes) {
      const text = textOfAdf(commentOf(note, ctx, { id: null, name: null }));
      assert.match(text, NEXT, `${note.kind}: ${text}`);
      if (note.kind === 'delivered' || note.kind === 'failed') assert.match(text, /comment on this issue mentioning the agent/);
    }
    assert.equal(textOfAdf(commentOf(notes[0], ctx, { id: null, name: null })).split('\n')[0], 'Team payments is on it: run run_x.');
  });

  it('chat: the end of a run says what to do next in its thread', () => {
    const post = (kind: string, text: string) => ({ seq: 5, kind, role: kind === 'completed' ? 'lead' : null, text, data: {}, created_at: '' }) as never;
    const rctx = { requester: '@alice', lastRole: null, run: run({}), format: formatOf('markdown') } as never;
    assert.match(renderPost(post('completed', 'Shipped'), rctx)!.text, /\nReply in this thread to ask for changes or more\.$/);
    assert.match(renderPost(post('failed', 'the budget ran out'), rctx)!.text, /\nReply in this thread to have the team try again, with what to do differently\.$/);
    assert.match(renderPost(post('canceled', 'cancelled by chat_a:@alice'), rctx)!.text, /\nFor new work, give the team a new task in the room\.$/);
  });

  it("a failure a retry cannot mend says so, by its cause, on every surface: when the budget resets, an archived team, a model that refuses", () => {
    const failed = (cause: string) => ({ seq: 12, kind: 'failed', role: null, text: 'the coder role failed: it stopped', data: { cause }, created_at: '' }) as unknown as Post;
    const rctx = { requester: '@alice', lastRole: null, run: run({}), format: formatOf('markdown') } as never;
    const expected: Record<string, RegExp> = {
      budget: /The team's daily budget is spent until 00:00 UTC: to have it try again, .+ after then \(or once an admin raises the budget\)\.$/,
      archived: /The team was archived, so the run takes no more replies: give a live team a new task\.$/,
      model_refused: /Trying again fails the same way until an admin mends the role's model settings \(its model or key\) in the Crewhouse console; then .+ to have the team try again\.$/,
    };
    for (const [cause, pattern] of Object.entries(expected)) {
      const texts = [
        renderPost(failed(cause) as never, rctx)!.text,
        progressText(run({ state: 'failed', failure_reason: 'it stopped' }), 'finished', 12, failed(cause), URL)!,
        activityOf({ kind: 'failed', reason: 'it stopped', cause: cause as never }, ctx).body,
        activityOf({ kind: 'failed', reason: 'it stopped', cause: cause as never }, ctx, false).body,
        textOfAdf(commentOf({ kind: 'failed', reason: 'it stopped', cause: cause as never }, ctx, { id: null, name: null })),
      ];
      for (const text of texts) {
        assert.match(text, pattern, `${cause}: ${text}`);
        assert.doesNotMatch(text, /with what to do differently/, `${cause}: a retry as it is cannot help`);
      }
    }
    assert.match(renderPost(failed('budget') as never, rctx)!.text, /to have it try again, reply in this thread after then/);
    assert.match(activityOf({ kind: 'failed', reason: 'x', cause: 'budget' }, ctx).body, /reply in this session after then/);
  });
});

// People read the service's name (Linear, Jira, Mattermost, Slack, GitHub), never the internal
// integration kind (`tracker_a`), wherever a text names where work came from or who did something.
describe('the texts people read never name an internal integration kind', () => {
  const KIND = /\b(tracker_a|tracker_b|chat_a|chat_b|code_host)\b/;
  const kinds = Object.keys(SERVICE_NAMES) as SurfaceKind[];

  it("a home-room thread's first post names where its work came from by the service", () => {
    for (const kind of kinds) {
      for (const format of [formatOf('markdown'), formatOf('mrkdwn')]) {
        for (const url of ['https://x.test/ENG-1', null]) {
          const text = renderStartFrom({ team: 'payments', runId: 'run_x', text: 'Fix it', by: 'Ada', origin: { surface: kind, place: 'ENG-1', url }, format });
          assert.doesNotMatch(text, KIND, text);
          assert.ok(text.includes(`ENG-1 on ${SERVICE_NAMES[kind]}`), text);
        }
      }
    }
  });

  it('a cancel names who cancelled by their name on the service', () => {
    assert.equal(actorForPeople('chat_a:@alice'), '@alice on Mattermost');
    assert.equal(actorForPeople('tracker_b:Bob Smith'), 'Bob Smith on Jira');
    assert.equal(actorForPeople('admin'), 'admin');
    assert.equal(actorForPeople('chat_b:'), 'chat_b:', 'a kind without a name is not made into one');
    const rctx = { requester: '@alice', lastRole: null, run: { id: 'run_x', cost_usd: 0, delivery: null }, format: formatOf('markdown') } as never;
    for (const kind of kinds) {
      const text = renderPost({ seq: 5, kind: 'canceled', role: null, text: `cancelled by ${actorForPeople(`${kind}:alice`)}`, data: {}, created_at: '' } as never, rctx)!.text;
      assert.doesNotMatch(text, KIND, text);
    }
  });
});

// chat_a (Mattermost-compatible) against the fake Mattermost server, on the whole run stack of
// the end-to-end tests (console, model proxy, gateway, worker, real `local` sandboxes, the
// scripted model answering at once).
//
// 1. A task given in the chat room (a message mentioning the bot, taken from the WebSocket) to
//    the person seeing the team's first answer in the run's thread, against the same task given
//    through POST /teams/{name}/tasks to its first answer in GET /runs/{id}/posts. Goal: at
//    most 1.2x.
// 2. One slow chat never slows the run: a run whose lead and dev hand the work to each other
//    HANDOFFS times each way (every hand-off is a post in the thread), with the chat server
//    answering at once and answering every request SLOW_MS late. The run's time (created to
//    finished, the server's own times) with the slow server against the fast one: at most 1.2x,
//    and every post arrives in the thread in the end.
// 3. Posts per second the chat_a adapter sustains against the fake, one after another, and
//    against the server's own rate limit (429 with X-Ratelimit-*): every post arrives, at no less
//    than 0.8x the rate the server allows.
import { chatAClient } from '../src/integrations/chat_a/client.ts';
import { chatASurface } from '../src/integrations/chat_a/surface.ts';
import { startFakeMattermost } from '../test/fakes/mattermost.ts';
import type { ScriptedAnswer, ScriptedRequest } from '../test/fakes/scripted-model.ts';
import { roleOf, stackSkip, startStack, waitFor } from '../test/e2e/stack.ts';
import { putSecret, setChatA } from '../test/integrations.ts';
import type { BenchReport } from './lib.ts';

const TASKS = Number(process.env.BENCH_CHAT_TASKS ?? 6);
const POSTS = Number(process.env.BENCH_CHAT_POSTS ?? 200);
const LIMIT = Number(process.env.BENCH_CHAT_RATE_LIMIT ?? 50);
const HANDOFFS = Number(process.env.BENCH_CHAT_HANDOFFS ?? 5);
const SLOW_MS = Number(process.env.BENCH_CHAT_SLOW_MS ?? 250);
const BOT_TOKEN = `bench-chat-a-bot-${'x'.repeat(12)}`;

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2) : NaN;
};
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export default async function chatABench(): Promise<BenchReport[]> {
  const mm = await startFakeMattermost();
  const reports: BenchReport[] = [];
  const bot = mm.addUser({ username: 'crewhouse', bot: true, token: BOT_TOKEN });
  const alice = mm.addUser({ username: 'alice' });
  const room = mm.addChannel({ teamId: mm.addTeam('bench').id, name: 'bench', members: [bot.id, alice.id] });
  try {
    if (stackSkip) {
      reports.push({ name: 'chat_a: task to first answer', lines: [`skipped: ${stackSkip}`], goal: 'runs as root with the local sandbox provider', met: false });
    } else {
      // A task saying HANDOFFS goes between the lead and the dev HANDOFFS times; any other ends at once.
      const script = async (req: ScriptedRequest): Promise<ScriptedAnswer> => {
        if (roleOf(req) === 'dev') return { tool_calls: [{ name: 'hand_off', arguments: { summary: 'dev part done' } }] };
        const said = req.body.messages.map((m) => (typeof m.content === 'string' ? m.content : '')).join('\n');
        const back = said.split('dev part done').length - 1;
        if (said.includes('HANDOFFS') && back < HANDOFFS) return { tool_calls: [{ name: 'hand_off', arguments: { to_role: 'dev', summary: `round ${back + 1}` } }] };
        return { tool_calls: [{ name: 'finish', arguments: { outcome: 'succeeded', summary: 'done at once' } }] };
      };
      const stack = await startStack({ script, config: { SERVICE_LOG_LEVEL: 'warn' } });
      try {
        await putSecret(stack.t, 'integrations/chat_a/bot_token', BOT_TOKEN);
        await setChatA(stack.t, true, { url: mm.url });
        const spec = { roles: { lead: { tools: ['finish'], role: { memory: { inject: false } } } }, budget_usd_per_day: 1000 };
        await stack.makeTeam({ ...spec, home: { surface: 'chat_a', room_id: room.id } });
        const consoleTeam = await stack.makeTeam(spec);
        await waitFor('the worker to listen to the chat server', async () => mm.openSockets === 1, 60_000);

        /** A task in the room to the first reply in its thread (polled as a person's client would). */
        const viaChat = async (i: number) => {
          const marker = `bench-task-${i}-${Date.now()}`;
          const t0 = performance.now();
          mm.post(alice.id, room.id, `@crewhouse Do it ${marker}`);
          const root = await waitFor('the thread', async () => mm.posts.find((p) => p.user_id === bot.id && p.root_id === '' && p.message.includes(marker)), 120_000);
          await waitFor('the first answer in the thread', async () => {
            await sleep(5);
            return mm.posts.some((p) => p.root_id === root.id);
          }, 120_000);
          return performance.now() - t0;
        };
        /** The same task through the API to the run's first post from the team. */
        const viaApi = async (i: number) => {
          const t0 = performance.now();
          const id = await stack.giveTask(consoleTeam, `Do it bench-${i}`);
          await waitFor('the first answer', async () => {
            await sleep(5);
            return (await stack.posts(id)).some((p) => p.kind !== 'task');
          }, 120_000);
          return performance.now() - t0;
        };
        // Warm-ups boot each team's sandbox; a second round finds both runtimes up (a sandbox's
        // runtime stops after a few idle seconds, and the first API warm-up's boot is longer than that).
        for (const i of [-2, -1]) {
          await viaChat(i);
          await viaApi(i);
        }
        const chat: number[] = [];
        const api: number[] = [];
        for (let i = 0; i < TASKS; i++) {
          chat.push(await viaChat(i));
          api.push(await viaApi(i));
        }
        const ratio = median(chat) / median(api);
        reports.push({
          name: `chat_a: a task to the team's first answer (${TASKS} tasks each way, the model answering at once)`,
          lines: [`chat room (mention, WebSocket, thread): median ${median(chat).toFixed(0)} ms`, `POST /teams/{name}/tasks, GET /runs/{id}/posts: median ${median(api).toFixed(0)} ms`, `ratio ${ratio.toFixed(2)}x`],
          goal: 'at most 1.2x the API',
          met: ratio <= 1.2,
        });

        // A team of two in a room of its own (one listener, one room per team).
        const pairRoom = mm.addChannel({ teamId: room.team_id, name: 'bench-pair', members: [bot.id, alice.id] });
        const role = { memory: { inject: false } };
        const chatTeam = await stack.makeTeam({ roles: { lead: { tools: ['finish', 'hand_off'], role }, dev: { tools: ['hand_off'], role } }, pipeline: { lead: 'dev' }, budget_usd_per_day: 1000, home: { surface: 'chat_a', room_id: pairRoom.id } });
        /** A run of hand-offs given in the room: its time from created to finished, and the thread's hand-off posts once all are in. */
        const progressRun = async (tag: string) => {
          const marker = `bench-handoffs-${tag}-${Date.now()}`;
          mm.post(alice.id, pairRoom.id, `@crewhouse HANDOFFS ${marker}`);
          const run = await waitFor('the run to finish', async () => {
            await sleep(20);
            const found = (await stack.t.request({ method: 'GET', url: `/api/v1/teams/${chatTeam}/runs?limit=50`, token: stack.t.adminToken })).body.items.find((r: { text: string }) => r.text.includes(marker));
            return found?.finished_at ? found : null;
          }, 180_000);
          const ms = Date.parse(run.finished_at) - Date.parse(run.created_at);
          const root = await waitFor('the thread', async () => mm.posts.find((p) => p.user_id === bot.id && p.root_id === '' && p.message.includes(marker)), 180_000);
          // Every post reaches the thread in the end, however slow the server: the last is the Done.
          await waitFor('the last post in the thread', async () => {
            await sleep(50);
            return mm.threadOf(root.id).some((p) => p.message.includes('Done:'));
          }, 300_000);
          const arrived = mm.threadOf(root.id).filter((p) => /takes over from/.test(p.message)).length;
          return { ms, arrived };
        };
        await progressRun('warm');
        const fast: number[] = [];
        const slow: number[] = [];
        let arrivedAll = true;
        for (let i = 0; i < 3; i++) {
          mm.latencyMs = 0;
          fast.push((await progressRun(`fast${i}`)).ms);
          mm.latencyMs = SLOW_MS;
          const s = await progressRun(`slow${i}`);
          mm.latencyMs = 0;
          slow.push(s.ms);
          arrivedAll &&= s.arrived === HANDOFFS * 2;
        }
        const slowRatio = median(slow) / median(fast);
        reports.push({
          name: `chat_a: a run of ${HANDOFFS * 2} hand-offs (a post each) with a slow chat server (every request answered ${SLOW_MS} ms late), 3 runs each way`,
          lines: [
            `chat answering at once: run created to finished, median ${median(fast).toFixed(0)} ms`,
            `chat answering ${SLOW_MS} ms late: median ${median(slow).toFixed(0)} ms (${slowRatio.toFixed(2)}x); posting them one by one would take at least ${((HANDOFFS * 2 * SLOW_MS) / 1000).toFixed(1)} s`,
            `every hand-off arrived in the slow server's thread: ${arrivedAll ? 'yes' : 'NO'}`,
          ],
          goal: 'a slow chat never slows the run: at most 1.2x, and every post arrives',
          met: slowRatio <= 1.2 && arrivedAll,
        });
      } finally {
        mm.latencyMs = 0;
        await stack.stop();
      }
    }

    // 3. Posts per second.
    const surface = chatASurface({ surface: chatAClient(mm.url, BOT_TOKEN), publicBaseUrl: 'http://crewhouse.test', roleClient: async () => null });
    const root = mm.post(alice.id, room.id, 'bench thread');
    const burst = async (n: number, tag: string) => {
      const t0 = performance.now();
      for (let i = 0; i < n; i++) await surface.post({ room_id: room.id, thread_id: root.id, text: `post ${i}`, as: null, key: `bench:${tag}:${i}` });
      return n / ((performance.now() - t0) / 1000);
    };
    const free = await burst(POSTS, 'free');
    mm.rateLimit = { perSecond: LIMIT, burst: 10 };
    const before = mm.threadOf(root.id).length;
    const limited = await burst(LIMIT * 4, 'limited');
    const arrived = mm.threadOf(root.id).length - before;
    mm.rateLimit = null;
    reports.push({
      name: `chat_a: posts per second against the fake server (${POSTS} posts in a thread, one after another)`,
      lines: [`unlimited: ${free.toFixed(0)} posts/s`, `under a limit of ${LIMIT}/s (burst 10): ${limited.toFixed(1)} posts/s, ${arrived} of ${LIMIT * 4} arrived`],
      goal: `every post arrives, at least 0.8x the server's limit (${LIMIT}/s)`,
      met: arrived === LIMIT * 4 && limited >= LIMIT * 0.8,
    });
  } finally {
    await mm.stop();
  }
  return reports;
}

// The fake OpenAI upstream in its own process, for the model proxy bench. A real upstream runs
// elsewhere; in the proxy's process its work would run on the proxy's event loop and count as
// latency the proxy adds (every due answer is written before the proxy reads any), which the
// direct path, read by another process, never pays. Prints its URL; takes option changes over IPC.
import { startFakeOpenAI, type FakeOpenAIOptions } from '../test/fakes/openai-upstream.ts';

const fake = await startFakeOpenAI(JSON.parse(process.argv[2]) as FakeOpenAIOptions);
// The bench never reads what the fake received; do not keep every request.
fake.requests.push = () => 0;
process.on('message', (m: Partial<FakeOpenAIOptions>) => {
  Object.assign(fake.options, m);
  process.send!('ok');
});
process.on('disconnect', () => void fake.close().then(() => process.exit(0)));
process.send!(fake.url);

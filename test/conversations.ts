/**
 * Chat completion bodies as a coding agent sends them: a system prompt, the task, and turn after
 * turn of tool calls and their results (source code, a diff, a test run's output), each kept in
 * the history, until the body is about `bytes` long. The text holds what real ones do: quotes,
 * backslashes, newlines and tabs (escaped in JSON), braces and brackets inside strings, keys named
 * "model" inside messages, and text beyond ASCII (accented letters, CJK, emoji: surrogate pairs).
 * Deterministic: the same arguments give the same body.
 */
export function agentConversation(opts: { bytes: number; model: string; stream?: boolean; maxTokens?: number; seed?: number }): { model: string; messages: unknown[]; [field: string]: unknown } {
  let seed = opts.seed ?? 1;
  const next = () => {
    // A small linear congruential generator: enough to vary the turns, the same every run.
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed;
  };
  const pick = <T>(xs: T[]): T => xs[next() % xs.length];
  const code = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      pick([
        `export function step${i}(input: Record<string, unknown>): string {\n\treturn JSON.stringify({ "model": input.model ?? "gpt", path: "C:\\\\work\\\\src" });\n}`,
        `  const re = /^"(?:[^"\\\\]|\\\\.)*"$/; // a quoted string, escapes and all`,
        `  if (items.length > ${i}) { throw new Error(\`too many: \${items.length} > ${i}\`); }`,
        `  // Größe prüfen, façade, naïve — 日本語のコメント — 🚀 done ✅`,
        `  print(f"{name!r}: {value:>10}\\n", end="")  # tab\there`,
      ]),
    ).join('\n');
  const messages: unknown[] = [
    { role: 'system', content: 'You are a coding agent. Use the tools to read, edit and test the repository; answer with a summary when done.' },
    { role: 'user', content: 'Fix the failing test in src/parser.ts and explain the cause. «Merci» — 谢谢 👍' },
  ];
  let size = JSON.stringify(messages).length;
  for (let turn = 0; size < opts.bytes; turn++) {
    const id = `call_${turn.toString(36)}_${next().toString(36)}`;
    const file = pick(['src/parser.ts', 'src/lexer.ts', 'test/parser.test.ts', 'README.md', 'src/ünïcode/名前.ts']);
    const tool = pick(['read_file', 'run_tests', 'apply_diff']);
    const call = { role: 'assistant', content: turn % 3 === 0 ? `Reading ${file} to see what "${tool}" shows.` : null, tool_calls: [{ id, type: 'function', function: { name: tool, arguments: JSON.stringify({ path: file, model: 'not-the-top-level-model', lines: [1, 200] }) } }] };
    const result =
      tool === 'run_tests'
        ? `✖ parser › handles "quoted \\"escapes\\"" (${next() % 90} ms)\n  AssertionError [ERR_ASSERTION]: Expected values to be strictly equal:\n  + actual - expected\n\n  + '{"a":[1,2,{"b":null}]}'\n  - '{"a":[1,2,{"b":true}]}'\n${code(6)}`
        : tool === 'apply_diff'
          ? `--- a/${file}\n+++ b/${file}\n@@ -1,4 +1,4 @@\n-${code(3).split('\n').join('\n-')}\n+${code(3).split('\n').join('\n+')}\nApplied.`
          : code(20 + (next() % 40));
    messages.push(call, { role: 'tool', tool_call_id: id, content: result });
    size += JSON.stringify(call).length + JSON.stringify(result).length + 50;
  }
  return { model: opts.model, messages, max_tokens: opts.maxTokens ?? 100, temperature: 0.2, ...(opts.stream === undefined ? {} : { stream: opts.stream }) };
}

/** JSON text with every character past ASCII written as a \u escape, as Python's json.dumps writes it by default. */
export const asciiJson = (value: unknown): string => JSON.stringify(value).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

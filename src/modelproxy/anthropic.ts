import { StringDecoder } from 'node:string_decoder';
import type { ModelAlias } from '../models/catalog.ts';
import { eventData, SseSplitter, tokenCount, type Adapter, type ChatRequest, type Usage } from './upstream.ts';

/**
 * The Anthropic Messages API behind the OpenAI-compatible front: chat messages, system prompts,
 * images by URL, tools and tool results are translated both ways, streaming included.
 */

const ANTHROPIC_VERSION = '2023-06-01';

type Part = Record<string, any>;

function textOf(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) return content.map((p: Part) => (p?.type === 'text' ? String(p.text ?? '') : '')).join('');
  return '';
}

function contentBlocks(content: unknown): Part[] {
  if (typeof content === 'string') return content ? [{ type: 'text', text: content }] : [];
  if (!Array.isArray(content)) return [];
  const out: Part[] = [];
  for (const p of content as Part[]) {
    if (p?.type === 'text') out.push({ type: 'text', text: String(p.text ?? '') });
    else if (p?.type === 'image_url') {
      const url = String(p.image_url?.url ?? '');
      const m = /^data:([^;]+);base64,(.*)$/s.exec(url);
      out.push(m ? { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } } : { type: 'image', source: { type: 'url', url } });
    }
  }
  return out;
}

function parseArgs(text: unknown): unknown {
  try {
    return JSON.parse(String(text ?? '{}'));
  } catch {
    return {};
  }
}

/** OpenAI messages to Anthropic's system + alternating messages (consecutive same-role turns merged). */
function translateMessages(messages: Part[]): { system: string | undefined; messages: Part[] } {
  const system: string[] = [];
  const out: Part[] = [];
  const push = (role: 'user' | 'assistant', blocks: Part[]) => {
    if (!blocks.length) return;
    const last = out[out.length - 1];
    if (last && last.role === role) last.content.push(...blocks);
    else out.push({ role, content: blocks });
  };
  for (const m of messages) {
    switch (m?.role) {
      case 'system':
      case 'developer':
        system.push(textOf(m.content));
        break;
      case 'user':
        push('user', contentBlocks(m.content));
        break;
      case 'assistant': {
        const blocks = contentBlocks(m.content);
        for (const call of Array.isArray(m.tool_calls) ? m.tool_calls : []) {
          blocks.push({ type: 'tool_use', id: String(call?.id ?? ''), name: String(call?.function?.name ?? ''), input: parseArgs(call?.function?.arguments) });
        }
        push('assistant', blocks);
        break;
      }
      case 'tool':
        push('user', [{ type: 'tool_result', tool_use_id: String(m.tool_call_id ?? ''), content: textOf(m.content) }]);
        break;
    }
  }
  return { system: system.length ? system.join('\n\n') : undefined, messages: out };
}

function toolChoice(choice: unknown): Part | undefined {
  if (choice === 'auto') return { type: 'auto' };
  if (choice === 'required') return { type: 'any' };
  if (choice === 'none') return { type: 'none' };
  if (choice && typeof choice === 'object' && (choice as Part).function?.name) return { type: 'tool', name: (choice as Part).function.name };
  return undefined;
}

const FINISH: Record<string, string> = { end_turn: 'stop', stop_sequence: 'stop', max_tokens: 'length', tool_use: 'tool_calls', refusal: 'content_filter' };

function openaiUsage(u: Usage) {
  return { prompt_tokens: u.tokensIn, completion_tokens: u.tokensOut, total_tokens: u.tokensIn + u.tokensOut };
}

export const anthropicAdapter: Adapter = {
  requestIdHeader: 'request-id',
  request(body: ChatRequest, alias: ModelAlias, credential: string | null) {
    const { system, messages } = translateMessages(body.messages as Part[]);
    const out: Part = {
      model: alias.model,
      messages,
      max_tokens: Math.min(body.max_completion_tokens ?? body.max_tokens ?? alias.max_output_tokens, alias.max_output_tokens),
    };
    if (system) out.system = system;
    if (body.stream) out.stream = true;
    if (typeof body.temperature === 'number') out.temperature = Math.min(body.temperature, 1);
    if (typeof body.top_p === 'number') out.top_p = body.top_p;
    if (body.stop) out.stop_sequences = Array.isArray(body.stop) ? body.stop : [body.stop];
    if (Array.isArray(body.tools) && body.tools.length) {
      out.tools = (body.tools as Part[]).map((t) => ({ name: t?.function?.name, description: t?.function?.description, input_schema: t?.function?.parameters ?? { type: 'object' } }));
      const choice = toolChoice(body.tool_choice);
      if (choice) out.tool_choice = choice;
    }
    if (typeof body.user === 'string') out.metadata = { user_id: body.user };
    const headers: Record<string, string> = { 'anthropic-version': ANTHROPIC_VERSION };
    if (credential) headers['x-api-key'] = credential;
    return { url: alias.base_url.replace(/\/+$/, '') + '/v1/messages', headers, payload: JSON.stringify(out) };
  },
  withCredential: (headers, credential) => ({ ...headers, 'x-api-key': credential }),
  response(raw, alias) {
    const m = JSON.parse(raw.toString('utf8')) as Part;
    const text = (m.content ?? []).filter((b: Part) => b.type === 'text').map((b: Part) => b.text).join('');
    const calls = (m.content ?? [])
      .filter((b: Part) => b.type === 'tool_use')
      .map((b: Part) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }));
    const usage: Usage | null = m.usage ? { tokensIn: tokenCount(m.usage.input_tokens), tokensOut: tokenCount(m.usage.output_tokens), reported: true } : null;
    const body = {
      id: m.id,
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model: alias.alias,
      choices: [{ index: 0, message: { role: 'assistant', content: text || null, ...(calls.length ? { tool_calls: calls } : {}) }, finish_reason: FINISH[m.stop_reason] ?? 'stop' }],
      ...(usage ? { usage: openaiUsage(usage) } : {}),
    };
    return { body: JSON.stringify(body), usage };
  },
  stream({ clientWantsUsage, alias }) {
    const sse = new SseSplitter();
    let id = 'chatcmpl';
    const created = Math.floor(Date.now() / 1000);
    let tokensIn = 0;
    let tokensOut = 0;
    let reported = false;
    let finish: string | null = null;
    let error: string | null = null;
    const toolIndex = new Map<number, number>();
    const chunk = (delta: Part, finishReason: string | null = null, extra: Part = {}) =>
      `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: alias.alias, choices: [{ index: 0, delta, finish_reason: finishReason }], ...extra })}\n\n`;
    const handle = (event: string): string => {
      const { data } = eventData(event);
      if (!data) return '';
      let e: Part;
      try {
        e = JSON.parse(data);
      } catch {
        return '';
      }
      // An event that is JSON but no object (`data: null`) is skipped as unreadable is: reading a
      // field of it threw inside the stream, after the answer's headers, and the client hung.
      if (!e || typeof e !== 'object') return '';
      switch (e.type) {
        case 'message_start':
          id = String(e.message?.id ?? id);
          tokensIn = tokenCount(e.message?.usage?.input_tokens);
          tokensOut = tokenCount(e.message?.usage?.output_tokens);
          reported = true;
          return chunk({ role: 'assistant', content: '' });
        case 'content_block_start':
          if (e.content_block?.type === 'tool_use') {
            const i = toolIndex.size;
            toolIndex.set(Number(e.index), i);
            return chunk({ tool_calls: [{ index: i, id: e.content_block.id, type: 'function', function: { name: e.content_block.name, arguments: '' } }] });
          }
          return '';
        case 'content_block_delta':
          if (e.delta?.type === 'text_delta') return chunk({ content: String(e.delta.text ?? '') });
          if (e.delta?.type === 'input_json_delta') return chunk({ tool_calls: [{ index: toolIndex.get(Number(e.index)) ?? 0, function: { arguments: String(e.delta.partial_json ?? '') } }] });
          return '';
        case 'message_delta':
          if (e.usage?.output_tokens !== undefined) tokensOut = tokenCount(e.usage.output_tokens);
          if (e.usage?.input_tokens) tokensIn = Number(e.usage.input_tokens) || tokensIn;
          // Only a reason of its own: `__proto__` would read Object's prototype.
          finish = typeof e.delta?.stop_reason === 'string' && Object.hasOwn(FINISH, e.delta.stop_reason) ? FINISH[e.delta.stop_reason] : 'stop';
          return '';
        case 'message_stop': {
          const u = { tokensIn, tokensOut, reported };
          let text = chunk({}, finish ?? 'stop');
          if (clientWantsUsage) text += `data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created, model: alias.alias, choices: [], usage: openaiUsage(u) })}\n\n`;
          return text + 'data: [DONE]\n\n';
        }
        case 'error':
          error = String(e.error?.message ?? 'the upstream failed mid-stream').slice(0, 500);
          return `data: ${JSON.stringify({ error: { message: error, type: 'upstream_error', param: null, code: String(e.error?.type ?? 'upstream_error') } })}\n\n`;
        default:
          return '';
      }
    };
    // Every event is translated, so this one reads text: a character split between chunks waits in the decoder.
    const decoder = new StringDecoder('utf8');
    const bytes = (text: string) => (text ? [Buffer.from(text)] : []);
    return {
      push: (chunk) => bytes(sse.push(decoder.write(chunk)).map(handle).join('')),
      end: () => {
        const rest = sse.rest() + decoder.end();
        return bytes(rest.trim() ? handle(rest) : '');
      },
      usage: () => (reported ? { tokensIn, tokensOut, reported } : null),
      error: () => error,
    };
  },
  errorMessage(raw) {
    try {
      const parsed = JSON.parse(raw.toString('utf8'));
      const m = parsed?.error?.message;
      return typeof m === 'string' ? m : null;
    } catch {
      return null;
    }
  },
};

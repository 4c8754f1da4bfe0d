/**
 * The MCP servers a role may use, as tools of the model. The runtime speaks MCP's Streamable HTTP
 * transport (the official SDK's client) to `http://mcp.crewhouse.internal/<server>/`, through the
 * gateway like every other request: the gateway knows the server's real address and puts its
 * credential on, so nothing of either is in the sandbox. Each server's tools are offered to the
 * model as `mcp__<server>__<tool>`.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { ToolDefinition } from './tools/catalog.ts';
import type { ToolSpec } from './model.ts';
import type { ToolAnswer } from './tools/context.ts';

export interface McpServerRef {
  name: string;
  url: string;
}

interface McpTool {
  /** The name the model calls. */
  name: string;
  server: string;
  /** The tool's own name on its server. */
  tool: string;
  description: string;
  parameters: Record<string, unknown>;
  /** The server says the tool only reads (its `readOnlyHint`); anything else is risky under confirm_risky. */
  readOnly: boolean;
}

/** The output a tool result may carry to the model (the rest is cut, saying so). */
const MAX_OUTPUT = 64 * 1024;
const PREFIX = 'mcp__';

/** `mcp__<server>__<tool>`, in the characters and length function names may have. */
export function mcpToolName(server: string, tool: string): string {
  const clean = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');
  return `${PREFIX}${clean(server)}__${clean(tool)}`.slice(0, 64);
}

export const isMcpToolName = (name: string) => name.startsWith(PREFIX);

export class McpToolbox {
  private readonly tools = new Map<string, McpTool>();
  private readonly clients = new Map<string, Client>();
  /** Servers that could not be reached, with why: told to the model and to the run. */
  readonly unavailable: Array<{ server: string; reason: string }> = [];

  /** Connects to every server and lists its tools; a server that fails is left out, with its reason. */
  static async open(servers: readonly McpServerRef[], opts: { timeoutMs?: number } = {}): Promise<McpToolbox> {
    const box = new McpToolbox();
    await Promise.all(servers.map((s) => box.connect(s, opts.timeoutMs ?? 30_000)));
    return box;
  }

  private async connect(server: McpServerRef, timeoutMs: number): Promise<void> {
    const client = new Client({ name: 'crewhouse-agent', version: '1' });
    try {
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url)), { timeout: timeoutMs });
      const tools = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: timeoutMs });
        tools.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor && tools.length < 1000);
      for (const t of tools) {
        const name = mcpToolName(server.name, t.name);
        if (this.tools.has(name)) continue;
        this.tools.set(name, {
          name,
          server: server.name,
          tool: t.name,
          description: `${t.description ?? t.title ?? t.name} (MCP server "${server.name}")`.slice(0, 1024),
          parameters: (t.inputSchema as Record<string, unknown>) ?? { type: 'object' },
          readOnly: t.annotations?.readOnlyHint === true,
        });
      }
      this.clients.set(server.name, client);
    } catch (err) {
      this.unavailable.push({ server: server.name, reason: oneLine(err) });
      await client.close().catch(() => undefined);
    }
  }

  get size(): number {
    return this.tools.size;
  }

  /** The tools as the model is offered them. */
  specs(): ToolSpec[] {
    return [...this.tools.values()].map((t) => ({ type: 'function' as const, function: { name: t.name, description: t.description, parameters: t.parameters as ToolSpec['function']['parameters'] } }));
  }

  owns(name: string): boolean {
    return this.tools.has(name);
  }

  /**
   * A call the model made to one of these tools: arguments that are a JSON object (the server
   * checks them against its schema), as a tool definition the loop's risk rule reads.
   */
  parse(name: string, rawArgs: string): { ok: true; tool: ToolDefinition; args: Record<string, unknown> } | { ok: false; error: string } {
    const t = this.tools.get(name);
    if (!t) return { ok: false, error: `there is no MCP tool named "${name}"` };
    let args: unknown;
    try {
      args = rawArgs.trim() === '' ? {} : JSON.parse(rawArgs);
    } catch {
      return { ok: false, error: `the arguments of ${name} are not valid JSON: ${rawArgs.slice(0, 200)}` };
    }
    if (!args || typeof args !== 'object' || Array.isArray(args)) return { ok: false, error: `the arguments of ${name} must be a JSON object` };
    return { ok: true, tool: { name, description: t.description, risky: !t.readOnly, parameters: t.parameters as ToolDefinition['parameters'] }, args: args as Record<string, unknown> };
  }

  /** Calls the tool on its server; a tool error or a failed call comes back as `ok: false`. */
  async call(name: string, args: Record<string, unknown>, signal: AbortSignal): Promise<ToolAnswer> {
    const t = this.tools.get(name);
    const client = t && this.clients.get(t.server);
    if (!t || !client) return { ok: false, output: `there is no MCP tool named "${name}"` };
    try {
      const res = await client.callTool({ name: t.tool, arguments: args }, undefined, { signal, timeout: 300_000 });
      const parts = ((res.content ?? []) as Array<{ type: string; text?: string; mimeType?: string; uri?: string }>).map((c) =>
        c.type === 'text' ? (c.text ?? '') : c.type === 'resource_link' ? `[resource ${c.uri ?? ''}]` : `[${c.type}${c.mimeType ? ` ${c.mimeType}` : ''}]`,
      );
      if (!parts.length && res.structuredContent) parts.push(JSON.stringify(res.structuredContent));
      const text = parts.join('\n');
      const output = text.length > MAX_OUTPUT ? `${text.slice(0, MAX_OUTPUT)}\n[cut: ${text.length - MAX_OUTPUT} more characters]` : text;
      return { ok: res.isError !== true, output: output || '(no output)' };
    } catch (err) {
      return { ok: false, output: `${name} failed: ${oneLine(err)}` };
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.clients.values()].map((c) => c.close().catch(() => undefined)));
    this.clients.clear();
  }
}

function oneLine(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/\s+/g, ' ').slice(0, 500);
}

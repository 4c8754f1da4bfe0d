/**
 * An MCP server outside the project, speaking MCP's Streamable HTTP transport through the
 * official SDK's server (stateless: a server and transport per request), on 127.0.0.1. Two
 * tools: `lookup` (read-only) answers from a small table; `write_note` (not read-only) records a
 * note. It records every request's authorization header and every call, for tests to check that
 * the gateway put the credential on and that the sandbox never held it.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { z } from 'zod';

export interface FakeMcpServer {
  /** The server's URL (its MCP endpoint, `/mcp`). */
  url: string;
  /** Authorization headers of every request, in order. */
  authorizations: Array<string | undefined>;
  calls: Array<{ tool: string; args: Record<string, unknown> }>;
  notes: string[];
  close(): Promise<void>;
}

export async function startFakeMcpServer(opts: { facts?: Record<string, string> } = {}): Promise<FakeMcpServer> {
  const facts = opts.facts ?? { 'release-day': 'Thursday' };
  const state: Omit<FakeMcpServer, 'url' | 'close'> = { authorizations: [], calls: [], notes: [] };

  const build = () => {
    const server = new McpServer({ name: 'fake-knowledge', version: '1.0.0' });
    server.registerTool(
      'lookup',
      { description: 'Looks a fact up by its key.', inputSchema: { key: z.string() }, annotations: { readOnlyHint: true } },
      async ({ key }) => {
        state.calls.push({ tool: 'lookup', args: { key } });
        const value = facts[key];
        return value === undefined ? { content: [{ type: 'text', text: `no fact "${key}"` }], isError: true } : { content: [{ type: 'text', text: value }] };
      },
    );
    server.registerTool('write_note', { description: 'Writes a note.', inputSchema: { text: z.string() } }, async ({ text }) => {
      state.calls.push({ tool: 'write_note', args: { text } });
      state.notes.push(text);
      return { content: [{ type: 'text', text: `noted (${state.notes.length})` }] };
    });
    return server;
  };

  const httpServer = http.createServer(async (req, res) => {
    state.authorizations.push(req.headers.authorization);
    if (new URL(req.url ?? '/', 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    if (req.method !== 'POST') {
      // Stateless: no server-initiated stream, no session to end.
      res.writeHead(405, { allow: 'POST' }).end();
      return;
    }
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: unknown;
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch {
      res.writeHead(400).end();
      return;
    }
    const server = build();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    res.on('close', () => {
      void transport.close();
      void server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, body);
  });
  await new Promise<void>((r) => httpServer.listen(0, '127.0.0.1', r));
  const port = (httpServer.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    ...state,
    close: () =>
      new Promise<void>((r) => {
        httpServer.closeAllConnections();
        httpServer.close(() => r());
      }),
  };
}

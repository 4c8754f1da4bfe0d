import type { IncomingMessage, ServerResponse } from 'node:http';

/** A server's request handler as Node's HTTP server calls it. */
export type LocalHandler = (req: IncomingMessage, res: ServerResponse) => void;

const handlers = new Map<string, LocalHandler>();
const originOf = (url: string) => new URL(url).origin;

/**
 * The servers of this process by the address they listen on, for a component that would
 * otherwise reach them over loopback HTTP: the gateway hands a sandbox's model request to the
 * model proxy's handler when the proxy it is configured to reach is the one in its own process
 * (one HTTP parse and write fewer each way). An address of another process is not here, and
 * its requests go over the network as before.
 */
export const localHandlers = {
  /** Registers `handler` as what serves `url`; the answer unregisters it (when the server stops). */
  add(url: string, handler: LocalHandler): () => void {
    const origin = originOf(url);
    handlers.set(origin, handler);
    return () => {
      if (handlers.get(origin) === handler) handlers.delete(origin);
    };
  },
  /** The handler serving `url` in this process, if one does. */
  get(url: URL): LocalHandler | undefined {
    return handlers.get(url.origin);
  },
};

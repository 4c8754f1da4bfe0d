import fs from 'node:fs';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import type { Component, ComponentContext } from '../components.ts';
import { createLeafIssuer, loadDeploymentCa } from './ca.ts';
import { watchIntegrationSettings } from './integration-settings.ts';
import { createResolver } from './resolve.ts';
import { createGatewayServer } from './server.ts';
import { createGatewaySources, type GatewaySources } from './sources.ts';

/** Trust anchors for upstream TLS: the system store (the bundled one where the system has none), plus the operator's extra file. */
function upstreamCa(file: string | null): string[] {
  const system = tls.getCACertificates('system');
  const base = system.length > 0 ? system : tls.getCACertificates('bundled');
  return file ? [...base, fs.readFileSync(file, 'utf8')] : [...base];
}

export interface RunningGateway {
  url: string;
  port: number;
  caPem: string;
  stop(): Promise<void>;
}

/** Starts the gateway on SERVICE_HOST:SERVICE_GATEWAY_PORT (or `listen`); `sources` default to the shared services. */
export async function startGateway(ctx: ComponentContext & { sources?: GatewaySources; listen?: { host: string; port: number } }): Promise<RunningGateway> {
  const { config, db, logger } = ctx;
  const ca = await loadDeploymentCa(db, ctx.cipher);
  const modelProxyUrl = config.modelProxyUrl ?? `http://127.0.0.1:${config.modelProxyPort}`;
  // The hop to the model proxy carries a role's key; plain HTTP is fine on this host, not across a network.
  const proxyHost = new URL(modelProxyUrl).hostname.replace(/^\[|\]$/g, '');
  if (new URL(modelProxyUrl).protocol === 'http:' && !['localhost', '::1'].includes(proxyHost) && !proxyHost.startsWith('127.')) {
    logger.warn({ modelProxyUrl }, `the gateway reaches the model proxy at ${modelProxyUrl} over plain HTTP, so the roles' model keys cross the network unencrypted; give SERVICE_MODEL_PROXY_URL an https:// address when the proxy runs on another machine`);
  }
  const gateway = createGatewayServer({
    sources: ctx.sources ?? createGatewaySources({ db, services: ctx.services }),
    db,
    logger,
    metrics: ctx.metrics,
    leaves: createLeafIssuer(ca),
    resolve: createResolver(config.gatewayDns),
    upstreamCa: upstreamCa(config.gatewayUpstreamCaFile),
    modelProxyUrl,
    otlpEndpoint: config.otlpEndpoint,
    cleartextHosts: config.gatewayCleartextHosts,
    maxConnectionsPerSandbox: config.gatewayMaxConnectionsPerSandbox,
  });
  // Said at every start, so an opt-in to cleartext credentials is never silent.
  if (config.gatewayCleartextHosts.length > 0) {
    logger.warn({ hosts: config.gatewayCleartextHosts }, `the gateway may send credentials unencrypted (plain HTTP) to these dev-only hosts: ${config.gatewayCleartextHosts.join(', ')} (SERVICE_GATEWAY_CLEARTEXT_HOSTS)`);
  }
  const listen = ctx.listen ?? { host: config.host, port: config.gatewayPort };
  await new Promise<void>((resolve, reject) => {
    gateway.server.once('error', reject);
    gateway.server.listen(listen.port, listen.host, () => resolve());
  });
  const port = (gateway.server.address() as AddressInfo).port;
  // This host's gateway: the integration settings it serves with, recorded against the host's address.
  const settings = await watchIntegrationSettings({ db, integrations: ctx.services.integrations, hostAddress: config.sandboxHostAddress, logger });
  return {
    url: `http://${listen.host.includes(':') ? `[${listen.host}]` : listen.host}:${port}`,
    port,
    caPem: ca.certPem,
    stop: async () => {
      await settings.stop();
      await gateway.close();
    },
  };
}

/** The credential gateway: every sandbox's only way out, on SERVICE_GATEWAY_PORT. */
export const gatewayComponent: Component = {
  name: 'gateway',
  async start(ctx) {
    const running = await startGateway(ctx);
    return { address: running.url, stop: running.stop };
  },
};

import type { App } from '../../http/kernel.ts';
import type { Static } from 'typebox';
import { SandboxHosts } from './hosts.schemas.ts';

/** The sandbox hosts for operators (the web console's Hosts page, `crewhouse hosts`): an extension of the contract, as `GET /audit` is. */
/** What the routes need of the sandboxes (the runtime's sandboxes service answers it; the console does not import the runtime). */
export interface HostsSource {
  hosts(settings: { deadAfterSeconds: number; vcpuOvercommit?: number }): Promise<Static<typeof SandboxHosts>>;
}

export function hostsRoutes(app: App, deps: { sandboxes: HostsSource; deadAfterSeconds: number; vcpuOvercommit: number }) {
  app.get('/hosts', {
    config: { auth: { role: 'operator' } },
    schema: {
      operationId: 'listHosts',
      summary: 'List the sandbox hosts and the runs waiting for room',
      tags: ['hosts'],
      description:
        'An extension of this deployment (not in the console contract, as `GET /audit` is not): every sandbox host with what it offers (vCPUs shared out by SERVICE_SANDBOX_VCPU_OVERCOMMIT), what its sandboxes hold (vCPUs and memory by awake ones, disk by all), how many are awake and asleep; and the runs waiting for room, oldest first.',
      response: { 200: SandboxHosts },
    },
    handler: () => deps.sandboxes.hosts({ deadAfterSeconds: deps.deadAfterSeconds, vcpuOvercommit: deps.vcpuOvercommit }),
  });
}

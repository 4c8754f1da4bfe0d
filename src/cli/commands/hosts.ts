import type { Group } from '../command.ts';
import { emit, table } from '../output.ts';

const of = (used: number, total: number) => `${used}/${total}`;

export const hosts: Group = {
  name: 'hosts',
  summary: 'Sandbox hosts: their room, what their sandboxes hold, and the runs waiting for room',
  commands: [
    {
      name: '',
      summary: 'each sandbox host\'s capacity and use (vCPUs and memory held by awake sandboxes, disk by all), then the runs waiting for room, oldest first',
      async run(ctx) {
        const h = await ctx.api().get('/hosts');
        emit(ctx.out, h, () => {
          const hostRows = table(h.hosts, [
            ['HOST', (x: any) => x.address],
            ['STATUS', (x) => x.status],
            ['PROVIDERS', (x) => x.providers],
            ['VCPUS USED/SHARED', (x) => of(x.used.vcpus, x.capacity.vcpus_shared)],
            ['MEMORY MIB USED/TOTAL', (x) => of(x.used.memory_mib, x.capacity.memory_mib)],
            ['DISK GIB USED/TOTAL', (x) => of(x.used.disk_gib, x.capacity.disk_gib)],
            ['AWAKE', (x) => x.sandboxes.awake],
            ['ASLEEP', (x) => x.sandboxes.asleep],
            ['ID', (x) => x.id],
          ]);
          const waiting = h.waiting.length
            ? `\n${h.waiting.length} run(s) waiting for room, oldest first:\n\n` +
              table(h.waiting, [
                ['RUN', (w: any) => w.run_id],
                ['TEAM', (w) => w.team],
                ['ENVIRONMENT', (w) => w.environment],
                ['NEEDS', (w) => `${w.vcpus} vCPU, ${w.memory_mib} MiB, ${w.disk_gib} GiB`],
                ['SINCE', (w) => w.since],
              ])
            : '\nNo run waits for room.\n';
          return hostRows + waiting;
        });
      },
    },
  ],
};

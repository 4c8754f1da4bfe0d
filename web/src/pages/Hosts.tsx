import { get } from '../api.ts';
import { DataTable, Loaded, PageHead, useLoad } from '../ui.tsx';
import type { SandboxHosts } from '../types.ts';

const of = (used: number, total: number) => `${used} of ${total}`;

/** The sandbox hosts (operators): what each offers and holds, and the runs waiting for room. */
export function Hosts() {
  const hosts = useLoad(() => get<SandboxHosts>('/hosts'));
  return (
    <section aria-labelledby="section-title">
      <PageHead
        title="Hosts"
        blurb="The machines that run sandboxes. vCPUs are shared out several times over and held by awake sandboxes; memory is held by awake sandboxes; disk by every sandbox, asleep or not. A run that finds no room waits in line, oldest first, while idle sandboxes go to sleep to make room."
      >
        <button type="button" onClick={() => void hosts.reload()} disabled={hosts.loading}>
          Refresh
        </button>
      </PageHead>
      <Loaded {...hosts}>
        {(h) => (
          <>
            <DataTable
              rows={h.hosts}
              label="hosts"
              columns={['address', 'status', 'providers', 'vcpus', 'memory', 'disk', 'awake', 'asleep', 'id']}
              cells={{
                vcpus: (r) => of(r.used.vcpus, r.capacity.vcpus_shared),
                memory: (r) => `${of(r.used.memory_mib, r.capacity.memory_mib)} MiB`,
                disk: (r) => `${of(r.used.disk_gib, r.capacity.disk_gib)} GiB`,
                awake: (r) => r.sandboxes.awake,
                asleep: (r) => r.sandboxes.asleep,
                providers: (r) => r.providers.join(', ') || 'none',
              }}
              empty="No sandbox host has registered yet: a worker registers one when it starts."
            />
            <h2>Waiting for room</h2>
            <DataTable
              rows={h.waiting}
              label="runs waiting for room"
              columns={['run_id', 'team', 'environment', 'needs', 'since']}
              cells={{
                run_id: (w) => <a href={`#/runs/${encodeURIComponent(w.run_id)}`}>{w.run_id}</a>,
                needs: (w) => `${w.vcpus} vCPU, ${w.memory_mib} MiB, ${w.disk_gib} GiB`,
              }}
              empty="No run waits for room."
            />
          </>
        )}
      </Loaded>
    </section>
  );
}

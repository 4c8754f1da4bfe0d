import { Type } from 'typebox';

/** A sandbox host: what it offers, what its sandboxes hold now, and how many claims wait for it alone. */
export const SandboxHost = Type.Object({
  id: Type.String(),
  address: Type.String({ description: 'where its worker and gateway are reached (SERVICE_SANDBOX_HOST_ADDRESS)' }),
  providers: Type.Array(Type.String(), { description: 'the environment providers it runs' }),
  status: Type.Union([Type.Literal('live'), Type.Literal('stopped'), Type.Literal('dead')], { description: '`live` heartbeats; `stopped` was stopped cleanly; `dead` has been silent past SERVICE_SANDBOX_HOST_DEAD_AFTER' }),
  started_at: Type.String({ format: 'date-time' }),
  heartbeat_at: Type.String({ format: 'date-time' }),
  capacity: Type.Object({
    vcpus: Type.Integer({ description: 'vCPUs it offers' }),
    vcpus_shared: Type.Integer({ description: 'vCPUs it shares out to awake sandboxes: its vCPUs times SERVICE_SANDBOX_VCPU_OVERCOMMIT' }),
    memory_mib: Type.Integer(),
    disk_gib: Type.Integer(),
  }),
  used: Type.Object(
    {
      vcpus: Type.Integer({ description: 'held by awake sandboxes' }),
      memory_mib: Type.Integer({ description: 'held by awake sandboxes and local ones in light sleep' }),
      disk_gib: Type.Integer({ description: 'held by every sandbox, asleep or not' }),
    },
    { description: 'what its sandboxes hold now' },
  ),
  sandboxes: Type.Object({ awake: Type.Integer(), asleep: Type.Integer() }),
  waiting: Type.Integer({ description: 'claims that wait for this host alone (their sleeping sandbox is here)' }),
});

/** A run waiting for room on a sandbox host. */
export const SandboxWait = Type.Object({
  run_id: Type.String(),
  team: Type.String(),
  environment: Type.String(),
  provider: Type.String(),
  host_id: Type.Union([Type.String(), Type.Null()], { description: 'the one host that will do, or null for any host running the provider' }),
  vcpus: Type.Integer(),
  memory_mib: Type.Integer(),
  disk_gib: Type.Integer(),
  since: Type.String({ format: 'date-time', description: 'when it began to wait: the oldest is served first' }),
});

/** The hosts and the line of runs waiting for room on them. */
export const SandboxHosts = Type.Object({
  hosts: Type.Array(SandboxHost),
  waiting: Type.Array(SandboxWait, { description: 'oldest first' }),
});

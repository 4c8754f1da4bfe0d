import type { Db } from '../../db/database.ts';

/** Who a gateway connection comes from: a sandbox that is not destroyed, its team and role. */
export interface SandboxIdentity {
  sandboxId: string;
  teamId: number;
  teamName: string;
  role: string;
}

/** `::ffff:10.0.0.2` (how a dual-stack socket reports an IPv4 peer) is `10.0.0.2`. */
const plain = (address: string) => address.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1').toLowerCase();

/**
 * The sandbox whose link has this host end and sandbox end: the local and remote address of a
 * connection the gateway accepted. Nothing the sandbox sends takes part; null when no live
 * sandbox owns the pair.
 */
export async function sandboxByAddress(db: Db, hostAddress: string, sandboxAddress: string): Promise<Omit<SandboxIdentity, 'teamName'> | null> {
  const row = await db
    .selectFrom('sandboxes')
    .select(['sandboxes.id', 'sandboxes.team_id', 'sandboxes.role'])
    .where('sandboxes.host_address', '=', plain(hostAddress))
    .where('sandboxes.sandbox_address', '=', plain(sandboxAddress))
    .where('sandboxes.state', '<>', 'destroyed')
    .executeTakeFirst();
  return row ? { sandboxId: row.id, teamId: row.team_id, role: row.role } : null;
}

import crypto from 'node:crypto';
import os from 'node:os';

/**
 * The name a process leases rows under (a job's `lease_owner`, a batch of the trace outbox's):
 * its host, its process id and a few random bytes, so two runners of one process differ too,
 * and an operator reading a lease can tell which host and process holds it.
 */
export function leaseOwner(): string {
  return `${os.hostname()}:${process.pid}:${crypto.randomBytes(3).toString('hex')}`;
}

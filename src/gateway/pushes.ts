/**
 * The gateway's record of git pushes: every ref a code host accepted from a sandbox, read from
 * the upstream's own answer (its report-status, inside side band 1 or not), so a push the
 * upstream rejected, or one the agent only claims to have made, records nothing. The run engine
 * reads it (pushesOf) to set a run's delivery and post its artifact.
 */
import type { Selectable } from 'kysely';
import type { Logger } from 'pino';
import type { Db } from '../db/database.ts';
import type { SandboxIdentity } from '../runtime/sandboxes/identify.ts';
import type { PushCommand } from './git-push.ts';
import type { GatewayTables } from './gateway.tables.ts';

export type GitPush = Selectable<GatewayTables['git_pushes']>;

/** More of an answer than this is not read for its report (the report comes first, and is small). */
const MAX_REPORT_BYTES = 4 * 1024 * 1024;

/** Splits pkt-lines from the start of `buf`: the payloads (null for a flush), and whether the stream was cut. */
function pktLines(buf: Buffer): { lines: Array<Buffer | null>; cut: boolean } {
  const lines: Array<Buffer | null> = [];
  let at = 0;
  while (at + 4 <= buf.length) {
    const lenText = buf.toString('latin1', at, at + 4);
    if (!/^[0-9a-f]{4}$/i.test(lenText)) return { lines, cut: true };
    const len = parseInt(lenText, 16);
    if (len === 0 || len === 1 || len === 2) {
      lines.push(null);
      at += 4;
      continue;
    }
    if (len < 4 || at + len > buf.length) return { lines, cut: true };
    lines.push(buf.subarray(at + 4, at + len));
    at += len;
  }
  return { lines, cut: at !== buf.length };
}

/**
 * The refs a receive-pack answer reports as updated, with the commit each now points at: only
 * after `unpack ok`, only `ok` lines (report-status-v2's `option` lines naming another ref or
 * commit are followed). `sideband`: the client asked for side-band(-64k), so the report is the
 * data of band 1.
 */
export function acceptedRefs(answer: Buffer, commands: readonly PushCommand[], sideband: boolean): Array<{ ref: string; old: string; new: string }> {
  let report = answer;
  if (sideband) {
    const parts: Buffer[] = [];
    for (const line of pktLines(answer).lines) if (line && line[0] === 1) parts.push(line.subarray(1));
    report = Buffer.concat(parts);
  }
  const out: Array<{ ref: string; old: string; new: string }> = [];
  const { lines } = pktLines(report);
  const texts = lines.map((l) => (l === null ? null : l.toString('utf8').replace(/\n$/, '')));
  if (texts[0] !== 'unpack ok') return [];
  let last: { ref: string; old: string; new: string } | null = null;
  for (const t of texts.slice(1)) {
    if (t === null) break;
    if (t.startsWith('ok ')) {
      const ref = t.slice(3).trim();
      const c = commands.find((x) => x.ref === ref);
      last = c && c.kind !== 'delete' ? { ref, old: c.old, new: c.new } : null;
      if (last) out.push(last);
    } else if (t.startsWith('option ') && last) {
      const [, key, value] = /^option (\S+) ?(.*)$/.exec(t) ?? [];
      if (key === 'refname' && value) last.ref = value;
      else if (key === 'old-oid' && /^[0-9a-f]{40,64}$/.test(value)) last.old = value;
      else if (key === 'new-oid' && /^[0-9a-f]{40,64}$/.test(value)) last.new = value;
    } else {
      last = null;
    }
  }
  return out;
}

/**
 * Watches a forwarded push's answer (`observe` gets each piece of the decoded body) and, once
 * it is over (`finish`), records the refs the upstream accepted.
 */
export function pushRecorder(db: Db, logger: Logger, who: SandboxIdentity, push: { destination: string | null; repository: string; commands: readonly PushCommand[]; capabilities: readonly string[] }) {
  const pieces: Buffer[] = [];
  let size = 0;
  const sideband = push.capabilities.includes('side-band-64k') || push.capabilities.includes('side-band');
  return {
    observe(piece: Buffer) {
      if (size >= MAX_REPORT_BYTES) return;
      pieces.push(Buffer.from(piece.subarray(0, MAX_REPORT_BYTES - size)));
      size += piece.length;
    },
    async finish(): Promise<void> {
      const refs = acceptedRefs(Buffer.concat(pieces), push.commands, sideband);
      if (!refs.length) return;
      try {
        await db
          .insertInto('git_pushes')
          .values(refs.map((r) => ({ sandbox_id: who.sandboxId, team_id: who.teamId, role: who.role, destination: push.destination, repository: push.repository.slice(0, 2000), ref: r.ref.slice(0, 1000), old_commit: r.old, new_commit: r.new })))
          .execute();
      } catch (err) {
        logger.error({ err, sandbox: who.sandboxId }, 'could not record a git push');
      }
    },
  };
}

/** A sandbox's recorded pushes after `afterId` (0: from the start), not before `since`, oldest first. */
export async function pushesOf(db: Db, sandboxId: string, afterId = '0', limit = 100, since: Date | null = null): Promise<GitPush[]> {
  let q = db.selectFrom('git_pushes').selectAll().where('sandbox_id', '=', sandboxId).where('id', '>', afterId);
  if (since) q = q.where('at', '>=', since.toISOString());
  const rows = await q.orderBy('id').limit(limit).execute();
  return rows.map((r) => ({ ...r, id: String(r.id), at: new Date(r.at).toISOString() }));
}

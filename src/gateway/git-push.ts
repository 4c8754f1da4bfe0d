import { globToRegExp } from './decide.ts';

/**
 * Git smart HTTP pushes (`POST .../git-receive-pack`): the commands of a push are read whole
 * (every ref, tags, deletions, a push certificate, push options) before a byte of the pack is
 * forwarded, each ref is checked against the destination's `git_push_ref_globs`, and a refusal
 * is answered in the git protocol so the git client prints the reason.
 */

const ZERO = /^0+$/;
const COMMAND = /^([0-9a-f]{40}|[0-9a-f]{64}) ([0-9a-f]{40}|[0-9a-f]{64}) (\S+)$/;
/** More than this before the pack starts is not a push we read. */
export const MAX_COMMAND_BYTES = 1024 * 1024;

export interface PushCommand {
  old: string;
  new: string;
  ref: string;
  kind: 'create' | 'update' | 'delete';
}

export type PushHead =
  | { state: 'more' }
  | { state: 'done'; commands: PushCommand[]; capabilities: string[] }
  | { state: 'bad'; reason: string };

function command(line: string): PushCommand | null {
  const m = COMMAND.exec(line);
  if (!m) return null;
  return { old: m[1], new: m[2], ref: m[3], kind: ZERO.test(m[2]) ? 'delete' : ZERO.test(m[1]) ? 'create' : 'update' };
}

/**
 * Reads the start of a receive-pack request body (`buf`, all bytes so far): `more` until the
 * command list (and push options) are complete, then the commands; `bad` for what is not a push.
 */
export function readPushHead(buf: Buffer): PushHead {
  const commands: PushCommand[] = [];
  const tooLong = (end: number): PushHead => (end > MAX_COMMAND_BYTES ? { state: 'bad', reason: 'the push commands are too long' } : { state: 'more' });
  let capabilities: string[] = [];
  let phase: 'commands' | 'options' = 'commands';
  let at = 0;
  let first = true;
  let inCert = false;
  // Inside a certificate: its header lines, a blank line, the commands, then the signature.
  let certPart: 'header' | 'commands' | 'signature' = 'header';
  for (;;) {
    if (buf.length < at + 4) return tooLong(at + 4);
    const lenText = buf.toString('latin1', at, at + 4);
    if (!/^[0-9a-f]{4}$/i.test(lenText)) return { state: 'bad', reason: 'the push is not in the git protocol' };
    const len = parseInt(lenText, 16);
    if (len === 0) {
      at += 4;
      if (inCert) return { state: 'bad', reason: 'the push certificate does not end' };
      if (phase === 'commands' && capabilities.includes('push-options')) phase = 'options';
      else return commands.length ? { state: 'done', commands, capabilities } : { state: 'bad', reason: 'the push has no commands' };
      continue;
    }
    if (len < 4) return { state: 'bad', reason: 'the push is not in the git protocol' };
    if (buf.length < at + len) return tooLong(at + len);
    let line = buf.toString('utf8', at + 4, at + len);
    at += len;
    if (phase === 'options' || line.startsWith('shallow ')) continue;
    if (first) {
      // The first line after any shallow lines carries the capabilities after a NUL.
      first = false;
      const nul = line.indexOf('\0');
      if (nul >= 0) {
        capabilities = line.slice(nul + 1).trim().split(/\s+/).filter(Boolean);
        line = line.slice(0, nul);
      }
      if (line === 'push-cert') {
        inCert = true;
        continue;
      }
    }
    line = line.replace(/\n$/, '');
    if (inCert) {
      const c = certPart === 'commands' ? command(line) : null;
      if (line === 'push-cert-end') inCert = false;
      else if (certPart === 'header' && line === '') certPart = 'commands';
      else if (c) commands.push(c);
      else if (certPart === 'commands') certPart = 'signature';
      continue;
    }
    const c = command(line);
    if (!c) return { state: 'bad', reason: `unreadable push command "${line.slice(0, 80)}"` };
    commands.push(c);
  }
}

const fullGlob = (glob: string) => (glob.startsWith('refs/') ? glob : `refs/heads/${glob}`);

/**
 * The first command the globs do not allow, with the reason; null when all pass. A glob names
 * refs (`refs/heads/agent/*`; a glob without `refs/` means a branch); `delete:<glob>` is needed
 * to delete a ref.
 */
export function refusedCommand(commands: PushCommand[], globs: readonly string[]): { ref: string; reason: string } | null {
  if (globs.length === 0) return commands.length ? { ref: commands[0].ref, reason: 'this destination allows no push (no git_push_ref_globs)' } : null;
  const update = globs.filter((g) => !g.startsWith('delete:')).map((g) => globToRegExp(fullGlob(g)));
  const remove = globs.filter((g) => g.startsWith('delete:')).map((g) => globToRegExp(fullGlob(g.slice('delete:'.length))));
  for (const c of commands) {
    if (c.kind === 'delete') {
      if (!remove.some((re) => re.test(c.ref))) return { ref: c.ref, reason: `deleting ${c.ref} is not allowed (no delete: glob matches it)` };
    } else if (!update.some((re) => re.test(c.ref))) {
      return { ref: c.ref, reason: `pushing to ${c.ref} is not allowed (git_push_ref_globs: ${globs.join(', ')})` };
    }
  }
  return null;
}

const pkt = (text: string | Buffer) => {
  const body = typeof text === 'string' ? Buffer.from(text, 'utf8') : text;
  return Buffer.concat([Buffer.from((body.length + 4).toString(16).padStart(4, '0'), 'latin1'), body]);
};
const FLUSH = Buffer.from('0000', 'latin1');

/**
 * The receive-pack answer refusing a whole push: report-status with every ref rejected
 * (git prints ` ! [remote rejected] <ref> (<reason>)`), in side band 1 when the client asked
 * for it, with the reason also as a progress message (git prints `remote: ...`).
 */
export function refusePushBody(commands: PushCommand[], capabilities: string[], refused: { ref: string; reason: string }): Buffer {
  const clean = (s: string) => s.replace(/[\r\n]+/g, ' ');
  const report = Buffer.concat([
    pkt('unpack refused by the gateway\n'),
    ...commands.map((c) => pkt(`ng ${c.ref} ${clean(c.ref === refused.ref ? refused.reason : `refused with ${refused.ref}: ${refused.reason}`)}\n`)),
    FLUSH,
  ]);
  const sideband = capabilities.includes('side-band-64k') || capabilities.includes('side-band');
  if (!sideband) return capabilities.includes('report-status') || capabilities.includes('report-status-v2') ? report : Buffer.concat([pkt(`ERR ${clean(refused.reason)}\n`)]);
  const max = capabilities.includes('side-band-64k') ? 65515 : 995;
  const parts: Buffer[] = [pkt(Buffer.concat([Buffer.from([2]), Buffer.from(`gateway: ${clean(refused.reason)}\n`)]))];
  for (let i = 0; i < report.length; i += max) parts.push(pkt(Buffer.concat([Buffer.from([1]), report.subarray(i, i + max)])));
  parts.push(FLUSH);
  return Buffer.concat(parts);
}

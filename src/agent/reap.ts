/**
 * Ending what a turn's tools left running, for the long-lived runtime (main.ts, serveMany), which
 * outlives its turns: a tool's own process group is killed when the tool ends, but a daemon, a
 * `setsid` child or a `nohup` one left that group and would live on into later turns.
 *
 * Every tool process of a turn is started with `TURN_MARK=<the turn's random token>` in its
 * environment, which its children inherit. At the turn's end `endTurn` kills, from /proc, every
 * process whose environment carries the token, every process of their process groups, and every
 * descendant of those (the PPid chain, for a child that cleared its environment or cannot be read).
 * What escapes all three (an orphan that cleared its environment) is ended by `endAllBut` once the
 * runtime serves no turn: everything in the exec's PID namespace but the runtime and its ancestors.
 */
import fs from 'node:fs';

/** The environment variable that marks a turn's tool processes. */
export const TURN_MARK = 'CREWHOUSE_TURN';

interface Proc {
  pid: number;
  ppid: number;
  pgrp: number;
}

/** The processes /proc shows (those that vanish meanwhile are left out). */
function processes(): Proc[] {
  const out: Proc[] = [];
  let names: string[];
  try {
    names = fs.readdirSync('/proc');
  } catch {
    return out;
  }
  for (const name of names) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${name}/stat`, 'utf8');
      // pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses, so read after the last ')'.
      const [, ppid, pgrp] = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ pid: Number(name), ppid: Number(ppid), pgrp: Number(pgrp) });
    } catch {
      // Gone meanwhile.
    }
  }
  return out;
}

function carries(pid: number, mark: string): boolean {
  try {
    return fs.readFileSync(`/proc/${pid}/environ`).includes(mark);
  } catch {
    // Gone, or not readable (a non-dumpable program): its parent's chain still finds it.
    return false;
  }
}

/** The runtime and its ancestors in this namespace: never killed. */
function keepers(): Set<number> {
  const keep = new Set([process.pid, 1]);
  const parent = new Map(processes().map((p) => [p.pid, p.ppid]));
  for (let p = process.ppid; p > 1 && !keep.has(p); p = parent.get(p) ?? 0) keep.add(p);
  return keep;
}

/**
 * Kills what `choose` picks (with the process groups and descendants of what it picks), scanning
 * again until a scan finds nothing, so a process forked meanwhile is found by the next scan.
 */
function killRounds(choose: (p: Proc) => boolean): void {
  const keep = keepers();
  for (let round = 0; round < 50; round++) {
    const seen = processes();
    // The groups of the runtime and its ancestors are theirs, not a tool's.
    const kept = new Set(seen.filter((p) => keep.has(p.pid)).map((p) => p.pgrp));
    const all = seen.filter((p) => !keep.has(p.pid));
    const picked = new Set(all.filter(choose).map((p) => p.pid));
    const groups = new Set(all.filter((p) => picked.has(p.pid) && !kept.has(p.pgrp)).map((p) => p.pgrp));
    for (const p of all) if (groups.has(p.pgrp)) picked.add(p.pid);
    for (let grew = true; grew; ) {
      grew = false;
      for (const p of all) {
        if (!picked.has(p.pid) && picked.has(p.ppid)) {
          picked.add(p.pid);
          grew = true;
        }
      }
    }
    if (!picked.size) return;
    for (const pid of picked) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
  }
}

/** Kills every process the turn marked `token` started, wherever it went (see the top of this file). */
export function endTurn(token: string): void {
  const mark = `${TURN_MARK}=${token}`;
  killRounds((p) => carries(p.pid, mark));
}

/**
 * Kills every process of this PID namespace but the runtime and its ancestors (PID 1 included).
 * Only for a runtime alone in a PID namespace of its own (a `local` sandbox's exec): anywhere
 * else it would kill what is not its own.
 */
export function endAllBut(): void {
  killRounds(() => true);
}

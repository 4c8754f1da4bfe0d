/**
 * Whether KVM can actually run a guest here. /dev/kvm's presence proves nothing: under nested
 * virtualization without VMX the device opens, and then QEMU aborts the moment it sets up a
 * `-cpu host` vCPU (MSR 0x10a), or, on other hosts, runs the kernel's 16-bit setup code and
 * then hangs for good once the kernel switches to long mode. So the probe starts a paused
 * microvm under KVM and asks it to run (only a guest that reports `running` counts) and, given
 * the kernel the sandboxes boot, boots it and waits for the kernel's first line on the serial
 * console ("Linux version", a fraction of a second under a working KVM).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import type { Logger } from 'pino';
import { Qmp } from './qmp.ts';

export async function kvmUsable(qemu = 'qemu-system-x86_64', kernel: string | null = null): Promise<boolean> {
  if (!(await kvmRuns(qemu))) return false;
  return kernel === null || (await kvmBoots(qemu, kernel));
}

/** KVM boots `kernel` far enough to print its banner within `ms`. */
async function kvmBoots(qemu: string, kernel: string, ms = 10_000): Promise<boolean> {
  const child = spawn(
    qemu,
    ['-M', 'microvm,x-option-roms=off,isa-serial=on,rtc=on', '-accel', 'kvm', '-cpu', 'host', '-m', '128', '-smp', '1', '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot', '-kernel', kernel, '-append', 'console=ttyS0 earlyprintk=ttyS0 panic=-1', '-serial', 'stdio'],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  );
  try {
    return await new Promise<boolean>((resolve) => {
      let out = '';
      const timer = setTimeout(() => resolve(false), ms);
      child.stdout.on('data', (c: Buffer) => {
        out = (out + c.toString('latin1')).slice(-4096);
        if (out.includes('Linux version')) {
          clearTimeout(timer);
          resolve(true);
        }
      });
      child.on('error', () => resolve(false));
      child.on('close', () => {
        clearTimeout(timer);
        resolve(out.includes('Linux version'));
      });
    });
  } finally {
    child.kill('SIGKILL');
  }
}

/** A paused microvm under KVM can be told to run, and is still running a round trip later. */
async function kvmRuns(qemu: string): Promise<boolean> {
  try {
    fs.accessSync('/dev/kvm', fs.constants.R_OK | fs.constants.W_OK);
  } catch {
    return false;
  }
  const child = spawn(qemu, ['-M', 'microvm', '-accel', 'kvm', '-cpu', 'host', '-m', '16', '-nodefaults', '-no-user-config', '-display', 'none', '-S', '-qmp', 'stdio'], {
    stdio: ['pipe', 'pipe', 'ignore'],
  });
  // A QEMU that cannot run the guest exits at once: a QMP command written after that is EPIPE, which says no more than the exit does.
  child.stdin.on('error', () => {});
  const exited = new Promise<boolean>((resolve) => {
    child.on('error', () => resolve(false));
    child.on('close', () => resolve(false));
  });
  const probe = (async () => {
    const q = await Qmp.over(child.stdout, child.stdin, () => child.kill('SIGKILL'));
    await q.execute('cont');
    const s = await q.execute<{ status: string }>('query-status');
    // A second round trip: a vCPU that cannot run has aborted QEMU by now.
    const again = await q.execute<{ status: string }>('query-status');
    return s.status === 'running' && again.status === 'running';
  })().catch(() => false);
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
  try {
    return await Promise.race([probe, exited]);
  } finally {
    clearTimeout(timer);
    child.kill('SIGKILL');
  }
}

const decided = new Map<string, Promise<'kvm' | 'tcg'>>();

/**
 * The accelerator the provider uses: KVM when the probe passes, otherwise TCG, said once in
 * the log. `forced` (from configuration) skips the probe. `kernel`: the kernel the guest will
 * boot, which the probe boots too (the first caller's is the one probed).
 */
export function accelerator(qemu: string, logger: Logger, forced: 'auto' | 'kvm' | 'tcg' = 'auto', kernel: string | null = null): Promise<'kvm' | 'tcg'> {
  if (forced !== 'auto') return Promise.resolve(forced);
  let p = decided.get(qemu);
  if (!p) {
    p = kvmUsable(qemu, kernel).then((ok) => {
      if (!ok) logger.warn('microvm: KVM cannot run a guest on this host; using TCG (software emulation: slower boots and wakes)');
      return ok ? 'kvm' : 'tcg';
    });
    decided.set(qemu, p);
  }
  return p;
}

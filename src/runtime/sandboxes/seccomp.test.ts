// The sandbox's seccomp filter as a program: run over system calls of each architecture by a
// small interpreter of the instructions it uses, its numbers checked against the system's own
// headers where they are installed, and its encoding as the kernel reads it. local.test.ts
// checks it in a real sandbox.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import { describe, test } from 'node:test';
import { AUDIT_ARCH, buildFilter, CLONE_NAMESPACE_FLAGS, encodeFilter, evaluate, KNOWN_CALLS, SANDBOX_RULES, SECCOMP_RET, syscallNumber, type SeccompArch } from './seccomp.ts';

const program = buildFilter();
const EPERM = SECCOMP_RET.errno(1);
const ENOSYS = SECCOMP_RET.errno(38);
const answer = (arch: SeccompArch, call: string | number, arg0?: number) =>
  evaluate(program, { arch: AUDIT_ARCH[arch], nr: typeof call === 'number' ? call : syscallNumber(arch, call)!, arg0 });

const SIGCHLD = 17;
const CLONE_VM = 0x100;
const CLONE_THREAD = 0x10000;
const CLONE_NEWUSER = 0x10000000;
const CLONE_NEWNET = 0x40000000;
const CLONE_FILES = 0x400;

describe('seccomp filter', () => {
  for (const arch of ['x86_64', 'aarch64'] as const) {
    test(`${arch}: the calls a container escape needs are refused, ordinary ones pass`, () => {
      for (const call of ['ptrace', 'bpf', 'keyctl', 'add_key', 'request_key', 'perf_event_open', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd', 'kcmp', 'userfaultfd', 'mount', 'umount2', 'open_tree', 'move_mount', 'fsopen', 'fsmount', 'fspick', 'mount_setattr', 'pivot_root', 'setns', 'init_module', 'finit_module', 'kexec_load', 'reboot', 'open_by_handle_at']) {
        assert.equal(answer(arch, call), EPERM, `${call} answers EPERM`);
      }
      for (const call of ['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'clone3']) assert.equal(answer(arch, call), ENOSYS, `${call} answers ENOSYS (callers fall back)`);

      // Namespaces: refused in clone and unshare, whatever else is asked with them.
      assert.equal(answer(arch, 'clone', SIGCHLD | CLONE_NEWUSER), EPERM);
      assert.equal(answer(arch, 'clone', SIGCHLD | CLONE_NEWNET), EPERM);
      assert.equal(answer(arch, 'unshare', CLONE_NEWUSER), EPERM);
      assert.equal(answer(arch, 'unshare', CLONE_NEWNET | CLONE_FILES), EPERM);
      assert.equal(answer(arch, 'unshare', 0x80), EPERM, 'CLONE_NEWTIME');
      // fork, threads and unsharing descriptors still work.
      assert.equal(answer(arch, 'clone', SIGCHLD), SECCOMP_RET.allow);
      assert.equal(answer(arch, 'clone', CLONE_VM | CLONE_THREAD | 0x3d0f00), SECCOMP_RET.allow);
      assert.equal(answer(arch, 'unshare', CLONE_FILES), SECCOMP_RET.allow);

      assert.equal(answer(arch, 'personality', 0), SECCOMP_RET.allow);
      assert.equal(answer(arch, 'personality', 0xffffffff), SECCOMP_RET.allow, 'querying');
      assert.equal(answer(arch, 'personality', 0x0040000), EPERM, 'READ_IMPLIES_EXEC');

      // read, write, openat, execve, kill of each table.
      const ordinary = arch === 'x86_64' ? [0, 1, 257, 59, 62] : [63, 64, 56, 221, 129];
      for (const nr of ordinary) assert.equal(answer(arch, nr), SECCOMP_RET.allow, `call ${nr} passes`);
    });
  }

  test('another ABI is killed, the x32 calls of x86_64 are refused', () => {
    assert.equal(evaluate(program, { arch: 0x40000003 /* i386 */, nr: 1 }), SECCOMP_RET.killProcess);
    assert.equal(evaluate(program, { arch: 0x40000028 /* arm */, nr: 1 }), SECCOMP_RET.killProcess);
    assert.equal(evaluate(program, { arch: AUDIT_ARCH.x86_64, nr: 0x40000000 + 101 }), ENOSYS, 'x32 ptrace');
    // The same number means another call on the other architecture: 101 is ptrace on x86_64 only.
    assert.equal(evaluate(program, { arch: AUDIT_ARCH.aarch64, nr: 101 }), SECCOMP_RET.allow, 'nanosleep on aarch64');
  });

  test('every jump lands inside the program, which every path leaves by a return', () => {
    program.forEach((p, i) => {
      if (p.code === 0x05) assert.ok(i + 1 + p.k < program.length, `ja at ${i}`);
      if (p.code === 0x15 || p.code === 0x35 || p.code === 0x45) assert.ok(i + 1 + Math.max(p.jt, p.jf) < program.length, `jump at ${i}`);
    });
    assert.equal(program.at(-1)!.code, 0x06);
    assert.ok(program.length < 4096);
    assert.ok((CLONE_NAMESPACE_FLAGS & CLONE_NEWUSER) !== 0);
  });

  test('encoded as struct sock_filter: 8 bytes an instruction, little-endian', () => {
    const buf = encodeFilter(program);
    assert.equal(buf.length, program.length * 8);
    // ld [4]: the architecture.
    assert.deepEqual([...buf.subarray(0, 8)], [0x20, 0, 0, 0, 4, 0, 0, 0]);
    const last = program.length - 1;
    assert.equal(buf.readUInt16LE(last * 8), 0x06);
    assert.equal(buf.readUInt32LE(last * 8 + 4), SECCOMP_RET.allow);
  });

  // The tables against the kernel's own numbering, where the headers are installed.
  const headers: Record<SeccompArch, string> = { x86_64: '/usr/include/x86_64-linux-gnu/asm/unistd_64.h', aarch64: '/usr/include/asm-generic/unistd.h' };
  for (const arch of ['x86_64', 'aarch64'] as const) {
    test(`${arch}: the numbers match ${headers[arch]}`, { skip: fs.existsSync(headers[arch]) ? false : `${headers[arch]} is not installed` }, () => {
      const text = fs.readFileSync(headers[arch], 'utf8');
      let checked = 0;
      for (const call of KNOWN_CALLS) {
        const m = new RegExp(`#define __NR(?:3264)?_${call}\\s+(\\d+)`).exec(text);
        const ours = syscallNumber(arch, call);
        if (!m) {
          // Calls the generic table dropped or never had (x86-only ones, and those removed since).
          continue;
        }
        assert.equal(ours, Number(m[1]), `${call} on ${arch}`);
        checked++;
      }
      assert.ok(checked > 40, `checked ${checked} calls`);
      for (const r of SANDBOX_RULES) assert.ok(KNOWN_CALLS.includes(r.call));
    });
  }
});

/**
 * The seccomp filter every process of a `local` sandbox runs under: a classic-BPF program,
 * built here and handed to bubblewrap (`--seccomp FD`), which installs it (with no_new_privs)
 * before it executes the sandbox's command; the kernel keeps it across every fork and exec.
 *
 * What it denies: what Docker's default profile denies (kernel modules, kexec, reboot, swap, the
 * clock, accounting, quotas, keyrings, the mount family, pivot_root, namespace creation and
 * entry, ptrace and reading or writing other processes' memory, perf, bpf, userfaultfd, NUMA
 * policy, handles by inode, the legacy x86 port and vm86 calls), plus io_uring, pidfd_getfd and
 * kcmp. Namespace flags are refused in clone and unshare; clone3 (whose flags sit behind a
 * pointer a filter cannot read) answers ENOSYS, so libc falls back to clone. io_uring answers
 * ENOSYS too (runtimes such as libuv then use their ordinary threads); everything else denied
 * answers EPERM. A system call of another ABI (32-bit x86 through int 0x80, x32, 32-bit ARM)
 * kills the process: the tables below name only the native calls.
 */

/** Audit architecture values (linux/audit.h) as seccomp reports them in seccomp_data.arch. */
export const AUDIT_ARCH = { x86_64: 0xc000003e, aarch64: 0xc00000b7 } as const;
export type SeccompArch = keyof typeof AUDIT_ARCH;

const EPERM = 1;
const ENOSYS = 38;

export const SECCOMP_RET = {
  killProcess: 0x80000000,
  errno: (errno: number) => (0x00050000 | (errno & 0xffff)) >>> 0,
  allow: 0x7fff0000,
} as const;

/** The namespace flags (CLONE_NEW*) refused in clone and unshare. */
export const CLONE_NAMESPACE_FLAGS =
  0x00020000 /* NEWNS */ | 0x02000000 /* NEWCGROUP */ | 0x04000000 /* NEWUTS */ | 0x08000000 /* NEWIPC */ | 0x10000000 /* NEWUSER */ | 0x20000000 /* NEWPID */ | 0x40000000 /* NEWNET */ | 0x00000080; /* NEWTIME */

/** The personality values Docker's profile admits (PER_LINUX, UNAME26, ADDR_NO_RANDOMIZE..., query); any other is refused. */
const PERSONALITY_ALLOWED = [0x0, 0x8, 0x20000, 0x20008, 0xffffffff];

/** System call numbers of each architecture (x86_64: arch/x86/entry/syscalls; aarch64: the generic table). Null: the call does not exist there. */
const NUMBERS: Record<string, { x86_64: number | null; aarch64: number | null }> = {
  acct: { x86_64: 163, aarch64: 89 },
  add_key: { x86_64: 248, aarch64: 217 },
  bpf: { x86_64: 321, aarch64: 280 },
  chroot: { x86_64: 161, aarch64: 51 },
  clock_adjtime: { x86_64: 305, aarch64: 266 },
  clock_settime: { x86_64: 227, aarch64: 112 },
  clone: { x86_64: 56, aarch64: 220 },
  clone3: { x86_64: 435, aarch64: 435 },
  create_module: { x86_64: 174, aarch64: null },
  delete_module: { x86_64: 176, aarch64: 106 },
  fanotify_init: { x86_64: 300, aarch64: 262 },
  finit_module: { x86_64: 313, aarch64: 273 },
  fsconfig: { x86_64: 431, aarch64: 431 },
  fsmount: { x86_64: 432, aarch64: 432 },
  fsopen: { x86_64: 430, aarch64: 430 },
  fspick: { x86_64: 433, aarch64: 433 },
  get_kernel_syms: { x86_64: 177, aarch64: null },
  get_mempolicy: { x86_64: 239, aarch64: 236 },
  init_module: { x86_64: 175, aarch64: 105 },
  io_uring_enter: { x86_64: 426, aarch64: 426 },
  io_uring_register: { x86_64: 427, aarch64: 427 },
  io_uring_setup: { x86_64: 425, aarch64: 425 },
  ioperm: { x86_64: 173, aarch64: null },
  iopl: { x86_64: 172, aarch64: null },
  kcmp: { x86_64: 312, aarch64: 272 },
  kexec_file_load: { x86_64: 320, aarch64: 294 },
  kexec_load: { x86_64: 246, aarch64: 104 },
  keyctl: { x86_64: 250, aarch64: 219 },
  lookup_dcookie: { x86_64: 212, aarch64: 18 },
  mbind: { x86_64: 237, aarch64: 235 },
  mount: { x86_64: 165, aarch64: 40 },
  mount_setattr: { x86_64: 442, aarch64: 442 },
  move_mount: { x86_64: 429, aarch64: 429 },
  move_pages: { x86_64: 279, aarch64: 239 },
  name_to_handle_at: { x86_64: 303, aarch64: 264 },
  nfsservctl: { x86_64: 180, aarch64: 42 },
  open_by_handle_at: { x86_64: 304, aarch64: 265 },
  open_tree: { x86_64: 428, aarch64: 428 },
  perf_event_open: { x86_64: 298, aarch64: 241 },
  personality: { x86_64: 135, aarch64: 92 },
  pidfd_getfd: { x86_64: 438, aarch64: 438 },
  /** Not refused (a process may wait on its own children through one); named for tests. */
  pidfd_open: { x86_64: 434, aarch64: 434 },
  pivot_root: { x86_64: 155, aarch64: 41 },
  process_vm_readv: { x86_64: 310, aarch64: 270 },
  process_vm_writev: { x86_64: 311, aarch64: 271 },
  ptrace: { x86_64: 101, aarch64: 117 },
  query_module: { x86_64: 178, aarch64: null },
  quotactl: { x86_64: 179, aarch64: 60 },
  quotactl_fd: { x86_64: 443, aarch64: 443 },
  reboot: { x86_64: 169, aarch64: 142 },
  request_key: { x86_64: 249, aarch64: 218 },
  set_mempolicy: { x86_64: 238, aarch64: 237 },
  setns: { x86_64: 308, aarch64: 268 },
  settimeofday: { x86_64: 164, aarch64: 170 },
  swapoff: { x86_64: 168, aarch64: 225 },
  swapon: { x86_64: 167, aarch64: 224 },
  syslog: { x86_64: 103, aarch64: 116 },
  sysfs: { x86_64: 139, aarch64: null },
  _sysctl: { x86_64: 156, aarch64: null },
  umount2: { x86_64: 166, aarch64: 39 },
  unshare: { x86_64: 272, aarch64: 97 },
  uselib: { x86_64: 134, aarch64: null },
  userfaultfd: { x86_64: 323, aarch64: 282 },
  ustat: { x86_64: 136, aarch64: null },
  vhangup: { x86_64: 153, aarch64: 58 },
};

/** One rule: a call refused outright, or refused when its first argument matches. */
export type SeccompRule =
  | { call: string; errno: number }
  /** Refused (errno) when the first argument has any of these bits. */
  | { call: string; errno: number; whenArg0Has: number }
  /** Refused (errno) unless the first argument is one of these values. */
  | { call: string; errno: number; unlessArg0In: number[] };

/** The sandbox policy: every rule, with why in the module comment. */
export const SANDBOX_RULES: readonly SeccompRule[] = [
  ...[
    'acct', 'add_key', 'bpf', 'chroot', 'clock_adjtime', 'clock_settime', 'create_module', 'delete_module', 'fanotify_init', 'finit_module',
    'fsconfig', 'fsmount', 'fsopen', 'fspick', 'get_kernel_syms', 'get_mempolicy', 'init_module', 'ioperm', 'iopl', 'kcmp', 'kexec_file_load',
    'kexec_load', 'keyctl', 'lookup_dcookie', 'mbind', 'mount', 'mount_setattr', 'move_mount', 'move_pages', 'name_to_handle_at', 'nfsservctl',
    'open_by_handle_at', 'open_tree', 'perf_event_open', 'pidfd_getfd', 'pivot_root', 'process_vm_readv', 'process_vm_writev', 'ptrace',
    'query_module', 'quotactl', 'quotactl_fd', 'reboot', 'request_key', 'set_mempolicy', 'setns', 'settimeofday', 'swapoff', 'swapon', 'syslog',
    'sysfs', '_sysctl', 'umount2', 'uselib', 'userfaultfd', 'ustat', 'vhangup',
  ].map((call) => ({ call, errno: EPERM })),
  ...['io_uring_setup', 'io_uring_enter', 'io_uring_register', 'clone3'].map((call) => ({ call, errno: ENOSYS })),
  // clone's low byte is the exit signal, so CLONE_NEWTIME (0x80, clone3 and unshare only) is left out of its mask.
  { call: 'clone', errno: EPERM, whenArg0Has: CLONE_NAMESPACE_FLAGS & ~0xff },
  { call: 'unshare', errno: EPERM, whenArg0Has: CLONE_NAMESPACE_FLAGS },
  { call: 'personality', errno: EPERM, unlessArg0In: PERSONALITY_ALLOWED },
];

/** The number of a call on an architecture, or null where it does not exist. */
export function syscallNumber(arch: SeccompArch, call: string): number | null {
  const n = NUMBERS[call];
  if (!n) throw new Error(`seccomp: no system call number known for ${call}`);
  return n[arch];
}

/** Names of every call the tables know (for checking them against the system headers). */
export const KNOWN_CALLS: readonly string[] = Object.keys(NUMBERS);

/** One classic-BPF instruction (struct sock_filter). */
export interface BpfInstruction {
  code: number;
  jt: number;
  jf: number;
  k: number;
}

// Opcodes (linux/bpf_common.h).
const LD_W_ABS = 0x20;
const JMP_JA = 0x05;
const JMP_JEQ_K = 0x15;
const JMP_JGE_K = 0x35;
const JMP_JSET_K = 0x45;
const RET_K = 0x06;

// Offsets in struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64 each).
const OFF_NR = 0;
const OFF_ARCH = 4;
/** The low 32 bits of args[0] (both architectures are little-endian). */
const OFF_ARG0_LO = 16;

/** x32 system calls on x86_64 carry this bit in their number. */
const X32_SYSCALL_BIT = 0x40000000;

const ins = (code: number, k: number, jt = 0, jf = 0): BpfInstruction => ({ code, jt, jf, k: k >>> 0 });

/** The instructions for one architecture: A holds the call number on entry, and every path returns. */
function archBlock(arch: SeccompArch, rules: readonly SeccompRule[]): BpfInstruction[] {
  const out: BpfInstruction[] = [ins(LD_W_ABS, OFF_NR)];
  // x32 calls reach the same entry points under other numbers: refuse the whole ABI.
  if (arch === 'x86_64') out.push(ins(JMP_JGE_K, X32_SYSCALL_BIT, 0, 1), ins(RET_K, SECCOMP_RET.errno(ENOSYS)));
  for (const rule of rules) {
    const nr = syscallNumber(arch, rule.call);
    if (nr === null) continue;
    const deny = ins(RET_K, SECCOMP_RET.errno(rule.errno));
    if ('whenArg0Has' in rule) {
      // nr? -> load arg0 -> any flag? deny : allow (the call is decided; nothing else matches it).
      out.push(ins(JMP_JEQ_K, nr, 0, 4), ins(LD_W_ABS, OFF_ARG0_LO), ins(JMP_JSET_K, rule.whenArg0Has, 0, 1), deny, ins(RET_K, SECCOMP_RET.allow));
    } else if ('unlessArg0In' in rule) {
      const values = rule.unlessArg0In;
      out.push(ins(JMP_JEQ_K, nr, 0, values.length + 3), ins(LD_W_ABS, OFF_ARG0_LO));
      // Each match jumps to the allow after the deny.
      values.forEach((v, i) => out.push(ins(JMP_JEQ_K, v, values.length - i, 0)));
      out.push(deny, ins(RET_K, SECCOMP_RET.allow));
    } else {
      out.push(ins(JMP_JEQ_K, nr, 0, 1), deny);
    }
  }
  out.push(ins(RET_K, SECCOMP_RET.allow));
  return out;
}

/**
 * The filter program: checks the architecture first (x86_64 and aarch64 each get their own
 * numbers; any other ABI kills the process), then the rules.
 */
export function buildFilter(rules: readonly SeccompRule[] = SANDBOX_RULES): BpfInstruction[] {
  const x86 = archBlock('x86_64', rules);
  const arm = archBlock('aarch64', rules);
  const head = [
    ins(LD_W_ABS, OFF_ARCH),
    ins(JMP_JEQ_K, AUDIT_ARCH.x86_64, 0, 1),
    ins(JMP_JA, 0), // to the x86_64 block, patched below
    ins(JMP_JEQ_K, AUDIT_ARCH.aarch64, 0, 1),
    ins(JMP_JA, 0), // to the aarch64 block
    ins(RET_K, SECCOMP_RET.killProcess),
  ];
  head[2].k = head.length - 3;
  head[4].k = head.length - 5 + x86.length;
  const program = [...head, ...x86, ...arm];
  if (program.length > 4096) throw new Error(`seccomp: the filter has ${program.length} instructions, more than the kernel's 4096`);
  return program;
}

/** The program as the kernel reads it (struct sock_filter[], host byte order: little-endian on both architectures). */
export function encodeFilter(program: readonly BpfInstruction[]): Buffer {
  const buf = Buffer.alloc(program.length * 8);
  program.forEach((p, i) => {
    buf.writeUInt16LE(p.code, i * 8);
    buf.writeUInt8(p.jt, i * 8 + 2);
    buf.writeUInt8(p.jf, i * 8 + 3);
    buf.writeUInt32LE(p.k >>> 0, i * 8 + 4);
  });
  return buf;
}

/** The sandbox's filter, encoded for bubblewrap's --seccomp. */
export function sandboxFilter(): Buffer {
  return encodeFilter(buildFilter());
}

/**
 * Runs a program over one system call as the kernel would (only the instructions built here):
 * what the filter answers for `nr` with `arg0` on `arch`. For tests.
 */
export function evaluate(program: readonly BpfInstruction[], call: { arch: number; nr: number; arg0?: number }): number {
  let a = 0;
  for (let pc = 0; pc < program.length; pc++) {
    const p = program[pc];
    switch (p.code) {
      case LD_W_ABS:
        a = p.k === OFF_NR ? call.nr >>> 0 : p.k === OFF_ARCH ? call.arch >>> 0 : p.k === OFF_ARG0_LO ? (call.arg0 ?? 0) >>> 0 : 0;
        break;
      case JMP_JA:
        pc += p.k;
        break;
      case JMP_JEQ_K:
        pc += a === p.k ? p.jt : p.jf;
        break;
      case JMP_JGE_K:
        pc += a >= p.k ? p.jt : p.jf;
        break;
      case JMP_JSET_K:
        pc += (a & p.k) !== 0 ? p.jt : p.jf;
        break;
      case RET_K:
        return p.k;
      default:
        throw new Error(`unknown instruction ${p.code}`);
    }
  }
  throw new Error('the program fell off its end');
}

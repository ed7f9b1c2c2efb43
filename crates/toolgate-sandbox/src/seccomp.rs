//! The seccomp filter: system calls a script never needs, refused with `EPERM`, compiled to BPF
//! by `seccompiler` (rust-vmm's compiler, used by Firecracker) rather than by hand.
//!
//! The filter allows by default and refuses a fixed list, because a deny list keeps Python and
//! its standard library working while closing what escapes and kernel attack surface go
//! through: debugging other processes, mounting, new namespaces, BPF, kernel keys, modules,
//! `perf_event_open`, `userfaultfd`, and every socket family but `AF_UNIX` (the bridge). The
//! network namespace already has no route out; the socket rule is a second wall.
//! `clone3` answers `ENOSYS` (its flags sit in memory a filter cannot read), so the C library
//! falls back to `clone`, whose namespace flags are checked.
//!
//! On x86_64, a third filter refuses (`EPERM`) every x32 system call (`nr | 0x40000000`): x32
//! calls share the x86_64 audit architecture, so the deny list, which matches exact numbers,
//! would let `0x40000000 | SYS_ptrace` through on a kernel built with x32 support. A range is
//! something `seccompiler` cannot express, so this filter is five fixed BPF instructions,
//! checked by a table test that runs all three filters through a BPF interpreter.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch, sock_filter,
};

/// Refused outright, whatever the arguments.
pub const DENIED: &[(&str, libc::c_long)] = &[
    ("ptrace", libc::SYS_ptrace),
    ("process_vm_readv", libc::SYS_process_vm_readv),
    ("process_vm_writev", libc::SYS_process_vm_writev),
    ("mount", libc::SYS_mount),
    ("umount2", libc::SYS_umount2),
    ("pivot_root", libc::SYS_pivot_root),
    ("chroot", libc::SYS_chroot),
    ("unshare", libc::SYS_unshare),
    ("setns", libc::SYS_setns),
    ("bpf", libc::SYS_bpf),
    ("keyctl", libc::SYS_keyctl),
    ("add_key", libc::SYS_add_key),
    ("request_key", libc::SYS_request_key),
    ("init_module", libc::SYS_init_module),
    ("finit_module", libc::SYS_finit_module),
    ("delete_module", libc::SYS_delete_module),
    ("kexec_load", libc::SYS_kexec_load),
    ("reboot", libc::SYS_reboot),
    ("swapon", libc::SYS_swapon),
    ("swapoff", libc::SYS_swapoff),
    ("perf_event_open", libc::SYS_perf_event_open),
    ("userfaultfd", libc::SYS_userfaultfd),
    ("open_by_handle_at", libc::SYS_open_by_handle_at),
    ("name_to_handle_at", libc::SYS_name_to_handle_at),
    ("acct", libc::SYS_acct),
    ("quotactl", libc::SYS_quotactl),
    ("syslog", libc::SYS_syslog),
    ("settimeofday", libc::SYS_settimeofday),
    ("clock_settime", libc::SYS_clock_settime),
    ("fanotify_init", libc::SYS_fanotify_init),
    ("io_uring_setup", libc::SYS_io_uring_setup),
    ("move_mount", libc::SYS_move_mount),
    ("open_tree", libc::SYS_open_tree),
    ("fsopen", libc::SYS_fsopen),
    ("fsmount", libc::SYS_fsmount),
];

/// `clone` flags that would make a new namespace.
const NAMESPACE_FLAGS: &[libc::c_int] = &[
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWNS,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWCGROUP,
];

fn arch() -> Result<TargetArch, String> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(TargetArch::x86_64),
        "aarch64" => Ok(TargetArch::aarch64),
        "riscv64" => Ok(TargetArch::riscv64),
        other => Err(format!("no seccomp filter for the {other} architecture")),
    }
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: libc::c_int,
) -> Result<BpfProgram, String> {
    let errno = u32::try_from(errno).map_err(|e| e.to_string())?;
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno),
        arch()?,
    )
    .and_then(BpfProgram::try_from)
    .map_err(|e| e.to_string())
}

fn condition(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conditions).map_err(|e| e.to_string())
}

/// The x32 ABI's marker bit in a system call number.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;
/// `AUDIT_ARCH_X86_64` (linux/audit.h): `EM_X86_64 | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE`.
const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
// Classic BPF opcodes (linux/bpf_common.h, linux/filter.h): BPF_LD | BPF_W | BPF_ABS is 0x20.
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JMP_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JMP_JGE_K: u16 = 0x05 | 0x30;
const BPF_RET_K: u16 = 0x06;
/// Offsets in `struct seccomp_data`.
const NR_OFFSET: u32 = 0;
const ARCH_OFFSET: u32 = 4;

fn insn(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

/// Refuses, with `EPERM`, every x86_64-architecture call whose number has the x32 bit.
/// Other architectures pass (the deny list kills them).
pub fn x32_filter() -> BpfProgram {
    let refuse = libc::SECCOMP_RET_ERRNO | (libc::EPERM.unsigned_abs() & libc::SECCOMP_RET_DATA);
    vec![
        insn(BPF_LD_W_ABS, 0, 0, ARCH_OFFSET),
        insn(BPF_JMP_JEQ_K, 0, 2, AUDIT_ARCH_X86_64),
        insn(BPF_LD_W_ABS, 0, 0, NR_OFFSET),
        insn(BPF_JMP_JGE_K, 1, 0, X32_SYSCALL_BIT),
        insn(BPF_RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
        insn(BPF_RET_K, 0, 0, refuse),
    ]
}

/// The filters, in the order they are installed: the deny list (`EPERM`), `clone3`
/// (`ENOSYS`), and on x86_64 the x32 refusal (`EPERM`).
pub fn filters() -> Result<Vec<BpfProgram>, String> {
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED
        .iter()
        .map(|&(_, number)| (number, Vec::new()))
        .collect();
    let unix = u64::try_from(libc::AF_UNIX).map_err(|e| e.to_string())?;
    denied.insert(
        libc::SYS_socket,
        vec![rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?],
    );
    denied.insert(
        libc::SYS_socketpair,
        vec![rule(vec![condition(0, SeccompCmpOp::Ne, unix)?])?],
    );
    let mut clone_rules = Vec::new();
    for &flag in NAMESPACE_FLAGS {
        let flag = u64::try_from(flag).map_err(|e| e.to_string())?;
        clone_rules.push(rule(vec![condition(
            0,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    denied.insert(libc::SYS_clone, clone_rules);
    let clone3 = BTreeMap::from([(libc::SYS_clone3, Vec::new())]);
    let mut filters = vec![
        compile(denied, libc::EPERM)?,
        compile(clone3, libc::ENOSYS)?,
    ];
    if arch()? == TargetArch::x86_64 {
        filters.push(x32_filter());
    }
    Ok(filters)
}

/// Installs the filters on the calling thread (before `exec`, so the program inherits them).
pub fn apply() -> Result<(), String> {
    for filter in filters()? {
        seccompiler::apply_filter(&filter).map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The classic BPF a seccomp filter may hold, run over one `seccomp_data` (the subset
    /// seccompiler and [`x32_filter`] emit; anything else fails the test).
    fn evaluate(program: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let word = |offset: u32| -> u32 {
            match offset {
                0 => nr,
                4 => arch,
                16..=63 => {
                    let i = ((offset - 16) / 8) as usize;
                    let arg = args[i];
                    if offset.is_multiple_of(8) {
                        arg as u32
                    } else {
                        (arg >> 32) as u32
                    }
                }
                other => panic!("load at offset {other}"),
            }
        };
        let (mut a, mut pc) = (0u32, 0usize);
        loop {
            let i = &program[pc];
            pc += 1;
            let jump = |taken: bool| usize::from(if taken { i.jt } else { i.jf });
            match i.code {
                0x20 => a = word(i.k),
                0x54 => a &= i.k,
                0x05 => pc += i.k as usize,
                0x15 => pc += jump(a == i.k),
                0x25 => pc += jump(a > i.k),
                0x35 => pc += jump(a >= i.k),
                0x45 => pc += jump(a & i.k != 0),
                0x06 => return i.k,
                other => panic!("opcode {other:#x} at {}", pc - 1),
            }
        }
    }

    /// What the kernel does with a call under every filter: the most restrictive action wins
    /// (seccomp(2): KILL > TRAP > ERRNO > ... > ALLOW; among equals, the first installed).
    fn verdict(arch: u32, nr: u32, args: [u64; 6]) -> u32 {
        let rank = |action: u32| match action & libc::SECCOMP_RET_ACTION_FULL {
            libc::SECCOMP_RET_KILL_PROCESS => 0,
            libc::SECCOMP_RET_KILL_THREAD => 1,
            libc::SECCOMP_RET_TRAP => 2,
            libc::SECCOMP_RET_ERRNO => 3,
            libc::SECCOMP_RET_ALLOW => 9,
            _ => 5,
        };
        filters()
            .unwrap()
            .iter()
            .map(|f| evaluate(f, arch, nr, args))
            .min_by_key(|&action| rank(action))
            .unwrap()
    }

    const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
    const EPERM: u32 = libc::SECCOMP_RET_ERRNO | libc::EPERM as u32;
    const ENOSYS: u32 = libc::SECCOMP_RET_ERRNO | libc::ENOSYS as u32;

    fn nr(n: libc::c_long) -> u32 {
        u32::try_from(n).unwrap()
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn x32_system_calls_are_refused_while_native_ones_keep_their_verdict() {
        let x = |n: libc::c_long| X32_SYSCALL_BIT | nr(n);
        let af = |family: libc::c_int| [u64::try_from(family).unwrap(), 1, 0, 0, 0, 0];
        let flags = |f: libc::c_int| [u64::try_from(f).unwrap(), 0, 0, 0, 0, 0];
        for (what, nr, args, expected) in [
            ("getpid", nr(libc::SYS_getpid), [0; 6], ALLOW),
            ("x32 getpid", x(libc::SYS_getpid), [0; 6], EPERM),
            ("ptrace", nr(libc::SYS_ptrace), [0; 6], EPERM),
            ("x32 ptrace", x(libc::SYS_ptrace), [0; 6], EPERM),
            ("x32 unshare", x(libc::SYS_unshare), [0; 6], EPERM),
            ("x32 mount", x(libc::SYS_mount), [0; 6], EPERM),
            ("x32 read", x(libc::SYS_read), [0; 6], EPERM),
            ("x32 top number", u32::MAX, [0; 6], EPERM),
            ("x32 bit alone", X32_SYSCALL_BIT, [0; 6], EPERM),
            ("last number below x32", X32_SYSCALL_BIT - 1, [0; 6], ALLOW),
            (
                "socket AF_UNIX",
                nr(libc::SYS_socket),
                af(libc::AF_UNIX),
                ALLOW,
            ),
            (
                "socket AF_INET",
                nr(libc::SYS_socket),
                af(libc::AF_INET),
                EPERM,
            ),
            (
                "x32 socket AF_INET",
                x(libc::SYS_socket),
                af(libc::AF_INET),
                EPERM,
            ),
            (
                "clone thread",
                nr(libc::SYS_clone),
                flags(libc::CLONE_VM),
                ALLOW,
            ),
            (
                "clone new user ns",
                nr(libc::SYS_clone),
                flags(libc::CLONE_NEWUSER),
                EPERM,
            ),
            ("clone3", nr(libc::SYS_clone3), [0; 6], ENOSYS),
        ] {
            assert_eq!(
                verdict(AUDIT_ARCH_X86_64, nr, args),
                expected,
                "{what} ({nr:#x})"
            );
        }
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_foreign_architecture_is_killed_not_allowed() {
        const AUDIT_ARCH_I386: u32 = 3 | 0x4000_0000;
        assert_eq!(
            verdict(AUDIT_ARCH_I386, 20, [0; 6]) & libc::SECCOMP_RET_ACTION_FULL,
            libc::SECCOMP_RET_KILL_PROCESS
        );
    }

    #[test]
    fn the_filters_compile_for_this_machine() {
        let filters = filters().unwrap();
        let expected = if cfg!(target_arch = "x86_64") { 3 } else { 2 };
        assert_eq!(filters.len(), expected);
        assert!(filters.iter().all(|f| !f.is_empty()));
    }

    #[test]
    fn deny_list_names_the_escape_syscalls() {
        for name in [
            "ptrace",
            "mount",
            "bpf",
            "keyctl",
            "unshare",
            "setns",
            "userfaultfd",
        ] {
            assert!(
                DENIED.iter().any(|(n, _)| *n == name),
                "{name} must be refused"
            );
        }
    }
}

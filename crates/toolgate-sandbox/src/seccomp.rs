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
#[path = "seccomp_tests.rs"]
mod tests;

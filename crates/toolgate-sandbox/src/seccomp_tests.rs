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

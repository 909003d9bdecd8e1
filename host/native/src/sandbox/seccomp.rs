//! The system calls a confined program may not make, on top of Landlock ([`SyscallFilter`], seccomp): those that
//! run code without `execve` of a path Landlock checks (`memfd_create`, `execveat`: a program could otherwise
//! copy itself a binary into memory and `fexecve` it), reach into another process (`ptrace`, `process_vm_*`),
//! change what the filesystem looks like (mounts, `chroot`, new namespaces, `setns`), load kernel code or keys
//! (`bpf`, modules, `kexec`, `keyctl`), or open kernel attack surface no tool needs (`io_uring`,
//! `perf_event_open`, `userfaultfd`). They fail with `EPERM`; `clone3` fails with `ENOSYS`, so that libc falls back
//! to `clone`, whose flags a filter can read (`clone3` passes them in memory), and which fails with `EPERM` when
//! they ask for a new namespace; x32 system calls (the same calls under other numbers) fail with `EPERM`; a
//! system call of another architecture (32-bit `int 0x80`) kills the process, as seccompiler's filters do.
//!
//! The filters are compiled once, in the parent (seccompiler allocates); the child only hands them to the kernel
//! between fork and exec, after `PR_SET_NO_NEW_PRIVS` and Landlock (see `process.rs`).
//!
//! What seccomp cannot see is which file a mapping comes from: the dynamic loader run as a program
//! (`/lib64/ld-linux-x86-64.so.2 ./out/e`) maps a written binary with `mmap(PROT_EXEC)`, as it maps every
//! library, and runs it (docs/permissions.md, "Written code").

use std::collections::BTreeMap;
use std::io;
use std::sync::OnceLock;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
    TargetArch, sock_filter,
};

/// System calls refused outright.
const DENIED: &[libc::c_long] = &[
    // Code run from memory: an anonymous file, or a descriptor handed to `execveat` (`fexecve`).
    libc::SYS_memfd_create,
    libc::SYS_memfd_secret,
    libc::SYS_execveat,
    // Other processes.
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    // The filesystem's shape (Landlock refuses mounts too; `chroot` it does not).
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_mount_setattr,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_setns,
    // A file by handle, not by path (with CAP_DAC_READ_SEARCH: a host running as root).
    libc::SYS_open_by_handle_at,
    // Kernel code, keys, and attack surface.
    libc::SYS_bpf,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_perf_event_open,
    libc::SYS_userfaultfd,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
];

/// The flags of `unshare` and `clone` that make a namespace.
const NEW_NAMESPACES: &[libc::c_int] = &[
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    0x80, // CLONE_NEWTIME
];

/// The filters every confined program gets, ready for the kernel, in the order they are installed.
#[derive(Debug)]
pub(crate) struct SyscallFilter {
    programs: Vec<BpfProgram>,
}

impl SyscallFilter {
    /// The filters, compiled at the first confined start (the same for every program): with `unix_sockets`
    /// false, a Unix socket cannot be made either (`socketpair` still can): a socket by path is reached whatever
    /// Landlock says (`connect` is not a file access it checks), and a Docker daemon's or an SSH agent's socket
    /// is an escape.
    pub(crate) fn get(unix_sockets: bool) -> io::Result<&'static SyscallFilter> {
        static FILTERS: [OnceLock<Result<SyscallFilter, String>>; 2] = [OnceLock::new(), OnceLock::new()];
        FILTERS[usize::from(unix_sockets)]
            .get_or_init(|| {
                SyscallFilter::compile(unix_sockets)
                    .map_err(|e| format!("cannot build the seccomp filter: {e}"))
            })
            .as_ref()
            .map_err(|e| io::Error::other(e.clone()))
    }

    fn compile(unix_sockets: bool) -> Result<SyscallFilter, seccompiler::BackendError> {
        let arch = TargetArch::try_from(std::env::consts::ARCH)?;
        let mut denied: BTreeMap<i64, Vec<SeccompRule>> = DENIED.iter().map(|&nr| (nr, Vec::new())).collect();
        // Any one of the namespace flags (rules of one call are alternatives; a rule's conditions all hold).
        let new_namespace = |arg: u8| -> Result<Vec<SeccompRule>, seccompiler::BackendError> {
            NEW_NAMESPACES
                .iter()
                .map(|&flag| {
                    let flag = u64::from(flag.cast_unsigned());
                    SeccompRule::new(vec![SeccompCondition::new(
                        arg,
                        SeccompCmpArgLen::Dword,
                        SeccompCmpOp::MaskedEq(flag),
                        flag,
                    )?])
                })
                .collect()
        };
        denied.insert(libc::SYS_unshare, new_namespace(0)?);
        // `clone(flags, …)` on every architecture seccompiler knows (x86_64, aarch64, riscv64).
        denied.insert(libc::SYS_clone, new_namespace(0)?);
        if !unix_sockets {
            denied.insert(
                libc::SYS_socket,
                vec![SeccompRule::new(vec![SeccompCondition::new(
                    0,
                    SeccompCmpArgLen::Dword,
                    SeccompCmpOp::Eq,
                    libc::AF_UNIX as u64,
                )?])?],
            );
        }
        let eperm = SeccompFilter::new(
            denied,
            SeccompAction::Allow,
            SeccompAction::Errno(libc::EPERM.cast_unsigned()),
            arch,
        )?;
        let enosys = SeccompFilter::new(
            BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
            SeccompAction::Allow,
            SeccompAction::Errno(libc::ENOSYS.cast_unsigned()),
            arch,
        )?;
        let mut programs = vec![BpfProgram::try_from(eperm)?, BpfProgram::try_from(enosys)?];
        if arch == TargetArch::x86_64 {
            programs.push(x32_refused());
        }
        Ok(SyscallFilter { programs })
    }

    /// Install the filters on the calling thread. Runs in the forked child, after `PR_SET_NO_NEW_PRIVS`: one
    /// `seccomp` system call per filter, on memory compiled before the fork; nothing is allocated.
    #[allow(unsafe_code)]
    pub(crate) fn apply(&self) -> io::Result<()> {
        for program in &self.programs {
            let prog = libc::sock_fprog {
                len: u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?,
                // seccompiler's `sock_filter` is the kernel's layout (`repr(C)`, as libc's).
                filter: program.as_ptr().cast::<libc::sock_filter>().cast_mut(),
            };
            // SAFETY: `prog` points at a filter that outlives the call; the kernel copies it.
            let installed = unsafe {
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &prog as *const libc::sock_fprog,
                )
            };
            if installed != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// A filter refusing every x32 system call (`nr` with bit 30 set, on x86_64): the x32 numbers of the calls
/// above would pass a filter that compares numbers. seccompiler compares numbers only, hence these six
/// instructions by hand.
fn x32_refused() -> BpfProgram {
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_SYSCALL_BIT: u32 = 0x4000_0000;
    // `struct seccomp_data`: `nr` at 0, `arch` at 4.
    let (nr, arch) = (0, 4);
    let stmt = |code: u32, k: u32| sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    };
    let jump = |code: u32, k: u32, jt: u8, jf: u8| sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    vec![
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, arch),
        // Another architecture: not this filter's to judge (the others kill it).
        jump(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            AUDIT_ARCH_X86_64,
            0,
            3,
        ),
        stmt(libc::BPF_LD | libc::BPF_W | libc::BPF_ABS, nr),
        jump(libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K, X32_SYSCALL_BIT, 0, 1),
        stmt(
            libc::BPF_RET | libc::BPF_K,
            libc::SECCOMP_RET_ERRNO | libc::EPERM.cast_unsigned(),
        ),
        stmt(libc::BPF_RET | libc::BPF_K, libc::SECCOMP_RET_ALLOW),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Run `f` in a forked child under the filters (its threads untouched); its exit code.
    #[allow(unsafe_code)]
    fn in_child(f: fn() -> i32) -> i32 {
        let filter = SyscallFilter::get(false).unwrap();
        // SAFETY: the child makes only system calls (prctl, seccomp, the ones `f` tests) and exits with `_exit`.
        unsafe {
            match libc::fork() {
                0 => {
                    let code = if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0
                        || filter.apply().is_err()
                    {
                        100
                    } else {
                        f()
                    };
                    libc::_exit(code)
                }
                pid => {
                    let mut status = 0;
                    assert_eq!(libc::waitpid(pid, &mut status, 0), pid);
                    assert!(libc::WIFEXITED(status), "the child was killed: {status:#x}");
                    libc::WEXITSTATUS(status)
                }
            }
        }
    }

    /// The errno of a system call that returned -1, else 0.
    fn errno_of(ret: libc::c_long) -> i32 {
        if ret == -1 {
            io::Error::last_os_error().raw_os_error().unwrap_or(-1)
        } else {
            0
        }
    }

    #[test]
    #[allow(unsafe_code)]
    fn denied_calls_fail_with_eperm_and_the_rest_work() {
        // SAFETY (all closures): system calls with integer or static-string arguments, in the child.
        assert_eq!(
            in_child(|| errno_of(unsafe { libc::syscall(libc::SYS_memfd_create, c"e".as_ptr(), 0) })),
            libc::EPERM
        );
        assert_eq!(
            in_child(|| errno_of(unsafe {
                libc::syscall(
                    libc::SYS_execveat,
                    0,
                    c"".as_ptr(),
                    0usize,
                    0usize,
                    libc::AT_EMPTY_PATH,
                )
            })),
            libc::EPERM
        );
        assert_eq!(
            in_child(|| errno_of(unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_NEWUSER) })),
            libc::EPERM
        );
        assert_eq!(
            in_child(|| errno_of(unsafe { libc::syscall(libc::SYS_clone3, 0usize, 0usize) })),
            libc::ENOSYS
        );
        assert_eq!(
            in_child(|| errno_of(unsafe { libc::syscall(libc::SYS_io_uring_setup, 1, 0usize) })),
            libc::EPERM
        );
        // x32's memfd_create.
        #[cfg(target_arch = "x86_64")]
        assert_eq!(
            in_child(|| errno_of(unsafe {
                libc::syscall(0x4000_0000 | libc::SYS_memfd_create, c"e".as_ptr(), 0)
            })),
            libc::EPERM
        );
        // Allowed: unshare of no namespace, and an ordinary call.
        assert_eq!(
            in_child(|| errno_of(unsafe { libc::syscall(libc::SYS_unshare, libc::CLONE_FILES) })),
            0
        );
        assert_eq!(
            in_child(|| errno_of(unsafe { libc::syscall(libc::SYS_getppid) })),
            0
        );
    }
}

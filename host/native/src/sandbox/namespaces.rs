//! The namespaces a sandboxed child makes for itself between fork and exec (network, mounts, and the user
//! namespace they need where the host is not root), and the hand-over of the proxy's listener from the child's
//! network namespace to the host. Everything the child runs here is a system call on memory prepared by the
//! parent.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use super::confine::Confinement;
use super::proxy;

/// The namespaces a child makes for itself: as root directly; otherwise (or where root may not) inside a user
/// namespace of its own that maps its user and group to themselves.
///
/// - network: its own, whose only interface is its loopback, brought up;
/// - mounts: its own, private (nothing propagates back to the host's), with each protected path bound
///   read-only over itself: a command cannot change, replace or remove the host's policy files, lockfiles, cache
///   or audit logs, even inside a directory it may write (Landlock can only allow, not take a file out of a
///   grant).
#[derive(Debug, Clone)]
pub(super) struct Namespaces {
    /// `/proc/self/uid_map`'s and `gid_map`'s lines, formatted in the parent.
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    root: bool,
    network: bool,
    /// The protected paths that exist, with the flags of the mounts they are on (kept when remounting: a user
    /// namespace may not clear `nosuid`, `nodev`, `noexec`).
    read_only: Vec<(std::ffi::CString, libc::c_ulong)>,
    /// Where to send the proxy's listener, made on the namespace's loopback (the child's end of a socket pair).
    proxy: Option<RawFd>,
}

impl Namespaces {
    pub(super) fn for_confinement(confinement: &Confinement, proxy: Option<RawFd>) -> io::Result<Self> {
        use std::os::unix::ffi::OsStrExt;
        let (uid, gid) = (
            rustix::process::geteuid().as_raw(),
            rustix::process::getegid().as_raw(),
        );
        let mut read_only = Vec::new();
        for path in &confinement.protected {
            let Ok(real) = std::fs::canonicalize(path) else {
                continue;
            };
            let path = std::ffi::CString::new(real.as_os_str().as_bytes()).map_err(io::Error::other)?;
            let flags = mount_flags(&path);
            read_only.push((path, flags));
        }
        Ok(Namespaces {
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
            root: uid == 0,
            network: confinement.own_network,
            read_only,
            proxy,
        })
    }

    /// In the child: syscalls only.
    #[allow(unsafe_code)]
    pub(super) fn apply(&self) -> io::Result<()> {
        let mut flags = 0;
        if self.network {
            flags |= libc::CLONE_NEWNET;
        }
        if !self.read_only.is_empty() {
            flags |= libc::CLONE_NEWNS;
        }
        // SAFETY: unshare with flags only.
        let direct = self.root && unsafe { libc::unshare(flags) } == 0;
        if !direct {
            // SAFETY: unshare with flags only.
            if unsafe { libc::unshare(libc::CLONE_NEWUSER | flags) } != 0 {
                return Err(io::Error::last_os_error());
            }
            write_file(c"/proc/self/setgroups", b"deny")?;
            write_file(c"/proc/self/uid_map", &self.uid_map)?;
            write_file(c"/proc/self/gid_map", &self.gid_map)?;
        }
        if !self.read_only.is_empty() {
            // SAFETY: mount with NUL-terminated paths that live across the calls, null or static strings for the
            // rest: first nothing propagates back to the host's namespace, then each path is bound over itself
            // and the binding made read-only.
            unsafe {
                let none = std::ptr::null();
                if libc::mount(
                    none,
                    c"/".as_ptr(),
                    none,
                    libc::MS_REC | libc::MS_PRIVATE,
                    none.cast(),
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                for (path, kept) in &self.read_only {
                    if libc::mount(path.as_ptr(), path.as_ptr(), none, libc::MS_BIND, none.cast()) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                    let read_only = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | kept;
                    if libc::mount(none, path.as_ptr(), none, read_only, none.cast()) != 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
            }
        }
        if self.network {
            loopback_up()?;
            if let Some(channel) = self.proxy {
                send_listener(channel)?;
            }
        }
        Ok(())
    }
}

/// A Unix socket pair, both ends close-on-exec: (the parent's, the child's).
#[allow(unsafe_code)]
pub(super) fn socket_pair() -> io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: socketpair writes two descriptors into the array it is given.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just made and are owned by nothing else.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// Room for one descriptor's control message (`CMSG_SPACE(sizeof(int))` is 24 on 64-bit, 16 on 32-bit).
const CONTROL: usize = 32;

/// An `iovec` to be filled by [`one_descriptor`].
const EMPTY_IOV: libc::iovec = libc::iovec {
    iov_base: std::ptr::null_mut(),
    iov_len: 0,
};

/// A message of one byte with room for one descriptor, over the caller's buffers (no allocation: the child uses
/// it too). The buffers must outlive the message's use.
fn one_descriptor(
    byte: &mut [u8; 1],
    iov: &mut libc::iovec,
    control: &mut [u64; CONTROL / 8],
) -> libc::msghdr {
    *iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    #[allow(unsafe_code)]
    // SAFETY: `msghdr` is plain data, for which all zeroes is a valid value.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = iov;
    message.msg_iovlen = 1;
    message.msg_control = control.as_mut_ptr().cast();
    message.msg_controllen = CONTROL as _;
    message
}

/// In the child: make a listening socket on the namespace's loopback at the proxy's port and send it over
/// `channel` (syscalls only, on stack memory).
#[allow(unsafe_code)]
fn send_listener(channel: RawFd) -> io::Result<()> {
    // SAFETY: plain data structures, zeroed then filled within their bounds; the syscalls read or write only
    // them; the listener's descriptor is closed once sent (the parent holds its copy).
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut address: libc::sockaddr_in = std::mem::zeroed();
        address.sin_family = libc::AF_INET as libc::sa_family_t;
        address.sin_port = proxy::PORT.to_be();
        address.sin_addr.s_addr = u32::from_be_bytes([127, 0, 0, 1]).to_be();
        let size = size_of::<libc::sockaddr_in>() as libc::socklen_t;
        if libc::bind(fd, (&raw const address).cast(), size) != 0 || libc::listen(fd, 128) != 0 {
            let error = io::Error::last_os_error();
            libc::close(fd);
            return Err(error);
        }
        let (mut byte, mut iov, mut control) = ([0u8; 1], EMPTY_IOV, [0u64; CONTROL / 8]);
        let mut message = one_descriptor(&mut byte, &mut iov, &mut control);
        message.msg_controllen = libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as _;
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        (*header).cmsg_level = libc::SOL_SOCKET;
        (*header).cmsg_type = libc::SCM_RIGHTS;
        (*header).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>(), fd);
        let sent = libc::sendmsg(channel, &raw const message, 0);
        let error = io::Error::last_os_error();
        libc::close(fd);
        if sent != 1 {
            return Err(error);
        }
    }
    Ok(())
}

/// In the parent: the listener the child sent over `channel`.
#[allow(unsafe_code)]
pub(super) fn receive_listener(channel: &std::os::fd::OwnedFd) -> io::Result<std::net::TcpListener> {
    use std::os::fd::FromRawFd;
    // SAFETY: as in `send_listener`: plain data within bounds; the descriptor received is owned from here on.
    unsafe {
        let (mut byte, mut iov, mut control) = ([0u8; 1], EMPTY_IOV, [0u64; CONTROL / 8]);
        let mut message = one_descriptor(&mut byte, &mut iov, &mut control);
        let received = libc::recvmsg(
            channel.as_raw_fd(),
            &raw mut message,
            libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC,
        );
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        if received != 1
            || header.is_null()
            || (*header).cmsg_level != libc::SOL_SOCKET
            || (*header).cmsg_type != libc::SCM_RIGHTS
        {
            return Err(io::Error::other(
                "the sandbox's proxy listener was not handed over",
            ));
        }
        let fd = std::ptr::read_unaligned(libc::CMSG_DATA(header).cast::<libc::c_int>());
        Ok(std::net::TcpListener::from_raw_fd(fd))
    }
}

/// The flags of the mount `path` is on that a remount must keep (`statvfs`'s, as `mount` flags).
#[allow(unsafe_code)]
fn mount_flags(path: &std::ffi::CStr) -> libc::c_ulong {
    // SAFETY: statvfs writes the struct it is given, zeroed plain data, for a NUL-terminated path.
    let flag = unsafe {
        let mut stat: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut stat) != 0 {
            return 0;
        }
        stat.f_flag
    };
    [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ]
    .into_iter()
    .filter(|(st, _)| flag & st != 0)
    .fold(0, |all, (_, ms)| all | ms)
}

/// Write `bytes` to the file at `path` (in the child: syscalls only).
#[allow(unsafe_code)]
fn write_file(path: &std::ffi::CStr, bytes: &[u8]) -> io::Result<()> {
    // SAFETY: open of a NUL-terminated path; write from a buffer that lives across the call; close of the
    // descriptor just opened.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        if written != bytes.len() as isize {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Bring the namespace's loopback interface up (a fresh network namespace has it down), so that programs may
/// still talk to each other on 127.0.0.1 (in the child: syscalls only).
#[allow(unsafe_code)]
fn loopback_up() -> io::Result<()> {
    // SAFETY: a socket for the ioctls; `ifreq` is plain data, zeroed, its name set within bounds; the ioctls
    // read and write only it; the descriptor is closed.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let mut request: libc::ifreq = std::mem::zeroed();
        request.ifr_name[0] = b'l' as libc::c_char;
        request.ifr_name[1] = b'o' as libc::c_char;
        let mut result = libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request);
        if result == 0 {
            request.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            result = libc::ioctl(fd, libc::SIOCSIFFLAGS, &request);
        }
        let error = io::Error::last_os_error();
        libc::close(fd);
        if result != 0 {
            return Err(error);
        }
    }
    Ok(())
}

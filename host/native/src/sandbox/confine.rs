//! Landlock rules of a confined program ([`Confinement`]): what it may read, write and execute, and which TCP
//! it may use.
//!
//! - A third-party plugin's programs reach only the plugin's own file grants (read-only ones read-only,
//!   read-write ones read-write; neither executable, so nothing the plugin wrote can run, only the system's
//!   programs and the granted programs themselves) and the read-only system paths a program needs to run
//!   ([`Exec::Granted`]).
//! - The built-in `bash`'s programs read below their read grants and write below their write grants, and may
//!   execute anything they may read ([`Exec::Readable`]: the model builds and runs code in the workspace).
//! - Either way, `hidden` paths (the user's secrets) are carved out of every grant: Landlock only allows, so a
//!   grant with a hidden path below it becomes rules for its other entries, level by level down to the hidden
//!   path (plus the right to list directories, not to read files, on the grant itself). `protected` paths (the
//!   host's policy, lockfiles, cache, audit logs) are bound read-only instead (`process.rs`).
//!
//! The ruleset is built in the parent (it allocates and opens files); the child, between fork and exec, only
//! makes two syscalls on the ready file descriptor (see `process.rs`).

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr, Scope,
    path_beneath_rules,
};

/// Directories and files every confined program may read and execute: the system's programs and libraries.
pub const SYSTEM_EXEC: &[&str] = &["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"];

/// Files below `/etc` a program needs to run (the loader's cache, users and groups, time zone, name
/// resolution, certificates, locale aliases, terminal descriptions, the system's git config): readable, not
/// executable. The rest of `/etc` (keys, shadow, credentials of services) is not reachable.
pub const SYSTEM_READ: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ld.so.preload",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/resolv.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/alternatives",
    "/etc/locale.alias",
    "/etc/locale.conf",
    "/etc/terminfo",
    "/etc/inputrc",
    "/etc/mime.types",
    "/etc/magic",
    "/etc/gitconfig",
    "/etc/os-release",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
];

/// Devices a program may write (and read): the sinks of redirections and the terminal.
pub const SYSTEM_DEVICES: &[&str] = &["/dev/null", "/dev/full", "/dev/tty"];

/// The Landlock ABI the rules are written for; older kernels get what they support (best effort), and
/// [`Confinement::for_start`] refuses where that is not enough.
const TARGET_ABI: ABI = ABI::V6;

/// Landlock's TCP restrictions need ABI 4.
const NET_ABI: i32 = 4;

/// What a granted start runs: the program's path, the child's whole environment, and its confinement.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program to execute (absolute for resolved grants).
    pub program: String,
    /// Exactly the environment the child gets.
    pub env: Vec<(String, String)>,
    /// Landlock confinement (none: unconfined).
    pub confinement: Option<Confinement>,
    /// Set `PR_SET_NO_NEW_PRIVS` (third-party plugins' children: no setuid escalation).
    pub no_new_privs: bool,
}

/// What a confined program may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The read-only grants.
    pub read: Vec<PathBuf>,
    /// The read-write grants.
    pub write: Vec<PathBuf>,
    /// The granted programs' resolved paths: executable even inside a read-only grant.
    pub programs: Vec<PathBuf>,
    /// What it may execute.
    pub exec: Exec,
    /// Paths it may neither read nor write, even below a grant (the user's secrets).
    pub hidden: Vec<PathBuf>,
    /// Paths it may not write, even below a write grant (what would give it more at the host's next start):
    /// bound read-only over themselves in a mount namespace of its own.
    pub protected: Vec<PathBuf>,
    /// TCP: none, only to these ports, or any (Landlock filters by port, not by address).
    pub tcp: Tcp,
    /// A network namespace of its own, with only a loopback interface: no address outside is reachable
    /// (TCP, UDP, DNS), whatever `tcp` says; `tcp` then applies inside it.
    pub own_network: bool,
    /// With `own_network`: the hosts it reaches by name through the host's proxy (none: no network at all).
    pub proxy: Option<super::proxy::Hosts>,
    /// Whether it may make Unix sockets (a socket by path is reached whatever the file rules say: a Docker
    /// daemon's or an SSH agent's is an escape). `socketpair` is always allowed.
    pub unix_sockets: bool,
    /// The call's cgroup limits.
    pub limits: Limits,
    /// The built-ins' sandbox mode it was made for (none: a plugin's grants).
    pub mode: Option<toolwright_core::policy::SandboxMode>,
    /// Whether programs may start unconfined where Landlock is not available.
    pub unconfined_ok: bool,
}

impl Default for Confinement {
    /// Nothing: no file, no program but the system's, no TCP.
    fn default() -> Self {
        Confinement {
            read: Vec::new(),
            write: Vec::new(),
            programs: Vec::new(),
            exec: Exec::Granted,
            hidden: Vec::new(),
            protected: Vec::new(),
            tcp: Tcp::None,
            own_network: false,
            proxy: None,
            unix_sockets: false,
            limits: Limits::default(),
            mode: None,
            unconfined_ok: false,
        }
    }
}

/// What a confined program may execute.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exec {
    /// The system's programs and the granted ones (a plugin's programs: nothing written can run).
    Granted,
    /// Anything it may read (the built-in `bash`).
    Readable,
}

/// The limits of a call's cgroup, where the host can make one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// At most this many processes and threads at once (`pids.max`): a fork storm stops there.
    pub pids: Option<u32>,
    /// At most this much memory, in bytes (`memory.max`, swap none): past it the kernel kills in the cgroup.
    pub memory: Option<u64>,
}

/// The TCP a confined program may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tcp {
    /// No TCP at all (the plugin has no network grant).
    None,
    /// Connections to these ports only (every granted pattern names its port).
    Ports(Vec<u16>),
    /// Any connection (a granted pattern with `*` for its port).
    Any,
}

impl Tcp {
    /// What a plugin's granted `HOST:PORT` patterns allow its programs: Landlock knows ports, not hosts.
    pub fn from_patterns(patterns: &[toolwright_core::policy::NetPattern]) -> Tcp {
        let ports: Option<Vec<u16>> = patterns.iter().map(|p| p.port).collect();
        match ports {
            _ if patterns.is_empty() => Tcp::None,
            Some(ports) => Tcp::Ports(ports),
            None => Tcp::Any,
        }
    }
}

impl std::fmt::Display for Tcp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Tcp::None => f.write_str("no TCP"),
            Tcp::Ports(ports) => {
                let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
                write!(f, "TCP connections to port {} only", ports.join(", "))
            }
            Tcp::Any => f.write_str("any TCP connection"),
        }
    }
}

/// The kernel's Landlock ABI version (0: none), asked once.
pub fn landlock_abi() -> i32 {
    static ABI_VERSION: OnceLock<i32> = OnceLock::new();
    *ABI_VERSION.get_or_init(|| {
        #[allow(unsafe_code)]
        // SAFETY: landlock_create_ruleset with a null attribute, size 0 and the VERSION flag only returns the
        // ABI version (or -1); it touches no memory of ours.
        let version = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                std::ptr::null::<u8>(),
                0usize,
                1u32, // LANDLOCK_CREATE_RULESET_VERSION
            )
        };
        i32::try_from(version).unwrap_or(0).max(0)
    })
}

impl Confinement {
    /// The Landlock ABI this confinement needs: 1 for files, 4 to restrict TCP.
    pub fn needed_abi(&self) -> i32 {
        if self.tcp == Tcp::Any { 1 } else { NET_ABI }
    }

    /// Why this system cannot confine as required, if it cannot.
    pub fn unavailable(&self) -> Option<String> {
        let (have, need) = (landlock_abi(), self.needed_abi());
        (have < need).then(|| match have {
            0 => "this system has no Landlock".to_owned(),
            n => format!("this system's Landlock (ABI {n}) cannot restrict TCP (ABI {need} needed)"),
        })
    }

    /// The confinement of one start of `program` by `who`: itself; none when Landlock is unavailable and the
    /// policy allows unconfined starts; else the refusal for the model.
    pub fn for_start(&self, program: &str, who: &str) -> Result<Option<Confinement>, String> {
        match self.unavailable() {
            None => Ok(Some(self.clone())),
            Some(_) if self.unconfined_ok => Ok(None),
            Some(why) if self.mode.is_some() => Err(format!(
                "Permission denied: {who} may start {program} only in the built-ins' sandbox, and {why}. \
                 `sandbox = \"off\"` in the [builtins] section of the policy file (toolwright.toml) would start \
                 it unconfined, as pi does."
            )),
            Some(why) => Err(format!(
                "Permission denied: {who} may start {program} only confined by Landlock, and {why}. \
                 `unconfined-spawn = true` for it in the policy file (toolwright.toml) would start it unconfined."
            )),
        }
    }

    /// The ruleset, ready to be enforced by `landlock_restrict_self` in the child.
    pub fn ruleset(&self) -> std::io::Result<OwnedFd> {
        let fail = |e: landlock::RulesetError| std::io::Error::other(format!("cannot set up Landlock: {e}"));
        let all = AccessFs::from_all(TARGET_ABI);
        let read = AccessFs::from_read(TARGET_ABI);
        let (write, data) = match self.exec {
            // Written files are never executable: a program cannot run what the plugin (or it) wrote.
            Exec::Granted => (
                all & !BitFlags::from(AccessFs::Execute),
                read & !BitFlags::from(AccessFs::Execute),
            ),
            Exec::Readable => (all, read),
        };
        let mut ruleset = Ruleset::default().handle_access(all).map_err(fail)?;
        if self.tcp != Tcp::Any {
            ruleset = ruleset
                .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
                .map_err(fail)?;
        }
        if landlock_abi() >= 6 {
            // Nor may it signal the host or talk to abstract sockets outside its domain.
            ruleset = ruleset
                .scope(Scope::AbstractUnixSocket | Scope::Signal)
                .map_err(fail)?;
        }
        // Protected paths are bound read-only in a mount namespace of its own (`process.rs`), not carved.
        let hidden = existing(&self.hidden);
        let (read_roots, listed) = carve_all(&self.read, &hidden);
        let (write_roots, _) = carve_all(&self.write, &hidden);
        let (program_roots, _) = carve_all(&self.programs, &hidden);
        let mut created = ruleset.create().map_err(fail)?;
        created = created
            .add_rules(path_beneath_rules(SYSTEM_EXEC, read))
            .map_err(fail)?
            .add_rules(path_beneath_rules(SYSTEM_READ, data))
            .map_err(fail)?
            .add_rules(path_beneath_rules(
                SYSTEM_DEVICES,
                all & !BitFlags::from(AccessFs::Execute),
            ))
            .map_err(fail)?
            // A grant a hidden path was carved out of may still be listed (names, not contents).
            .add_rules(path_beneath_rules(&listed, AccessFs::ReadDir))
            .map_err(fail)?
            .add_rules(path_beneath_rules(&read_roots, data))
            .map_err(fail)?
            .add_rules(path_beneath_rules(&program_roots, read))
            .map_err(fail)?
            .add_rules(path_beneath_rules(&write_roots, write))
            .map_err(fail)?;
        if let Tcp::Ports(ports) = &self.tcp {
            for port in ports {
                created = created
                    .add_rule(NetPort::new(*port, AccessNet::ConnectTcp))
                    .map_err(fail)?;
            }
        }
        let fd: Option<OwnedFd> = created.into();
        fd.ok_or_else(|| std::io::Error::other("cannot set up Landlock: the kernel does not support it"))
    }
}

/// The paths of `paths` that exist, with symlinks resolved (a hidden path that does not exist hides nothing,
/// and carving around it would only take away the right to create entries beside it).
fn existing(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths
        .iter()
        .filter_map(|p| std::fs::canonicalize(p).ok())
        .collect()
}

/// The roots that grant what `grants` grant without anything below `hidden` (canonical), and the grants a hidden
/// path was carved out of.
fn carve_all(grants: &[PathBuf], hidden: &[PathBuf]) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut roots = Vec::new();
    let mut carved = Vec::new();
    for grant in grants {
        let real = std::fs::canonicalize(grant).unwrap_or_else(|_| grant.clone());
        if hidden.iter().any(|h| h.starts_with(&real) && *h != real) {
            carved.push(real.clone());
        }
        carve(&real, hidden, &mut roots);
    }
    (roots, carved)
}

/// Push onto `out` the paths whose rules grant everything below `root` but what lies below `hidden`: `root`
/// itself when no hidden path is below it, none when it is hidden, else its entries in turn (symbolic links
/// are left out: what they point to is reached, and checked, where it is).
fn carve(root: &Path, hidden: &[PathBuf], out: &mut Vec<PathBuf>) {
    if hidden.iter().any(|h| root.starts_with(h)) {
        return;
    }
    if !hidden.iter().any(|h| h.starts_with(root)) {
        out.push(root.to_path_buf());
        return;
    }
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_symlink()) {
            continue;
        }
        carve(&entry.path(), hidden, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_without_landlock_unless_the_policy_opts_in() {
        let mut c = Confinement::default();
        if c.unavailable().is_none() {
            assert_eq!(c.for_start("git", "the plugin p"), Ok(Some(c.clone())));
            assert!(c.ruleset().is_ok());
            return;
        }
        let why = c.unavailable().unwrap();
        assert_eq!(
            c.for_start("git", "the plugin p").unwrap_err(),
            format!(
                "Permission denied: the plugin p may start git only confined by Landlock, and {why}. \
                 `unconfined-spawn = true` for it in the policy file (toolwright.toml) would start it unconfined."
            )
        );
        c.unconfined_ok = true;
        assert_eq!(c.for_start("git", "the plugin p"), Ok(None));
    }
}

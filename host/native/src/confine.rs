//! Landlock confinement of the programs a third-party plugin starts: they reach only the plugin's own file grants
//! (read-only ones read-only, read-write ones read-write; neither executable, so nothing the plugin wrote can
//! run, only the system's programs and the granted programs themselves) and the read-only system paths a
//! program needs to run, and no TCP unless the plugin has a network grant.
//!
//! The ruleset is built in the parent (it allocates and opens files); the child, between fork and exec, only
//! makes two syscalls on the ready file descriptor (see `process.rs`).

use std::os::fd::OwnedFd;
use std::path::PathBuf;
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

/// What a confined program may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confinement {
    /// The plugin's read-only grants.
    pub read: Vec<PathBuf>,
    /// The plugin's read-write grants.
    pub write: Vec<PathBuf>,
    /// The granted programs' resolved paths: executable even inside a read-only grant.
    pub programs: Vec<PathBuf>,
    /// TCP: none, only to these ports, or any (Landlock filters by port, not by address).
    pub tcp: Tcp,
    /// Whether the plugin may start programs unconfined where Landlock is not available.
    pub unconfined_ok: bool,
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
        // Written files are never executable: a program cannot run what the plugin (or it) wrote.
        let write = all & !BitFlags::from(AccessFs::Execute);
        let data = read & !BitFlags::from(AccessFs::Execute);
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
        let mut created = ruleset.create().map_err(fail)?;
        created = created
            .add_rules(path_beneath_rules(SYSTEM_EXEC, read))
            .map_err(fail)?
            .add_rules(path_beneath_rules(SYSTEM_READ, data))
            .map_err(fail)?
            .add_rules(path_beneath_rules(SYSTEM_DEVICES, write))
            .map_err(fail)?
            .add_rules(path_beneath_rules(&self.read, data))
            .map_err(fail)?
            .add_rules(path_beneath_rules(&self.programs, read))
            .map_err(fail)?
            .add_rules(path_beneath_rules(&self.write, write))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_without_landlock_unless_the_policy_opts_in() {
        let mut c = Confinement {
            read: Vec::new(),
            write: Vec::new(),
            programs: Vec::new(),
            tcp: Tcp::None,
            unconfined_ok: false,
        };
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

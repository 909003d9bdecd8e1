//! The sandbox of every process the host starts: the built-in `bash`'s (natively and as wasm), a plugin's
//! granted programs, and whatever an embedder starts through a tool's context. One path: a grant becomes a
//! [`Launch`] with a [`Confinement`], and [`NativeProcess::spawn`] starts the program in it.
//!
//! ## Map
//!
//! - this file: the built-ins' sandbox from the policy's mode ([`BuiltinSandbox`],
//!   [`Confinement::for_builtins`]).
//! - `confine`: what a start becomes ([`Launch`]) and the Landlock rules of its [`Confinement`] (files read,
//!   written, executed; TCP by port), secrets carved out of grants.
//! - `seccomp`: the system calls a confined program may not make (compiled once, before any fork).
//! - `scope`: the call's cgroups ([`CallScope`]): every process of a call dies with it; pids and memory limits.
//! - `namespaces`: the network and mount namespaces a child makes for itself, and the proxy listener's hand-over.
//! - `proxy`: hosts by name through the host's proxy ([`Hosts`]).
//! - `explain`: what a refusal tells the model ([`explain`]).
//! - `process`: the start itself ([`NativeProcess`]; [`PipedProcess`] for a program spoken to over its standard
//!   streams, as an MCP server on stdio is): between fork and exec the child joins the cgroups, makes
//!   its namespaces, sets `PR_SET_NO_NEW_PRIVS`, enforces the Landlock ruleset, then the seccomp filter.
//!
//! Why in-process rather than Debian's `bubblewrap`: every mechanism is a system call the child makes on
//! itself (no setuid helper, no extra `exec`), and the start costs well under a millisecond more than an
//! unconfined one (docs/performance.md, "Sandbox").

mod confine;
mod explain;
mod namespaces;
mod process;
mod proxy;
mod scope;
mod seccomp;

use std::path::{Path, PathBuf};

pub use confine::{
    Confinement, Exec, Launch, Limits, SYSTEM_DEVICES, SYSTEM_EXEC, SYSTEM_READ, Tcp, landlock_abi,
};
pub use explain::explain;
pub use process::{NativeProcess, PipedProcess, without_forks};
pub use proxy::{Hosts, PORT as PROXY_PORT};
pub use scope::CallScope;
pub use toolwright_core::policy::SandboxMode;

/// Processes and threads a sandboxed call may run at once (`pids.max` of its cgroup): a build's compilers fit, a
/// fork storm stops.
pub const BUILTIN_PIDS: u32 = 4096;

/// What the built-ins' sandbox is made from: the built-ins' file grants, where temporary files go, and the
/// paths it must keep out of.
#[derive(Debug, Clone, Default)]
pub struct BuiltinSandbox {
    /// The mode.
    pub mode: SandboxMode,
    /// Directories the built-ins may read (`/` by default).
    pub read: Vec<PathBuf>,
    /// Directories they may write (the workspace by default).
    pub write: Vec<PathBuf>,
    /// The temporary directory (writable under `workspace-write`).
    pub temp_dir: PathBuf,
    /// The user's secrets, absolute.
    pub hidden: Vec<PathBuf>,
    /// What no program of theirs may write (the host's policy files, lockfiles, cache, audit logs).
    pub protected: Vec<PathBuf>,
    /// The hosts their programs reach through the host's proxy (`[builtins] network`).
    pub network: Hosts,
    /// The memory one call's processes may use together, in bytes (`[builtins] process-memory-mib`).
    pub memory: Option<u64>,
    /// Whether what the proxy refuses is asked about (`[ask] grants = true`): then the proxy serves even when no
    /// host is granted, refusing every one, so that the refusals can be asked about.
    pub asks_network: bool,
}

impl BuiltinSandbox {
    /// The default: `workspace-write` for the workspace `cwd` in the host environment `host`, reading
    /// everywhere but [`DEFAULT_SECRETS`](toolwright_core::policy::DEFAULT_SECRETS).
    pub fn default_for(cwd: &Path, host: &crate::HostEnv) -> Self {
        let defaults: Vec<String> = toolwright_core::policy::DEFAULT_SECRETS
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        BuiltinSandbox {
            mode: SandboxMode::WorkspaceWrite,
            read: vec!["/".into()],
            write: vec![cwd.to_path_buf()],
            temp_dir: host.temp_dir.clone(),
            hidden: secrets(&defaults, cwd, host.home.as_deref()),
            protected: Vec::new(),
            network: Hosts::default(),
            memory: None,
            asks_network: false,
        }
    }
}

impl Confinement {
    /// The confinement of the built-ins' programs under `sandbox` (none when its mode is `off`): read below
    /// the read grants, write below the write grants and the temporary directory (nothing under `read-only`),
    /// run anything readable, keep out of the secrets, no network but a loopback of its own.
    pub fn for_builtins(sandbox: &BuiltinSandbox) -> Option<Confinement> {
        let write = match sandbox.mode {
            SandboxMode::Off => return None,
            SandboxMode::ReadOnly => Vec::new(),
            SandboxMode::WorkspaceWrite => sandbox
                .write
                .iter()
                .cloned()
                .chain([sandbox.temp_dir.clone(), PathBuf::from("/dev/shm")])
                .collect(),
        };
        Some(Confinement {
            read: sandbox.read.clone(),
            write,
            programs: Vec::new(),
            exec: Exec::Readable,
            hidden: sandbox.hidden.clone(),
            protected: sandbox.protected.clone(),
            // Any TCP, inside a network namespace whose only interface is its own loopback.
            tcp: Tcp::Any,
            own_network: true,
            proxy: (!sandbox.network.allow.is_empty() || sandbox.asks_network)
                .then(|| sandbox.network.clone()),
            unix_sockets: false,
            limits: Limits {
                pids: Some(BUILTIN_PIDS),
                memory: sandbox.memory,
            },
            mode: Some(sandbox.mode),
            unconfined_ok: false,
        })
    }
}

/// The secrets of `list` as a policy writes them (`~` the home directory, relative paths below the workspace
/// `cwd`), absolute.
pub fn secrets(list: &[String], cwd: &Path, home: Option<&str>) -> Vec<PathBuf> {
    let cwd = toolwright_sdk::paths::normalize(&cwd.to_string_lossy());
    list.iter()
        .map(|s| PathBuf::from(toolwright_sdk::paths::resolve_to_cwd(s, &cwd, home)))
        .collect()
}

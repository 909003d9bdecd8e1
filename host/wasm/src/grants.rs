//! What a plugin may touch, as the runtime applies it: [`WasmGrants`] (directories mapped as preopens, programs,
//! variables, network rules, limits), made from a policy decision by the caller, who reads the host's
//! environment ([`toolwright_native::HostEnv`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use toolwright_core::policy::InstanceReuse;
use toolwright_native::{FileMutationQueue, ProgramGrant};

use crate::{DEFAULT_RESULT_CAP, MAX_MEMORY};

/// A directory a plugin may reach, as it is mapped into the plugin's filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Preopen {
    /// The directory on the host.
    pub host: PathBuf,
    /// Its path inside the plugin (the same as `host` for Toolwright's own grants).
    pub guest: String,
    /// Whether the plugin may write below it.
    pub write: bool,
}

/// What a plugin's calls get: directories, programs, environment, workspace.
#[derive(Debug, Clone)]
pub struct WasmGrants {
    /// The workspace, as the plugin sees it.
    pub cwd: String,
    /// The home directory, when the plugin may know it.
    pub home: Option<String>,
    /// A writable temp directory, when granted.
    pub temp_dir: Option<String>,
    /// The directories.
    pub preopens: Vec<Preopen>,
    /// The programs it may start.
    pub programs: ProgramGrant,
    /// The environment variables it sees.
    pub env: Arc<Vec<(String, String)>>,
    /// pi's file mutation queue, shared with every other tool of the session.
    pub mutations: Arc<FileMutationQueue>,
    /// Wall-clock limit per call (none: only cancellation stops it).
    pub timeout: Option<std::time::Duration>,
    /// Memory limit per instance, in bytes (at most [`MAX_MEMORY`]).
    pub memory: usize,
    /// Fuel per call (wasm instructions, roughly); none: unmetered. Needs a plugin loaded with
    /// [`PluginHost::metered`](crate::PluginHost::metered).
    pub fuel: Option<u64>,
    /// Where it may connect (none: no network at all).
    pub network: Arc<Vec<NetRule>>,
    /// Where it may never connect: checked by address, so a denied host cannot be reached through another name.
    pub network_deny: Arc<Vec<NetRule>>,
    /// The bytes a call may carry into the host: its result, partial updates and nested calls' results.
    pub result_cap: usize,
    /// Whether an instance that finished a tool call or a hook cleanly may serve the plugin's next one (policy
    /// `instance = "reuse"`), and for how long; none: a fresh instance for every call.
    pub reuse: Option<InstanceReuse>,
    /// Whether its tools' work is short ([`Work::Short`](toolwright_core::pipeline::Work::Short)): beside others
    /// it runs on a short-work thread instead of a thread of tokio's blocking pool each. For tools that never send
    /// updates nor make nested calls, as the wasm built-ins but `bash` (the native built-ins run so too). There, an
    /// update the queue has no room for is dropped, never waited for, and nested calls are refused. (Every
    /// plugin's call that runs alone is placed on the thread that polls its batch:
    /// [`Placement::of`](toolwright_core::pipeline::Placement::of).)
    pub work: toolwright_core::pipeline::Work,
    /// Which tools its nested calls may reach, and under whose authority they run.
    pub calls: Calls,
    /// As a `tool_call` handler: the tools whose arguments it may rewrite (`*`: any). It may block any call.
    pub rewrite: Vec<String>,
    /// Where what the host refuses its tool calls (a file outside its grants, a program it may not start) is
    /// recorded by call id, for a server that may ask the user ([`toolwright_core::ask`]); none: not recorded.
    pub refusals: Option<toolwright_core::ask::RefusalBook>,
    /// Where a server registers the clients of its calls, for the plugin's `ask` ([`toolwright_core::client`]);
    /// none: it has nobody to ask.
    pub client: Option<toolwright_core::client::ClientDesk>,
    /// Whether the plugin may ask the client's model (`sampling/createMessage`).
    pub sampling: bool,
    /// Whether its sockets are on though no network grant allows anything, so that what it tries is refused and
    /// recorded for a server that asks the user (`refusals`): a plugin that requested network capabilities when
    /// the policy asks for grants. Nothing leaves the host: every name lookup and connection is refused.
    pub network_asked: bool,
    /// A built-in's grants: of what it is refused, only what its programs' proxies refuse them is recorded
    /// (`refusals`), as the built-ins' ([`toolwright_core::ask::Subject::Builtins`]).
    pub builtin: bool,
}

/// Which tools a plugin's nested calls may reach, and under whose authority they run
/// ([`toolwright_core::authority`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Calls {
    /// Its own authority: these tools (none by default), within its grants (and within its caller's, when
    /// another plugin called it).
    Own(Vec<String>),
    /// No authority of its own (codemode, the built-ins): its calls run under its caller's, and it runs within
    /// its caller's grants.
    Inherit,
}

/// One address a plugin may connect to, by TCP or UDP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetRule {
    /// The IP addresses (none: any). For a host name, what it resolved to when the grant was made.
    pub ips: Option<Vec<std::net::IpAddr>>,
    /// The host name, when the pattern names one: resolved again when a connection is checked, so a name whose
    /// addresses change (round-robin DNS, a CDN) still reaches what it names now.
    pub name: Option<String>,
    /// The port (none: any).
    pub port: Option<u16>,
}

impl NetRule {
    /// The rule of a granted pattern, resolving a host name now (a name that does not resolve reaches nothing
    /// until it does).
    pub fn from_pattern(pattern: &toolwright_core::policy::NetPattern) -> NetRule {
        let (ips, name) = if pattern.host == "*" {
            (None, None)
        } else if let Ok(ip) = pattern.host.parse::<std::net::IpAddr>() {
            (Some(vec![ip]), None)
        } else {
            let found = resolve(&pattern.host, pattern.port.unwrap_or(0));
            (Some(found), Some(pattern.host.clone()))
        };
        NetRule {
            ips,
            name,
            port: pattern.port,
        }
    }

    /// Whether a connection to `addr` is allowed by the addresses known now.
    pub fn allows(&self, addr: &std::net::SocketAddr) -> bool {
        self.port_allows(addr) && self.ips.as_ref().is_none_or(|ips| same_ip(ips, addr))
    }

    fn port_allows(&self, addr: &std::net::SocketAddr) -> bool {
        self.port.is_none_or(|p| p == addr.port())
    }
}

/// Whether a connection to `addr` is allowed: no `deny` rule matches it (deny wins, by address), and an
/// `allow` rule does.
pub(crate) async fn network_allows(
    allow: Arc<Vec<NetRule>>,
    deny: Arc<Vec<NetRule>>,
    addr: std::net::SocketAddr,
) -> bool {
    !matches_any(&deny, addr).await && matches_any(&allow, addr).await
}

/// Whether one of `rules` matches `addr`: by the addresses known, else by resolving their names again (on a
/// blocking thread).
async fn matches_any(rules: &[NetRule], addr: std::net::SocketAddr) -> bool {
    if rules.iter().any(|r| r.allows(&addr)) {
        return true;
    }
    for rule in rules.iter().filter(|r| r.port_allows(&addr)) {
        let Some(name) = rule.name.clone() else {
            continue;
        };
        let port = addr.port();
        let found = tokio::task::spawn_blocking(move || resolve(&name, port))
            .await
            .unwrap_or_default();
        if same_ip(&found, &addr) {
            return true;
        }
    }
    false
}

/// The addresses of the granted name `name` (none when it does not resolve; logged), without those of this
/// machine or link-local ones unless the name says it is local (`localhost`): a name that rebinds to 127.0.0.1
/// must not reach the user's own services ([`toolwright_core::policy::is_local_address`]).
fn resolve(name: &str, port: u16) -> Vec<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    (name, port)
        .to_socket_addrs()
        .map(|addrs| granted_addresses(name, addrs.map(|a| a.ip())))
        .unwrap_or_else(|e| {
            tracing::warn!("the granted host {name} does not resolve: {e}");
            Vec::new()
        })
}

/// Of the addresses `found` for the granted name `name`, those it reaches (see [`resolve`]).
fn granted_addresses(name: &str, found: impl Iterator<Item = std::net::IpAddr>) -> Vec<std::net::IpAddr> {
    let local_ok = toolwright_core::policy::names_this_machine(name);
    found
        .filter(|ip| local_ok || !toolwright_core::policy::is_local_address(*ip))
        .collect()
}

/// Whether `addr`'s IP (or the IPv4 address inside an IPv4-mapped one) is among `ips`.
fn same_ip(ips: &[std::net::IpAddr], addr: &std::net::SocketAddr) -> bool {
    ips.iter()
        .any(|ip| *ip == addr.ip() || Some(*ip) == ipv4_of(addr.ip()))
}

/// The IPv4 address behind an IPv4-mapped IPv6 address.
fn ipv4_of(ip: std::net::IpAddr) -> Option<std::net::IpAddr> {
    match ip {
        std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map(std::net::IpAddr::V4),
        std::net::IpAddr::V4(_) => None,
    }
}

impl WasmGrants {
    /// What a policy decision grants: its directories (mapped at the same paths; the caller leaves out those
    /// that do not exist), its network rules and limits, with `env` (the granted variables with their values)
    /// and `programs` (see [`ProgramGrant::for_plugin`]) made by the caller from the host's environment.
    pub fn from_effective(
        effective: &toolwright_core::policy::Effective,
        cwd: &Path,
        env: Vec<(String, String)>,
        programs: ProgramGrant,
    ) -> Self {
        let mut grants = WasmGrants::none(cwd);
        grants.preopens = effective
            .dirs
            .iter()
            .map(|d| Preopen {
                host: d.path.clone(),
                guest: d.path.to_string_lossy().into_owned(),
                write: d.write,
            })
            .collect();
        grants.programs = programs;
        let rules = |patterns: &[toolwright_core::policy::NetPattern]| {
            Arc::new(patterns.iter().map(NetRule::from_pattern).collect::<Vec<_>>())
        };
        grants.network = rules(&effective.network);
        grants.network_deny = rules(&effective.network_deny);
        grants.env = Arc::new(env);
        grants.limit(effective.timeout_ms, effective.memory_mib);
        grants.fuel = effective.fuel;
        grants.reuse = effective.reuse;
        grants.calls = Calls::Own(effective.tools.clone());
        grants.rewrite = effective.rewrite.clone();
        grants
    }
}

impl WasmGrants {
    /// Tell the plugin the home directory `home` (for `~` in its paths: `ctx.resolve("~/notes")` in the SDKs) when
    /// one of its directories is the home, lies inside it or contains it: it could name the home from that
    /// directory's path anyway, and a model's `~/…` then means to it what it means to the native tools. Without
    /// such a grant it does not learn where the home is, and `~` stays a name like any other.
    pub fn know_home(&mut self, home: Option<&str>) {
        let Some(home) = home else { return };
        let home_path = Path::new(home);
        if self
            .preopens
            .iter()
            .any(|p| p.host.starts_with(home_path) || home_path.starts_with(&p.host))
        {
            self.home = Some(toolwright_sdk::paths::normalize(home));
        }
    }

    /// Apply a policy's limits: a wall-clock limit per call (milliseconds) and a memory limit (MiB, at most
    /// [`MAX_MEMORY`]); a limit the policy does not set is left as it is.
    pub fn limit(&mut self, timeout_ms: Option<u64>, memory_mib: Option<u64>) {
        if let Some(ms) = timeout_ms {
            self.timeout = Some(std::time::Duration::from_millis(ms));
        }
        if let Some(mib) = memory_mib {
            self.memory = usize::try_from(mib.saturating_mul(1 << 20))
                .unwrap_or(MAX_MEMORY)
                .min(MAX_MEMORY);
        }
    }
}

/// Wall-clock limit per call of a third-party plugin when its policy sets none.
pub const DEFAULT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// How long a plugin may take to describe itself at load (its `metadata` and `list-tools`) when its policy sets
/// no `timeout-ms`: a plugin that loops there is skipped after this, so it cannot hold a start hostage.
pub const LOAD_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

impl WasmGrants {
    /// Nothing at all: a third-party plugin's start.
    pub fn none(cwd: &Path) -> Self {
        WasmGrants {
            cwd: toolwright_sdk::paths::normalize(&cwd.to_string_lossy()),
            home: None,
            temp_dir: None,
            preopens: Vec::new(),
            programs: ProgramGrant::None,
            env: Arc::default(),
            mutations: Arc::default(),
            timeout: Some(DEFAULT_TIMEOUT),
            memory: MAX_MEMORY,
            fuel: None,
            network: Arc::default(),
            network_deny: Arc::default(),
            result_cap: DEFAULT_RESULT_CAP,
            reuse: None,
            work: toolwright_core::pipeline::Work::Relaying,
            calls: Calls::Own(Vec::new()),
            rewrite: Vec::new(),
            refusals: None,
            client: None,
            sampling: false,
            network_asked: false,
            builtin: false,
        }
    }

    /// The built-ins' default, as natively: read anywhere, write in the workspace and the temp directory, start
    /// the shell, the host's environment.
    pub fn builtin(cwd: &Path, host: &toolwright_native::HostEnv) -> Self {
        let cwd_text = toolwright_sdk::paths::normalize(&cwd.to_string_lossy());
        let temp = host.temp_dir.clone();
        let temp_text = toolwright_sdk::paths::normalize(&temp.to_string_lossy());
        WasmGrants {
            preopens: vec![
                Preopen {
                    host: "/".into(),
                    guest: "/".into(),
                    write: false,
                },
                Preopen {
                    host: cwd.to_path_buf(),
                    guest: cwd_text.clone(),
                    write: true,
                },
                Preopen {
                    host: temp,
                    guest: temp_text.clone(),
                    write: true,
                },
            ],
            cwd: cwd_text,
            home: host.home.clone(),
            temp_dir: Some(temp_text),
            programs: toolwright_native::sandbox::BuiltinSandbox::default_for(cwd, host).programs(),
            env: Arc::new(host.vars.clone()),
            mutations: Arc::default(),
            // pi's bash has no default timeout; the built-ins run unbounded unless a policy says otherwise.
            timeout: None,
            memory: MAX_MEMORY,
            fuel: None,
            // The built-ins never open sockets (bash's programs are outside the sandbox, as natively).
            network: Arc::default(),
            network_deny: Arc::default(),
            result_cap: DEFAULT_RESULT_CAP,
            reuse: None,
            work: toolwright_core::pipeline::Work::Relaying,
            calls: Calls::Inherit,
            rewrite: Vec::new(),
            refusals: None,
            client: None,
            sampling: false,
            network_asked: false,
            builtin: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_granted_name_reaches_this_machine_only_when_it_says_so() {
        let ips =
            |list: &[&str]| -> Vec<std::net::IpAddr> { list.iter().map(|a| a.parse().unwrap()).collect() };
        let found = ips(&[
            "127.0.0.1",
            "169.254.169.254",
            "::1",
            "::ffff:127.0.0.1",
            "93.184.216.34",
            "10.0.0.5",
        ]);
        assert_eq!(
            granted_addresses("api.example.com", found.clone().into_iter()),
            ips(&["93.184.216.34", "10.0.0.5"]),
            "a name rebinding to this machine or the metadata service reaches neither"
        );
        assert_eq!(granted_addresses("localhost", found.clone().into_iter()), found);
        assert_eq!(
            granted_addresses("db.localhost.", found.clone().into_iter()),
            found
        );
    }

    fn with_dirs(dirs: &[&str]) -> WasmGrants {
        let mut grants = WasmGrants::none(Path::new("/w"));
        grants.preopens = dirs
            .iter()
            .map(|d| Preopen {
                host: d.into(),
                guest: (*d).to_owned(),
                write: false,
            })
            .collect();
        grants
    }

    #[test]
    fn a_plugin_learns_the_home_only_through_a_directory_at_inside_or_above_it() {
        for (dirs, known) in [
            (&["/home/me"][..], true),
            (&["/home/me/notes"][..], true),
            (&["/"][..], true),
            (&["/w", "/home/me2"][..], false),
            (&["/home/m"][..], false),
            (&[][..], false),
        ] {
            let mut grants = with_dirs(dirs);
            grants.know_home(Some("/home/me"));
            assert_eq!(grants.home.is_some(), known, "{dirs:?}");
        }
        let mut grants = with_dirs(&["/home/me"]);
        grants.know_home(None);
        assert_eq!(grants.home, None);
    }
}

//! WebAssembly plugins: components built against `wit/plugin.wit`, compiled once and cached on disk, run in a
//! fresh instance per call under the plugin's grants.
//!
//! Layering as in wasmtime-wasi: this file holds the domain logic (loading, validating, turning tools into
//! [`ToolDefinition`]s); `bindings` holds the generated code, private to this module; `state` and `process`
//! are the thin host implementations of the imports; `convert` maps between generated and domain types.

mod bindings;
mod bounded_io;
mod budget;
mod cache;
mod convert;
mod engine;
mod gate;
mod handler;
mod process;
mod state;
mod tool;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use toolwright_sdk::{PluginMetadata, ToolSpec};
use wasmtime::component::{HasSelf, InstancePre, Linker};
use wasmtime::{Store, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::p2::pipe::MemoryOutputPipe;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder};

pub use budget::{DEFAULT_HOST_MEMORY, DEFAULT_RESULT_CAP, MemoryBudget};
pub use cache::{ComponentCache, Origin, default_dir as default_cache_dir};
pub use engine::{MAX_INSTANCES, MAX_MEMORY};
pub use gate::LOAD_TIMEOUT;
pub use handler::hooks as handler_hooks;
pub use state::CallEnv;

use crate::definition::ToolDefinition;
use crate::native::{FileMutationQueue, ProgramGrant};
use crate::tool::UpdateSink;
use state::PluginState;

/// Bytes of stdout or stderr a plugin may print per call; the rest is dropped (it goes to the log only).
const OUTPUT_CAPTURE: usize = 64 * 1024;

/// Why a plugin could not be loaded: which file, what was wrong.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The file could not be read.
    #[error("{path}: cannot read the plugin: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a valid component, or compiled code that cannot run here.
    #[error("{path}: not a valid WebAssembly component: {message}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What the compiler said.
        message: String,
    },
    /// It imports something the host does not offer, or exports neither interface.
    #[error("{path}: incompatible plugin: {message}")]
    Incompatible {
        /// The file.
        path: PathBuf,
        /// What does not fit.
        message: String,
    },
    /// Its metadata or tool declarations are invalid, or it failed while describing itself.
    #[error("{path}: invalid plugin metadata: {message}")]
    Metadata {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// Another plugin already has this name.
    #[error("{path}: a plugin named `{name}` is already loaded from {other}")]
    NameClash {
        /// The file.
        path: PathBuf,
        /// The name.
        name: String,
        /// Where the first one came from.
        other: PathBuf,
    },
    /// A plugin of the project's `.toolwright/plugins` claims the name of a plugin from a trusted location: the
    /// trusted one is loaded (with the grants for the name), this one is skipped, whatever the load order.
    #[error(
        "{path}: the project's plugin claims the name `{name}` of the plugin {other} from {location}; that one is \
         loaded and keeps the grants for `{name}`, this one is skipped"
    )]
    NameTaken {
        /// The project's file.
        path: PathBuf,
        /// The name both claim.
        name: String,
        /// The trusted plugin's file.
        other: PathBuf,
        /// Where the trusted one was found (`the user's plugin directory`).
        location: String,
    },
    /// Another plugin already provides a tool of this name; the first in load order keeps it.
    #[error("{path}: the tool `{tool}` is already provided by {other}; this one is skipped")]
    ToolClash {
        /// The file.
        path: PathBuf,
        /// The tool.
        tool: String,
        /// Who has it.
        other: PathBuf,
    },
    /// The file was replaced after it was loaded, so it cannot be loaded again as the same plugin.
    #[error("{path}: the file changed after it was loaded; it is loaded again at the next start")]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// The engine could not be set up.
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
}

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
    /// [`PluginHost::metered`].
    pub fuel: Option<u64>,
    /// Where it may connect (none: no network at all).
    pub network: Arc<Vec<NetRule>>,
    /// Where it may never connect: checked by address, so a denied host cannot be reached through another name.
    pub network_deny: Arc<Vec<NetRule>>,
    /// The bytes a call may carry into the host: its result, partial updates and nested calls' results.
    pub result_cap: usize,
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
    pub fn from_pattern(pattern: &crate::policy::NetPattern) -> NetRule {
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
async fn network_allows(
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

/// The addresses of `name` (none when it does not resolve; logged).
fn resolve(name: &str, port: u16) -> Vec<std::net::IpAddr> {
    use std::net::ToSocketAddrs;
    (name, port)
        .to_socket_addrs()
        .map(|addrs| addrs.map(|a| a.ip()).collect())
        .unwrap_or_else(|e| {
            tracing::warn!("the granted host {name} does not resolve: {e}");
            Vec::new()
        })
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
    /// What a policy decision grants: its directories (mapped at the same paths), programs, variables (from the
    /// host's environment) and limits. Directories that do not exist are left out.
    pub fn from_effective(effective: &crate::policy::Effective, cwd: &Path) -> Self {
        let mut grants = WasmGrants::none(cwd);
        grants.preopens = effective
            .dirs
            .iter()
            .filter(|(dir, _)| Path::new(dir).is_dir())
            .map(|(dir, write)| Preopen {
                host: PathBuf::from(dir),
                guest: dir.clone(),
                write: *write,
            })
            .collect();
        let (write, read): (Vec<&Preopen>, Vec<&Preopen>) = grants.preopens.iter().partition(|p| p.write);
        let hosts = |list: Vec<&Preopen>| list.into_iter().map(|p| p.host.clone()).collect();
        grants.programs = ProgramGrant::for_plugin(effective, hosts(read), hosts(write));
        let rules = |patterns: &[String]| {
            Arc::new(
                patterns
                    .iter()
                    .filter_map(|p| crate::policy::NetPattern::parse(p))
                    .map(|p| NetRule::from_pattern(&p))
                    .collect::<Vec<_>>(),
            )
        };
        grants.network = rules(&effective.network);
        grants.network_deny = rules(&effective.network_deny);
        let all = effective.env.iter().any(|v| v == "*");
        grants.env = Arc::new(
            std::env::vars()
                .filter(|(k, _)| all || effective.env.contains(k))
                .collect(),
        );
        grants.limit(effective.timeout_ms, effective.memory_mib);
        grants.fuel = effective.fuel;
        grants
    }
}

impl WasmGrants {
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
        }
    }

    /// The built-ins' default, as natively: read anywhere, write in the workspace and the temp directory, start
    /// the shell, the host's environment.
    pub fn builtin(cwd: &Path) -> Self {
        let cwd_text = toolwright_sdk::paths::normalize(&cwd.to_string_lossy());
        let temp = std::env::temp_dir();
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
            home: std::env::var("HOME").ok(),
            temp_dir: Some(temp_text),
            programs: ProgramGrant::Any,
            env: Arc::new(std::env::vars().collect()),
            mutations: Arc::default(),
            // pi's bash has no default timeout; the built-ins run unbounded unless a policy says otherwise.
            timeout: None,
            memory: MAX_MEMORY,
            fuel: None,
            // The built-ins never open sockets (bash's programs are outside the sandbox, as natively).
            network: Arc::default(),
            network_deny: Arc::default(),
            result_cap: DEFAULT_RESULT_CAP,
        }
    }
}

/// The plugin runtime: an engine, a linker and a cache (a second, metered set made on first need for plugins
/// with a fuel budget), and a bound on live instances shared by both.
pub struct PluginHost {
    plain: Runtime,
    metered: std::sync::OnceLock<Result<Runtime, String>>,
    cache_dir: Option<PathBuf>,
    slots: Arc<tokio::sync::Semaphore>,
    load_timeout: std::time::Duration,
    budget: Arc<MemoryBudget>,
}

/// One engine with its linker and cache.
struct Runtime {
    engine: engine::PluginEngine,
    linker: Linker<PluginState>,
    cache: ComponentCache,
    metered: bool,
}

impl Runtime {
    fn new(cache_dir: Option<PathBuf>, metered: bool) -> Result<Self, PluginError> {
        let engine = engine::PluginEngine::new(metered).map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let mut linker = Linker::new(engine.engine());
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| bounded_io::add_to_linker(&mut linker))
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        bindings::FullPlugin::add_to_linker::<_, HasSelf<_>>(&mut linker, |s| s)
            .map_err(|e| PluginError::Engine(format!("{e:#}")))?;
        let cache = ComponentCache::new(cache_dir, engine.fingerprint());
        Ok(Runtime {
            engine,
            linker,
            cache,
            metered,
        })
    }
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("cache", &self.plain.cache)
            .finish_non_exhaustive()
    }
}

/// A loaded plugin: its metadata, its tools, and the pre-linked component every call instantiates.
pub struct Plugin {
    /// The file it came from.
    pub path: PathBuf,
    /// What it says about itself.
    pub metadata: PluginMetadata,
    /// Its tools.
    pub tools: Vec<ToolSpec>,
    /// Whether it exports the handler interface.
    pub is_handler: bool,
    /// Whether its compiled code came from the cache.
    pub origin: Origin,
    /// How long loading took (compiling or reading the cache, and describing itself).
    pub load_time: std::time::Duration,
    pub(crate) inner: Arc<PluginInner>,
}

impl std::fmt::Debug for Plugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plugin")
            .field("path", &self.path)
            .field("name", &self.metadata.name)
            .finish_non_exhaustive()
    }
}

pub(crate) struct PluginInner {
    name: String,
    pre: InstancePre<PluginState>,
    tool: Option<bindings::tool::GuestIndices>,
    handler: Option<bindings::handler::GuestIndices>,
    slots: Arc<tokio::sync::Semaphore>,
    budget: Arc<MemoryBudget>,
    /// Compiled with fuel: every store gets the grant's budget (or unlimited fuel).
    metered: bool,
    /// The SHA-256 of the component it was loaded from.
    digest: cache::Digest,
}

impl PluginHost {
    /// A runtime caching compiled components in `cache_dir` (none: compile every time).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, PluginError> {
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_INSTANCES as usize));
        Ok(PluginHost {
            plain: Runtime::new(cache_dir.clone(), false)?,
            metered: std::sync::OnceLock::new(),
            cache_dir,
            slots,
            load_timeout: LOAD_TIMEOUT,
            budget: MemoryBudget::new(DEFAULT_HOST_MEMORY),
        })
    }

    /// The host-wide budget for the linear memory of every live instance (its cap is set from the policy's
    /// `host-memory-mib`).
    pub fn memory_budget(&self) -> &Arc<MemoryBudget> {
        &self.budget
    }

    /// How long a plugin may take to describe itself at load ([`LOAD_TIMEOUT`] unless set): one that takes
    /// longer is not loaded (a [`PluginError::Metadata`] naming the limit), so it cannot stall a start.
    pub fn with_load_timeout(mut self, timeout: std::time::Duration) -> Self {
        self.load_timeout = timeout;
        self
    }

    /// The process's plugin host for `cache_dir`, made on first need and shared while anything holds it: one
    /// engine, one epoch thread and one bound on live instances for every toolset and codemode of the process
    /// (DESIGN §5), so a reloaded toolset does not start a second runtime beside the first.
    pub fn shared(cache_dir: Option<PathBuf>) -> Result<Arc<PluginHost>, PluginError> {
        static HOSTS: std::sync::Mutex<Vec<(Option<PathBuf>, std::sync::Weak<PluginHost>)>> =
            std::sync::Mutex::new(Vec::new());
        let mut hosts = HOSTS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        hosts.retain(|(_, host)| host.strong_count() > 0);
        if let Some(host) = hosts
            .iter()
            .find(|(dir, _)| *dir == cache_dir)
            .and_then(|(_, host)| host.upgrade())
        {
            return Ok(host);
        }
        let host = Arc::new(PluginHost::new(cache_dir.clone())?);
        hosts.push((cache_dir, Arc::downgrade(&host)));
        Ok(host)
    }

    /// Load the plugin in `bytes` (`path` names it in errors and listings).
    pub fn load_bytes(&self, path: &Path, bytes: &[u8]) -> Result<Plugin, PluginError> {
        self.load_on(&self.plain, path, bytes, &cache::digest(bytes))
    }

    /// Load `plugin` again, compiled with fuel metering, for a grant with a fuel budget. Metered code runs
    /// slower, so only plugins with a budget pay for it; the metered engine is made on first need.
    pub fn metered(&self, plugin: &Plugin) -> Result<Plugin, PluginError> {
        if plugin.inner.metered {
            return Err(PluginError::Engine(format!(
                "{} is already metered",
                plugin.path.display()
            )));
        }
        let runtime = self
            .metered
            .get_or_init(|| Runtime::new(self.cache_dir.clone(), true).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| PluginError::Engine(e.clone()))?;
        let bytes = std::fs::read(&plugin.path).map_err(|source| PluginError::Read {
            path: plugin.path.clone(),
            source,
        })?;
        // The grant was decided for the component that was loaded: a file replaced since then is not it.
        let digest = cache::digest(&bytes);
        if digest != plugin.inner.digest {
            return Err(PluginError::Changed {
                path: plugin.path.clone(),
            });
        }
        self.load_on(runtime, &plugin.path, &bytes, &digest)
    }

    fn load_on(
        &self,
        runtime: &Runtime,
        path: &Path,
        bytes: &[u8],
        digest: &cache::Digest,
    ) -> Result<Plugin, PluginError> {
        let started = Instant::now();
        let (component, origin) = runtime
            .cache
            .load(runtime.engine.engine(), bytes, digest)
            .map_err(|e| PluginError::Invalid {
                path: path.to_owned(),
                message: format!("{e:#}"),
            })?;
        let incompatible = |message: String| PluginError::Incompatible {
            path: path.to_owned(),
            message,
        };
        let pre = runtime
            .linker
            .instantiate_pre(&component)
            .map_err(|e| incompatible(format!("{e:#}")))?;
        let tool = bindings::tool::GuestIndices::new(&pre).ok();
        let handler = bindings::handler::GuestIndices::new(&pre).ok();
        if tool.is_none() && handler.is_none() {
            return Err(incompatible(
                "it exports neither `toolwright:plugin/tool@0.1.0` nor `toolwright:plugin/handler@0.1.0`"
                    .into(),
            ));
        }
        let metadata_error = |message: String| PluginError::Metadata {
            path: path.to_owned(),
            message,
        };
        let is_handler = handler.is_some();
        let inner = PluginInner {
            name: path.display().to_string(),
            pre,
            tool,
            handler,
            slots: self.slots.clone(),
            budget: self.budget.clone(),
            metered: runtime.metered,
            digest: *digest,
        };
        let (metadata, tools) = inner.describe(self.load_timeout).map_err(metadata_error)?;
        validate(&metadata, &tools).map_err(metadata_error)?;
        let inner = Arc::new(PluginInner {
            name: metadata.name.clone(),
            ..inner
        });
        Ok(Plugin {
            path: path.to_owned(),
            metadata,
            tools,
            is_handler,
            origin,
            load_time: started.elapsed(),
            inner,
        })
    }

    /// Load one `.wasm` file.
    pub fn load_file(&self, path: &Path) -> Result<Plugin, PluginError> {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Read {
            path: path.to_owned(),
            source,
        })?;
        self.load_bytes(path, &bytes)
    }

    /// Load several plugins at once (compiling in parallel), keeping their order. Each gets its own result.
    pub fn load_all(&self, sources: &[(PathBuf, Option<&'static [u8]>)]) -> Vec<Result<Plugin, PluginError>> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = sources
                .iter()
                .map(|(path, bytes)| {
                    scope.spawn(move || match bytes {
                        Some(bytes) => self.load_bytes(path, bytes),
                        None => self.load_file(path),
                    })
                })
                .collect();
            handles
                .into_iter()
                .zip(sources)
                .map(|(h, (path, _))| {
                    h.join().unwrap_or_else(|_| {
                        Err(PluginError::Invalid {
                            path: path.clone(),
                            message: "loading panicked".into(),
                        })
                    })
                })
                .collect()
        })
    }

    /// The `.wasm` files of the plugin directories, in load order (directories in order, files by name). A
    /// directory that does not exist is skipped.
    pub fn discover(dirs: &[PathBuf]) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for dir in dirs {
            let Ok(entries) = std::fs::read_dir(dir) else {
                continue;
            };
            let mut found: Vec<PathBuf> = entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "wasm") && p.is_file())
                .collect();
            found.sort();
            files.extend(found);
        }
        files
    }
}

fn validate(metadata: &PluginMetadata, tools: &[ToolSpec]) -> Result<(), String> {
    if metadata.name.trim().is_empty() {
        return Err("the plugin has no name".into());
    }
    let mut seen = std::collections::HashSet::new();
    for tool in tools {
        let valid = !tool.name.is_empty()
            && tool
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            return Err(format!(
                "tool name `{}` must be non-empty ASCII letters, digits, `_` or `-`",
                tool.name
            ));
        }
        if !seen.insert(tool.name.as_str()) {
            return Err(format!("the plugin declares the tool `{}` twice", tool.name));
        }
        // A schema the host cannot enforce would accept values open or loop; the plugin is refused at load.
        if let Err(e) = crate::schema::Validator::new(tool.parameters.clone()) {
            return Err(format!(
                "the parameter schema of tool `{}` is refused: {e}",
                tool.name
            ));
        }
    }
    Ok(())
}

impl PluginInner {
    /// A fresh store for one call under `grants`.
    fn store(
        &self,
        grants: &WasmGrants,
        cancel: CancellationToken,
        updates: UpdateSink,
        session: Option<crate::definition::ToolContext>,
    ) -> wasmtime::Result<Store<PluginState>> {
        let mut wasi = WasiCtxBuilder::new();
        // Calls already run on a blocking thread: file operations run right there instead of taking a round trip
        // through tokio's blocking pool each.
        wasi.allow_blocking_current_thread(true);
        for p in &grants.preopens {
            let perms = if p.write {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            wasi.preopened_dir(&p.host, &p.guest, perms)?;
        }
        for (k, v) in grants.env.iter() {
            wasi.env(k, v);
        }
        if !grants.network.is_empty() {
            let (allow, deny) = (grants.network.clone(), grants.network_deny.clone());
            wasi.allow_tcp(true)
                .allow_udp(true)
                .allow_ip_name_lookup(true)
                .socket_addr_check(move |addr, used| {
                    use wasmtime_wasi::sockets::SocketAddrUse;
                    match used {
                        // Connections and datagrams out, to granted addresses only.
                        SocketAddrUse::TcpConnect | SocketAddrUse::UdpSend => {
                            Box::pin(network_allows(allow.clone(), deny.clone(), addr))
                        }
                        // The implicit bind of an outgoing socket (wildcard address, any port); never a listener.
                        SocketAddrUse::TcpBind | SocketAddrUse::UdpBind => {
                            Box::pin(std::future::ready(addr.ip().is_unspecified() && addr.port() == 0))
                        }
                        _ => Box::pin(std::future::ready(false)),
                    }
                });
        }
        let stdout = MemoryOutputPipe::new(OUTPUT_CAPTURE);
        let stderr = MemoryOutputPipe::new(OUTPUT_CAPTURE);
        wasi.stdout(stdout.clone()).stderr(stderr.clone());
        let call = CallEnv {
            plugin: self.name.clone(),
            cwd: grants.cwd.clone(),
            home: grants.home.clone(),
            temp_dir: grants.temp_dir.clone(),
            cancel: cancel.clone(),
            updates,
            programs: grants.programs.clone(),
            env: grants.env.clone(),
            deadline: grants.timeout.map(|t| (Instant::now() + t, t)),
            session,
        };
        let limits = budget::Limiter::new(
            StoreLimitsBuilder::new()
                .memory_size(grants.memory.min(MAX_MEMORY))
                .trap_on_grow_failure(true)
                .build(),
            self.budget.clone(),
        );
        let state = PluginState {
            wasi: wasi.build(),
            table: Default::default(),
            limits,
            carried: budget::Carried::new(grants.result_cap),
            call,
            stdout,
            stderr,
            processes: crate::native::CallScope::new(),
        };
        let mut store = Store::new(self.pre.engine(), state);
        store.limiter(|s| &mut s.limits);
        match (self.metered, grants.fuel) {
            (true, fuel) => store.set_fuel(fuel.unwrap_or(u64::MAX))?,
            (false, Some(_)) => {
                return Err(wasmtime::format_err!(
                    "a fuel budget needs the plugin loaded with metering (PluginHost::metered)"
                ));
            }
            (false, None) => {}
        }
        // Checked at every epoch tick: a cancelled call stops even inside a busy loop.
        store.set_epoch_deadline(1);
        // A cancelled call gets one more tick to wind down on its own (it sees `is-cancelled`); then it is stopped.
        let mut cancel_seen = false;
        store.epoch_deadline_callback(move |ctx| {
            let state = ctx.data();
            if cancel.is_cancelled() {
                if cancel_seen {
                    return Err(state.call.interrupted());
                }
                cancel_seen = true;
            }
            if let Some((deadline, limit)) = state.call.deadline
                && Instant::now() >= deadline
            {
                return Err(wasmtime::Error::new(state::Stopped::Deadline(limit)));
            }
            Ok(UpdateDeadline::Continue(1))
        });
        Ok(store)
    }

    /// Instantiate once, with no grants and within `timeout`, to read the metadata and the tool list.
    fn describe(&self, timeout: std::time::Duration) -> Result<(PluginMetadata, Vec<ToolSpec>), String> {
        let mut grants = WasmGrants::none(Path::new("/"));
        grants.timeout = Some(timeout);
        let described = self.enter(&grants, gate::Entry::bare("metadata"), |store, instance| {
            let named = |export: &str, e: wasmtime::Error| e.context(format!("`{export}` failed"));
            match (&self.tool, &self.handler) {
                (Some(tool), _) => {
                    let guest = tool.load(&mut *store, instance)?;
                    let metadata = guest
                        .call_metadata(&mut *store)
                        .map_err(|e| named("metadata", e))?;
                    let tools = guest
                        .call_list_tools(&mut *store)
                        .map_err(|e| named("list-tools", e))?;
                    Ok((metadata, Some(tools)))
                }
                (None, Some(handler)) => {
                    let guest = handler.load(&mut *store, instance)?;
                    let metadata = guest
                        .call_metadata(&mut *store)
                        .map_err(|e| named("metadata", e))?;
                    Ok((metadata, None))
                }
                (None, None) => Err(wasmtime::format_err!("no interface to describe")),
            }
        });
        let (metadata, tools) = described.map_err(|e| e.message().to_owned())?;
        let tools = tools
            .unwrap_or_default()
            .into_iter()
            .map(convert::spec_from_wit)
            .collect::<Result<Vec<_>, _>>()?;
        Ok((convert::metadata_from_wit(metadata), tools))
    }
}

impl Plugin {
    /// The SHA-256 of the component it was loaded from: the digest a grant's `sha256` pin is compared with.
    pub fn sha256(&self) -> [u8; 32] {
        self.inner.digest
    }

    /// Its tools as definitions, calling into fresh instances under `grants`.
    pub fn tool_definitions(&self, grants: &WasmGrants) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .map(|spec| tool::definition(&self.inner, &self.path, spec, grants))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, parameters: serde_json::Value) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            parameters,
            ..Default::default()
        }
    }

    #[test]
    fn a_tool_schema_the_host_cannot_enforce_refuses_the_plugin_naming_the_tool() {
        let metadata = PluginMetadata {
            name: "hostile".into(),
            version: "0.1.0".into(),
            description: String::new(),
            capabilities: Vec::new(),
        };
        let fine = spec("fine", serde_json::json!({"type": "object"}));
        assert_eq!(validate(&metadata, std::slice::from_ref(&fine)), Ok(()));
        let looping = spec("looping", serde_json::json!({"$ref": "#"}));
        assert_eq!(
            validate(&metadata, &[fine.clone(), looping]),
            Err("the parameter schema of tool `looping` is refused: the schema at # refers to itself without \
                 descending into the value (# -> #)"
                .into())
        );
        let pattern = spec(
            "pattern",
            serde_json::json!({"properties": {"a": {"pattern": "(?<!"}}}),
        );
        let err = validate(&metadata, &[pattern]).unwrap_err();
        assert!(
            err.starts_with(
                "the parameter schema of tool `pattern` is refused: the pattern \"(?<!\" at #/properties/a/pattern \
                 does not compile: "
            ),
            "{err}"
        );
    }

    fn addr(text: &str) -> std::net::SocketAddr {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[tokio::test]
    async fn network_rules_match_addresses_ports_and_names_resolved_again() {
        let pattern = |t: &str| crate::policy::NetPattern::parse(t).unwrap_or_else(|| panic!("{t}"));
        let ip = NetRule::from_pattern(&pattern("127.0.0.1:8080"));
        assert!(ip.allows(&addr("127.0.0.1:8080")));
        assert!(
            ip.allows(&addr("[::ffff:127.0.0.1]:8080")),
            "an IPv4-mapped address is the same host"
        );
        assert!(!ip.allows(&addr("127.0.0.1:8081")));
        assert!(!ip.allows(&addr("127.0.0.2:8080")));
        let any = NetRule::from_pattern(&pattern("*:443"));
        assert!(any.allows(&addr("10.1.2.3:443")) && !any.allows(&addr("10.1.2.3:80")));
        // A name whose addresses were unknown at load (or changed since) is resolved when it is checked.
        let stale = NetRule {
            ips: Some(Vec::new()),
            name: Some("localhost".into()),
            port: Some(8080),
        };
        assert!(!stale.allows(&addr("127.0.0.1:8080")));
        let (rules, none) = (Arc::new(vec![stale]), Arc::new(Vec::new()));
        assert!(network_allows(rules.clone(), none.clone(), addr("127.0.0.1:8080")).await);
        assert!(!network_allows(rules.clone(), none.clone(), addr("127.0.0.1:9090")).await);
        assert!(!network_allows(rules.clone(), none, addr("10.9.9.9:8080")).await);
        // Deny wins by address: a name that resolves to a denied address is refused.
        let deny = Arc::new(vec![NetRule::from_pattern(&pattern("127.0.0.1:*"))]);
        assert!(!network_allows(rules, deny, addr("127.0.0.1:8080")).await);
    }
}

//! # toolwright-wasm
//!
//! WebAssembly plugins: components built against `wit/plugin.wit`, compiled once and cached on disk, run in a
//! fresh instance per call under the plugin's grants. The only crate of the host that names wasmtime.
//!
//! ## Map
//!
//! Layering as in wasmtime-wasi: this file holds the domain logic (loading, validating, turning tools into
//! [`ToolDefinition`](toolwright_core::definition::ToolDefinition)s); `bindings` holds the generated code, private to this crate; `state` is a call's
//! store data, and `host_import` and `process` are the thin host implementations of the imports; `convert` maps between generated and domain types;
//! `bounded_io` and `environment` shadow wasmtime-wasi's `wasi:io` (bounded by the call's deadline) and
//! `wasi:cli/environment` (the call's granted variables, copied only when asked for).
//!
//! - `gate`: the one door into every export of a component (slot, an instance leased, the export, the instance
//!   given back, every failure named).
//! - `instances`: the instance lifecycle, under one owner, `Instances`, a field of [`PluginHost`]: the bound on
//!   live instances, `instances::pool` (a plugin's idle instances: opt-in reuse, `instance = "reuse"`, and the
//!   spares made ahead of a call), `instances::recycler` (finished stores dropped and spares made off the call's
//!   path, on the host's one background thread) and `instances::resident` (the pages a plugin's calls write kept
//!   resident across wasmtime's reset of its memory slot).
//! - `plugin`: a loaded plugin as its calls reach it (`PluginInner`): its linked component, the stores its
//!   calls run in, its exports; `runtime`: an engine with its linker and cache, and a component linked on it.
//! - `engine`, `cache` ([`ComponentCache`], bounded: [`cache_entries`], [`prune_cache`], [`clear_cache`]; and
//!   each component's description, kept apart from its compiled code), `budget` ([`MemoryBudget`]): the
//!   runtime, compiled components on disk, and the host-wide memory budget, which gets memory back from idle
//!   instances through the one callback `Instances` gives it.
//! - `queue`: compiles done ahead of need take turns, smallest first, one at a time per cache
//!   ([`PluginHost::compile_turn`], [`CompileTurn`]); a plugin loaded from its description links at its first
//!   call or ahead of it ([`Link`]).
//! - `tool`, `handler`: a plugin's tools as `ToolDefinition`s, and a handler plugin's `tool_call` /
//!   `tool_result` as hooks ([`handler_hooks`]), over its exports of either shape (`handler::exports`: the hooks
//!   returning `result`, or the bare ones of plugins built before).
//! - [`offers`]: a plugin's MCP resources and prompts (the optional `offers` export, [`Plugin::offers`]), checked,
//!   bounded and in MCP's shapes, each export run through the gate under the plugin's grants.
//! - `grants`: a plugin's [`WasmGrants`], typed from its decided policy.
//! - `v1`: plugins built against `toolwright:plugin@0.1.0` (frozen in `wit-0.1`): its imports linked beside the
//!   current ones and served by them, its `tool` and `offers` exports called in the current types
//!   (`v1::ToolGuest`, `v1::OffersGuest`; its `handler` in `handler::exports`), what crosses converted.
//! - [`codemode`] (feature `codemode`): pi's `codemode` tool, its engine a component.
//! - Trust (which plugin a grant is for, `toolwright.lock`, project trust) is the facade's (`toolwright::trust`):
//!   this crate runs what it let through.
//! - [`components`]: the reference plugins as components, built from their crates' sources by `build.rs`.
//!
//! ## State and threads
//!
//! State that lives longer than a call has an owner: a [`PluginHost`] owns its engines, its cache and its
//! instances (with their counts and the recycler's thread); a plugin owns its pool and its opened directories.
//! Nothing in this crate is process-wide and mutable (a unit test, `tests::no_process_wide_mutable_state`,
//! reads the sources): hosts are shared through a [`Hosts`] the embedder owns (the facade's toolset options
//! hold one), and each host probes the kernel's page map itself. Threads: each engine's epoch thread (it ends with the engine), and each
//! host's recycler (it ends with the host).
//!
//! ## Features
//!
//! - `codemode` (default): build and embed the codemode component.

mod authority;
mod bindings;
/// The reference plugins as wasm components, built by `build.rs` from their crates' sources (`None` when built
/// with `TOOLWRIGHT_SKIP_WASM_BUILD`).
pub mod components {
    include!(concat!(env!("OUT_DIR"), "/components.rs"));
}
mod bounded_io;
mod budget;
mod cache;
#[cfg(feature = "codemode")]
pub mod codemode;
mod convert;
mod engine;
mod environment;
mod error;
mod gate;
mod grants;
mod handler;
mod host_import;
mod instances;
mod name_lookup;
pub mod offers;
mod plugin;
mod process;
mod queue;
mod runtime;
mod state;
mod tool;
mod v1;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use toolwright_sdk::{PluginMetadata, ToolSpec};

pub use budget::{DEFAULT_HOST_MEMORY, DEFAULT_RESULT_CAP, MemoryBudget};
pub use cache::{
    CacheEntry, Compilation, ComponentCache, DEFAULT_MAX_BYTES as DEFAULT_CACHE_MAX_BYTES, Digest, FileStamp,
    clear as clear_cache, default_dir as default_cache_dir, entries as cache_entries,
    max_bytes as cache_max_bytes, prune as prune_cache,
};
pub use engine::{MAX_INSTANCES, MAX_MEMORY};
pub use error::PluginError;
pub use grants::{Calls, DEFAULT_TIMEOUT, LOAD_TIMEOUT, NetRule, Preopen, WasmGrants};
pub use handler::hooks as handler_hooks;
pub use queue::{CompileTurn, LOCK_FILE as COMPILE_LOCK_FILE};
pub use state::CallEnv;

use instances::Instances;
use plugin::PluginInner;
use runtime::{Linked, Runtime, link, read_file};

/// How many instances an engine has room for: [`MAX_INSTANCES`] running, and those the host's `Instances` keeps
/// idle or waiting to be dropped.
const ENGINE_INSTANCES: u32 = MAX_INSTANCES + instances::BEYOND_RUNNING;

/// The imports a plugin's component is linked with besides WASI: `wasi:io` bounded by the call's deadline, the
/// call's environment and name lookups limited to the granted names (shadowing wasmtime-wasi's), and Toolwright's
/// own interfaces.
fn imports(linker: &mut wasmtime::component::Linker<state::PluginState>) -> wasmtime::Result<()> {
    use wasmtime::component::HasSelf;
    bounded_io::add_to_linker(linker)?;
    environment::add_to_linker(linker)?;
    name_lookup::add_to_linker(linker)?;
    bindings::types::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    bindings::host::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    bindings::process::add_to_linker::<_, HasSelf<_>>(linker, |s| s)?;
    v1::add_to_linker(linker)
}

/// The plugin runtime: an engine, a linker and a cache (a second, metered set made on first need for plugins
/// with a fuel budget), and the instances of its plugins (`instances`: the bound on live ones, the idle ones, the
/// recycler) shared by both.
pub struct PluginHost {
    plain: Arc<Runtime>,
    metered: std::sync::OnceLock<Result<Arc<Runtime>, String>>,
    cache_dir: Option<PathBuf>,
    instances: Arc<Instances>,
    load_timeout: std::time::Duration,
    budget: Arc<MemoryBudget>,
    /// Background compiles, one at a time, smallest first ([`PluginHost::compile_turn`]).
    compiles: queue::CompileQueue,
}

impl std::fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PluginHost")
            .field("cache", &self.plain.cache)
            .finish_non_exhaustive()
    }
}

/// A loaded plugin: its metadata, its tools, and the pre-linked component every call instantiates (a clone
/// shares the component).
#[derive(Clone)]
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
    pub compilation: Compilation,
    /// How long loading took (compiling or reading the cache, and describing itself; not a link deferred to
    /// the first call, see [`Plugin::prepare`]).
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

/// A component embedded in the program and its SHA-256, computed when it was built.
pub type Embedded = (&'static [u8], Digest);

/// The plugin hosts of whoever holds a clone (a toolset's options and those of its reloads, the codemode they
/// load), one per cache directory, each made on first need and kept while anything holds it: one engine, one
/// epoch thread and one bound on live instances for all of them (DESIGN §5), so a reloaded toolset does not
/// start a second runtime beside the first. Owned, not process-wide: two embedders' hosts stay apart.
#[derive(Clone, Default)]
pub struct Hosts(Arc<std::sync::Mutex<Vec<HostOf>>>);

/// A host and the cache directory it was made for.
type HostOf = (Option<PathBuf>, std::sync::Weak<PluginHost>);

impl std::fmt::Debug for Hosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hosts").finish_non_exhaustive()
    }
}

impl Hosts {
    /// The host for `cache_dir`: the one a clone made and something still holds, or a new one.
    pub fn get(&self, cache_dir: Option<PathBuf>) -> Result<Arc<PluginHost>, PluginError> {
        let mut hosts = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
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
}

impl PluginHost {
    /// A runtime caching compiled components in `cache_dir` (none: compile every time).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Self, PluginError> {
        Ok(PluginHost {
            plain: Arc::new(Runtime::new(cache_dir.clone(), false, ENGINE_INSTANCES, imports)?),
            metered: std::sync::OnceLock::new(),
            cache_dir,
            instances: Arc::new(Instances::new(MAX_INSTANCES)),
            load_timeout: LOAD_TIMEOUT,
            budget: MemoryBudget::new(DEFAULT_HOST_MEMORY),
            compiles: queue::CompileQueue::default(),
        })
    }

    /// Wait for the turn of a compile of a `size`-byte component done ahead of need (a plugin compiling in the
    /// background, a [`Link`] run): one at a time in this host, smallest first, and one at a time across the
    /// processes sharing its cache (whose lock file the turn holds). A compile a call needs now does not queue.
    pub fn compile_turn(&self, size: u64) -> CompileTurn<'_> {
        self.compiles.turn(size, self.cache_dir.as_deref())
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

    /// Load the plugin in `bytes` (`path` names it in errors and listings).
    pub fn load_bytes(&self, path: &Path, bytes: &[u8]) -> Result<Plugin, PluginError> {
        self.load_on(&self.plain, path, Bytes::Borrowed(bytes), &cache::digest(bytes))
    }

    /// Load a component embedded in the program, whose SHA-256 `digest` was computed when it was built (as
    /// [`components::BUILTIN_DIGESTS`] is): hashing a megabyte costs about a millisecond of every start. A
    /// debug build checks the digest.
    pub fn load_embedded(
        &self,
        path: &Path,
        bytes: &'static [u8],
        digest: &Digest,
    ) -> Result<Plugin, PluginError> {
        debug_assert_eq!(
            &cache::digest(bytes),
            digest,
            "{}: the embedded digest is not these bytes' SHA-256",
            path.display()
        );
        self.load_on(&self.plain, path, Bytes::Static(bytes), digest)
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
            .get_or_init(|| {
                Runtime::new(self.cache_dir.clone(), true, ENGINE_INSTANCES, imports)
                    .map(Arc::new)
                    .map_err(|e| e.to_string())
            })
            .as_ref()
            .map_err(|e| PluginError::Engine(e.clone()))?;
        // The grant was decided for the component that was loaded: compiled again from its file only if the
        // file still holds it.
        let digest = plugin.inner.digest;
        let read;
        let bytes = match plugin.inner.source.2 {
            Some(bytes) => Bytes::Static(bytes),
            None if runtime.cache.holds(&digest) => Bytes::InFile,
            None => {
                // Not compiled for this engine: compiled now, while the file still holds the component (a
                // file changed since is refused here, not at the first call).
                read = read_file(&plugin.path)?.0;
                if cache::digest(&read) != digest {
                    return Err(PluginError::Changed {
                        path: plugin.path.clone(),
                    });
                }
                Bytes::Borrowed(&read)
            }
        };
        self.load_on(runtime, &plugin.path, bytes, &digest)
    }

    /// Load the component whose SHA-256 is `digest`: from the cache, else compiled from `bytes`, else from
    /// the file at `path` if it still hashes to `digest`. A component whose description is cached is linked on
    /// its first call ([`Plugin::prepare`]), unless its bytes are only lent: a start maps no plugin it does not
    /// call, and compiles none whose compiled code is missing (a new engine, a pruned or cleared cache).
    fn load_on(
        &self,
        runtime: &Arc<Runtime>,
        path: &Path,
        bytes: Bytes<'_>,
        digest: &Digest,
    ) -> Result<Plugin, PluginError> {
        let started = Instant::now();
        let deferrable = !matches!(bytes, Bytes::Borrowed(_));
        let (lent, kept) = match bytes {
            Bytes::Borrowed(bytes) | Bytes::Read(bytes) => (Some(bytes), None),
            Bytes::Static(bytes) => (Some(bytes), Some(bytes)),
            Bytes::InFile => (None, None),
        };
        // What a component says about itself is a function of its bytes: its metadata and tool list are read
        // from the cache's description, so a start with every plugin described runs and compiles no wasm at all.
        let described = deferrable
            .then(|| Described::cached(&runtime.cache, digest))
            .flatten();
        let inner = |linked: std::sync::OnceLock<Result<Linked, PluginError>>, name: String| PluginInner {
            name,
            engine: runtime.engine.engine().clone(),
            linked,
            source: (runtime.clone(), path.to_owned(), kept),
            instances: self.instances.clone(),
            budget: self.budget.clone(),
            metered: runtime.metered,
            digest: *digest,
            preopened: Default::default(),
            pool: self.instances.pool(),
            turnover: Default::default(),
            image: Default::default(),
        };
        let (
            Described {
                metadata,
                tools,
                handler,
                ..
            },
            linked,
            compilation,
        ) = match described {
            Some(described) => {
                // Marked as used for the cache's eviction, when it holds the compiled code.
                let compilation = if runtime.cache.mark_used(digest) {
                    Compilation::Cached
                } else {
                    Compilation::Later
                };
                (described, std::sync::OnceLock::new(), compilation)
            }
            None => {
                let (linked, compilation) = link(runtime, path, lent, digest)?;
                let is_handler = linked.handler.is_some();
                let describing = inner(std::sync::OnceLock::from(Ok(linked)), path.display().to_string());
                let (metadata, tools) =
                    describe(&describing, self.load_timeout).map_err(|message| PluginError::Metadata {
                        path: path.to_owned(),
                        message,
                    })?;
                let described = Described {
                    host: env!("CARGO_PKG_VERSION").to_owned(),
                    metadata,
                    tools,
                    handler: is_handler,
                };
                runtime.cache.store_description(digest, &described);
                (described, describing.linked, compilation)
            }
        };
        validate(&metadata, &tools).map_err(|message| PluginError::Metadata {
            path: path.to_owned(),
            message,
        })?;
        Ok(Plugin {
            path: path.to_owned(),
            inner: Arc::new(inner(linked, metadata.name.clone())),
            metadata,
            tools,
            is_handler: handler,
            compilation,
            load_time: started.elapsed(),
        })
    }

    /// Load one `.wasm` file. A file loaded before is recognised by its [`FileStamp`] (device, inode, size,
    /// modification and change times), so a cached plugin is neither read nor hashed again (a 19 MB Python
    /// component's SHA-256 costs about 20 ms); any write to the file changes its stamp, and it is hashed anew.
    pub fn load_file(&self, path: &Path) -> Result<Plugin, PluginError> {
        let cache = &self.plain.cache;
        if let Some(digest) = self.remembered(path) {
            // Were the file to change between the stamp and a compile the cache cannot spare, `load_on` hashes
            // what it reads and refuses a mismatch.
            return self.load_on(&self.plain, path, Bytes::InFile, &digest);
        }
        let read_at = std::time::SystemTime::now();
        let (bytes, stamp) = read_file(path)?;
        let digest = cache::digest(&bytes);
        let plugin = self.load_on(&self.plain, path, Bytes::Read(&bytes), &digest)?;
        if let Some(stamp) = stamp {
            cache.remember(&stamp, &digest, read_at);
        }
        Ok(plugin)
    }

    /// The SHA-256 of the file at `path` when loading it would compile it: its description is not in the cache
    /// (a plugin never seen before, or first seen by this build). None when it loads without compiling (its
    /// description is cached; its code, if not, is compiled at its first call), or cannot be read at all (the
    /// load reports why). It reads and hashes the file unless its stamp was remembered, and runs no wasm.
    pub fn needs_compile(&self, path: &Path) -> Option<Digest> {
        let cache = &self.plain.cache;
        let digest = match self.remembered(path) {
            Some(digest) => digest,
            None => cache::digest(&read_file(path).ok()?.0),
        };
        Described::cached(cache, &digest).is_none().then_some(digest)
    }

    /// The SHA-256 the cache remembers for the file at `path` as it is now (its [`FileStamp`]), if any.
    fn remembered(&self, path: &Path) -> Option<Digest> {
        std::fs::metadata(path)
            .ok()
            .and_then(|meta| FileStamp::of(&meta))
            .and_then(|stamp| self.plain.cache.remembered(&stamp))
    }

    /// Load several plugins at once (compiling in parallel), keeping their order: a file by its path, or an
    /// embedded component with its digest (see [`PluginHost::load_embedded`]). Each gets its own result.
    pub fn load_all(&self, sources: &[(PathBuf, Option<Embedded>)]) -> Vec<Result<Plugin, PluginError>> {
        std::thread::scope(|scope| {
            let handles: Vec<_> = sources
                .iter()
                .map(|(path, bytes)| {
                    scope.spawn(move || match bytes {
                        Some((bytes, digest)) => self.load_embedded(path, bytes, digest),
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

/// What a component is loaded from.
enum Bytes<'a> {
    /// Bytes lent for the load: it links at once, as they are gone after it.
    Borrowed(&'a [u8]),
    /// Bytes just read from the plugin's file, which a later link reads again.
    Read(&'a [u8]),
    /// Bytes of the program itself (an embedded built-in).
    Static(&'static [u8]),
    /// The file at the plugin's path, read only if its compiled code is not cached.
    InFile,
}

/// Instantiate once, with no grants and within `timeout`, to read the metadata and the tool list.
fn describe(
    plugin: &PluginInner,
    timeout: std::time::Duration,
) -> Result<(PluginMetadata, Vec<ToolSpec>), String> {
    let mut grants = WasmGrants::none(Path::new("/"));
    grants.timeout = Some(timeout);
    let described = gate::enter(
        plugin,
        &grants,
        gate::Entry::bare("metadata"),
        |store, instance| {
            let named = |export: &str, e: wasmtime::Error| e.context(format!("`{export}` failed"));
            let linked = plugin.linked().map_err(|e| wasmtime::format_err!("{e}"))?;
            match (&linked.tool, &linked.handler) {
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
        },
    );
    let (metadata, tools) = described.map_err(|e| e.message().to_owned())?;
    let tools = tools
        .unwrap_or_default()
        .into_iter()
        .map(convert::spec_from_wit)
        .collect::<Result<Vec<_>, _>>()?;
    Ok((convert::metadata_from_wit(metadata), tools))
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
        if let Err(e) = toolwright_core::schema::Validator::new(tool.parameters.clone()) {
            return Err(format!(
                "the parameter schema of tool `{}` is refused: {e}",
                tool.name
            ));
        }
    }
    Ok(())
}

impl Plugin {
    /// Map and link its compiled component now, if its load deferred that to the first call (a component
    /// whose code and description were both cached): what the first call would otherwise pay, a few
    /// milliseconds for an interpreter's component, and any error it would meet (a cache entry that no longer
    /// maps and a plugin file that changed since, say).
    pub fn prepare(&self) -> Result<(), &PluginError> {
        self.inner.linked().map(|_| ())
    }

    /// The SHA-256 of the component it was loaded from: the digest a grant's `sha256` pin is compared with.
    pub fn sha256(&self) -> [u8; 32] {
        self.inner.digest
    }

    /// Its link, when its load left it to the first call and its code is not compiled
    /// ([`Compilation::Later`]) and no call has linked it yet: run it ahead of need, on a thread of one's own.
    pub fn link_later(&self) -> Option<Link> {
        (self.compilation == Compilation::Later && self.inner.linked.get().is_none()).then(|| Link {
            inner: self.inner.clone(),
        })
    }
}

/// A plugin's link left to its first call ([`Plugin::link_later`]): run ahead of need, the call finds it done
/// (a call that comes first links it itself, and this run waits for that one).
pub struct Link {
    inner: Arc<PluginInner>,
}

impl std::fmt::Debug for Link {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Link")
            .field("plugin", &self.inner.name)
            .field("done", &self.is_done())
            .finish()
    }
}

impl Link {
    /// Compile (or map from the cache) and link the plugin, if nothing has yet: its error, should it fail
    /// (the plugin's calls report it too).
    pub fn run(&self) -> Result<(), String> {
        self.inner.linked().map(|_| ()).map_err(ToString::to_string)
    }

    /// Whether it is linked (or failed to).
    pub fn is_done(&self) -> bool {
        self.inner.linked.get().is_some()
    }

    /// The size of the component, in bytes, as the compile queue orders it ([`PluginHost::compile_turn`]).
    pub fn size(&self) -> u64 {
        let (_, path, bytes) = &self.inner.source;
        bytes.map_or_else(
            || std::fs::metadata(path).map_or(0, |m| m.len()),
            |b| b.len() as u64,
        )
    }
}

#[cfg(test)]
mod tests;

/// A component's metadata and tool list, as cached beside its compiled code, with the host version that read
/// them (another version may convert them differently: its entries are read again).
#[derive(serde::Serialize, serde::Deserialize)]
struct Described {
    host: String,
    metadata: PluginMetadata,
    tools: Vec<ToolSpec>,
    /// Whether it exports the handler interface.
    handler: bool,
}

impl Described {
    /// What the cache holds beside the component whose SHA-256 is `digest`, if this host version read it.
    fn cached(cache: &ComponentCache, digest: &Digest) -> Option<Described> {
        cache
            .description::<Described>(digest)
            .filter(|d| d.host == env!("CARGO_PKG_VERSION"))
    }
}

//! Plugins compiled in the background: an installed plugin whose compiled code is not in the cache (a fresh
//! machine, a cleared cache, a new toolwright whose engine cannot use the old entries) would hold up the start
//! for as long as its compile takes — seconds for a Python or JavaScript component.
//!
//! - A plugin whose description is cached loads from it without compiling (its tools are listed at once); its
//!   code is compiled at its first call, or ahead of it on a thread of its own ([`link_in_background`],
//!   [`Linking`], what `toolwright mcp` does).
//! - A plugin without one, whose file is the one its `toolwright.lock` entry approved, is [`Deferred`]: what it
//!   offers is known from that entry (its tool names, whether it is a handler), so it compiles on a thread of
//!   its own while the toolset loads without it, and a batch waits for it only when it needs it
//!   (`Session::waits_for`) — every batch, for a handler, which is in every call's path.
//!
//! Both take their turns in the host's compile queue, smallest first ([`PluginHost::compile_turn`]). Compiles
//! are kept per process, by cache directory, file and digest, so a toolset loaded again while one is running
//! (the next batch, a reloading MCP server) waits for the same compile instead of starting another, and takes
//! its plugin once it is done.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::wasm::{Digest, Plugin, PluginError, PluginHost};

/// A plugin left out of a toolset while it compiles in the background.
#[derive(Clone)]
pub struct Deferred {
    /// Its file.
    pub path: PathBuf,
    /// Its name, as its lockfile entry records it.
    pub name: String,
    /// Its tools' names, as its lockfile entry records them.
    pub tools: Vec<String>,
    /// Whether its lockfile entry says it is a handler (then every call waits for it).
    pub handler: bool,
    compile: Arc<Compile>,
}

impl std::fmt::Debug for Deferred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Deferred")
            .field("path", &self.path)
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("handler", &self.handler)
            .field("done", &self.is_done())
            .finish()
    }
}

impl Deferred {
    /// Whether its compile has ended (a load of the toolset now takes it, or its error).
    pub fn is_done(&self) -> bool {
        self.compile.lock().is_some()
    }

    /// Wait until its compile has ended, without holding a thread: a task that stops waiting (a cancelled
    /// call) takes nothing with it.
    pub async fn ended(&self) {
        let mut done = self.compile.done.subscribe();
        // The sender lives as long as the compile: an error cannot happen while `self` holds it.
        let _ = done.wait_for(|ended| *ended).await;
    }

    /// Wait until its compile has ended.
    pub fn wait(&self) {
        let mut done = self.compile.lock();
        while done.is_none() {
            done = self
                .compile
                .ended
                .wait(done)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

impl Deferred {
    /// Wait for its compile and take what it loaded, for a load that cannot do without it (a plugin its cache
    /// did not keep, or whose outcome another load took, is loaded again by `host`).
    pub(super) fn finish(self, host: &PluginHost) -> Result<Plugin, PluginError> {
        self.wait();
        compiles().retain(|(_, compile)| !Arc::ptr_eq(compile, &self.compile));
        self.compile.take().unwrap_or_else(|| host.load_file(&self.path))
    }
}

/// Whether a call of the tool `name` must wait for the plugins still compiling in the background (`deferred`)
/// before it runs against `registry`: yes when one of them is a handler (it is in every call's path, as pi's
/// extensions are loaded before any call); else no when it names a built-in (`read` … `ls`: built-ins make no
/// calls of their own, so nothing it runs can reach a plugin left out) or a tool that neither `registry` nor any
/// of them has (it is `not found` either way); else yes — one of them offers it, or it may call other tools (a
/// plugin's tool, `codemode`, `tool_search`), so it must meet the tools a start with every plugin cached would
/// load.
pub fn must_wait(deferred: &[Deferred], registry: &crate::registry::SharedRegistry, name: &str) -> bool {
    if deferred.is_empty() {
        return false;
    }
    if deferred
        .iter()
        .any(|d| d.handler || d.tools.iter().any(|t| t == name))
    {
        return true;
    }
    registry.read(|r| match r.definition(name) {
        None => false,
        Some(d) => {
            d.source != crate::definition::ToolSource::Builtin || !crate::builtins::NAMES.contains(&name)
        }
    })
}

/// One compile: its outcome once it ends, until a load takes it.
struct Compile {
    outcome: Mutex<Option<Outcome>>,
    /// Told when it ends, for threads ([`Deferred::wait`]) and for tasks ([`Deferred::ended`]).
    ended: Condvar,
    done: tokio::sync::watch::Sender<bool>,
}

enum Outcome {
    Loaded(Result<Plugin, PluginError>),
    /// A load took the outcome.
    Taken,
}

impl Compile {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Outcome>> {
        self.outcome.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What it loaded, taken once it has ended (none while it runs, or once taken).
    fn take(&self) -> Option<Result<Plugin, PluginError>> {
        let mut outcome = self.lock();
        match outcome.take() {
            Some(Outcome::Loaded(loaded)) => {
                *outcome = Some(Outcome::Taken);
                Some(loaded)
            }
            other => {
                *outcome = other;
                None
            }
        }
    }
}

/// Which compile: the cache it fills, the file and the digest it was started for.
type Key = (Option<PathBuf>, PathBuf, Digest);

fn compiles() -> std::sync::MutexGuard<'static, Vec<(Key, Arc<Compile>)>> {
    static COMPILES: Mutex<Vec<(Key, Arc<Compile>)>> = Mutex::new(Vec::new());
    COMPILES.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Forget the ended compiles of the file at `path` for `cache`: a load found it cached, so what they kept of it
/// (a plugin's mapped code, for a Python component tens of megabytes) is not needed.
pub(super) fn forget(cache: Option<&Path>, path: &Path) {
    compiles().retain(|((dir, file, _), compile)| {
        dir.as_deref() != cache || file != path || compile.lock().is_none()
    });
}

/// Forget the ended compiles of files that are gone (a long-running MCP server whose plugin was removed).
pub(super) fn forget_removed() {
    compiles().retain(|((_, file, _), compile)| file.exists() || compile.lock().is_none());
}

/// What a load does with a plugin that would compile.
pub(super) enum Start {
    /// Its compile ended since an earlier load deferred it: its plugin, or why it did not load.
    Ended(Result<Plugin, PluginError>),
    /// It compiles (started now, or still running): the toolset loads without it.
    Deferred(Deferred),
}

/// What a lockfile entry says a plugin offers: its name, its tools' names, whether it is a handler.
pub(super) struct Offer {
    pub(super) name: String,
    pub(super) tools: Vec<String>,
    pub(super) handler: bool,
}

/// The plugin at `path` (whose SHA-256 is `digest`) compiled on a thread of its own by `host`, whose cache it
/// fills, in its turn ([`PluginHost::compile_turn`]): a compile of the same file already running is waited for,
/// one that ended is taken.
pub(super) fn start(
    host: &Arc<PluginHost>,
    cache: Option<&Path>,
    path: &Path,
    digest: Digest,
    offer: Offer,
) -> Start {
    let key: Key = (cache.map(Path::to_owned), path.to_owned(), digest);
    let name = offer.name.as_str();
    let deferred = |compile| {
        Start::Deferred(Deferred {
            path: path.to_owned(),
            name: offer.name.clone(),
            tools: offer.tools.clone(),
            handler: offer.handler,
            compile,
        })
    };
    let mut compiles = compiles();
    if let Some(at) = compiles.iter().position(|(k, _)| *k == key) {
        let compile = compiles[at].1.clone();
        if compile.lock().is_none() {
            return deferred(compile);
        }
        // Ended: its outcome is this load's, and the list forgets it.
        compiles.remove(at);
        if let Some(loaded) = compile.take() {
            return Start::Ended(loaded);
        }
    }
    let compile = Arc::new(Compile {
        outcome: Mutex::new(None),
        ended: Condvar::new(),
        done: tokio::sync::watch::Sender::new(false),
    });
    let (compiler, file, ending) = (host.clone(), path.to_owned(), compile.clone());
    let spawned = std::thread::Builder::new()
        .name("toolwright-compile".into())
        .spawn(move || {
            // A panic must still end the compile: a batch may be waiting for it.
            let loaded = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let size = std::fs::metadata(&file).map_or(0, |m| m.len());
                let _turn = compiler.compile_turn(size);
                compiler.load_file(&file)
            }))
            .unwrap_or_else(|_| {
                Err(PluginError::Invalid {
                    path: file.clone(),
                    message: "loading panicked".into(),
                })
            });
            *ending.lock() = Some(Outcome::Loaded(loaded));
            ending.ended.notify_all();
            ending.done.send_replace(true);
        });
    if let Err(error) = spawned {
        // No thread: it loads now, as it would have without a lockfile (other loads need not wait for it).
        drop(compiles);
        tracing::debug!("cannot start a background compile: {error}");
        return Start::Ended(host.load_file(path));
    }
    compiles.push((key, compile.clone()));
    tracing::info!(plugin = name, path = %path.display(), "not in the cache: compiling in the background");
    deferred(compile)
}

/// A plugin of a toolset, loaded from its cached description, whose code compiles on a thread of its own
/// ([`link_in_background`]); a call that comes first compiles it itself, and this waits for that.
#[derive(Clone)]
pub struct Linking {
    /// Its name.
    pub name: String,
    /// Its tools' names.
    pub tools: Vec<String>,
    /// Whether it is a handler (then every call waits for it).
    pub handler: bool,
    done: Arc<tokio::sync::watch::Sender<bool>>,
}

impl std::fmt::Debug for Linking {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Linking")
            .field("name", &self.name)
            .field("handler", &self.handler)
            .field("done", &self.is_done())
            .finish()
    }
}

impl Linking {
    /// Whether its code is compiled and linked (or failed to be: its calls say why).
    pub fn is_done(&self) -> bool {
        *self.done.borrow()
    }

    /// Wait until it is, holding no thread.
    pub async fn ended(&self) {
        let mut done = self.done.subscribe();
        // The sender lives as long as `self`.
        let _ = done.wait_for(|ended| *ended).await;
    }
}

/// Start compiling, each on a thread of its own and in its turn, the plugins of `toolset` that were loaded from
/// their cached descriptions and whose code is not compiled ([`Plugin::link_later`]), so that their first calls
/// find them ready: what `toolwright mcp` does at start and after each reload. `exec` does not: it compiles only
/// what its batch calls.
pub fn link_in_background(toolset: &super::Toolset) -> Vec<Linking> {
    let Some(host) = &toolset.host else {
        return Vec::new();
    };
    let mut linking = Vec::new();
    for plugin in &toolset.plugins {
        let Some(link) = plugin.link_later() else {
            continue;
        };
        let done = Arc::new(tokio::sync::watch::Sender::new(false));
        let (compiler, ending, name) = (host.clone(), done.clone(), plugin.metadata.name.clone());
        let spawned = std::thread::Builder::new()
            .name("toolwright-link".into())
            .spawn(move || {
                let linked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    let _turn = compiler.compile_turn(link.size());
                    link.run()
                }));
                match linked {
                    Ok(Ok(())) => tracing::info!(plugin = %name, "compiled in the background"),
                    Ok(Err(error)) => tracing::warn!(plugin = %name, "cannot compile: {error}"),
                    Err(_) => tracing::warn!(plugin = %name, "compiling panicked"),
                }
                ending.send_replace(true);
            });
        if let Err(error) = spawned {
            // Its first call compiles it.
            tracing::debug!("cannot start a background compile: {error}");
            continue;
        }
        linking.push(Linking {
            name: plugin.metadata.name.clone(),
            tools: plugin.tools.iter().map(|t| t.name.clone()).collect(),
            handler: plugin.is_handler,
            done,
        });
    }
    linking
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compile_runs_once_however_often_it_is_asked_for_and_its_plugin_is_taken_once() {
        let Some(builtins) = crate::wasm::components::BUILTINS else {
            return; // Built without the wasm built-ins: nothing to compile.
        };
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path().join("cache");
        let file = dir.path().join("ls.wasm");
        let (_, bytes) = builtins.iter().find(|(name, _)| *name == "ls").unwrap();
        std::fs::write(&file, bytes).unwrap();
        let host = Arc::new(PluginHost::new(Some(cache.clone())).unwrap());
        let digest = host.needs_compile(&file).expect("a new cache holds nothing");
        let offer = || Offer {
            name: "ls".into(),
            tools: vec!["ls".into()],
            handler: false,
        };
        let start = || start(&host, Some(&cache), &file, digest, offer());
        let Start::Deferred(first) = start() else {
            panic!("a plugin that needs compiling is deferred")
        };
        // Asked again while it runs (or once it has ended), the same compile answers.
        let second = start();
        if let Start::Deferred(again) = &second {
            assert!(Arc::ptr_eq(&first.compile, &again.compile));
        }
        // A task waits for it too, holding no thread.
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        let waiting = first.clone();
        let ended = runtime.block_on(async move {
            tokio::time::timeout(std::time::Duration::from_secs(120), waiting.ended()).await
        });
        assert!(ended.is_ok(), "the compile ended within two minutes");
        assert!(first.is_done());
        let plugin = match second {
            Start::Deferred(again) => {
                again.wait();
                match start() {
                    Start::Ended(plugin) => plugin,
                    Start::Deferred(_) => panic!("an ended compile is taken"),
                }
            }
            Start::Ended(plugin) => plugin,
        };
        assert_eq!(plugin.unwrap().metadata.name, "toolwright-tool-ls");
        assert!(first.is_done());
        // It filled the cache: the next load does not compile.
        assert_eq!(host.needs_compile(&file), None);
    }
}

//! The plugin files of a toolset, found in the plugin directories and loaded in parallel (or from the cache), or
//! left to compile in the background; and what no third-party plugin may be granted to write.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::background::{self, Start};
use super::{BuiltinMode, Deferred, LoadError, ToolsetError, ToolsetOptions, mib_bytes};
use crate::definition::ToolDefinition;
use crate::policy::Policy;
use crate::trust::Locks;
use crate::trust::identity::{self, PluginLocation};
use crate::wasm::{Plugin, PluginError, PluginHost};

/// The plugins found, loaded and kept, with where each came from, and those still compiling.
pub(super) struct Loaded {
    pub(super) plugins: Vec<Plugin>,
    pub(super) locations: Vec<PluginLocation>,
    pub(super) errors: Vec<LoadError>,
    pub(super) host: Option<Arc<PluginHost>>,
    pub(super) deferred: Vec<Deferred>,
}

pub(super) use super::builtins::trusted_paths;

/// Step 3: the wasm built-ins asked for and the plugin files, loaded in parallel (or from the cache), with
/// duplicates between locations resolved by trust ([`identity::dedupe`]).
pub(super) fn load(options: &ToolsetOptions, policy: &Policy, locks: &Locks) -> Result<Loaded, ToolsetError> {
    let as_wasm =
        |name: &str| options.builtins == BuiltinMode::Wasm || options.wasm_builtins.iter().any(|w| w == name);
    let files = options.plugin_files();
    let wasm_builtins = crate::builtins::NAMES.iter().any(|n| as_wasm(n));
    if !wasm_builtins && files.is_empty() {
        return Ok(Loaded {
            plugins: Vec::new(),
            locations: Vec::new(),
            errors: Vec::new(),
            host: None,
            deferred: Vec::new(),
        });
    }
    let host = options
        .hosts
        .get(options.cache_dir.clone())
        .map_err(|e| ToolsetError::Runtime(e.to_string()))?;
    if let Some(mib) = policy.limits.host_memory_mib {
        host.memory_budget().set_cap(mib_bytes(mib));
    }
    let mut sources: Vec<(PathBuf, Option<crate::wasm::Embedded>)> = Vec::new();
    if wasm_builtins {
        let not_built = || {
            ToolsetError::NotBuilt(
                "this toolwright was built without the wasm built-ins (TOOLWRIGHT_SKIP_WASM_BUILD)",
            )
        };
        let builtins = crate::wasm::components::BUILTINS.ok_or_else(not_built)?;
        let digests = crate::wasm::components::BUILTIN_DIGESTS.ok_or_else(not_built)?;
        sources.extend(
            builtins
                .iter()
                .zip(digests)
                .filter(|((name, _), _)| as_wasm(name))
                .map(|((name, bytes), (_, digest))| {
                    (PathBuf::from(format!("builtin:{name}")), Some((*bytes, *digest)))
                }),
        );
    }
    let mut locations = vec![PluginLocation::Builtin; sources.len()];
    if options.compile_in_background {
        background::forget_removed();
    }
    // Each file loads now, or compiles in the background (its outcome taken by a later load).
    let mut slots: Vec<Loading> = sources.iter().map(|_| Loading::Load).collect();
    let files: Vec<(PathBuf, PluginLocation)> = files.into_iter().collect();
    for ((path, location), start) in files.iter().zip(defer_all(options, &host, locks, &files)) {
        slots.push(match start {
            Some(Start::Deferred(plugin)) => Loading::Deferred(plugin),
            Some(Start::Ended(outcome)) => Loading::Ended(outcome),
            None => Loading::Load,
        });
        locations.push(*location);
        sources.push((path.clone(), None));
    }
    let to_load: Vec<(PathBuf, Option<crate::wasm::Embedded>)> = sources
        .iter()
        .zip(&slots)
        .filter(|(_, slot)| matches!(slot, Loading::Load))
        .map(|(source, _)| source.clone())
        .collect();
    let mut fresh = host.load_all(&to_load).into_iter();
    for slot in &mut slots {
        if matches!(slot, Loading::Load) {
            let outcome = fresh
                .next()
                .unwrap_or_else(|| unreachable!("load_all gives one outcome per source"));
            *slot = Loading::Ended(outcome);
        }
    }
    // Which tool a name means never changes while a session runs: a plugin whose tool takes a name the toolset
    // has without it (a built-in's, another plugin's), or whose name another loaded plugin has (which of the two
    // keeps it is decided by trust, below), is not left out, but waited for now — until no such plugin is left.
    let mut taken: HashSet<String> = crate::builtins::NAMES
        .iter()
        .chain(&["codemode", crate::registry::search::TOOL_SEARCH_TOOL_NAME])
        .map(|name| (*name).to_owned())
        .collect();
    let mut names = HashSet::new();
    let take = |plugin: &Plugin, taken: &mut HashSet<String>, names: &mut HashSet<String>| {
        taken.extend(plugin.tools.iter().map(|t| t.name.clone()));
        names.insert(plugin.metadata.name.clone());
    };
    for slot in &slots {
        if let Loading::Ended(Ok(plugin)) = slot {
            take(plugin, &mut taken, &mut names);
        }
    }
    loop {
        let clashing = slots.iter().position(|slot| {
            matches!(slot, Loading::Deferred(d)
                if d.tools.iter().any(|t| taken.contains(t)) || names.contains(&d.name))
        });
        let Some(at) = clashing else { break };
        let Loading::Deferred(plugin) = std::mem::replace(&mut slots[at], Loading::Load) else {
            unreachable!("found above")
        };
        let outcome = plugin.finish(&host);
        if let Ok(plugin) = &outcome {
            take(plugin, &mut taken, &mut names);
        }
        slots[at] = Loading::Ended(outcome);
    }
    let mut deferred = Vec::new();
    let mut loaded = Vec::new();
    for (slot, location) in slots.into_iter().zip(locations) {
        match slot {
            Loading::Deferred(plugin) => deferred.push(plugin),
            Loading::Ended(outcome) => loaded.push((outcome.map_err(LoadError::from), location)),
            Loading::Load => unreachable!("every slot to load was loaded"),
        }
    }
    let (kept, errors) = identity::dedupe(loaded);
    let (plugins, locations) = kept.into_iter().unzip();
    Ok(Loaded {
        plugins,
        locations,
        errors,
        host: Some(host),
        deferred,
    })
}

/// Where one plugin's outcome comes from, while the toolset loads.
enum Loading {
    /// It loads now (or from the cache).
    Load,
    /// It loaded, or failed to.
    Ended(Result<Plugin, PluginError>),
    /// It compiles in the background.
    Deferred(Deferred),
}

/// [`defer`] for every file, in order. Telling whether a file is described in the cache means hashing it unless
/// its digest is remembered (about 20 ms for a 19 MB Python component on a cold cache), so the files are taken by
/// as many threads as the machine has cores: a cold `mcp` answers `initialize` after the slowest share, not the
/// sum.
fn defer_all(
    options: &ToolsetOptions,
    host: &Arc<PluginHost>,
    locks: &Locks,
    files: &[(PathBuf, PluginLocation)],
) -> Vec<Option<Start>> {
    let workers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZero::get)
        .min(files.len());
    if workers <= 1 || !options.compile_in_background {
        return files
            .iter()
            .map(|(path, location)| defer(options, host, locks, path, *location))
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut starts: Vec<Option<Start>> = files.iter().map(|_| None).collect();
    let done: Vec<Vec<(usize, Option<Start>)>> = std::thread::scope(|scope| {
        let take = || {
            let mut mine = Vec::new();
            loop {
                let at = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((path, location)) = files.get(at) else {
                    return mine;
                };
                mine.push((at, defer(options, host, locks, path, *location)));
            }
        };
        let handles: Vec<_> = (0..workers).map(|_| scope.spawn(take)).collect();
        // A worker that panicked leaves its files to load now, where the load reports what is wrong.
        handles.into_iter().filter_map(|h| h.join().ok()).collect()
    });
    for (at, start) in done.into_iter().flatten() {
        starts[at] = start;
    }
    starts
}

/// Whether the plugin file at `path` compiles in the background ([`ToolsetOptions::compile_in_background`]):
/// only when loading it would compile (its description is not cached), and its `toolwright.lock` entry for
/// `location` approved exactly this file — then its tools, and whether it is a handler, are known without
/// compiling it. None: it loads now.
fn defer(
    options: &ToolsetOptions,
    host: &Arc<PluginHost>,
    locks: &Locks,
    path: &Path,
    location: PluginLocation,
) -> Option<Start> {
    if !options.compile_in_background || options.cache_dir.is_none() {
        return None;
    }
    let (_, lock) = locks.for_location(location)?;
    let Some(digest) = host.needs_compile(path) else {
        background::forget(options.cache_dir.as_deref(), path);
        return None;
    };
    let sha256 = identity::hex(&digest);
    // A handler if any entry approving this file says so (an odd lockfile may list it twice): every call waits
    // for it.
    let mut approving = lock.plugins.iter().filter(|(_, entry)| entry.sha256 == sha256);
    let (name, entry) = approving.next()?;
    let handler = entry.handler || approving.any(|(_, entry)| entry.handler);
    let offer = background::Offer {
        name: name.clone(),
        tools: entry.tools.keys().cloned().collect(),
        handler,
    };
    Some(background::start(
        host,
        options.cache_dir.as_deref(),
        path,
        digest,
        offer,
    ))
}

/// Step 4: pi's `codemode`, when this build has it, with the policy's `[codemode]` settings.
pub(super) fn codemode(
    options: &ToolsetOptions,
    settings: &toolwright_core::policy::CodemodeSettings,
) -> Option<ToolDefinition> {
    #[cfg(feature = "codemode")]
    {
        use crate::codemode::{Mode, Settings};
        let mode = match settings.mode {
            Some(toolwright_core::policy::CodemodeMode::Only) => Mode::Only,
            _ => Mode::On,
        };
        let inline_budget = settings
            .inline_budget
            .map_or(Settings::default().inline_budget, |b| {
                Some(usize::try_from(b).unwrap_or(usize::MAX))
            });
        Some(crate::codemode::definition(crate::codemode::CodemodeOptions {
            cwd: options.cwd.clone(),
            cache_dir: options.cache_dir.clone(),
            hosts: options.hosts.clone(),
            timeout: Some(crate::wasm::DEFAULT_TIMEOUT),
            settings: Settings { mode, inline_budget },
        }))
    }
    #[cfg(not(feature = "codemode"))]
    {
        let _ = (options, settings);
        None
    }
}

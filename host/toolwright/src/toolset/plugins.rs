//! [`Toolset`]: the built-ins and the plugins of a session, loaded (feature `wasm`).

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::background::{self, Deferred, Start};
use super::{
    BuiltinGrants, BuiltinMode, ToolsetError, ToolsetOptions, load_policy_trusted, native_builtins_granted,
    user_plugin_dir,
};
use crate::audit::{Origin, OriginKind, Runtime};
use crate::definition::{ToolDefinition, ToolSource, wrap_tool_definition};
use crate::hooks::HookChain;
use crate::native::{FileMutationQueue, HostEnv, ProgramGrant};
use crate::policy::{Effective, Policy};
use crate::tool::AgentTool;
use crate::wasm::identity::{self, PinStatus, PluginIdentity, PluginLocation};
use crate::wasm::lock::{LockError, Lockfile, Verdict};
use crate::wasm::{Plugin, PluginError, PluginHost, Preopen, WasmGrants};

/// Whether loading `options` needs the user's trust in the project: they ask for it and name a project plugin
/// directory the user did not also name as a plugin directory (that one was trusted on purpose).
fn needs_project_trust(options: &ToolsetOptions) -> bool {
    options.require_project_trust
        && options
            .project_plugin_dir
            .as_deref()
            .is_some_and(|project| !options.plugin_dirs.iter().any(|d| d == project))
}

impl ToolsetOptions {
    /// The `.wasm` files of the plugin directories in load order (the project's directory first, then the
    /// trusted ones in order; files by name), each with where it was found.
    pub fn plugin_files(&self) -> Vec<(PathBuf, PluginLocation)> {
        let user = user_plugin_dir();
        let same = |a: &Path, b: &Path| {
            a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
        };
        let mut dirs: Vec<(&Path, PluginLocation)> = Vec::new();
        if let Some(project) = &self.project_plugin_dir
            && !self.plugin_dirs.iter().any(|d| same(d, project))
        {
            dirs.push((project, PluginLocation::Project));
        }
        for dir in &self.plugin_dirs {
            let location = match &user {
                Some(user) if same(user, dir) => PluginLocation::User,
                _ => PluginLocation::Cli,
            };
            dirs.push((dir, location));
        }
        dirs.into_iter()
            .flat_map(|(dir, location)| {
                PluginHost::discover(&[dir.to_owned()])
                    .into_iter()
                    .map(move |file| (file, location))
            })
            .collect()
    }
}

/// The tools of a session, and what happened while loading them.
pub struct Toolset {
    /// The built-in tools, native or wasm, in pi's order.
    pub builtins: Vec<ToolDefinition>,
    /// The plugins' tools, in load order (the first plugin to offer a name wins).
    pub extension_tools: Vec<ToolDefinition>,
    /// The plugins that loaded (built-ins included when they run as wasm).
    pub plugins: Vec<Plugin>,
    /// The plugins that did not, and why.
    pub errors: Vec<PluginError>,
    /// Tools of later sources that replaced an earlier tool of the same name: (name, replaced by).
    pub overrides: Vec<(String, PathBuf)>,
    /// The runtime, when any wasm plugin is loaded.
    pub host: Option<Arc<PluginHost>>,
    /// The policy in force.
    pub policy: Policy,
    /// What each third-party plugin was granted and refused, by plugin name.
    pub grants: Vec<(String, Effective)>,
    /// Where each loaded plugin came from, its file's digest and its pin status.
    pub identities: Vec<PluginIdentity>,
    /// The approvals of `toolwright.lock`: beside the trusted policy files (for plugins from trusted locations)
    /// and beside the project's (for the project's plugins).
    pub locks: Locks,
    handler_grants: Vec<WasmGrants>,
    /// pi's `codemode` (registered as an extension tool, inactive until named; feature `codemode`).
    pub codemode: Option<ToolDefinition>,
    /// Installed plugins left out while they compile in the background
    /// ([`ToolsetOptions::compile_in_background`]); loading the toolset again once they are done takes them in.
    pub deferred: Vec<Deferred>,
    /// What was skipped of an untrusted project, in one line for people, with the command that trusts it.
    pub skipped_project: Option<String>,
}

impl std::fmt::Debug for Toolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let definitions = self.definitions();
        let names: Vec<_> = definitions.iter().map(|d| d.name.as_str()).collect();
        f.debug_struct("Toolset")
            .field("tools", &names)
            .field("errors", &self.errors)
            .finish_non_exhaustive()
    }
}

/// The plugins found, loaded and kept, with where each came from, and those still compiling.
struct Loaded {
    plugins: Vec<Plugin>,
    locations: Vec<PluginLocation>,
    errors: Vec<PluginError>,
    host: Option<Arc<PluginHost>>,
    deferred: Vec<Deferred>,
}

impl Toolset {
    /// Load the built-ins and every plugin of the plugin directories. Plugins compile in parallel, or come from
    /// the cache.
    pub fn load(options: &ToolsetOptions) -> Result<Self, ToolsetError> {
        // A project's own plugins do nothing until the user trusts it as it is now. Checked once: the digest
        // reads every file the project ships.
        let trust = options
            .require_project_trust
            .then(|| crate::trust::check(&options.cwd));
        let trusted = trust == Some(crate::trust::ProjectTrust::Trusted);
        let mut skipped_project = None;
        let untrusted;
        let options = match &trust {
            Some(trust) if !trusted && needs_project_trust(options) => {
                skipped_project = crate::trust::skipped_line(&options.cwd, trust);
                untrusted = ToolsetOptions {
                    project_plugin_dir: None,
                    ..options.clone()
                };
                &untrusted
            }
            _ => options,
        };
        let host = HostEnv::current();
        let policy = load_policy_trusted(options, &host, trusted)?;
        if let Some(unknown) = options
            .wasm_builtins
            .iter()
            .find(|w| !crate::builtins::NAMES.contains(&w.as_str()))
        {
            return Err(ToolsetError::UnknownBuiltin(unknown.clone()));
        }
        let mutations = Arc::new(FileMutationQueue::default());
        // The `[builtins]` section, decided once for the native and the wasm built-ins.
        let builtin_section = policy
            .builtins
            .as_ref()
            .filter(|section| section.grants())
            .map(|section| BuiltinGrants::decide(section, &options.cwd, &host));
        // Every built-in has its slot in pi's order, native or wasm.
        let builtins = match options.builtins {
            BuiltinMode::Native => {
                native_builtins_granted(options, builtin_section.as_ref(), &host, &mutations)?
            }
            BuiltinMode::Wasm => Vec::new(),
        };
        let locks = Locks::load(options)?;
        let loaded = load_plugins(options, &policy, &locks)?;
        let codemode = codemode(options, &policy.codemode);
        let mut toolset = Toolset {
            builtins,
            extension_tools: Vec::new(),
            plugins: Vec::new(),
            errors: loaded.errors,
            overrides: Vec::new(),
            host: loaded.host,
            policy,
            grants: Vec::new(),
            identities: Vec::new(),
            locks,
            handler_grants: Vec::new(),
            codemode,
            deferred: loaded.deferred,
            skipped_project,
        };
        for (plugin, location) in loaded.plugins.into_iter().zip(loaded.locations) {
            toolset.add_plugin(
                options,
                &host,
                builtin_section.as_ref(),
                plugin,
                location,
                &mutations,
            );
        }
        Ok(toolset)
    }

    /// Step 5, for one plugin: decide its grants (a built-in's from `[builtins]`, a third party's from its
    /// requests and the policy entry that applies where it came from), then take its tools.
    fn add_plugin(
        &mut self,
        options: &ToolsetOptions,
        host: &HostEnv,
        builtin_section: Option<&BuiltinGrants>,
        mut plugin: Plugin,
        location: PluginLocation,
        mutations: &Arc<FileMutationQueue>,
    ) {
        let is_builtin = location == PluginLocation::Builtin;
        let cwd = toolwright_sdk::paths::normalize(&options.cwd.to_string_lossy());
        let mut identity = PluginIdentity {
            path: plugin.path.clone(),
            location,
            sha256: identity::hex(&plugin.sha256()),
            pin: PinStatus::Unpinned,
        };
        // A plugin that no longer matches its approval in toolwright.lock does not run at all, neither its tools
        // nor its hooks (a changed handler could rewrite calls): the error says what changed.
        if !is_builtin {
            match self.approval(&plugin, location) {
                Approval::Held => {
                    self.identities.push(identity);
                    return;
                }
                // The pin `plugins add` wrote is the lockfile's digest: what the lockfile approves by itself, the
                // pin does not refuse.
                Approval::Auto { approved } => {
                    let entry = identity::policy_for(&self.policy, &plugin.metadata.name, location);
                    if let Some(entry) = entry
                        && entry.sha256.iter().all(|pin| *pin == approved)
                        && let Some(p) = self.policy.plugins.get_mut(&plugin.metadata.name)
                    {
                        p.sha256 = vec![identity.sha256.clone()];
                    }
                }
                Approval::Approved | Approval::Unlocked => {}
            }
        }
        let (mut grants, granted_words) = if is_builtin {
            let grants = self.builtin_grants(&options.cwd, host, builtin_section);
            let words = builtin_words(&grants);
            (grants, words)
        } else {
            let name = &plugin.metadata.name;
            let entry = identity::policy_for(&self.policy, name, location);
            identity.pin = identity::pin_status(entry.as_ref(), &identity.sha256);
            let effective = identity::decide(
                name,
                &plugin.metadata.capabilities,
                &self.policy,
                &identity,
                &cwd,
                host.home.as_deref(),
            );
            // Directories that do not exist are not mapped (nor given to the plugin's programs).
            let mut existing = effective.clone();
            existing.dirs.retain(|d| d.path.is_dir());
            if let Some(error) = writes_what_is_trusted(options, &self.policy, &plugin, &existing.dirs) {
                self.errors.push(error);
                self.identities.push(identity);
                return;
            }
            let env = host.vars_granted(&existing.env, &[]);
            let programs = ProgramGrant::for_plugin(&existing, &host.path);
            let grants = WasmGrants::from_effective(&existing, &options.cwd, env, programs);
            let words = effective
                .decisions
                .iter()
                .flat_map(|d| d.granted.iter().map(ToString::to_string))
                .collect();
            self.grants.push((name.clone(), effective));
            (grants, words)
        };
        // A fuel budget needs the plugin compiled with metering: load it again on the metered engine.
        if grants.fuel.is_some()
            && let Some(host) = &self.host
        {
            match host.metered(&plugin) {
                Ok(metered) => plugin = metered,
                Err(e) => {
                    self.errors.push(e);
                    if !is_builtin {
                        self.grants.pop();
                    }
                    return;
                }
            }
        }
        let sha256 = identity.sha256.clone();
        self.identities.push(identity);
        grants.mutations = mutations.clone();
        // A wasm built-in runs in place when its native twin does (never a third party's tool: it may stream or
        // call tools).
        grants.in_place = is_builtin
            && plugin
                .tools
                .iter()
                .all(|t| crate::builtins::runs_in_place(&t.name));
        if let Some(mib) = self.policy.limits.result_mib {
            grants.result_cap = mib_bytes(mib);
        }
        if plugin.is_handler {
            self.handler_grants.push(grants.clone());
        }
        let origin = Arc::new(Origin {
            kind: if is_builtin {
                OriginKind::Builtin
            } else {
                OriginKind::Plugin
            },
            runtime: Runtime::Wasm,
            plugin: Some(plugin.metadata.name.clone()),
            sha256: Some(sha256),
            grants: Some(granted_words),
            // A wasm built-in sees the host's whole environment: only what looks like a secret is kept out.
            secrets: if is_builtin {
                Arc::new(crate::audit::secret_looking(&grants.env))
            } else {
                grants.env.clone()
            },
        });
        for mut definition in plugin.tool_definitions(&grants) {
            definition.origin = Some(origin.clone());
            if is_builtin {
                definition.source = ToolSource::Builtin;
                // A wasm built-in takes the place of its native twin, in pi's order.
                match self.builtins.iter_mut().find(|d| d.name == definition.name) {
                    Some(native) => *native = definition,
                    None => self.builtins.push(definition),
                }
                continue;
            }
            // pi's precedence: an extension's tool replaces a built-in of the same name; between extensions,
            // the first in load order wins.
            if let Some(existing) = self.extension_tools.iter().find(|d| d.name == definition.name) {
                self.errors.push(PluginError::ToolClash {
                    path: plugin.path.clone(),
                    tool: definition.name.clone(),
                    other: match &existing.source {
                        ToolSource::Plugin { path } => path.clone(),
                        _ => PathBuf::from("builtin"),
                    },
                });
                continue;
            }
            if self.builtins.iter().any(|d| d.name == definition.name) {
                // A plugin takes a built-in's name only where the user's config says so (`replace`).
                if !self.policy.replace.contains(&definition.name) {
                    self.errors.push(PluginError::ReplacesBuiltin {
                        path: plugin.path.clone(),
                        tool: definition.name.clone(),
                    });
                    continue;
                }
                self.overrides
                    .push((definition.name.clone(), plugin.path.clone()));
            }
            self.extension_tools.push(definition);
        }
        self.plugins.push(plugin);
    }

    /// The wasm built-ins' grants: the defaults, or what the policy's `[builtins]` section grants (`granted`),
    /// with the section's limits and instance setting either way (they bind the wasm built-ins; natively they are
    /// the host's own code, as in pi).
    fn builtin_grants(&self, cwd: &Path, host: &HostEnv, granted: Option<&BuiltinGrants>) -> WasmGrants {
        let mut grants = WasmGrants::builtin(cwd, host);
        let Some(section) = &self.policy.builtins else {
            return grants;
        };
        // A section of limits only keeps the default grant (`granted` is none then).
        if let Some(granted) = granted {
            let temp = grants.preopens.pop();
            grants.preopens = granted
                .dirs
                .iter()
                .map(|g| Preopen {
                    host: g.path.clone(),
                    guest: g.path.to_string_lossy().into_owned(),
                    write: g.write,
                })
                .chain(temp)
                .collect();
            grants.programs = granted.programs.clone();
            grants.env = Arc::new(granted.vars.clone());
        }
        grants.limit(section.timeout_ms, section.memory_mib);
        grants.reuse = section.reuse();
        grants
    }

    /// How `plugin` stands with the lockfile for `location`: held (the error recorded says what changed),
    /// approved by the policy (logged), approved, or not in a lockfile.
    fn approval(&mut self, plugin: &Plugin, location: PluginLocation) -> Approval {
        let Some((lockfile, lock)) = self.locks.for_location(location) else {
            return Approval::Unlocked;
        };
        let Some(approved) = lock.plugins.get(&plugin.metadata.name) else {
            return Approval::Unlocked;
        };
        let found = crate::wasm::lock::entry(plugin, &approved.source);
        let changes = crate::wasm::lock::changes(approved, &found);
        let same_surface = self.policy.auto_approve == Some(crate::policy::AutoApprove::SameSurface);
        match crate::wasm::lock::verdict(&changes, same_surface) {
            Verdict::Approved => Approval::Approved,
            Verdict::AutoApproved(changes) => {
                let words: Vec<String> = changes.iter().map(ToString::to_string).collect();
                tracing::info!(
                    plugin = %plugin.metadata.name,
                    "approved by auto-approve = \"same-surface\": {}",
                    words.join("; ")
                );
                Approval::Auto {
                    approved: approved.sha256.clone(),
                }
            }
            Verdict::Held(changes) => {
                self.errors.push(PluginError::Held {
                    path: plugin.path.clone(),
                    name: plugin.metadata.name.clone(),
                    changes: changes.iter().map(ToString::to_string).collect(),
                    lockfile: lockfile.to_owned(),
                });
                Approval::Held
            }
        }
    }

    /// Where `plugin` came from, its digest and pin status.
    pub fn identity(&self, plugin: &Plugin) -> Option<&PluginIdentity> {
        self.identities.iter().find(|id| id.path == plugin.path)
    }

    /// The handler plugins' hooks, each handler under its own grants, in load order: `tool_call` handlers to run
    /// before execution and `tool_result` handlers after it (image normalisation is the session's, after all).
    pub fn hooks(&self) -> HookChain {
        let handlers: Vec<&Plugin> = self.plugins.iter().filter(|p| p.is_handler).collect();
        let (before, after) = crate::wasm::handler_hooks(&handlers, &self.handler_grants);
        let mut chain = HookChain::new();
        if let Some(before) = before {
            chain.push_before_named("handler plugins", before);
        }
        if let Some(after) = after {
            chain.push_after_named("handler plugins", after);
        }
        chain
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// A pipeline with the hooks a session chains for these tools (the handler plugins', then image
    /// normalisation), for running [`Toolset::agent_tools`] without a [`Session`](crate::Session).
    pub fn pipeline(&self) -> crate::pipeline::Pipeline {
        let mut chain = self.hooks();
        chain.push_after_named("image normalisation", crate::builtins::normalize_images());
        crate::pipeline::Pipeline::new().with_hooks(&chain)
    }

    /// Every tool, in registration order (built-ins first, then plugins in load order), a plugin's tool in the
    /// place of a built-in it replaces.
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        let mut definitions = self.builtins.clone();
        for tool in &self.extension_tools {
            match definitions.iter_mut().find(|d| d.name == tool.name) {
                Some(slot) => *slot = tool.clone(),
                None => definitions.push(tool.clone()),
            }
        }
        definitions
    }

    /// Whether a plugin still compiling in the background offers `tool` (the session built once it is done
    /// takes it in, and an `--expose` of it applies then).
    pub fn will_offer(&self, tool: &str) -> bool {
        self.deferred.iter().any(|d| d.tools.iter().any(|t| t == tool))
    }

    /// Change how the model reaches every tool named `tool` (built-in or plugin), as `--expose` does; false when
    /// no tool has the name.
    pub fn set_exposure(&mut self, tool: &str, exposure: toolwright_sdk::Exposure) -> bool {
        let mut found = false;
        for definition in self.builtins.iter_mut().chain(self.extension_tools.iter_mut()) {
            if definition.name == tool {
                definition.exposure = exposure;
                found = true;
            }
        }
        found
    }

    /// The registry of these tools with pi's `tool_search`, and `embedder` tools of the application: the sets,
    /// loadouts and declarations for `selection`.
    pub fn registry(
        &self,
        selection: &crate::registry::Selection,
        embedder: Vec<ToolDefinition>,
    ) -> Result<crate::registry::SharedRegistry, crate::registry::SelectionError> {
        let mut extensions: Vec<ToolDefinition> = self.codemode.iter().cloned().collect();
        extensions.extend(self.extension_tools.iter().cloned());
        let sources = crate::registry::RegistrySources {
            builtins: self.builtins.clone(),
            extensions,
            embedder,
        };
        crate::registry::Registry::with_tool_search(sources, selection)
    }

    /// Every tool as the pipeline runs it, whatever its exposure (no registry: see [`Toolset::registry`]).
    pub fn agent_tools(&self) -> Vec<AgentTool> {
        self.definitions()
            .iter()
            .map(|d| wrap_tool_definition(d, None))
            .collect()
    }
}

/// What no third-party plugin may write, with what each is: the component cache (compiled code runs outside
/// the sandbox), the plugin directories, the trusted policy files with their lockfiles (a plugin writing
/// them would grant itself more at the next start), and the audit logs (a plugin writing one would erase what
/// it did; a grant of the directory that holds one is refused with it).
fn trusted_paths(options: &ToolsetOptions, policy: &Policy) -> Vec<(PathBuf, &'static str)> {
    let mut paths = Vec::new();
    for log in crate::session::audit_logs(options, policy) {
        paths.push((log, "the audit log"));
    }
    if let Some(cache) = &options.cache_dir {
        paths.push((cache.clone(), "the component cache"));
    }
    for dir in &options.plugin_dirs {
        paths.push((dir.clone(), "the plugin directory"));
    }
    for file in &options.policy_files {
        paths.push((file.clone(), "the policy file"));
        if let Some(dir) = file.parent() {
            paths.push((dir.join(crate::wasm::lock::FILE_NAME), "the lockfile"));
        }
    }
    paths
}

/// The error for a write grant in `dirs` that contains a trusted path or lies inside one (compared as real
/// paths, so neither a symbolic link nor `..` hides one), if there is one.
fn writes_what_is_trusted(
    options: &ToolsetOptions,
    policy: &Policy,
    plugin: &Plugin,
    dirs: &[toolwright_core::policy::DirGrant],
) -> Option<PluginError> {
    let writable: Vec<&Path> = dirs
        .iter()
        .filter(|d| d.write)
        .map(|d| d.path.as_path())
        .collect();
    if writable.is_empty() {
        return None;
    }
    trusted_paths(options, policy)
        .into_iter()
        .find_map(|(protected, what)| {
            let real = real_path(&protected);
            writable.iter().find_map(|dir| {
                let granted = real_path(dir);
                (real.starts_with(&granted) || granted.starts_with(&real)).then(|| PluginError::GrantCovers {
                    path: plugin.path.clone(),
                    name: plugin.metadata.name.clone(),
                    dir: dir.to_path_buf(),
                    protected: protected.clone(),
                    what,
                })
            })
        })
}

/// `path` with its symbolic links resolved, as far as it exists (the rest appended as written).
fn real_path(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |p: PathBuf, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// Step 3: the wasm built-ins asked for and the plugin files, loaded in parallel (or from the cache), with
/// duplicates between locations resolved by trust ([`identity::dedupe`]).
fn load_plugins(options: &ToolsetOptions, policy: &Policy, locks: &Locks) -> Result<Loaded, ToolsetError> {
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
    let host =
        PluginHost::shared(options.cache_dir.clone()).map_err(|e| ToolsetError::Runtime(e.to_string()))?;
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
    let mut slots: Vec<Slot> = sources.iter().map(|_| Slot::Load).collect();
    for (path, location) in files {
        slots.push(match defer(options, &host, locks, &path, location) {
            Some(Start::Deferred(plugin)) => Slot::Deferred(plugin),
            Some(Start::Ended(outcome)) => Slot::Ended(outcome),
            None => Slot::Load,
        });
        locations.push(location);
        sources.push((path, None));
    }
    let to_load: Vec<(PathBuf, Option<crate::wasm::Embedded>)> = sources
        .iter()
        .zip(&slots)
        .filter(|(_, slot)| matches!(slot, Slot::Load))
        .map(|(source, _)| source.clone())
        .collect();
    let mut fresh = host.load_all(&to_load).into_iter();
    for slot in &mut slots {
        if matches!(slot, Slot::Load) {
            let outcome = fresh
                .next()
                .unwrap_or_else(|| unreachable!("load_all gives one outcome per source"));
            *slot = Slot::Ended(outcome);
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
        if let Slot::Ended(Ok(plugin)) = slot {
            take(plugin, &mut taken, &mut names);
        }
    }
    loop {
        let clashing = slots.iter().position(|slot| {
            matches!(slot, Slot::Deferred(d)
                if d.tools.iter().any(|t| taken.contains(t)) || names.contains(&d.name))
        });
        let Some(at) = clashing else { break };
        let Slot::Deferred(plugin) = std::mem::replace(&mut slots[at], Slot::Load) else {
            unreachable!("found above")
        };
        let outcome = plugin.finish(&host);
        if let Ok(plugin) = &outcome {
            take(plugin, &mut taken, &mut names);
        }
        slots[at] = Slot::Ended(outcome);
    }
    let mut deferred = Vec::new();
    let mut loaded = Vec::new();
    for (slot, location) in slots.into_iter().zip(locations) {
        match slot {
            Slot::Deferred(plugin) => deferred.push(plugin),
            Slot::Ended(outcome) => loaded.push((outcome, location)),
            Slot::Load => unreachable!("every slot to load was loaded"),
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
enum Slot {
    /// It loads now (or from the cache).
    Load,
    /// It loaded, or failed to.
    Ended(Result<Plugin, PluginError>),
    /// It compiles in the background.
    Deferred(Deferred),
}

/// Whether the plugin file at `path` compiles in the background ([`ToolsetOptions::compile_in_background`]):
/// only when loading it would compile, and its `toolwright.lock` entry for `location` approved exactly this file
/// and says it is no handler — then its tools are known without compiling it, and it is in no other call's path.
/// None: it loads now.
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
    // Every entry approving this file must say it is no handler (an odd lockfile may list it twice).
    let mut approving = lock.plugins.iter().filter(|(_, entry)| entry.sha256 == sha256);
    let (name, entry) = approving.next()?;
    if entry.handler || approving.any(|(_, entry)| entry.handler) {
        return None;
    }
    let tools = entry.tools.keys().cloned().collect();
    Some(background::start(
        host,
        options.cache_dir.as_deref(),
        path,
        digest,
        name,
        tools,
    ))
}

/// How a plugin stands with its lockfile.
enum Approval {
    /// No lockfile records it.
    Unlocked,
    /// It is what was approved.
    Approved,
    /// It changed in a way the policy approves by itself; `approved` is the digest the lockfile records.
    Auto { approved: String },
    /// It changed: it does not run.
    Held,
}

/// The lockfiles in force: the first trusted one (beside the first trusted policy file that has one), and the
/// project's.
#[derive(Debug, Clone, Default)]
pub struct Locks {
    /// For plugins from trusted locations: the lockfile beside the user's policy (or the first `--policy` file),
    /// and what it records.
    pub trusted: Option<(PathBuf, Lockfile)>,
    /// For the project's plugins: the lockfile beside the project's `toolwright.toml`.
    pub project: Option<(PathBuf, Lockfile)>,
}

impl Locks {
    /// The lockfiles beside the policy files of `options` (one that does not parse is an error).
    pub fn load(options: &ToolsetOptions) -> Result<Locks, ToolsetError> {
        let open = |policy: &Path| -> Result<Option<(PathBuf, Lockfile)>, LockError> {
            let path = crate::wasm::lock::beside(policy);
            if !path.exists() {
                return Ok(None);
            }
            Ok(Some((path.clone(), Lockfile::load(&path)?)))
        };
        let mut trusted = None;
        for file in &options.policy_files {
            if let Some(found) = open(file).map_err(ToolsetError::Lock)? {
                trusted = Some(found);
                break;
            }
        }
        let project = match &options.project_policy {
            Some(file) if !options.policy_files.contains(file) => open(file).map_err(ToolsetError::Lock)?,
            _ => None,
        };
        Ok(Locks { trusted, project })
    }

    /// The lockfile for plugins from `location`.
    pub fn for_location(&self, location: PluginLocation) -> Option<(&Path, &Lockfile)> {
        let lock = match location {
            PluginLocation::Builtin => None,
            PluginLocation::Project => self.project.as_ref(),
            PluginLocation::User | PluginLocation::Cli => self.trusted.as_ref(),
        };
        lock.map(|(path, lock)| (path.as_path(), lock))
    }
}

/// Step 4: pi's `codemode`, when this build has it, with the policy's `[codemode]` settings.
fn codemode(
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

/// MiB as bytes, saturating.
fn mib_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

/// The grants of a wasm built-in in the audit log's words.
fn builtin_words(grants: &WasmGrants) -> Vec<String> {
    let dirs = grants.preopens.iter().map(|p| {
        let verb = if p.write { "write" } else { "read" };
        format!("{verb} {}", p.host.display())
    });
    let env = grants.env.iter().map(|(name, _)| format!("env {name}"));
    dirs.chain(super::program_words(&grants.programs))
        .chain(env)
        .collect()
}

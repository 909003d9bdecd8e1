//! Assembling the tools of a session: the built-ins (native or as wasm plugins) and the plugins of the plugin
//! directories, with clear reports of what could not be loaded.
//!
//! [`Toolset::load`] runs named steps in order: [`load_policy`], [`native_builtins`], then (feature `wasm`) the
//! plugin files loaded in parallel (or from the cache), codemode, and for each plugin its three steps: checking
//! trust (its approval in `toolwright.lock`), deciding its grants (a wasm built-in's from `[builtins]`, a third
//! party's from its requests, its identity and the policy), and registering its tools (a wasm built-in taking the
//! place of its native twin).
//!
//! - `options`: what to load ([`ToolsetOptions`], [`BuiltinMode`]).
//! - `builtins`: the policy in force and the built-ins' grants, native and wasm.
//! - `plugins` (feature `wasm`): the plugin files found and loaded (from their cached descriptions when they are
//!   there), some compiling in the `background` ([`Deferred`]: left out until compiled; [`Linking`]: loaded,
//!   their code compiled ahead of their first calls).
//! - `dev` (feature `wasm`): the build of the plugin project `toolwright dev` serves ([`DevBuild`]), loaded ahead
//!   of the installed plugin of its name, under that plugin's approved grants ([`dev_grants`]).
//! - `offerings` (features `wasm` and `mcp`): the third-party plugins' MCP resources and prompts for
//!   `toolwright mcp` ([`PluginOfferings`]), each asked under its plugin's grants.
//! - Trust (identity, lockfile, approvals, project trust) is [`crate::trust`]'s; this module asks it.

#[cfg(feature = "wasm")]
mod background;
mod builtins;
#[cfg(feature = "wasm")]
mod dev;
#[cfg(all(feature = "wasm", feature = "mcp"))]
pub mod mcp;
#[cfg(all(feature = "wasm", feature = "mcp"))]
mod offerings;
mod options;
#[cfg(feature = "wasm")]
mod plugins;
#[cfg(feature = "wasm")]
mod regrant;

use std::path::PathBuf;
#[cfg(feature = "wasm")]
use std::sync::Arc;

#[cfg(feature = "wasm")]
pub use background::{Deferred, Linking, link_in_background, must_wait};
#[cfg(feature = "wasm")]
use builtins::{BuiltinGrants, load_policy_trusted, native_builtins_granted};
pub use builtins::{
    builtin_read_files, builtin_write_dirs, load_policy, native_builtins, network_summary, sandbox_summary,
};
#[cfg(feature = "wasm")]
pub use dev::{DevBuild, dev_grants};
#[cfg(all(feature = "wasm", feature = "mcp"))]
pub use mcp::{McpClients, McpLoad, project_mcp_files, user_mcp_files};
#[cfg(all(feature = "wasm", feature = "mcp"))]
pub use offerings::PluginOfferings;
pub use options::{BuiltinMode, ToolsetOptions, audit_logs, project_plugin_dir, user_plugin_dir};
#[cfg(feature = "wasm")]
pub use regrant::Regrants;

#[cfg(feature = "wasm")]
use crate::audit::{Machine, Origin, OriginKind};
#[cfg(feature = "wasm")]
use crate::definition::{ToolDefinition, ToolSource, wrap_tool_definition};
#[cfg(feature = "wasm")]
use crate::hooks::HookChain;
#[cfg(feature = "wasm")]
use crate::native::{FileMutationQueue, HostEnv, ProgramGrant};
#[cfg(feature = "wasm")]
use crate::policy::{Effective, Policy};
#[cfg(feature = "wasm")]
use crate::tool::AgentTool;
#[cfg(feature = "wasm")]
use crate::trust::identity::{self, PinStatus, PluginIdentity, PluginLocation};
#[cfg(feature = "wasm")]
use crate::trust::{Approval, Locks, TrustError};
#[cfg(feature = "wasm")]
use crate::wasm::{Plugin, PluginError, PluginHost, WasmGrants};

/// Why a toolset could not be assembled at all (a plugin that fails to load is reported, not fatal).
#[derive(Debug, thiserror::Error)]
pub enum ToolsetError {
    /// The workspace cannot be opened for the built-ins' grants.
    #[error("cannot open the workspace {path}")]
    Workspace {
        /// The workspace.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A built-in named to run as wasm does not exist.
    #[error("`{0}` is not a built-in tool (the built-ins are {names})", names = crate::builtins::NAMES.join(", "))]
    UnknownBuiltin(String),
    /// The wasm runtime could not start.
    #[error("the plugin runtime cannot start: {0}")]
    Runtime(String),
    /// What was asked for needs a part this build does not have.
    #[error("{0}")]
    NotBuilt(&'static str),
    /// A policy file is unreadable or invalid.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
    /// A lockfile is unreadable or invalid.
    #[cfg(feature = "wasm")]
    #[error(transparent)]
    Lock(crate::trust::lock::LockError),
}

/// Why a plugin, or a tool of one, is not in the toolset (reported in [`Toolset::errors`], not fatal): the
/// runtime could not load it, or trust left it out.
#[cfg(feature = "wasm")]
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The runtime could not load it, or a tool of it has a name another tool keeps.
    #[error(transparent)]
    Plugin(#[from] PluginError),
    /// Trust left it out: held since it changed, a write grant over what is trusted, or a name another plugin
    /// keeps.
    #[error(transparent)]
    Trust(#[from] TrustError),
}

#[cfg(feature = "wasm")]
impl LoadError {
    /// The plugin file it is about (none for the engine's own failure).
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            LoadError::Plugin(e) => e.path(),
            LoadError::Trust(e) => Some(e.path()),
        }
    }
}

/// The tools of a session, and what happened while loading them.
#[cfg(feature = "wasm")]
pub struct Toolset {
    /// The built-in tools, native or wasm, in pi's order.
    pub builtins: Vec<ToolDefinition>,
    /// The plugins' tools, in load order (the first plugin to offer a name wins).
    pub extension_tools: Vec<ToolDefinition>,
    /// The plugins that loaded (built-ins included when they run as wasm).
    pub plugins: Vec<Plugin>,
    /// The plugins that did not, and why.
    pub errors: Vec<LoadError>,
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
    /// The third-party plugins under their grants, which may offer MCP resources and prompts
    /// ([`PluginOfferings`]).
    offering: Vec<(Plugin, Arc<WasmGrants>)>,
    /// pi's file mutation queue of this toolset's tools.
    mutations: Arc<FileMutationQueue>,
    /// pi's `codemode` (registered as an extension tool, inactive until named; feature `codemode`).
    pub codemode: Option<ToolDefinition>,
    /// Installed plugins left out while they compile in the background
    /// ([`ToolsetOptions::compile_in_background`]); loading the toolset again once they are done takes them in.
    pub deferred: Vec<Deferred>,
    /// What was skipped of an untrusted project, in one line for people, with the command that trusts it.
    pub skipped_project: Option<String>,
    /// The MCP servers and their tools (feature `mcp`; see [`mcp`]).
    #[cfg(feature = "mcp")]
    pub mcp: McpLoad,
}

#[cfg(feature = "wasm")]
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

#[cfg(feature = "wasm")]
impl Toolset {
    /// Load the built-ins and every plugin of the plugin directories. Plugins compile in parallel, or come from
    /// the cache.
    pub fn load(options: &ToolsetOptions) -> Result<Self, ToolsetError> {
        // A project's own plugins do nothing until the user trusts it as it is now. Checked once: the digest
        // reads every file the project ships.
        let trust = options
            .require_project_trust
            .then(|| crate::trust::project::check(&options.cwd));
        let trusted = trust == Some(crate::trust::project::ProjectTrust::Trusted);
        let mut skipped_project = None;
        let untrusted;
        let options = match &trust {
            Some(trust) if !trusted && options::needs_project_trust(options) => {
                skipped_project = crate::trust::project::skipped_line(&options.cwd, trust);
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
            .filter(|section| section.replaces_builtin_defaults())
            .map(|section| BuiltinGrants::open(section, &options.cwd, &host));
        // Every built-in has its slot in pi's order, native or wasm.
        let builtins = match options.builtins {
            BuiltinMode::Native => {
                native_builtins_granted(options, &policy, builtin_section.as_ref(), &host, &mutations)?
            }
            BuiltinMode::Wasm => Vec::new(),
        };
        let locks = Locks::load(&options.policy_files, options.project_policy.as_deref())
            .map_err(ToolsetError::Lock)?;
        let loaded = plugins::load(options, &policy, &locks)?;
        let codemode = plugins::codemode(options, &policy.codemode);
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
            offering: Vec::new(),
            mutations: mutations.clone(),
            codemode,
            deferred: loaded.deferred,
            skipped_project,
            #[cfg(feature = "mcp")]
            mcp: McpLoad::default(),
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
        #[cfg(feature = "mcp")]
        {
            let taken: Vec<String> = toolset.definitions().into_iter().map(|d| d.name).collect();
            toolset.mcp = mcp::load(options, &toolset.policy, &host, trusted, &taken);
        }
        Ok(toolset)
    }

    /// Step 5, for one plugin: checking trust, deciding its grants, registering its tools. A plugin trust leaves
    /// out is recorded with its identity and the reason ([`Toolset::errors`]).
    fn add_plugin(
        &mut self,
        options: &ToolsetOptions,
        host: &HostEnv,
        builtin_section: Option<&BuiltinGrants>,
        plugin: Plugin,
        location: PluginLocation,
        mutations: &Arc<FileMutationQueue>,
    ) {
        let mut identity = PluginIdentity {
            path: plugin.path.clone(),
            location,
            sha256: identity::hex(&plugin.sha256()),
            pin: PinStatus::Unpinned,
        };
        let decided = self
            .check_trust(options, &plugin, &identity)
            .and_then(|()| self.decide_grants(options, host, builtin_section, &plugin, &mut identity));
        match decided {
            Ok((grants, granted_words)) => {
                self.register_tools(plugin, grants, granted_words, identity, mutations);
            }
            Err(refused) => {
                self.errors.push(refused.into());
                self.identities.push(identity);
            }
        }
    }

    /// Checking trust: a plugin that no longer matches its approval in toolwright.lock does not run at all,
    /// neither its tools nor its hooks (a changed handler could rewrite calls); the error says what changed. The
    /// wasm built-ins are the host's own.
    fn check_trust(
        &mut self,
        options: &ToolsetOptions,
        plugin: &Plugin,
        identity: &PluginIdentity,
    ) -> Result<(), TrustError> {
        if identity.location == PluginLocation::Builtin {
            return Ok(());
        }
        if identity.location == PluginLocation::Dev {
            // Its approval is the user's choice of the project, for the one file its build wrote.
            return match &options.dev {
                Some(dev) if dev.sha256 == identity.sha256 => Ok(()),
                _ => Err(TrustError::NotDevBuild {
                    path: plugin.path.clone(),
                    project: options
                        .dev
                        .as_ref()
                        .map(|d| d.project.clone())
                        .unwrap_or_default(),
                    found: identity.sha256.clone(),
                    built: options.dev.as_ref().map(|d| d.sha256.clone()).unwrap_or_default(),
                }),
            };
        }
        let same_surface = self.policy.auto_approve == Some(crate::policy::AutoApprove::SameSurface);
        // The pin `plugins add` wrote is the lockfile's digest: what the lockfile approves by itself, the pin does
        // not refuse.
        if let Approval::Auto { approved } = self.locks.approval(plugin, identity.location, same_surface)? {
            let entry = identity::policy_for(&self.policy, &plugin.metadata.name, identity.location);
            if let Some(entry) = entry
                && entry.sha256.iter().all(|pin| *pin == approved)
                && let Some(p) = self.policy.plugins.get_mut(&plugin.metadata.name)
            {
                p.sha256 = vec![identity.sha256.clone()];
            }
        }
        Ok(())
    }

    /// Deciding grants: a wasm built-in's from `[builtins]`, a third party's from its identity and the policy
    /// ([`Toolset::plugin_grants`]); with the host's limits. The grants with their words for the audit log.
    fn decide_grants(
        &mut self,
        options: &ToolsetOptions,
        host: &HostEnv,
        builtin_section: Option<&BuiltinGrants>,
        plugin: &Plugin,
        identity: &mut PluginIdentity,
    ) -> Result<(WasmGrants, Vec<String>), TrustError> {
        if identity.location == PluginLocation::Builtin {
            return Ok(wasm_builtin(options, &self.policy, host, builtin_section, plugin));
        }
        let (mut grants, words) = self.plugin_grants(options, host, plugin, identity)?;
        grants.work = crate::pipeline::Work::Relaying;
        if let Some(mib) = self.policy.limits.result_mib {
            grants.result_cap = mib_bytes(mib);
        }
        Ok((grants, words))
    }

    /// A third party's grants: what it requests, intersected with the policy entry that applies where it came from
    /// (its pin status recorded in `identity`), refused whole when a write grant covers what is trusted. Its
    /// decisions are kept for `toolwright plugins` ([`Toolset::grants`]).
    fn plugin_grants(
        &mut self,
        options: &ToolsetOptions,
        host: &HostEnv,
        plugin: &Plugin,
        identity: &mut PluginIdentity,
    ) -> Result<(WasmGrants, Vec<String>), TrustError> {
        let cwd = toolwright_sdk::paths::normalize(&options.cwd.to_string_lossy());
        let name = &plugin.metadata.name;
        let effective = if identity.location == PluginLocation::Dev {
            // The installed plugin of its name, as the trusted lockfile approved it.
            let installed = self
                .locks
                .for_location(PluginLocation::User)
                .and_then(|(_, lock)| lock.plugins.get(name));
            dev_grants(
                name,
                &plugin.metadata.capabilities,
                &self.policy,
                installed,
                &identity.sha256,
                &cwd,
                host.home.as_deref(),
            )
        } else {
            let entry = identity::policy_for(&self.policy, name, identity.location);
            identity.pin = identity::pin_status(entry.as_ref(), &identity.sha256);
            identity::grants_for(
                name,
                &plugin.metadata.capabilities,
                &self.policy,
                identity,
                &cwd,
                host.home.as_deref(),
            )
        };
        let grants = runtime_grants(options, host, &self.policy, plugin, &effective)?;
        let words = effective
            .decisions
            .iter()
            .flat_map(|d| d.granted.iter().map(ToString::to_string))
            .collect();
        self.grants.push((name.clone(), effective));
        Ok((grants, words))
    }

    /// Registering tools: the plugin under its decided `grants` (loaded again on the metered engine when they set
    /// a fuel budget), its tools in the toolset with where they came from: a wasm built-in's in the place of its
    /// native twin, a third party's after the built-ins, by pi's precedence.
    fn register_tools(
        &mut self,
        mut plugin: Plugin,
        mut grants: WasmGrants,
        granted_words: Vec<String>,
        identity: PluginIdentity,
        mutations: &Arc<FileMutationQueue>,
    ) {
        let is_builtin = identity.location == PluginLocation::Builtin;
        // A fuel budget needs the plugin compiled with metering: load it again on the metered engine.
        if grants.fuel.is_some()
            && let Some(host) = &self.host
        {
            match host.metered(&plugin) {
                Ok(metered) => plugin = metered,
                Err(e) => {
                    self.errors.push(e.into());
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
        if plugin.is_handler {
            self.handler_grants.push(grants.clone());
        }
        if !is_builtin {
            self.offering.push((plugin.clone(), Arc::new(grants.clone())));
        }
        for definition in wasm_definitions(&plugin, &grants, granted_words, sha256, is_builtin) {
            if is_builtin {
                // A wasm built-in takes the place of its native twin, in pi's order.
                match self.builtins.iter_mut().find(|d| d.name == definition.name) {
                    Some(native) => *native = definition,
                    None => self.builtins.push(definition),
                }
            } else {
                self.add_extension_tool(definition, &plugin.path);
            }
        }
        self.plugins.push(plugin);
    }

    /// A third party's tool from the plugin at `path`, by pi's precedence: an extension's tool replaces a built-in
    /// of the same name (where the user's `replace` allows it); between extensions, the first in load order wins.
    fn add_extension_tool(&mut self, definition: ToolDefinition, path: &std::path::Path) {
        if let Some(existing) = self.extension_tools.iter().find(|d| d.name == definition.name) {
            self.errors.push(
                PluginError::ToolClash {
                    path: path.to_owned(),
                    tool: definition.name.clone(),
                    other: match &existing.source {
                        ToolSource::Plugin { path } => path.clone(),
                        _ => PathBuf::from("builtin"),
                    },
                }
                .into(),
            );
            return;
        }
        if self.builtins.iter().any(|d| d.name == definition.name) {
            // A plugin takes a built-in's name only where the user's config says so (`replace`).
            if !self.policy.replace.contains(&definition.name) {
                self.errors.push(
                    PluginError::ReplacesBuiltin {
                        path: path.to_owned(),
                        tool: definition.name.clone(),
                    }
                    .into(),
                );
                return;
            }
            self.overrides.push((definition.name.clone(), path.to_owned()));
        }
        self.extension_tools.push(definition);
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
        for tool in self.extension_tools.iter().chain(self.mcp_tools()) {
            match definitions.iter_mut().find(|d| d.name == tool.name) {
                Some(slot) => *slot = tool.clone(),
                None => definitions.push(tool.clone()),
            }
        }
        definitions
    }

    /// The tools of the MCP servers (feature `mcp`), held ones left out.
    pub fn mcp_tools(&self) -> &[ToolDefinition] {
        #[cfg(feature = "mcp")]
        return &self.mcp.tools;
        #[cfg(not(feature = "mcp"))]
        &[]
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
        #[cfg(feature = "mcp")]
        let mcp = self.mcp.tools.iter_mut();
        #[cfg(not(feature = "mcp"))]
        let mcp = std::iter::empty();
        for definition in self
            .builtins
            .iter_mut()
            .chain(self.extension_tools.iter_mut())
            .chain(mcp)
        {
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
        extensions.extend(self.mcp_tools().iter().cloned());
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

/// What the runtime applies of `effective`, a third party's decided grants under `policy`: its directories that
/// exist, its variables and programs, refused whole when a write grant covers what is trusted; what it refuses
/// recorded for asking when the policy asks ([`crate::ask`]).
#[cfg(feature = "wasm")]
fn runtime_grants(
    options: &ToolsetOptions,
    host: &HostEnv,
    policy: &Policy,
    plugin: &Plugin,
    effective: &Effective,
) -> Result<WasmGrants, TrustError> {
    // Directories that do not exist are not mapped (nor given to the plugin's programs).
    let mut existing = effective.clone();
    existing.dirs.retain(|d| d.path.is_dir());
    let protected = || plugins::trusted_paths(options, policy);
    if let Some(error) = crate::trust::writes_what_is_trusted(protected, plugin, &existing.dirs) {
        return Err(error);
    }
    let env = host.vars_granted(&existing.env, &[]);
    // Sockets on and its programs' proxy serving, refusing everything not granted, so that what it tries can be
    // asked about.
    let network_asked = policy.ask.grants()
        && plugin
            .metadata
            .capabilities
            .iter()
            .any(|c| matches!(c.capability, toolwright_sdk::Capability::Network(_)));
    let programs = ProgramGrant::for_plugin(&existing, &host.path, network_asked);
    let mut grants = WasmGrants::from_effective(&existing, &options.cwd, env, programs);
    grants.know_home(host.home.as_deref());
    if policy.ask.grants() {
        grants.refusals = Some(options.refusals.clone());
        grants.network_asked = network_asked;
    }
    grants.client = Some(options.client.clone());
    grants.sampling = policy.ask.samples(&plugin.metadata.name);
    Ok(grants)
}

/// A wasm built-in's grants (`[builtins]`'s, `section` decided already) under `policy`, with their words for the
/// audit log: its work short when its native twin's is, the policy's result cap.
#[cfg(feature = "wasm")]
fn wasm_builtin(
    options: &ToolsetOptions,
    policy: &Policy,
    host: &HostEnv,
    section: Option<&BuiltinGrants>,
    plugin: &Plugin,
) -> (WasmGrants, Vec<String>) {
    let mut grants = builtins::wasm_builtin_grants(options, policy, host, section);
    let words = builtins::builtin_words(&grants);
    let short = plugin
        .tools
        .iter()
        .all(|t| crate::builtins::work(&t.name) == crate::pipeline::Work::Short);
    grants.work = if short {
        crate::pipeline::Work::Short
    } else {
        crate::pipeline::Work::Relaying
    };
    if let Some(mib) = policy.limits.result_mib {
        grants.result_cap = mib_bytes(mib);
    }
    (grants, words)
}

/// The tools of the wasm `plugin` under `grants` (`words` for the audit log), each with its origin; a built-in's
/// as a built-in.
#[cfg(feature = "wasm")]
fn wasm_definitions(
    plugin: &Plugin,
    grants: &WasmGrants,
    words: Vec<String>,
    sha256: String,
    is_builtin: bool,
) -> Vec<ToolDefinition> {
    let origin = Arc::new(Origin {
        kind: if is_builtin {
            OriginKind::Builtin
        } else {
            OriginKind::Plugin
        },
        machine: Machine::Wasm,
        plugin: Some(plugin.metadata.name.clone()),
        server: None,
        sha256: Some(sha256),
        grants: Some(words),
        // A wasm built-in sees the host's whole environment: only what looks like a secret is kept out.
        secrets: if is_builtin {
            Arc::new(crate::audit::secret_looking(&grants.env))
        } else {
            grants.env.clone()
        },
    });
    let mut definitions = plugin.tool_definitions(grants);
    for definition in &mut definitions {
        definition.origin = Some(origin.clone());
        if is_builtin {
            definition.source = ToolSource::Builtin;
        }
    }
    definitions
}

/// MiB as bytes, saturating.
#[cfg(feature = "wasm")]
fn mib_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

//! Assembling the tools of a session: the built-ins (native or as wasm plugins) and the plugins of the plugin
//! directories, with clear reports of what could not be loaded.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::definition::{ToolDefinition, wrap_tool_definition};
use crate::grants::{Grant, GrantedFiles};
use crate::identity::{PluginIdentity, PluginLocation};
use crate::native::ProgramGrant;
use crate::native::{FileMutationQueue, NativeEnv};
use crate::policy::{Effective, PluginPolicy, Policy};
use crate::tool::AgentTool;
use crate::wasm::{Plugin, PluginError, PluginHost, Preopen, WasmGrants};

/// How the built-in tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BuiltinMode {
    /// Linked into the host.
    #[default]
    Native,
    /// As wasm plugins, from the same source.
    Wasm,
}

/// What to load.
#[derive(Debug, Clone)]
pub struct ToolsetOptions {
    /// The workspace.
    pub cwd: PathBuf,
    /// How the built-ins run.
    pub builtins: BuiltinMode,
    /// Built-ins that run as wasm plugins even when the others run natively.
    pub wasm_builtins: Vec<String>,
    /// Trusted plugin directories, in load order: the user's (`~/.config/toolwright/plugins`), those given
    /// with `--plugins` or by the embedding application. Grants of the trusted policy files apply to their
    /// plugins.
    pub plugin_dirs: Vec<PathBuf>,
    /// The project's plugin directory (`<cwd>/.toolwright/plugins`), loaded first and untrusted: its plugins get
    /// only what the project's own policy grants, and never take the name of a trusted plugin
    /// ([`crate::identity`]). When it is also one of `plugin_dirs`, it was trusted on purpose and counts as that.
    pub project_plugin_dir: Option<PathBuf>,
    /// Where compiled components are cached (none: compile every time).
    pub cache_dir: Option<PathBuf>,
    /// Trusted policy files: the user's config and files given on the command line (grants add up, denials
    /// win).
    pub policy_files: Vec<PathBuf>,
    /// The project's policy file, confined unless a trusted file lists the workspace in `trusted-projects`.
    pub project_policy: Option<PathBuf>,
}

impl ToolsetOptions {
    /// The built-ins, natively, in `cwd`, with the default plugin directories and cache.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        ToolsetOptions {
            plugin_dirs: user_plugin_dir().into_iter().collect(),
            project_plugin_dir: Some(project_plugin_dir(&cwd)),
            policy_files: crate::policy::default_files(),
            project_policy: Some(crate::policy::project_file(&cwd)),
            cwd,
            builtins: BuiltinMode::Native,
            wasm_builtins: Vec::new(),
            cache_dir: Some(crate::wasm::default_cache_dir()),
        }
    }

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

/// The user's plugin directory: `$XDG_CONFIG_HOME/toolwright/plugins` (or `~/.config/toolwright/plugins`).
pub fn user_plugin_dir() -> Option<PathBuf> {
    crate::policy::config_dir().map(|c| c.join("plugins"))
}

/// The project's plugin directory: `<cwd>/.toolwright/plugins`.
pub fn project_plugin_dir(cwd: &Path) -> PathBuf {
    cwd.join(".toolwright").join("plugins")
}

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
    /// The wasm runtime could not start, or the built-ins were built without wasm components.
    #[error("{0}")]
    Runtime(String),
    /// A policy file is unreadable or invalid.
    #[error(transparent)]
    Policy(#[from] crate::policy::PolicyError),
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
    handler_grants: Vec<WasmGrants>,
    /// pi's `codemode` (registered as an extension tool, inactive until named).
    pub codemode: ToolDefinition,
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

impl Toolset {
    /// Load the built-ins and every plugin of the plugin directories. Plugins compile in parallel, or come from
    /// the cache.
    pub fn load(options: &ToolsetOptions) -> Result<Self, ToolsetError> {
        let cwd_text = toolwright_sdk::paths::normalize(&options.cwd.to_string_lossy());
        let home = std::env::var("HOME").ok();
        let policy = Policy::load_with_project(
            &options.policy_files,
            options.project_policy.as_deref(),
            &cwd_text,
            home.as_deref(),
        )?;
        for line in &policy.ignored {
            tracing::warn!("ignored from the project's untrusted toolwright.toml: {line}");
        }
        let mutations = Arc::new(FileMutationQueue::default());
        let files = options.plugin_files();
        let as_wasm = |name: &str| {
            options.builtins == BuiltinMode::Wasm || options.wasm_builtins.iter().any(|w| w == name)
        };
        if let Some(unknown) = options
            .wasm_builtins
            .iter()
            .find(|w| !crate::builtins::NAMES.contains(&w.as_str()))
        {
            return Err(ToolsetError::Runtime(format!(
                "`{unknown}` is not a built-in tool (the built-ins are {})",
                crate::builtins::NAMES.join(", ")
            )));
        }
        let needs_runtime = crate::builtins::NAMES.iter().any(|n| as_wasm(n)) || !files.is_empty();
        let host = if needs_runtime {
            Some(
                PluginHost::shared(options.cache_dir.clone())
                    .map_err(|e| ToolsetError::Runtime(e.to_string()))?,
            )
        } else {
            None
        };
        if let (Some(host), Some(mib)) = (&host, policy.limits.host_memory_mib) {
            host.memory_budget().set_cap(mib_bytes(mib));
        }
        let mut sources: Vec<(PathBuf, Option<&'static [u8]>)> = Vec::new();
        if crate::builtins::NAMES.iter().any(|n| as_wasm(n)) {
            let builtins = crate::builtins::wasm::BUILTINS.ok_or_else(|| {
                ToolsetError::Runtime(
                    "this toolwright was built without the wasm built-ins (TOOLWRIGHT_SKIP_WASM_BUILD)"
                        .into(),
                )
            })?;
            sources.extend(
                builtins
                    .iter()
                    .filter(|(name, _)| as_wasm(name))
                    .map(|(name, bytes)| (PathBuf::from(format!("builtin:{name}")), Some(*bytes))),
            );
        }
        let mut locations = vec![PluginLocation::Builtin; sources.len()];
        locations.extend(files.iter().map(|(_, location)| *location));
        sources.extend(files.into_iter().map(|(p, _)| (p, None)));
        let loaded = match &host {
            Some(host) => host.load_all(&sources),
            None => Vec::new(),
        };
        let (kept, mut errors) = crate::identity::dedupe(loaded.into_iter().zip(locations).collect());
        let (mut plugins, locations): (Vec<Plugin>, Vec<PluginLocation>) = kept.into_iter().unzip();
        let mut identities = Vec::new();

        // Every built-in has its slot in pi's order, native or wasm.
        let mut builtins = Vec::new();
        if options.builtins == BuiltinMode::Native {
            let workspace_error = |source| ToolsetError::Workspace {
                path: options.cwd.clone(),
                source,
            };
            let mut env = NativeEnv::builtin(&options.cwd).map_err(workspace_error)?;
            if let Some(b) = &policy.builtins {
                let (grants, programs, vars) = builtin_policy(b, &cwd_text, home.as_deref());
                env.files = Arc::new(GrantedFiles::open(&grants).map_err(workspace_error)?);
                env.programs = programs;
                env.env = Arc::new(vars);
            }
            env.mutations = mutations.clone();
            builtins.extend(crate::builtins::definitions(&env));
        }
        let mut extension_tools: Vec<ToolDefinition> = Vec::new();
        let mut overrides = Vec::new();
        let mut decided = Vec::new();
        let mut handler_grants = Vec::new();
        let mut unusable = Vec::new();
        #[allow(clippy::needless_range_loop)] // A plugin may be replaced by its metered twin inside the loop.
        for i in 0..plugins.len() {
            let plugin = &plugins[i];
            let is_builtin = locations[i] == PluginLocation::Builtin;
            let mut identity = PluginIdentity {
                path: plugin.path.clone(),
                location: locations[i],
                sha256: crate::identity::hex(&plugin.sha256()),
                pin: crate::identity::PinStatus::Unpinned,
            };
            let mut grants = if is_builtin {
                let mut grants = WasmGrants::builtin(&options.cwd);
                if let Some(b) = &policy.builtins {
                    let (dirs, programs, vars) = builtin_policy(b, &cwd_text, home.as_deref());
                    let temp = grants.preopens.pop();
                    grants.preopens = dirs
                        .iter()
                        .map(|g| Preopen {
                            host: g.path.clone(),
                            guest: g.path.to_string_lossy().into_owned(),
                            write: g.write,
                        })
                        .chain(temp)
                        .collect();
                    grants.programs = programs;
                    grants.env = Arc::new(vars);
                    // Limits bind the wasm built-ins (natively they are the host's own code, as in pi).
                    grants.limit(b.timeout_ms, b.memory_mib);
                }
                grants
            } else {
                let name = &plugin.metadata.name;
                let entry = crate::identity::policy_for(&policy, name, identity.location);
                identity.pin = crate::identity::pin_status(entry.as_ref(), &identity.sha256);
                let effective = crate::identity::decide(
                    name,
                    &plugin.metadata.capabilities,
                    &policy,
                    &identity,
                    &cwd_text,
                    home.as_deref(),
                );
                let grants = WasmGrants::from_effective(&effective, &options.cwd);
                decided.push((name.clone(), effective));
                grants
            };
            identities.push(identity);
            // A fuel budget needs the plugin compiled with metering: load it again on the metered engine.
            if grants.fuel.is_some()
                && let Some(host) = &host
            {
                match host.metered(plugin) {
                    Ok(metered) => plugins[i] = metered,
                    Err(e) => {
                        errors.push(e);
                        unusable.push(i);
                        continue;
                    }
                }
            }
            let plugin = &plugins[i];
            grants.mutations = mutations.clone();
            if let Some(mib) = policy.limits.result_mib {
                grants.result_cap = mib_bytes(mib);
            }
            if plugin.is_handler {
                handler_grants.push(grants.clone());
            }
            for mut definition in plugin.tool_definitions(&grants) {
                if is_builtin {
                    definition.source = crate::definition::ToolSource::Builtin;
                    // A wasm built-in takes the place of its native twin, in pi's order.
                    match builtins
                        .iter_mut()
                        .find(|d: &&mut ToolDefinition| d.name == definition.name)
                    {
                        Some(native) => *native = definition,
                        None => builtins.push(definition),
                    }
                    continue;
                }
                // pi's precedence: an extension's tool replaces a built-in of the same name; between extensions,
                // the first in load order wins.
                if let Some(existing) = extension_tools.iter().find(|d| d.name == definition.name) {
                    errors.push(PluginError::ToolClash {
                        path: plugin.path.clone(),
                        tool: definition.name.clone(),
                        other: match &existing.source {
                            crate::definition::ToolSource::Plugin { path } => path.clone(),
                            _ => PathBuf::from("builtin"),
                        },
                    });
                    continue;
                }
                if builtins.iter().any(|d| d.name == definition.name) {
                    overrides.push((definition.name.clone(), plugin.path.clone()));
                }
                extension_tools.push(definition);
            }
        }
        // A plugin whose budget cannot be enforced offers nothing (its error says why).
        for i in unusable.into_iter().rev() {
            plugins.remove(i);
        }
        identities.retain(|id| plugins.iter().any(|p| p.path == id.path));
        Ok(Toolset {
            builtins,
            extension_tools,
            plugins,
            errors,
            overrides,
            host,
            policy,
            grants: decided,
            identities,
            handler_grants,
            codemode: crate::codemode::definition(crate::codemode::CodemodeOptions {
                cwd: options.cwd.clone(),
                cache_dir: options.cache_dir.clone(),
                timeout: Some(crate::wasm::DEFAULT_TIMEOUT),
            }),
        })
    }

    /// Where `plugin` came from, its digest and pin status.
    pub fn identity(&self, plugin: &Plugin) -> Option<&PluginIdentity> {
        self.identities.iter().find(|id| id.path == plugin.path)
    }

    /// The session's pipeline: the handler plugins' hooks, each handler under its own grants, and pi's image
    /// normalisation of every result (after the handlers, as pi's session does).
    pub fn pipeline(&self, cwd: &Path) -> crate::pipeline::Pipeline {
        let _ = cwd;
        let handlers: Vec<&Plugin> = self.plugins.iter().filter(|p| p.is_handler).collect();
        let (before, after) = crate::wasm::handler_hooks(&handlers, &self.handler_grants);
        let mut pipeline = crate::pipeline::Pipeline::new().with_after_tool_call(after);
        if let Some(before) = before {
            pipeline = pipeline.with_before_tool_call(before);
        }
        pipeline
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
    ) -> Result<Arc<std::sync::Mutex<crate::registry::Registry>>, crate::registry::SelectionError> {
        let mut extensions = vec![self.codemode.clone()];
        extensions.extend(self.extension_tools.iter().cloned());
        let sources = crate::registry::RegistrySources {
            builtins: self.builtins.clone(),
            extensions,
            sdk: embedder,
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

/// The built-ins' grants when a policy sets them: its directories (deny wins), programs and variables.
fn builtin_policy(
    p: &PluginPolicy,
    cwd: &str,
    home: Option<&str>,
) -> (Vec<Grant>, ProgramGrant, Vec<(String, String)>) {
    let resolve = |list: &[String]| {
        list.iter()
            .map(|d| crate::policy::resolve(d, cwd, home))
            .collect::<Vec<_>>()
    };
    let denied = resolve(&p.deny.read);
    let denied_write = resolve(&p.deny.write);
    let inside =
        |dir: &str, other: &str| other == "/" || dir == other || dir.starts_with(&format!("{other}/"));
    let clash = |dir: &str, list: &[String]| list.iter().any(|d| inside(dir, d) || inside(d, dir));
    let mut grants: Vec<Grant> = resolve(&p.read)
        .into_iter()
        .filter(|d| !clash(d, &denied))
        .map(Grant::read_only)
        .collect();
    grants.extend(
        resolve(&p.write)
            .into_iter()
            .filter(|d| !clash(d, &denied) && !clash(d, &denied_write))
            .map(Grant::read_write),
    );
    grants.retain(|g| g.path.is_dir());
    let programs = if p.spawn.iter().any(|s| s.program == "*" && s.args.is_none()) && p.deny.spawn.is_empty()
    {
        ProgramGrant::Any
    } else {
        let rules: Vec<_> = p
            .spawn
            .iter()
            .filter(|s| !p.deny.spawn.contains(&s.program))
            .cloned()
            .collect();
        let writable: Vec<_> = grants
            .iter()
            .filter(|g| g.write)
            .map(|g| g.path.clone())
            .collect();
        // The built-ins' programs are resolved like a plugin's, but run unconfined with any variables, as
        // they always have: the built-in tools are the host's own code.
        ProgramGrant::Only(crate::native::Programs::new(
            &rules,
            &std::env::var("PATH").unwrap_or_default(),
            &writable,
            None,
            None,
        ))
    };
    let all = p.env.iter().any(|v| v == "*");
    let vars = std::env::vars()
        .filter(|(k, _)| (all || p.env.contains(k)) && !p.deny.env.iter().any(|d| d == k || d == "*"))
        .collect();
    (grants, programs, vars)
}

/// MiB as bytes, saturating.
fn mib_bytes(mib: u64) -> usize {
    usize::try_from(mib.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

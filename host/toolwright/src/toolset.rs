//! Assembling the tools of a session: the built-ins (native or as wasm plugins) and the plugins of the plugin
//! directories, with clear reports of what could not be loaded.
//!
//! [`Toolset::load`] runs named steps in order: [`load_policy`], [`native_builtins`], then (feature `wasm`) the
//! plugins, each under its decided grants, a wasm built-in taking the place of its native twin, and codemode.

#[cfg(feature = "wasm")]
mod background;
#[cfg(feature = "wasm")]
mod plugins;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::definition::ToolDefinition;
use crate::grants::{Grant, GrantedFiles};
use crate::native::{FileMutationQueue, HostEnv, NativeEnv, ProgramGrant};
use crate::policy::{PluginPolicy, Policy};
#[cfg(feature = "wasm")]
pub use background::{Deferred, must_wait};
#[cfg(feature = "wasm")]
pub use plugins::{Locks, Toolset};

/// How the built-in tools run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BuiltinMode {
    /// Linked into the host.
    #[default]
    Native,
    /// As wasm plugins, from the same source (feature `wasm`).
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
    /// (`toolwright::identity`). When it is also one of `plugin_dirs`, it was trusted on purpose and counts as
    /// that.
    pub project_plugin_dir: Option<PathBuf>,
    /// Where compiled components are cached (none: compile every time).
    pub cache_dir: Option<PathBuf>,
    /// Trusted policy files: the user's config and files given on the command line (grants add up, denials
    /// win).
    pub policy_files: Vec<PathBuf>,
    /// The project's policy file, confined unless a trusted file lists the workspace in `trusted-projects`.
    pub project_policy: Option<PathBuf>,
    /// An audit log to write besides the one the policy names (`--audit-log`; the same file is written once).
    pub audit_log: Option<PathBuf>,
    /// Whether the project's plugins and grants (`project_plugin_dir`, `project_policy`) need the user's trust
    /// ([`crate::trust`], feature `wasm`): without it, the project's plugins are not loaded and its policy file
    /// is confined. On in [`ToolsetOptions::new`], what the command line loads.
    pub require_project_trust: bool,
    /// Compile installed plugins that are not in the cache on threads of their own, leaving them out of the
    /// toolset until they are done ([`Toolset::deferred`]; only with a cache, and only plugins whose
    /// `toolwright.lock` entry approved exactly their file and says they are no handler). Off: every plugin is
    /// loaded before the toolset is.
    pub compile_in_background: bool,
}

impl ToolsetOptions {
    /// The built-ins, natively, in `cwd`, with the user's and the project's plugin directories and policy
    /// files, and the default cache: what the `toolwright` command line loads.
    pub fn new(cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        ToolsetOptions {
            plugin_dirs: user_plugin_dir().into_iter().collect(),
            project_plugin_dir: Some(project_plugin_dir(&cwd)),
            policy_files: crate::policy::default_files(),
            project_policy: Some(crate::policy::project_file(&cwd)),
            require_project_trust: true,
            #[cfg(feature = "wasm")]
            cache_dir: Some(crate::wasm::default_cache_dir()),
            ..Self::bare(cwd)
        }
    }

    /// The built-ins, natively, in `cwd`, and nothing else: no plugin directory, no policy file, no cache
    /// (what [`Session::builder`](crate::Session::builder) starts from).
    pub fn bare(cwd: impl Into<PathBuf>) -> Self {
        ToolsetOptions {
            cwd: cwd.into(),
            builtins: BuiltinMode::Native,
            wasm_builtins: Vec::new(),
            plugin_dirs: Vec::new(),
            project_plugin_dir: None,
            cache_dir: None,
            policy_files: Vec::new(),
            project_policy: None,
            audit_log: None,
            require_project_trust: false,
            compile_in_background: false,
        }
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
    Lock(crate::wasm::lock::LockError),
}

/// Step 1: the policy in force for `options` (trusted files, then the project's, confined unless trusted).
/// What the project's file may not set is logged and left out.
pub fn load_policy(options: &ToolsetOptions, host: &HostEnv) -> Result<Policy, ToolsetError> {
    load_policy_trusted(options, host, project_trusted(options))
}

/// [`load_policy`] when whether the user trusted the project is already known (`trusted`).
pub(crate) fn load_policy_trusted(
    options: &ToolsetOptions,
    host: &HostEnv,
    trusted: bool,
) -> Result<Policy, ToolsetError> {
    let cwd = toolwright_sdk::paths::normalize(&options.cwd.to_string_lossy());
    let policy = Policy::load_with_trusted_project(
        &options.policy_files,
        options.project_policy.as_deref(),
        &cwd,
        host.home.as_deref(),
        trusted,
    )?;
    for line in &policy.ignored {
        tracing::warn!("ignored from the project's untrusted toolwright.toml: {line}");
    }
    Ok(policy)
}

/// Whether the user trusted the project as it is now (`toolwright trust`; feature `wasm`).
fn project_trusted(options: &ToolsetOptions) -> bool {
    #[cfg(feature = "wasm")]
    if options.require_project_trust {
        return crate::trust::check(&options.cwd) == crate::trust::ProjectTrust::Trusted;
    }
    let _ = options;
    false
}

/// Step 2: the built-in tools running natively in `options.cwd`, under the policy's `[builtins]` grants when it
/// has some (else the defaults: read anywhere, write in the workspace and the temp directory), sharing
/// `mutations` with the other tools.
pub fn native_builtins(
    options: &ToolsetOptions,
    policy: &Policy,
    host: &HostEnv,
    mutations: &Arc<FileMutationQueue>,
) -> Result<Vec<ToolDefinition>, ToolsetError> {
    let granted = policy
        .builtins
        .as_ref()
        .filter(|section| section.grants())
        .map(|section| BuiltinGrants::decide(section, &options.cwd, host));
    native_builtins_granted(options, granted.as_ref(), host, mutations)
}

/// [`native_builtins`] with the `[builtins]` section already decided (`None`: the defaults).
pub(crate) fn native_builtins_granted(
    options: &ToolsetOptions,
    granted: Option<&BuiltinGrants>,
    host: &HostEnv,
    mutations: &Arc<FileMutationQueue>,
) -> Result<Vec<ToolDefinition>, ToolsetError> {
    let workspace_error = |source| ToolsetError::Workspace {
        path: options.cwd.clone(),
        source,
    };
    let mut env = NativeEnv::builtin_in(&options.cwd, host).map_err(workspace_error)?;
    if let Some(granted) = granted {
        env.files = Arc::new(GrantedFiles::open(&granted.dirs).map_err(workspace_error)?);
        env.programs = granted.programs.clone();
        env.env = Arc::new(granted.vars.clone());
    }
    env.mutations = mutations.clone();
    let origin = Arc::new(crate::audit::Origin {
        grants: granted.map(|g| {
            let dirs = g.dirs.iter().map(|d| {
                let verb = if d.write { "write" } else { "read" };
                format!("{verb} {}", d.path.display())
            });
            let env = g.vars.iter().map(|(name, _)| format!("env {name}"));
            dirs.chain(program_words(&g.programs)).chain(env).collect()
        }),
        secrets: Arc::new(crate::audit::secret_looking(&env.env)),
        ..Default::default()
    });
    let mut definitions = crate::builtins::definitions(&env);
    for definition in &mut definitions {
        definition.origin = Some(origin.clone());
    }
    Ok(definitions)
}

/// The programs of a grant in the audit log's words (`spawn git`, `spawn *`).
pub(crate) fn program_words(programs: &ProgramGrant) -> Vec<String> {
    match programs {
        ProgramGrant::None => Vec::new(),
        ProgramGrant::Any => vec!["spawn *".into()],
        ProgramGrant::Only(p) => p
            .granted
            .iter()
            .map(|p| format!("spawn {}", p.rule.program))
            .collect(),
    }
}

/// What a policy's `[builtins]` section gives the built-ins: decided by the same rule as a plugin's requests
/// ([`crate::policy::intersect_granted`]: what the section grants, deny wins), then made concrete here, once per
/// load (programs are resolved on the host's `PATH`) for the native and the wasm built-ins alike.
#[cfg_attr(not(feature = "wasm"), allow(dead_code))]
pub(crate) struct BuiltinGrants {
    /// The granted directories that exist.
    pub dirs: Vec<Grant>,
    /// The programs.
    pub programs: ProgramGrant,
    /// The environment variables, with their values from the host.
    pub vars: Vec<(String, String)>,
}

impl BuiltinGrants {
    pub(crate) fn decide(section: &PluginPolicy, cwd: &Path, host: &HostEnv) -> Self {
        let cwd_text = toolwright_sdk::paths::normalize(&cwd.to_string_lossy());
        let effective = crate::policy::intersect_granted(section, &cwd_text, host.home.as_deref());
        let dirs: Vec<Grant> = effective
            .dirs
            .iter()
            .filter(|d| d.path.is_dir())
            .map(|d| {
                if d.write {
                    Grant::read_write(d.path.clone())
                } else {
                    Grant::read_only(d.path.clone())
                }
            })
            .collect();
        let any_program = effective
            .spawn_rules
            .iter()
            .any(|r| r.program == "*" && r.args.is_none());
        let programs = if any_program && section.deny.spawn.is_empty() {
            ProgramGrant::Any
        } else {
            let writable: Vec<PathBuf> = dirs.iter().filter(|g| g.write).map(|g| g.path.clone()).collect();
            // The built-ins' programs are resolved like a plugin's, but run unconfined with any variables, as
            // they always have: the built-in tools are the host's own code.
            ProgramGrant::Only(crate::native::Programs::new(
                &effective.spawn_rules,
                &host.path,
                &writable,
                None,
                None,
            ))
        };
        let vars = host.vars_granted(&effective.env, &section.deny.env);
        BuiltinGrants { dirs, programs, vars }
    }
}

//! What a toolset loads ([`ToolsetOptions`]): the workspace, how the built-ins run, the plugin directories and
//! policy files, the cache, and whether the project's own plugins need the user's trust.

use std::path::{Path, PathBuf};

use crate::policy::Policy;

#[cfg(feature = "wasm")]
use crate::trust::identity::PluginLocation;
#[cfg(feature = "wasm")]
use crate::wasm::PluginHost;

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
    /// (`toolwright::trust::identity`). When it is also one of `plugin_dirs`, it was trusted on purpose and counts as
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
    /// Compile installed plugins whose description is not in the cache on threads of their own, leaving them out
    /// of the toolset until they are done ([`Toolset::deferred`](super::Toolset::deferred); only with a cache,
    /// and only plugins whose `toolwright.lock` entry approved exactly their file, handlers included: then every
    /// call waits for them). Off: every plugin is loaded before the toolset is. Either way, a plugin whose
    /// description is cached loads from it, its code compiled at its first call.
    pub compile_in_background: bool,
    /// The plugin hosts this toolset loads into, shared with every toolset loaded from a clone of these options
    /// (a reload) and with their codemode: one runtime, one bound on live instances (feature `wasm`). Set it to
    /// another toolset's `options.hosts` to share that one's.
    #[cfg(feature = "wasm")]
    pub hosts: crate::wasm::Hosts,
    /// The MCP configuration files read first, in order (feature `mcp`): pi's and the user's
    /// ([`user_mcp_files`](super::user_mcp_files)), then those given with `--mcp-config`. Trusted: their servers
    /// run with the grants of the trusted policy files' `[mcp.NAME]` sections.
    pub mcp_files: Vec<PathBuf>,
    /// Whether the project's `.pi/mcp.json` and `.toolwright/mcp.json` are read (only once the project is
    /// trusted, when [`ToolsetOptions::require_project_trust`] is on).
    pub mcp_project: bool,
    /// The MCP servers' connections, shared with every toolset loaded from a clone of these options (feature
    /// `mcp`).
    #[cfg(all(feature = "wasm", feature = "mcp"))]
    pub mcp: super::McpClients,
    /// The build of the plugin project `toolwright dev` serves, loaded before every plugin directory and in the
    /// place of any other plugin of its name (feature `wasm`; see [`DevBuild`](super::DevBuild)).
    #[cfg(feature = "wasm")]
    pub dev: Option<super::DevBuild>,
    /// The MCP server `toolwright mcp-servers approve` is approving: it is started even when it is another
    /// program than the one its pin names (every other such server is held, not started).
    pub mcp_approving: Option<String>,
    /// What the host refused plugins' calls, by call id, while the policy asks for grants (`[ask] grants`;
    /// feature `wasm`): shared with every toolset loaded from a clone of these options.
    #[cfg(feature = "wasm")]
    pub refusals: crate::ask::RefusalBook,
    /// Where a server registers the clients of its calls, for plugins' questions to them (`ask`,
    /// [`toolwright_core::client`]; feature `wasm`): shared with every toolset loaded from a clone of these options.
    #[cfg(feature = "wasm")]
    pub client: toolwright_core::client::ClientDesk,
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
            #[cfg(all(feature = "wasm", feature = "mcp"))]
            mcp_files: super::user_mcp_files(),
            mcp_project: true,
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
            #[cfg(feature = "wasm")]
            hosts: crate::wasm::Hosts::default(),
            mcp_files: Vec::new(),
            mcp_project: false,
            #[cfg(all(feature = "wasm", feature = "mcp"))]
            mcp: super::McpClients::default(),
            #[cfg(feature = "wasm")]
            dev: None,
            mcp_approving: None,
            #[cfg(feature = "wasm")]
            refusals: crate::ask::RefusalBook::default(),
            #[cfg(feature = "wasm")]
            client: toolwright_core::client::ClientDesk::default(),
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

#[cfg(feature = "wasm")]
/// Whether loading `options` needs the user's trust in the project: they ask for it and name a project plugin
/// directory the user did not also name as a plugin directory (that one was trusted on purpose).
pub(super) fn needs_project_trust(options: &ToolsetOptions) -> bool {
    options.require_project_trust
        && options
            .project_plugin_dir
            .as_deref()
            .is_some_and(|project| !options.plugin_dirs.iter().any(|d| d == project))
}

#[cfg(feature = "wasm")]
impl ToolsetOptions {
    /// The `.wasm` files of the plugin directories in load order (the dev build first, the project's directory
    /// next, then the trusted ones in order; files by name), each with where it was found.
    pub fn plugin_files(&self) -> Vec<(PathBuf, PluginLocation)> {
        let user = user_plugin_dir();
        let same = |a: &Path, b: &Path| {
            a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(a), Ok(b)) if a == b)
        };
        let dev = self.dev.iter().map(|d| (d.file.clone(), PluginLocation::Dev));
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
        let found = dirs.into_iter().flat_map(|(dir, location)| {
            PluginHost::discover(&[dir.to_owned()])
                .into_iter()
                .map(move |file| (file, location))
        });
        dev.chain(found).collect()
    }
}

/// The audit logs to open: the policy's `audit` (`~/` is the home directory) and `options.audit_log` (relative to
/// the workspace), each file once.
pub fn audit_logs(options: &ToolsetOptions, policy: &Policy) -> Vec<PathBuf> {
    let home = crate::native::HostEnv::current().home;
    let mut logs = Vec::new();
    if let Some(path) = &policy.audit {
        logs.push(match (path.strip_prefix("~"), &home) {
            (Ok(rest), Some(home)) => Path::new(home).join(rest),
            _ => path.clone(),
        });
    }
    if let Some(extra) = &options.audit_log {
        let extra = options.cwd.join(extra);
        if !logs.contains(&extra) {
            logs.push(extra);
        }
    }
    logs
}

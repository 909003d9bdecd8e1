//! [`PluginError`]: why a plugin could not be loaded.

use std::path::PathBuf;

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
    /// It no longer matches what `toolwright.lock` records as approved: it does not run (no tools, no hooks, no
    /// grant) until approved.
    #[error(
        "{path}: plugin `{name}` changed since it was approved ({changes}); it is held: its tools and hooks do \
         not run until you approve it: toolwright plugins approve {name}",
        changes = changes.join("; ")
    )]
    Held {
        /// The file.
        path: PathBuf,
        /// The plugin's name.
        name: String,
        /// What changed, in words.
        changes: Vec<String>,
        /// The lockfile that records the approval.
        lockfile: PathBuf,
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
    /// A tool of the plugin has a built-in's name, and the user's config does not let plugins replace it.
    #[error(
        "{path}: the tool `{tool}` has the name of the built-in `{tool}`; the built-in stays and this tool is \
         skipped (replace = [\"{tool}\"] in the user's toolwright.toml lets a plugin replace it)"
    )]
    ReplacesBuiltin {
        /// The file.
        path: PathBuf,
        /// The tool.
        tool: String,
    },
    /// The file was replaced after it was loaded, so it cannot be loaded again as the same plugin.
    #[error("{path}: the file changed after it was loaded; it is loaded again at the next start")]
    Changed {
        /// The file.
        path: PathBuf,
    },
    /// A directory grant would let a third-party plugin write what Toolwright trusts: compiled code that runs
    /// outside the sandbox, the plugin files it loads, or the policy and lockfile that decide grants.
    #[error(
        "{path}: plugin `{name}` is not loaded: its write grant on {dir} covers {what} {protected}, which would let \
         it escape its sandbox; grant it a directory that does not contain that"
    )]
    GrantCovers {
        /// The plugin's file.
        path: PathBuf,
        /// Its name.
        name: String,
        /// The granted directory.
        dir: PathBuf,
        /// What it covers.
        protected: PathBuf,
        /// What that is, in words ("the component cache", "the plugin directory", "the policy file").
        what: &'static str,
    },
    /// The engine could not be set up.
    #[error("cannot start the WebAssembly engine: {0}")]
    Engine(String),
}

impl PluginError {
    /// The plugin file it is about (none for the engine's own failure).
    pub fn path(&self) -> Option<&std::path::Path> {
        match self {
            PluginError::Read { path, .. }
            | PluginError::Invalid { path, .. }
            | PluginError::Incompatible { path, .. }
            | PluginError::Metadata { path, .. }
            | PluginError::NameClash { path, .. }
            | PluginError::NameTaken { path, .. }
            | PluginError::Held { path, .. }
            | PluginError::ToolClash { path, .. }
            | PluginError::ReplacesBuiltin { path, .. }
            | PluginError::Changed { path }
            | PluginError::GrantCovers { path, .. } => Some(path),
            PluginError::Engine(_) => None,
        }
    }
}

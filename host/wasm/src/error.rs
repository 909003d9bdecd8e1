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
            | PluginError::ToolClash { path, .. }
            | PluginError::ReplacesBuiltin { path, .. }
            | PluginError::Changed { path } => Some(path),
            PluginError::Engine(_) => None,
        }
    }
}

//! Trust: which plugin a grant is for, what the user approved of it, and whether the project it came with is
//! trusted. The wasm runtime only runs what this module let through; MCP servers (next) go through the same
//! checks, so nothing here names a wasm type but the one [`Subject`] impl at the bottom.
//!
//! ## Map
//!
//! - [`identity`]: where a plugin came from ([`PluginLocation`](identity::PluginLocation)), its digest and pin,
//!   which policy entry applies to it, what it is granted ([`identity::grants_for`]), and which of two plugins of one
//!   name is kept ([`identity::dedupe`]).
//! - [`lock`]: `toolwright.lock`, what the user approved of each installed plugin, and what changed since.
//! - `approval`: the lockfiles in force ([`Locks`]) and how a plugin stands with its own ([`Approval`]): a
//!   plugin that changed since it was approved is held.
//! - `protected`: what no third-party plugin may be granted to write (the cache, the plugin directories, the
//!   policy files and lockfiles, the audit logs).
//! - [`project`]: project trust: a project's own plugins, handlers and policy do nothing until the user trusts it
//!   (`toolwright trust`), by path and the digest of what it ships.
//! - [`TrustError`]: why trust left a plugin out, with the plugin's file.
//!
//! ```
//! use toolwright::trust::identity::PluginLocation;
//! use toolwright::trust::lock::{LockEntry, changes, verdict, Verdict};
//!
//! assert!(!PluginLocation::Project.is_trusted());
//! let approved = LockEntry { sha256: "ab".repeat(32), ..Default::default() };
//! assert_eq!(verdict(&changes(&approved, &approved), false), Verdict::Approved);
//! ```

mod approval;
pub mod identity;
pub mod lock;
pub mod project;
mod protected;

use std::path::{Path, PathBuf};

use toolwright_sdk::{CapabilityRequest, ToolSpec};

pub use approval::{Approval, Locks};
pub use protected::writes_what_is_trusted;

/// What trust reads of a plugin, whatever runs it (a wasm component today): the name it claims, its file and
/// that file's digest, and what it asks for and offers.
pub trait Subject {
    /// The name it claims (a claim only: grants bind to its [`identity`]).
    fn name(&self) -> &str;
    /// Its file (`builtin:NAME` for a wasm built-in).
    fn path(&self) -> &Path;
    /// The SHA-256 of its file.
    fn sha256(&self) -> [u8; 32];
    /// Its version.
    fn version(&self) -> &str;
    /// The capabilities it requests, with its reasons.
    fn capabilities(&self) -> &[CapabilityRequest];
    /// Its tools, as the model reads them.
    fn tools(&self) -> &[ToolSpec];
    /// Whether it is in the path of every call (a handler plugin).
    fn is_handler(&self) -> bool;
}

impl Subject for crate::wasm::Plugin {
    fn name(&self) -> &str {
        &self.metadata.name
    }
    fn path(&self) -> &Path {
        &self.path
    }
    fn sha256(&self) -> [u8; 32] {
        crate::wasm::Plugin::sha256(self)
    }
    fn version(&self) -> &str {
        &self.metadata.version
    }
    fn capabilities(&self) -> &[CapabilityRequest] {
        &self.metadata.capabilities
    }
    fn tools(&self) -> &[ToolSpec] {
        &self.tools
    }
    fn is_handler(&self) -> bool {
        self.is_handler
    }
}

/// Why trust left a plugin out: which file, and what decided it.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    /// Another plugin already has this name.
    #[error(
        "{path}: a plugin named `{name}` is already loaded from {other}; this one is skipped (a plugin project's \
         build runs in an installed plugin's place under `toolwright dev DIR` or `toolwright exec --dev DIR`)"
    )]
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
    /// The plugin project `toolwright dev` builds has a plugin of this name: its build runs in this one's place
    /// (under this one's approved grants when it is installed), and this one is not loaded.
    #[error(
        "{path}: plugin `{name}` is shadowed by its dev build {build} (toolwright dev), which runs in its place"
    )]
    Shadowed {
        /// The shadowed plugin's file.
        path: PathBuf,
        /// The name both have.
        name: String,
        /// The dev build's file.
        build: PathBuf,
    },
    /// The file at the dev build's path is not the file the build wrote (its digest differs): it is not loaded.
    #[error(
        "{path}: this is not the file the dev build of {project} wrote (its SHA-256 is {found}, the build's was \
         {built}); it is not loaded"
    )]
    NotDevBuild {
        /// The file.
        path: PathBuf,
        /// The plugin project.
        project: PathBuf,
        /// The digest of the file found (lower-case hex).
        found: String,
        /// The digest of the file the build wrote.
        built: String,
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
}

impl TrustError {
    /// The plugin file it is about.
    pub fn path(&self) -> &Path {
        match self {
            TrustError::NameClash { path, .. }
            | TrustError::NameTaken { path, .. }
            | TrustError::Held { path, .. }
            | TrustError::GrantCovers { path, .. }
            | TrustError::Shadowed { path, .. }
            | TrustError::NotDevBuild { path, .. } => path,
        }
    }

    /// The name of the plugin it is about (none when the file is not the one it claims to be).
    pub fn name(&self) -> Option<&str> {
        match self {
            TrustError::NameClash { name, .. }
            | TrustError::NameTaken { name, .. }
            | TrustError::Held { name, .. }
            | TrustError::GrantCovers { name, .. }
            | TrustError::Shadowed { name, .. } => Some(name),
            TrustError::NotDevBuild { .. } => None,
        }
    }
}

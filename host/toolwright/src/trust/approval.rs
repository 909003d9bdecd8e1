//! The lockfiles in force ([`Locks`]) and how a plugin stands with its own ([`Approval`]): a plugin that no longer
//! matches what the user approved does not run at all, neither its tools nor its hooks (a changed handler could
//! rewrite calls), and the error says what changed.

use std::path::{Path, PathBuf};

use super::identity::PluginLocation;
use super::lock::{self, LockError, Lockfile, Verdict};
use super::{Subject, TrustError};

/// How a plugin stands with its lockfile, when it may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approval {
    /// No lockfile records it.
    Unlocked,
    /// It is what was approved.
    Approved,
    /// It changed in a way the policy approves by itself; `approved` is the digest the lockfile records.
    Auto {
        /// The SHA-256 the lockfile approved (lower-case hex).
        approved: String,
    },
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
    /// The lockfiles beside the trusted `policy_files` and beside the project's policy file (one that does not
    /// parse is an error).
    pub fn load(policy_files: &[PathBuf], project_policy: Option<&Path>) -> Result<Locks, LockError> {
        let open = |policy: &Path| -> Result<Option<(PathBuf, Lockfile)>, LockError> {
            let path = lock::beside(policy);
            if !path.exists() {
                return Ok(None);
            }
            Ok(Some((path.clone(), Lockfile::load(&path)?)))
        };
        let mut trusted = None;
        for file in policy_files {
            if let Some(found) = open(file)? {
                trusted = Some(found);
                break;
            }
        }
        let project = match project_policy {
            Some(file) if !policy_files.iter().any(|f| f == file) => open(file)?,
            _ => None,
        };
        Ok(Locks { trusted, project })
    }

    /// The lockfile for plugins from `location`.
    pub fn for_location(&self, location: PluginLocation) -> Option<(&Path, &Lockfile)> {
        let lock = match location {
            // The dev build's approval is the user's choice of the project (its grants: `toolset::dev`).
            PluginLocation::Builtin | PluginLocation::Dev => None,
            PluginLocation::Project => self.project.as_ref(),
            PluginLocation::User | PluginLocation::Cli => self.trusted.as_ref(),
        };
        lock.map(|(path, lock)| (path.as_path(), lock))
    }

    /// How `plugin` from `location` stands with its lockfile: approved, approved by the policy (`same_surface`:
    /// the user's `auto-approve = "same-surface"`; logged), or not in a lockfile; or held
    /// ([`TrustError::Held`], saying what changed).
    pub fn approval(
        &self,
        plugin: &impl Subject,
        location: PluginLocation,
        same_surface: bool,
    ) -> Result<Approval, TrustError> {
        let Some((lockfile, lock)) = self.for_location(location) else {
            return Ok(Approval::Unlocked);
        };
        let Some(approved) = lock.plugins.get(plugin.name()) else {
            return Ok(Approval::Unlocked);
        };
        let found = lock::entry(plugin, &approved.source);
        let changes = lock::changes(approved, &found);
        match lock::verdict(&changes, same_surface) {
            Verdict::Approved => Ok(Approval::Approved),
            Verdict::AutoApproved(changes) => {
                let words: Vec<String> = changes.iter().map(ToString::to_string).collect();
                tracing::info!(
                    plugin = %plugin.name(),
                    "approved by auto-approve = \"same-surface\": {}",
                    words.join("; ")
                );
                Ok(Approval::Auto {
                    approved: approved.sha256.clone(),
                })
            }
            Verdict::Held(changes) => Err(TrustError::Held {
                path: plugin.path().to_owned(),
                name: plugin.name().to_owned(),
                changes: changes.iter().map(ToString::to_string).collect(),
                lockfile: lockfile.to_owned(),
            }),
        }
    }
}

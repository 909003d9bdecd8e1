//! What no third-party plugin may be granted to write: what Toolwright trusts (compiled code that runs outside
//! the sandbox, the plugin files it loads, the policy and lockfiles that decide grants, the audit logs that
//! record what plugins did). Compared as real paths, so neither a symbolic link nor `..` hides one.

use std::path::{Path, PathBuf};

use super::{Subject, TrustError};
use crate::policy::DirGrant;

/// The error for a write grant in `dirs` that contains one of the `protected` paths (each with what it is, in
/// words: "the component cache"; asked for only when there is a write grant) or lies inside one, if there is one.
pub fn writes_what_is_trusted(
    protected: impl FnOnce() -> Vec<(PathBuf, &'static str)>,
    plugin: &impl Subject,
    dirs: &[DirGrant],
) -> Option<TrustError> {
    let writable: Vec<&Path> = dirs
        .iter()
        .filter(|d| d.write)
        .map(|d| d.path.as_path())
        .collect();
    if writable.is_empty() {
        return None;
    }
    protected().into_iter().find_map(|(protected, what)| {
        let real = real_path(&protected);
        writable.iter().find_map(|dir| {
            let granted = real_path(dir);
            (real.starts_with(&granted) || granted.starts_with(&real)).then(|| TrustError::GrantCovers {
                path: plugin.path().to_owned(),
                name: plugin.name().to_owned(),
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

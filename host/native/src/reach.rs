//! What a plugin may touch, as the calls it makes carry it ([`Reach`], the runtime's side of
//! [`toolwright_core::Authority`]), and the intersections that keep a callee within it.
//!
//! A built-in called under a plugin's authority runs with its own grants intersected with the plugin's
//! ([`NativeEnv::narrowed`]): files by directory ([`intersect`]), programs only those both may start (confined
//! by Landlock to the intersected files and the plugin's network), variables only those both see. Another plugin
//! called under it runs only if its own grants lie within the caller's ([`within`]; the wasm runtime checks the
//! rest).

use std::any::Any;
use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use toolwright_sdk::paths;

use crate::grants::{Grant, GrantedFiles};
use crate::{NativeEnv, ProgramGrant};

/// What a plugin may touch: the grants a call it makes carries in its [`toolwright_core::Authority`].
#[derive(Debug, Clone)]
pub struct Reach {
    /// Its directories.
    pub files: Vec<Grant>,
    /// Its programs (resolved and confined as its own starts are).
    pub programs: ProgramGrant,
    /// The names of the variables it sees.
    pub env: Vec<String>,
    /// Its network rules, in the terms of the runtime that made the reach (checked by that runtime).
    pub network: Arc<dyn Any + Send + Sync>,
    /// Whether it has any network grant at all.
    pub has_network: bool,
}

impl Reach {
    /// The reach of `authority`, when the runtime that made it is this one's.
    pub fn of(authority: &toolwright_core::Authority) -> Option<&Reach> {
        authority.reach::<Reach>()
    }
}

/// The directories both `a` and `b` grant: for each pair, the deeper one, writable only if both are; minimal
/// (no grant covered by another as strong).
pub fn intersect(a: &[Grant], b: &[Grant]) -> Vec<Grant> {
    let mut both: Vec<Grant> = Vec::new();
    for x in a {
        for y in b {
            let (px, py) = (norm(&x.path), norm(&y.path));
            let deeper = if below(&px, &py) {
                px
            } else if below(&py, &px) {
                py
            } else {
                continue;
            };
            both.push(Grant {
                path: PathBuf::from(deeper),
                write: x.write && y.write,
            });
        }
    }
    minimal(both)
}

/// Whether every grant of `inner` is allowed by a grant of `outer` (the same access or more).
pub fn within(inner: &[Grant], outer: &[Grant]) -> bool {
    inner.iter().all(|i| {
        let pi = norm(&i.path);
        outer
            .iter()
            .any(|o| (o.write || !i.write) && below(&pi, &norm(&o.path)))
    })
}

/// `grants` without duplicates and without a grant another one covers with the same access or more.
fn minimal(grants: Vec<Grant>) -> Vec<Grant> {
    let mut kept: Vec<Grant> = Vec::new();
    for (i, g) in grants.iter().enumerate() {
        let p = norm(&g.path);
        let covered = grants.iter().enumerate().any(|(j, o)| {
            let q = norm(&o.path);
            let stronger = (o.write || !g.write) && below(&p, &q);
            // Of two equal grants, the first is kept.
            stronger && (p != q || o.write != g.write || j < i)
        });
        if !covered {
            kept.push(g.clone());
        }
    }
    kept
}

fn norm(path: &std::path::Path) -> String {
    paths::normalize(&path.to_string_lossy())
}

/// Whether absolute, normalised `inner` is `outer` or below it.
fn below(inner: &str, outer: &str) -> bool {
    outer == "/"
        || inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// The programs a built-in with `own` may start under `reach`, whose files are narrowed to `files`: none unless
/// both may start some; then the plugin's programs (those `own` names too, when `own` is a list), confined to
/// `files` and the plugin's network.
pub fn narrow_programs(own: &ProgramGrant, reach: &Reach, files: &[Grant]) -> ProgramGrant {
    let mut programs = match (own, &reach.programs) {
        (ProgramGrant::None, _) | (_, ProgramGrant::None) => return ProgramGrant::None,
        (_, ProgramGrant::Any(_)) => return own.clone(),
        (ProgramGrant::Any(_), ProgramGrant::Only(theirs)) => theirs.clone(),
        (ProgramGrant::Only(mine), ProgramGrant::Only(theirs)) => {
            let mut theirs = theirs.clone();
            theirs
                .granted
                .retain(|g| mine.granted.iter().any(|m| m.rule.program == g.rule.program));
            if let Some(c) = &mut theirs.confinement {
                c.programs = theirs
                    .granted
                    .iter()
                    .filter_map(|g| g.resolved.clone().ok())
                    .collect();
            }
            theirs
        }
    };
    if let Some(c) = &mut programs.confinement {
        let (write, read): (Vec<&Grant>, Vec<&Grant>) = files.iter().partition(|g| g.write);
        c.read = read.into_iter().map(|g| g.path.clone()).collect();
        c.write = write.into_iter().map(|g| g.path.clone()).collect();
    }
    ProgramGrant::Only(programs)
}

impl NativeEnv {
    /// This environment within `reach`: the directories both grant, the programs both may start, the variables
    /// both see (see the module docs).
    pub fn narrowed(&self, reach: &Reach) -> io::Result<NativeEnv> {
        let own: Vec<Grant> = self
            .files
            .grants()
            .map(|(path, write)| Grant {
                path: path.into(),
                write,
            })
            .collect();
        let files = intersect(&own, &reach.files);
        let programs = narrow_programs(&self.programs, reach, &files);
        let env = self
            .env
            .iter()
            .filter(|(k, _)| reach.env.iter().any(|n| n == k))
            .cloned()
            .collect();
        Ok(NativeEnv {
            files: Arc::new(GrantedFiles::open(&files)?),
            programs,
            env: Arc::new(env),
            refusals: None,
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ro(p: &str) -> Grant {
        Grant::read_only(p)
    }
    fn rw(p: &str) -> Grant {
        Grant::read_write(p)
    }

    #[test]
    fn the_intersection_keeps_the_deeper_directory_and_the_weaker_access() {
        let builtin = [ro("/"), rw("/w")];
        let plugin = [ro("/w/sub"), rw("/w/out"), rw("/elsewhere")];
        assert_eq!(
            intersect(&builtin, &plugin),
            [ro("/w/sub"), ro("/elsewhere"), rw("/w/out")]
        );
        assert_eq!(intersect(&builtin, &[]), []);
        assert_eq!(intersect(&[rw("/w/a")], &[ro("/w/b")]), []);
        // A prefix is not a parent.
        assert_eq!(intersect(&[rw("/w")], &[rw("/work")]), []);
    }

    #[test]
    fn within_needs_a_grant_as_strong_for_every_directory() {
        assert!(within(&[ro("/w/a"), rw("/w/b")], &[ro("/"), rw("/w")]));
        assert!(!within(&[rw("/w/a")], &[rw("/w/b"), ro("/w")]));
        assert!(!within(&[ro("/etc")], &[rw("/w")]));
        assert!(within(&[], &[]));
    }
}

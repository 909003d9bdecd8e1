//! Which plugin a grant is for. A plugin's metadata name is only a claim: anyone can build a component that calls
//! itself `my-indexer`, and a cloned repository can ship one in `.toolwright/plugins`. So grants bind to the
//! plugin's identity: where its file was loaded from ([`PluginLocation`]) and, when a grant pins it, the SHA-256
//! of that file ([`PinStatus`]).
//!
//! - A grant in a trusted file (the user's config, a `--policy` file) applies only to plugins from a trusted
//!   location: the user's plugin directory, a `--plugins` directory, an embedder's directory, the built-ins. A
//!   plugin from the project's `.toolwright/plugins` gets only what the project's own (confined) policy grants;
//!   from the trusted files it gets their denials, limits and pins, which only ever narrow.
//! - When a trusted plugin and a project plugin claim one name, the trusted one is loaded and the project's is
//!   skipped ([`TrustError::NameTaken`], naming both files), whatever the load order.
//! - A pinned grant (`sha256 = "…"`) gives nothing to a file with another digest until the pin is updated.
//!
//! ```
//! use toolwright::trust::identity::{PinStatus, PluginLocation, pin_status};
//! use toolwright::policy::PluginPolicy;
//!
//! assert!(PluginLocation::User.is_trusted() && !PluginLocation::Project.is_trusted());
//! let pinned = PluginPolicy { sha256: vec!["ab".repeat(32)], ..Default::default() };
//! assert_eq!(pin_status(Some(&pinned), &"ab".repeat(32)), PinStatus::Matches);
//! assert!(matches!(pin_status(Some(&pinned), &"cd".repeat(32)), PinStatus::Mismatch { .. }));
//! ```

use std::collections::HashMap;
use std::path::PathBuf;

use serde::Serialize;
use toolwright_sdk::CapabilityRequest;

use super::{Subject, TrustError};
use crate::policy::{Effective, PluginPolicy, Policy};

/// Where a plugin's file was found: what decides which grants it may receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PluginLocation {
    /// A built-in tool run as wasm (embedded in the host binary).
    Builtin,
    /// The user's plugin directory (`$XDG_CONFIG_HOME/toolwright/plugins` or `~/.config/toolwright/plugins`).
    User,
    /// A directory given on the command line (`--plugins DIR`) or by the embedding application.
    Cli,
    /// The project's `<workspace>/.toolwright/plugins`: it comes with the repository, so it is untrusted.
    Project,
    /// The build of the plugin project `toolwright dev` was given ([`crate::toolset::DevBuild`]): the file that
    /// build wrote, by its digest. It shadows a plugin of the same name from anywhere else and runs under that
    /// plugin's approved grants, never more.
    Dev,
}

impl PluginLocation {
    /// Whether the trusted policy files' grants apply to plugins from here.
    pub fn is_trusted(self) -> bool {
        self != PluginLocation::Project
    }

    /// The location for people: `the user's plugin directory`.
    pub fn describe(self) -> &'static str {
        match self {
            PluginLocation::Builtin => "the built-in tools",
            PluginLocation::User => "the user's plugin directory",
            PluginLocation::Cli => "a --plugins directory",
            PluginLocation::Project => "the project's .toolwright/plugins",
            PluginLocation::Dev => "the plugin project `toolwright dev` builds",
        }
    }

    /// The short name `toolwright plugins` shows: `user`, `cli`, `project`, `builtin`.
    pub fn as_str(self) -> &'static str {
        match self {
            PluginLocation::Builtin => "builtin",
            PluginLocation::User => "user",
            PluginLocation::Cli => "cli",
            PluginLocation::Project => "project",
            PluginLocation::Dev => "dev",
        }
    }
}

/// Whether a plugin's file matches the digests its grants pin.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "lowercase")]
pub enum PinStatus {
    /// No grant pins it.
    Unpinned,
    /// Every pin matches the file.
    Matches,
    /// A pin does not match: the plugin gets no grant until the pin is updated.
    Mismatch {
        /// The digest the policy pins (lower-case hex).
        pinned: String,
        /// The file's digest (lower-case hex).
        actual: String,
    },
}

/// Who a loaded plugin is: where it came from, its file's digest, and whether that matches the pins.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PluginIdentity {
    /// The plugin's file (`builtin:NAME` for a wasm built-in).
    pub path: PathBuf,
    /// Where it was found.
    pub location: PluginLocation,
    /// The SHA-256 of its file, lower-case hex (what `sha256sum` prints).
    pub sha256: String,
    /// How its digest compares with the pins of its grants.
    pub pin: PinStatus,
}

/// A digest as lower-case hex.
pub fn hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// The policy that applies to the plugin named `name` from `location`: the trusted files' entry in full for a
/// trusted location, only its restrictions (denials, limits, pins) for the project's plugins, plus the project
/// file's entry either way. None when no file names the plugin.
pub fn policy_for(policy: &Policy, name: &str, location: PluginLocation) -> Option<PluginPolicy> {
    let ours = policy.plugins.get(name).map(|p| {
        if location.is_trusted() {
            p.clone()
        } else {
            restrictions(p)
        }
    });
    let theirs = policy.project_plugins.get(name).cloned();
    match (ours, theirs) {
        (None, None) => None,
        (Some(p), None) | (None, Some(p)) => Some(p),
        (Some(mut ours), Some(theirs)) => {
            ours.merge(theirs);
            Some(ours)
        }
    }
}

/// What of `p` only narrows: denials, limits and pins, without a single grant.
fn restrictions(p: &PluginPolicy) -> PluginPolicy {
    PluginPolicy {
        deny: p.deny.clone(),
        timeout_ms: p.timeout_ms,
        memory_mib: p.memory_mib,
        fuel: p.fuel,
        sha256: p.sha256.clone(),
        ..Default::default()
    }
}

/// How the file whose digest is `sha256` (hex) compares with the pins of `policy`.
pub fn pin_status(policy: Option<&PluginPolicy>, sha256: &str) -> PinStatus {
    let pins = policy.map(|p| p.sha256.as_slice()).unwrap_or_default();
    match pins.iter().find(|pin| *pin != sha256) {
        Some(pinned) => PinStatus::Mismatch {
            pinned: pinned.clone(),
            actual: sha256.to_owned(),
        },
        None if pins.is_empty() => PinStatus::Unpinned,
        None => PinStatus::Matches,
    }
}

/// What the plugin `name` (from `identity`) gets of its `requests` under `policy` (from [`policy_for`]): the
/// intersection as [`crate::policy::intersect`] computes it, nothing but the restrictions when a pin does not
/// match, and refusals that say why a grant of the trusted files does not reach a project's plugin.
pub fn grants_for(
    name: &str,
    requests: &[CapabilityRequest],
    policy: &Policy,
    identity: &PluginIdentity,
    cwd: &str,
    home: Option<&str>,
) -> Effective {
    let entry = policy_for(policy, name, identity.location);
    if let PinStatus::Mismatch { pinned, actual } = &identity.pin {
        let stripped = entry.as_ref().map(restrictions);
        let mut effective = crate::policy::intersect(name, requests, stripped.as_ref(), cwd, home);
        let why = format!(
            "not granted: [plugins.{name}] pins sha256 = \"{pinned}\", but this file's SHA-256 is {actual}; \
             update the pin if you trust this file"
        );
        for decision in &mut effective.decisions {
            decision.refused = Some(why.clone());
        }
        return effective;
    }
    let mut effective = crate::policy::intersect(name, requests, entry.as_ref(), cwd, home);
    let withheld = policy.plugins.get(name).is_some_and(|p| {
        !(p.read.is_empty()
            && p.write.is_empty()
            && p.spawn.is_empty()
            && p.env.is_empty()
            && p.network.is_empty())
    });
    if !identity.location.is_trusted() && withheld {
        let why = format!(
            "not granted to this plugin: it comes from {}, and [plugins.{name}] grants in your own toolwright.toml \
             or a --policy file apply only to plugins from your plugin directory or a --plugins directory",
            identity.location.describe()
        );
        for decision in effective.decisions.iter_mut().filter(|d| d.granted.is_empty()) {
            decision.refused = Some(why.clone());
        }
    }
    effective
}

/// Keep one plugin per name: the dev build wins over every other plugin of its name (each is
/// [`TrustError::Shadowed`]); a plugin from a trusted location wins over a project's plugin of the same name
/// whatever the load order (the project's is [`TrustError::NameTaken`]); between plugins of equal trust, the
/// first in load order wins (the later is [`TrustError::NameClash`]). The order of the kept plugins is the
/// load order; a plugin that failed to load keeps its error.
pub fn dedupe<S: Subject, E: From<TrustError>>(
    loaded: Vec<(Result<S, E>, PluginLocation)>,
) -> (Vec<(S, PluginLocation)>, Vec<E>) {
    let mut trusted: HashMap<String, (PathBuf, PluginLocation)> = HashMap::new();
    let mut dev: HashMap<String, PathBuf> = HashMap::new();
    for (plugin, location) in &loaded {
        if let (Ok(p), PluginLocation::Dev) = (plugin, location) {
            dev.entry(p.name().to_owned())
                .or_insert_with(|| p.path().to_owned());
        }
        if let (Ok(p), true) = (plugin, location.is_trusted()) {
            trusted
                .entry(p.name().to_owned())
                .or_insert_with(|| (p.path().to_owned(), *location));
        }
    }
    let mut kept: Vec<(S, PluginLocation)> = Vec::new();
    let mut errors = Vec::new();
    for (plugin, location) in loaded {
        let p = match plugin {
            Ok(p) => p,
            Err(e) => {
                errors.push(e);
                continue;
            }
        };
        if location != PluginLocation::Dev
            && let Some(build) = dev.get(p.name())
        {
            errors.push(E::from(TrustError::Shadowed {
                path: p.path().to_owned(),
                name: p.name().to_owned(),
                build: build.clone(),
            }));
            continue;
        }
        if !location.is_trusted()
            && let Some((other, other_location)) = trusted.get(p.name())
        {
            errors.push(E::from(TrustError::NameTaken {
                path: p.path().to_owned(),
                name: p.name().to_owned(),
                other: other.clone(),
                location: other_location.describe().to_owned(),
            }));
            continue;
        }
        match kept.iter().find(|(k, _)| k.name() == p.name()) {
            Some((first, _)) => errors.push(E::from(TrustError::NameClash {
                path: p.path().to_owned(),
                name: p.name().to_owned(),
                other: first.path().to_owned(),
            })),
            None => kept.push((p, location)),
        }
    }
    (kept, errors)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DirGrant;
    use toolwright_sdk::Capability;

    fn policy(user: &str, project: &str) -> Policy {
        let mut policy = Policy::parse(std::path::Path::new("user.toml"), user).unwrap();
        let theirs = Policy::parse(std::path::Path::new("project.toml"), project).unwrap();
        policy.project_plugins = theirs.plugins;
        policy
    }

    fn identity(location: PluginLocation, pin: PinStatus) -> PluginIdentity {
        PluginIdentity {
            path: PathBuf::from("/p/x.wasm"),
            location,
            sha256: "ab".repeat(32),
            pin,
        }
    }

    fn read_dot() -> Vec<CapabilityRequest> {
        vec![CapabilityRequest::new(Capability::Read(".".into()), "because")]
    }

    #[test]
    fn the_users_grants_do_not_reach_a_project_plugin_but_its_denials_and_limits_do() {
        let p = policy(
            "[plugins.x]\nread = [\"./secret\"]\ntimeout-ms = 50\ndeny = { read = [\"./data/private\"] }\n",
            "[plugins.x]\nread = [\"./data\"]\n",
        );
        let project = policy_for(&p, "x", PluginLocation::Project).unwrap();
        assert_eq!(project.read, ["./data"]);
        assert_eq!(project.timeout_ms, Some(50));
        assert_eq!(project.deny.read, ["./data/private"]);
        let user = policy_for(&p, "x", PluginLocation::User).unwrap();
        assert_eq!(user.read, ["./secret", "./data"]);

        let e = grants_for(
            "x",
            &read_dot(),
            &policy("[plugins.x]\nread = [\"./secret\"]\n", ""),
            &identity(PluginLocation::Project, PinStatus::Unpinned),
            "/w",
            None,
        );
        assert!(e.dirs.is_empty());
        assert_eq!(
            e.decisions[0].refused.as_deref(),
            Some(
                "not granted to this plugin: it comes from the project's .toolwright/plugins, and [plugins.x] \
                 grants in your own toolwright.toml or a --policy file apply only to plugins from your plugin \
                 directory or a --plugins directory"
            )
        );
        let e = grants_for(
            "x",
            &read_dot(),
            &policy("[plugins.x]\nread = [\"./secret\"]\n", ""),
            &identity(PluginLocation::Cli, PinStatus::Unpinned),
            "/w",
            None,
        );
        assert_eq!(e.dirs, [DirGrant::read("/w/secret")]);
    }

    #[test]
    fn a_pin_that_does_not_match_gets_nothing() {
        let pinned = PluginPolicy {
            read: vec![".".into()],
            sha256: vec!["ab".repeat(32)],
            ..Default::default()
        };
        assert_eq!(pin_status(None, "cd"), PinStatus::Unpinned);
        assert_eq!(pin_status(Some(&pinned), &"ab".repeat(32)), PinStatus::Matches);
        let wrong = pin_status(Some(&pinned), &"cd".repeat(32));
        assert_eq!(
            wrong,
            PinStatus::Mismatch {
                pinned: "ab".repeat(32),
                actual: "cd".repeat(32)
            }
        );
        let p = policy(
            &format!("[plugins.x]\nread = [\".\"]\nsha256 = \"{}\"\n", "AB".repeat(32)),
            "",
        );
        let e = grants_for(
            "x",
            &read_dot(),
            &p,
            &identity(PluginLocation::User, wrong),
            "/w",
            None,
        );
        assert!(e.dirs.is_empty());
        assert_eq!(
            e.decisions[0].refused.as_deref(),
            Some(
                format!(
                    "not granted: [plugins.x] pins sha256 = \"{}\", but this file's SHA-256 is {}; update the pin \
                     if you trust this file",
                    "ab".repeat(32),
                    "cd".repeat(32)
                )
                .as_str()
            )
        );
        let e = grants_for(
            "x",
            &read_dot(),
            &p,
            &identity(PluginLocation::User, PinStatus::Matches),
            "/w",
            None,
        );
        assert_eq!(e.dirs, [DirGrant::read("/w")]);
    }

    #[test]
    fn a_pin_that_is_not_a_digest_is_a_policy_error() {
        let err =
            Policy::parse(std::path::Path::new("t.toml"), "[plugins.x]\nsha256 = \"abc\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml: [plugins.x] sha256: \"abc\" is not a SHA-256 digest (64 hex digits, as `sha256sum` or \
             `toolwright plugins` prints it)"
        );
    }
}

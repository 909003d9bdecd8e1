//! The dev build: the plugin file `toolwright dev` built from a plugin project, loaded ahead of every other plugin
//! of its name ([`DevBuild`]), and what it is granted ([`dev_grants`]).
//!
//! Its trust binds to what the user chose, never to the name it claims: the project directory given to `dev`, and
//! the one file its build wrote, by digest. A plugin of the same name from anywhere else is shadowed
//! ([`TrustError::Shadowed`](crate::trust::TrustError::Shadowed)); a file at the dev build's path with another
//! digest is not loaded ([`TrustError::NotDevBuild`](crate::trust::TrustError::NotDevBuild)).
//!
//! - An installed plugin of its name (an entry of the trusted `toolwright.lock`): the dev build gets what that
//!   plugin was approved for and no more — of its requests, only those the approval lists, under the trusted
//!   policy's `[plugins.NAME]` section (its denials and limits too; not its `sha256` pin, which names the
//!   installed file). No `plugins update` or `approve` per rebuild.
//! - No installed plugin of its name: it is what a plugin of a `--plugins` directory is, an unknown plugin: only
//!   what a `[plugins.NAME]` section grants (none unless the user wrote one; a pin there that does not match
//!   grants nothing).

use std::path::PathBuf;

use toolwright_sdk::CapabilityRequest;

use crate::policy::{Decision, Effective, Policy};
use crate::trust::identity::{self, PluginLocation};
use crate::trust::lock::LockEntry;

/// The file a `toolwright dev` build wrote, and the project it was built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DevBuild {
    /// The plugin project the user gave `toolwright dev` (absolute). No tool the toolset serves may be granted
    /// to write it: the next rebuild would run what it wrote outside the sandbox.
    pub project: PathBuf,
    /// The built plugin file, as the toolset loads it (a copy only the host writes).
    pub file: PathBuf,
    /// The SHA-256 of the file the build wrote, lower-case hex: a file of another digest at `file` is not it.
    pub sha256: String,
    /// Whether `project` is kept out of every grant to write (on unless the user let the tools edit it): a
    /// plugin or MCP server whose write grant covers it is not loaded, and bash's programs see it read-only.
    pub guarded: bool,
}

/// What the dev build of the plugin `name`, requesting `requests`, is granted under `policy`: the approved
/// requests of the installed plugin of its name (`installed`, from the trusted lockfile) under that plugin's
/// policy section without its pins, or, when none is installed, what an unknown plugin of a `--plugins`
/// directory gets (`sha256`: the dev build's digest, for a pin).
pub fn dev_grants(
    name: &str,
    requests: &[CapabilityRequest],
    policy: &Policy,
    installed: Option<&LockEntry>,
    sha256: &str,
    cwd: &str,
    home: Option<&str>,
) -> Effective {
    let Some(installed) = installed else {
        let entry = identity::policy_for(policy, name, PluginLocation::Cli);
        let unknown = identity::PluginIdentity {
            path: PathBuf::new(),
            location: PluginLocation::Cli,
            sha256: sha256.to_owned(),
            pin: identity::pin_status(entry.as_ref(), sha256),
        };
        return identity::grants_for(name, requests, policy, &unknown, cwd, home);
    };
    let mut entry = identity::policy_for(policy, name, PluginLocation::User);
    if let Some(entry) = &mut entry {
        entry.sha256.clear();
    }
    let approved = |r: &CapabilityRequest| installed.capabilities.contains(&r.capability.to_string());
    let kept: Vec<CapabilityRequest> = requests.iter().filter(|r| approved(r)).cloned().collect();
    let mut effective = crate::policy::intersect(name, &kept, entry.as_ref(), cwd, home);
    // One decision per request, in the plugin's order: those not approved are refused, saying why.
    let mut granted = std::mem::take(&mut effective.decisions).into_iter();
    effective.decisions = requests
        .iter()
        .map(|r| match approved(r) {
            true => granted.next().unwrap_or_else(|| refused(r, String::new())),
            false => refused(
                r,
                format!(
                    "not granted to the dev build: the installed `{name}` was not approved for it (the dev build \
                     runs under the installed plugin's grants, never more); to grant it, approve a build that asks \
                     for it: toolwright plugins update {name}, then toolwright plugins approve {name}"
                ),
            ),
        })
        .collect();
    effective
}

fn refused(request: &CapabilityRequest, why: String) -> Decision {
    Decision {
        requested: request.capability.clone(),
        granted: Vec::new(),
        refused: (!why.is_empty()).then_some(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DirGrant;
    use toolwright_sdk::Capability;

    fn requests() -> Vec<CapabilityRequest> {
        vec![
            CapabilityRequest::new(Capability::Read(".".into()), "reads"),
            CapabilityRequest::new(Capability::Read("/other".into()), "reads more"),
        ]
    }

    fn policy(text: &str) -> Policy {
        Policy::parse(std::path::Path::new("user.toml"), text).unwrap()
    }

    #[test]
    fn an_installed_plugin_s_dev_build_gets_its_approved_grants_and_never_more() {
        let installed = LockEntry {
            sha256: "ab".repeat(32),
            capabilities: vec!["read .".into()],
            ..Default::default()
        };
        // The policy grants both, pinned to the installed file: the pin does not apply to the dev build, the
        // approval does.
        let p = policy(&format!(
            "[plugins.x]\nread = [\".\", \"/other\"]\nsha256 = \"{}\"\n",
            "ab".repeat(32)
        ));
        let e = dev_grants("x", &requests(), &p, Some(&installed), "cd", "/w", None);
        assert_eq!(e.dirs, [DirGrant::read("/w")]);
        assert_eq!(e.decisions.len(), 2);
        assert!(e.decisions[0].refused.is_none());
        assert!(
            e.decisions[1]
                .refused
                .as_deref()
                .unwrap()
                .starts_with("not granted to the dev build: the installed `x` was not approved for it")
        );
        // What the policy does not grant stays ungranted, approved or not.
        let e = dev_grants("x", &requests(), &policy(""), Some(&installed), "cd", "/w", None);
        assert!(e.dirs.is_empty());
    }

    #[test]
    fn a_dev_build_of_a_plugin_not_installed_is_an_unknown_plugin() {
        let e = dev_grants("x", &requests(), &policy(""), None, "cd", "/w", None);
        assert!(e.dirs.is_empty());
        let e = dev_grants(
            "x",
            &requests(),
            &policy("[plugins.x]\nread = [\".\"]\n"),
            None,
            "cd",
            "/w",
            None,
        );
        assert_eq!(e.dirs, [DirGrant::read("/w")]);
        // A pinned section names another file.
        let pinned = policy(&format!(
            "[plugins.x]\nread = [\".\"]\nsha256 = \"{}\"\n",
            "ab".repeat(32)
        ));
        let e = dev_grants("x", &requests(), &pinned, None, "cd", "/w", None);
        assert!(e.dirs.is_empty());
    }
}

//! Policy files: what each plugin is granted. A plugin gets the intersection of what it requests and what the
//! policy grants; a deny always wins; a third-party plugin starts with nothing.
//!
//! ```toml
//! # toolwright.toml (the project's), then ~/.config/toolwright/toolwright.toml (the user's)
//! [plugins.my-indexer]
//! read = ["."]              # "." is the workspace; "~" the home directory
//! write = ["./index"]
//! spawn = ["git"]
//! env = ["LANG"]
//! timeout-ms = 30000        # wall-clock limit per call (default 60 s for third-party plugins)
//! memory-mib = 128          # memory limit per instance (default and maximum 256)
//! deny = { read = ["./secrets"] }
//!
//! [builtins]                # replaces the built-ins' default grants (read "/", write ".", spawn any, env "*")
//! write = ["./src"]
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolwright_sdk::{Capability, CapabilityRequest, paths};

/// A policy file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Grants by plugin name.
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginPolicy>,
    /// Grants of the built-in tools, replacing their defaults.
    #[serde(default)]
    pub builtins: Option<PluginPolicy>,
}

/// What one plugin is granted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PluginPolicy {
    /// Directories it may read below.
    #[serde(default)]
    pub read: Vec<String>,
    /// Directories it may read and write below.
    #[serde(default)]
    pub write: Vec<String>,
    /// Programs it may start.
    #[serde(default)]
    pub spawn: Vec<String>,
    /// Environment variables it may see (`*`: all).
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts it may connect to.
    #[serde(default)]
    pub network: Vec<String>,
    /// What it may not have, whatever else says so.
    #[serde(default)]
    pub deny: Deny,
    /// Wall-clock limit per call, in milliseconds.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Memory limit per instance, in MiB.
    #[serde(default)]
    pub memory_mib: Option<u64>,
}

/// Denials: they win over every grant.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Deny {
    /// Directories.
    #[serde(default)]
    pub read: Vec<String>,
    /// Directories (writing).
    #[serde(default)]
    pub write: Vec<String>,
    /// Programs.
    #[serde(default)]
    pub spawn: Vec<String>,
    /// Environment variables.
    #[serde(default)]
    pub env: Vec<String>,
    /// Hosts.
    #[serde(default)]
    pub network: Vec<String>,
}

/// A policy file that could not be used.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PolicyError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

/// The policy files that apply to a workspace: `<cwd>/toolwright.toml`, then the user's
/// `$XDG_CONFIG_HOME/toolwright/toolwright.toml` (or `~/.config/toolwright/toolwright.toml`).
pub fn default_files(cwd: &Path) -> Vec<PathBuf> {
    let mut files = vec![cwd.join("toolwright.toml")];
    files.extend(config_dir().map(|c| c.join("toolwright.toml")));
    files
}

/// The user's Toolwright configuration directory: `$XDG_CONFIG_HOME/toolwright`, else `~/.config/toolwright`.
pub fn config_dir() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
        .map(|c| c.join("toolwright"))
}

impl Policy {
    /// Parse one file's text.
    pub fn parse(path: &Path, text: &str) -> Result<Policy, PolicyError> {
        toml::from_str(text).map_err(|e| PolicyError {
            path: path.to_owned(),
            message: e.to_string(),
        })
    }

    /// The union of the files that exist (grants add up; denials add up and win). A file that exists but
    /// cannot be read or parsed is an error: a broken policy must not silently grant or refuse.
    pub fn load(files: &[PathBuf]) -> Result<Policy, PolicyError> {
        let mut policy = Policy::default();
        for path in files {
            let text = match std::fs::read_to_string(path) {
                Ok(text) => text,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    return Err(PolicyError {
                        path: path.clone(),
                        message: e.to_string(),
                    });
                }
            };
            policy.merge(Policy::parse(path, &text)?);
        }
        Ok(policy)
    }

    fn merge(&mut self, other: Policy) {
        for (name, p) in other.plugins {
            self.plugins.entry(name).or_default().merge(p);
        }
        if let Some(b) = other.builtins {
            self.builtins.get_or_insert_with(PluginPolicy::default).merge(b);
        }
    }
}

impl PluginPolicy {
    fn merge(&mut self, other: PluginPolicy) {
        self.read.extend(other.read);
        self.write.extend(other.write);
        self.spawn.extend(other.spawn);
        self.env.extend(other.env);
        self.network.extend(other.network);
        self.deny.read.extend(other.deny.read);
        self.deny.write.extend(other.deny.write);
        self.deny.spawn.extend(other.deny.spawn);
        self.deny.env.extend(other.deny.env);
        self.deny.network.extend(other.deny.network);
        // The stricter limit wins.
        self.timeout_ms = min_opt(self.timeout_ms, other.timeout_ms);
        self.memory_mib = min_opt(self.memory_mib, other.memory_mib);
    }
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// A capability granted, or refused with the reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Decision {
    /// What was requested.
    pub requested: Capability,
    /// What is granted of it (a narrower directory, some variables), empty when refused.
    pub granted: Vec<Capability>,
    /// Why (part of) it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// What a plugin ends up with.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effective {
    /// Directories: (absolute path, writable).
    pub dirs: Vec<(String, bool)>,
    /// Programs.
    pub programs: Vec<String>,
    /// Environment variables (`*`: all).
    pub env: Vec<String>,
    /// Per request: granted or refused, and why.
    pub decisions: Vec<Decision>,
    /// Wall-clock limit per call.
    pub timeout_ms: Option<u64>,
    /// Memory limit in MiB.
    pub memory_mib: Option<u64>,
}

/// Whether absolute path `inner` is `outer` or below it.
fn within(inner: &str, outer: &str) -> bool {
    outer == "/"
        || inner == outer
        || inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// A policy or request path made absolute: `.` and relative paths against the workspace, `~` the home.
pub fn resolve(path: &str, cwd: &str, home: Option<&str>) -> String {
    paths::resolve_to_cwd(path, cwd, home)
}

/// The intersection of `requests` and `policy` for a plugin named `name` (deny wins), in workspace `cwd`.
pub fn decide(
    name: &str,
    requests: &[CapabilityRequest],
    policy: Option<&PluginPolicy>,
    cwd: &str,
    home: Option<&str>,
) -> Effective {
    let empty = PluginPolicy::default();
    let policy = policy.unwrap_or(&empty);
    let abs = |list: &[String]| list.iter().map(|p| resolve(p, cwd, home)).collect::<Vec<_>>();
    let (read, write) = (abs(&policy.read), abs(&policy.write));
    let (deny_read, deny_write) = (abs(&policy.deny.read), abs(&policy.deny.write));
    let mut out = Effective {
        timeout_ms: policy.timeout_ms,
        memory_mib: policy.memory_mib,
        ..Default::default()
    };
    let hint = |key: &str, value: &str| {
        format!("not granted: add {key} = [\"{value}\"] under [plugins.{name}] in toolwright.toml")
    };
    for request in requests {
        let mut decision = Decision {
            requested: request.capability.clone(),
            granted: Vec::new(),
            refused: None,
        };
        match &request.capability {
            Capability::Read(p) | Capability::Write(p) => {
                let writing = matches!(request.capability, Capability::Write(_));
                let wanted = resolve(p, cwd, home);
                let grants: Vec<&String> = if writing {
                    write.iter().collect()
                } else {
                    read.iter().chain(&write).collect()
                };
                let denies: Vec<&String> = if writing {
                    deny_read.iter().chain(&deny_write).collect()
                } else {
                    deny_read.iter().collect()
                };
                let mut refusals = Vec::new();
                for g in grants {
                    let dir = if within(g, &wanted) {
                        g.clone()
                    } else if within(&wanted, g) {
                        wanted.clone()
                    } else {
                        continue;
                    };
                    if let Some(d) = denies.iter().find(|d| within(&dir, d) || within(d, &dir)) {
                        refusals.push(format!("{dir} is denied by the policy (deny {d}); deny wins"));
                        continue;
                    }
                    if !out.dirs.iter().any(|(x, w)| *x == dir && *w == writing) {
                        out.dirs.push((dir.clone(), writing));
                    }
                    decision.granted.push(if writing {
                        Capability::Write(dir)
                    } else {
                        Capability::Read(dir)
                    });
                }
                if decision.granted.is_empty() {
                    decision.refused = Some(if refusals.is_empty() {
                        hint(if writing { "write" } else { "read" }, p)
                    } else {
                        refusals.join("; ")
                    });
                }
            }
            Capability::Spawn(program) => {
                if policy.deny.spawn.iter().any(|d| d == program || d == "*") {
                    decision.refused = Some(format!("starting {program} is denied by the policy; deny wins"));
                } else if policy.spawn.iter().any(|g| g == program || g == "*") {
                    out.programs.push(program.clone());
                    decision.granted.push(Capability::Spawn(program.clone()));
                } else {
                    decision.refused = Some(hint("spawn", program));
                }
            }
            Capability::Env(var) => {
                let granted: Vec<String> = if var == "*" {
                    policy.env.clone()
                } else if policy.env.iter().any(|g| g == var || g == "*") {
                    vec![var.clone()]
                } else {
                    Vec::new()
                };
                let (denied, kept): (Vec<String>, Vec<String>) = granted
                    .into_iter()
                    .partition(|v| policy.deny.env.iter().any(|d| d == v || d == "*"));
                for v in &kept {
                    if !out.env.contains(v) {
                        out.env.push(v.clone());
                    }
                    decision.granted.push(Capability::Env(v.clone()));
                }
                if kept.is_empty() {
                    decision.refused = Some(if denied.is_empty() {
                        hint("env", var)
                    } else {
                        format!("{} denied by the policy; deny wins", denied.join(", "))
                    });
                }
            }
            Capability::Network(host) => {
                decision.refused = Some(format!("network access ({host}) is not offered to plugins yet"));
            }
        }
        out.decisions.push(decision);
    }
    // A directory granted writable needs no read-only twin (two preopens of one path would shadow each other).
    let writable: Vec<String> = out
        .dirs
        .iter()
        .filter(|(_, w)| *w)
        .map(|(d, _)| d.clone())
        .collect();
    out.dirs.retain(|(d, w)| *w || !writable.contains(d));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(c: Capability) -> CapabilityRequest {
        CapabilityRequest::new(c, "because")
    }

    #[test]
    fn intersection_of_requests_and_grants() {
        let policy = PluginPolicy {
            read: vec!["./data".into()],
            write: vec!["./out".into()],
            spawn: vec!["git".into()],
            env: vec!["LANG".into()],
            ..Default::default()
        };
        let e = decide(
            "p",
            &[
                req(Capability::Read("/".into())),
                req(Capability::Write(".".into())),
                req(Capability::Spawn("git".into())),
                req(Capability::Spawn("curl".into())),
                req(Capability::Env("*".into())),
                req(Capability::Read("/etc".into())),
            ],
            Some(&policy),
            "/w",
            None,
        );
        assert_eq!(
            e.dirs,
            [("/w/data".to_owned(), false), ("/w/out".to_owned(), true)]
        );
        assert_eq!(e.programs, ["git"]);
        assert_eq!(e.env, ["LANG"]);
        assert_eq!(
            e.decisions[3].refused.as_deref(),
            Some("not granted: add spawn = [\"curl\"] under [plugins.p] in toolwright.toml")
        );
        assert!(e.decisions[5].refused.is_some());
    }

    #[test]
    fn deny_wins() {
        let policy = PluginPolicy {
            read: vec![".".into()],
            deny: Deny {
                read: vec!["./secrets".into()],
                spawn: vec!["git".into()],
                ..Default::default()
            },
            spawn: vec!["git".into()],
            ..Default::default()
        };
        let e = decide(
            "p",
            &[
                req(Capability::Read(".".into())),
                req(Capability::Spawn("git".into())),
            ],
            Some(&policy),
            "/w",
            None,
        );
        assert!(
            e.dirs.is_empty(),
            "a denied directory inside a grant refuses the grant: {:?}",
            e.dirs
        );
        assert!(e.decisions[0].refused.as_deref().unwrap().contains("deny wins"));
        assert!(e.programs.is_empty());
    }

    #[test]
    fn nothing_without_a_policy() {
        let e = decide(
            "p",
            &[
                req(Capability::Read(".".into())),
                req(Capability::Env("HOME".into())),
            ],
            None,
            "/w",
            None,
        );
        assert_eq!(
            e,
            Effective {
                decisions: e.decisions.clone(),
                ..Default::default()
            }
        );
        assert!(e.decisions.iter().all(|d| d.refused.is_some()));
    }

    #[test]
    fn parses_kebab_case_and_rejects_unknown_keys() {
        let p = Policy::parse(
            Path::new("t.toml"),
            "[plugins.x]\nread = [\".\"]\ntimeout-ms = 5\ndeny = { env = [\"*\"] }\n",
        )
        .unwrap();
        assert_eq!(p.plugins["x"].timeout_ms, Some(5));
        let err = Policy::parse(Path::new("t.toml"), "[plugins.x]\nraed = [\".\"]\n").unwrap_err();
        assert!(err.to_string().starts_with("t.toml: "), "{err}");
    }
}

//! The decision: what a plugin's requests and a policy entry give it together ([`intersect`]), deny winning, and
//! the same rule for the built-ins' own section ([`intersect_granted`]).

use std::path::{Path, PathBuf};

use serde::Serialize;
use toolwright_sdk::{Capability, CapabilityRequest, paths};

use super::{NetPattern, PluginPolicy, SpawnRule};

/// A directory granted, typed: its absolute path and whether it is writable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DirGrant {
    /// The absolute path.
    pub path: PathBuf,
    /// Writable (else read-only).
    pub write: bool,
}

impl DirGrant {
    /// `path`, read-only.
    pub fn read(path: impl Into<PathBuf>) -> Self {
        DirGrant {
            path: path.into(),
            write: false,
        }
    }

    /// `path`, writable.
    pub fn write(path: impl Into<PathBuf>) -> Self {
        DirGrant {
            path: path.into(),
            write: true,
        }
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
    /// Directories.
    pub dirs: Vec<DirGrant>,
    /// Programs.
    pub programs: Vec<String>,
    /// The programs with their argument rules, one per entry of `programs`.
    pub spawn_rules: Vec<SpawnRule>,
    /// Whether its programs may run unconfined where Landlock is not available.
    pub unconfined_spawn: bool,
    /// Environment variables (`*`: all).
    pub env: Vec<String>,
    /// Variables the policy grants by name (a `*` does not count): only these of the ones that steer what code
    /// a program runs (`PATH`, `LD_PRELOAD`, ...) may be set for the programs the plugin starts.
    pub settable_env: Vec<String>,
    /// Network addresses it may connect to.
    pub network: Vec<NetPattern>,
    /// Tools its nested calls may reach.
    pub tools: Vec<String>,
    /// Tools whose calls it may rewrite, as a handler.
    pub rewrite: Vec<String>,
    /// Network addresses it may never connect to, whatever name it uses for them.
    pub network_deny: Vec<NetPattern>,
    /// Per request: granted or refused, and why.
    pub decisions: Vec<Decision>,
    /// Wall-clock limit per call.
    pub timeout_ms: Option<u64>,
    /// Memory limit in MiB.
    pub memory_mib: Option<u64>,
    /// Fuel per call.
    pub fuel: Option<u64>,
    /// Whether an instance may serve more than one call, and its bounds (none: a fresh instance per call).
    pub reuse: Option<super::InstanceReuse>,
}

/// Whether absolute path `inner` is `outer` or below it.
pub(super) fn within(inner: &str, outer: &str) -> bool {
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
pub fn intersect(
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
        fuel: policy.fuel,
        reuse: policy.reuse(),
        network_deny: policy
            .deny
            .network
            .iter()
            .filter_map(|p| NetPattern::parse(p))
            .collect(),
        unconfined_spawn: policy.unconfined_spawn,
        tools: policy.tools.clone(),
        rewrite: policy.rewrite.clone(),
        settable_env: policy
            .env
            .iter()
            .filter(|v| *v != "*" && !policy.deny.env.iter().any(|d| d == *v || d == "*"))
            .cloned()
            .collect(),
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
                    if !out
                        .dirs
                        .iter()
                        .any(|d| d.path == Path::new(&dir) && d.write == writing)
                    {
                        out.dirs.push(DirGrant {
                            path: PathBuf::from(&dir),
                            write: writing,
                        });
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
                } else if let Some(rule) = SpawnRule::combined(program, &policy.spawn) {
                    out.programs.push(program.clone());
                    out.spawn_rules.push(rule);
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
            Capability::Network(address) => match NetPattern::parse(address) {
                None => {
                    decision.refused = Some(format!(
                        "{address} is not an address pattern (HOST:PORT, HOST an IP address, a name or *, PORT a \
                         number or *)"
                    ));
                }
                Some(wanted) => {
                    let patterns = |list: &[String]| {
                        list.iter()
                            .filter_map(|p| NetPattern::parse(p))
                            .collect::<Vec<_>>()
                    };
                    if let Some(d) = patterns(&policy.deny.network)
                        .iter()
                        .find(|d| wanted.within(d) || d.within(&wanted))
                    {
                        decision.refused =
                            Some(format!("{address} is denied by the policy (deny {d}); deny wins"));
                    } else {
                        for g in patterns(&policy.network) {
                            let narrower = if wanted.within(&g) {
                                wanted.clone()
                            } else if g.within(&wanted) {
                                g
                            } else {
                                continue;
                            };
                            let text = narrower.to_string();
                            if !out.network.contains(&narrower) {
                                out.network.push(narrower);
                            }
                            decision.granted.push(Capability::Network(text));
                        }
                        if decision.granted.is_empty() {
                            decision.refused = Some(hint("network", address));
                        }
                    }
                }
            },
        }
        out.decisions.push(decision);
    }
    // A directory granted writable needs no read-only twin (two preopens of one path would shadow each other).
    let writable: Vec<PathBuf> = out
        .dirs
        .iter()
        .filter(|d| d.write)
        .map(|d| d.path.clone())
        .collect();
    out.dirs.retain(|d| d.write || !writable.contains(&d.path));
    out
}

/// The built-ins' decision under their `[builtins]` section: everything it grants, taken as if requested, with
/// the same rule as a plugin's requests (so deny wins in one place, [`intersect`]).
pub fn intersect_granted(section: &PluginPolicy, cwd: &str, home: Option<&str>) -> Effective {
    let request = |capability| CapabilityRequest {
        capability,
        reason: String::new(),
    };
    let requests: Vec<CapabilityRequest> = section
        .read
        .iter()
        .map(|p| request(Capability::Read(p.clone())))
        .chain(
            section
                .write
                .iter()
                .map(|p| request(Capability::Write(p.clone()))),
        )
        .chain(
            section
                .spawn
                .iter()
                .map(|s| request(Capability::Spawn(s.program.clone()))),
        )
        .chain(section.env.iter().map(|v| request(Capability::Env(v.clone()))))
        .chain(
            section
                .network
                .iter()
                .map(|a| request(Capability::Network(a.clone()))),
        )
        .collect();
    intersect("builtins", &requests, Some(section), cwd, home)
}

//! Policy files: what each plugin is granted. A plugin gets the intersection of what it requests and what the
//! policy grants; a deny always wins; a third-party plugin starts with nothing.
//!
//! ```toml
//! # ~/.config/toolwright/toolwright.toml (the user's), files given with --policy, and the project's
//! # toolwright.toml, which is confined unless the user trusts the project (see below)
//! trusted-projects = ["~/src/my-app"]   # only read from the user's file
//!
//! [plugins.my-indexer]
//! read = ["."]              # "." is the workspace; "~" the home directory
//! write = ["./index"]
//! spawn = ["git", { program = "rg", args = [["--json"]] }]   # a name (any arguments) or argument prefixes
//! env = ["LANG"]
//! network = ["api.example.com:443", "127.0.0.1:*"]   # outbound connections: HOST:PORT, `*` for any
//! timeout-ms = 30000        # wall-clock limit per call (default 60 s for third-party plugins)
//! memory-mib = 128          # memory limit per instance (default and maximum 256)
//! fuel = 5_000_000_000      # optional budget of wasm instructions per call (metered plugins run slower)
//! sha256 = "5e0b…"         # optional: only the .wasm file with this SHA-256 gets these grants
//! deny = { read = ["./secrets"] }
//!
//! [builtins]                # replaces the built-ins' default grants (read "/", write ".", spawn any, env "*")
//! write = ["./src"]
//! ```
//!
//! A project's `toolwright.toml` comes with the repository, so it is not trusted by default: it may deny,
//! lower limits, and grant directories inside the workspace, but its grants of programs, variables, network
//! and directories outside the workspace are ignored (and listed by `toolwright plugins`) until the user's
//! config names the project in `trusted-projects`. Otherwise cloning a repository with a plugin and a policy
//! granting it `spawn = ["sh"]` would hand that plugin the machine.
//!
//! Grants of the trusted files reach only plugins from trusted locations; the project's grants are kept apart in
//! [`Policy::project_plugins`]. Which entry applies to which plugin is decided in [`crate::identity`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use toolwright_sdk::{Capability, CapabilityRequest, paths};

/// A policy file's contents.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    /// Workspaces whose own `toolwright.toml` is trusted in full (honoured in the user's files only).
    #[serde(default, rename = "trusted-projects")]
    pub trusted_projects: Vec<String>,
    /// What was ignored from an untrusted project's file, one line each (`[plugins.x] spawn = "sh"`).
    #[serde(skip)]
    pub ignored: Vec<String>,
    /// Grants by plugin name, from the trusted files (the user's config, `--policy` files): they apply only to
    /// plugins from trusted locations (see [`crate::identity`]).
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginPolicy>,
    /// Grants by plugin name from the project's `toolwright.toml` (confined unless the project is trusted): they
    /// apply to every plugin of that name, wherever it was loaded from.
    #[serde(skip)]
    pub project_plugins: BTreeMap<String, PluginPolicy>,
    /// Grants of the built-in tools, replacing their defaults.
    #[serde(default)]
    pub builtins: Option<PluginPolicy>,
    /// Bounds on the host's memory that hold for every plugin together.
    #[serde(default)]
    pub limits: HostLimits,
}

/// The `[limits]` section: how much of the host's memory plugins may take. Files combine by the stricter value,
/// so a project's file can lower them but never raise them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct HostLimits {
    /// The linear memory of every live plugin instance together, in MiB (default 192).
    pub host_memory_mib: Option<u64>,
    /// The bytes one call may carry into the host (its result, partial updates and nested results), in MiB
    /// (default 16).
    pub result_mib: Option<u64>,
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
    /// Programs it may start: a name (`"git"`, any arguments) or a table restricting the arguments
    /// (`{ program = "git", args = [["status"], ["log"]] }`).
    #[serde(default)]
    pub spawn: Vec<SpawnRule>,
    /// Let it start its granted programs without Landlock confinement where the system offers none (or, on a
    /// system that has it, not at all: confinement is always applied when available).
    #[serde(default)]
    pub unconfined_spawn: bool,
    /// Environment variables it may see (`*`: all).
    #[serde(default)]
    pub env: Vec<String>,
    /// Addresses it may connect to: `HOST:PORT`, HOST an IP address, a name or `*`, PORT a number or `*`.
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
    /// Fuel per call: a budget of wasm instructions, roughly (none: unmetered). Metered plugins run slower.
    #[serde(default)]
    pub fuel: Option<u64>,
    /// Pinned SHA-256 digests of the plugin's `.wasm` file (lower-case hex; `sha256 = "…"` in a file, one per
    /// file that pins): a plugin whose file does not match every pin gets no grant.
    #[serde(default, deserialize_with = "one_pin")]
    pub sha256: Vec<String>,
}

/// `sha256 = "…"`: one pin per file (several files may each pin; every pin must match).
fn one_pin<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    let pin = String::deserialize(deserializer)?;
    Ok(vec![pin.trim().to_ascii_lowercase()])
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

/// The user's policy file: `$XDG_CONFIG_HOME/toolwright/toolwright.toml` (or
/// `~/.config/toolwright/toolwright.toml`).
pub fn default_files() -> Vec<PathBuf> {
    config_dir()
        .map(|c| c.join("toolwright.toml"))
        .into_iter()
        .collect()
}

/// The project's policy file: `<cwd>/toolwright.toml` (confined unless the project is trusted).
pub fn project_file(cwd: &Path) -> PathBuf {
    cwd.join("toolwright.toml")
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
        let policy: Policy = toml::from_str(text).map_err(|e| PolicyError {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        // Keys that would do nothing are errors, like unknown keys: a grant (or a denial) must never be
        // silently void.
        let sections = policy
            .plugins
            .iter()
            .map(|(name, p)| (format!("[plugins.{name}]"), p))
            .chain(policy.builtins.iter().map(|b| ("[builtins]".to_owned(), b)));
        for (section, p) in sections {
            if let Some(bad) = p.sha256.iter().find(|d| !is_sha256(d)) {
                return Err(PolicyError {
                    path: path.to_owned(),
                    message: format!(
                        "{section} sha256: {bad:?} is not a SHA-256 digest (64 hex digits, as `sha256sum` or \
                         `toolwright plugins` prints it)"
                    ),
                });
            }
            let patterns = p.network.iter().chain(&p.deny.network);
            if let Some(bad) = patterns.into_iter().find(|n| NetPattern::parse(n).is_none()) {
                return Err(PolicyError {
                    path: path.to_owned(),
                    message: format!(
                        "{section} network: {bad:?} is not HOST:PORT (HOST an IP address, a name or *, PORT a \
                         number or *)"
                    ),
                });
            }
        }
        if let Some(b) = &policy.builtins {
            let void = [
                (
                    b.unconfined_spawn,
                    "unconfined-spawn: the built-in tools' programs are not confined",
                ),
                (
                    !b.network.is_empty() || !b.deny.network.is_empty(),
                    "network: the built-in tools open no sockets",
                ),
                (
                    b.fuel.is_some(),
                    "fuel: the built-in tools are not metered (use timeout-ms)",
                ),
                (
                    !b.sha256.is_empty(),
                    "sha256: the built-in tools are part of the host binary",
                ),
            ];
            if let Some((_, why)) = void.iter().find(|(set, _)| *set) {
                return Err(PolicyError {
                    path: path.to_owned(),
                    message: format!("[builtins] cannot set {why}"),
                });
            }
        }
        Ok(policy)
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

    /// The trusted `files` (the user's config, `--policy` files), then the project's file `project` for the
    /// workspace `cwd`: in full when a trusted file lists the workspace in `trusted-projects`, else confined
    /// (what it may not grant is dropped and recorded in [`Policy::ignored`]).
    pub fn load_with_project(
        files: &[PathBuf],
        project: Option<&Path>,
        cwd: &str,
        home: Option<&str>,
    ) -> Result<Policy, PolicyError> {
        let mut policy = Policy::load(files)?;
        let Some(project) = project.filter(|p| !files.iter().any(|f| f == p)) else {
            return Ok(policy);
        };
        let mut theirs = Policy::load(&[project.to_owned()])?;
        if !theirs.trusted_projects.is_empty() {
            policy.ignored.push(format!(
                "trusted-projects = {:?} (only the user's config can trust a project)",
                theirs.trusted_projects
            ));
            theirs.trusted_projects.clear();
        }
        let workspace = canonical(cwd);
        let trusted = policy
            .trusted_projects
            .iter()
            .any(|t| canonical(&resolve(t, cwd, home)) == workspace);
        if !trusted {
            for (name, p) in &mut theirs.plugins {
                policy
                    .ignored
                    .extend(p.confine(&format!("[plugins.{name}]"), &workspace, cwd, home, true));
            }
            if let Some(b) = &mut theirs.builtins {
                // The built-ins' default already reads anywhere and starts any program: only writing outside
                // the workspace would widen it.
                policy
                    .ignored
                    .extend(b.confine("[builtins]", &workspace, cwd, home, false));
            }
        }
        // The project's grants are kept apart: a trusted file's grants are for plugins from trusted locations
        // only, the project's for any plugin of the name (crate::identity).
        let project_plugins = std::mem::take(&mut theirs.plugins);
        policy.merge(theirs);
        for (name, p) in project_plugins {
            policy.project_plugins.entry(name).or_default().merge(p);
        }
        Ok(policy)
    }

    fn merge(&mut self, other: Policy) {
        self.trusted_projects.extend(other.trusted_projects);
        self.ignored.extend(other.ignored);
        for (name, p) in other.plugins {
            self.plugins.entry(name).or_default().merge(p);
        }
        for (name, p) in other.project_plugins {
            self.project_plugins.entry(name).or_default().merge(p);
        }
        if let Some(b) = other.builtins {
            self.builtins.get_or_insert_with(PluginPolicy::default).merge(b);
        }
        self.limits.host_memory_mib = min_opt(self.limits.host_memory_mib, other.limits.host_memory_mib);
        self.limits.result_mib = min_opt(self.limits.result_mib, other.limits.result_mib);
    }
}

/// `path` with symlinks resolved when it exists (a granted `./link` to `/` is `/`), else as written.
fn canonical(path: &str) -> String {
    std::fs::canonicalize(path)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| path.to_owned())
}

impl PluginPolicy {
    /// Drop what an untrusted project may not grant: directories outside the workspace (after symlinks), and,
    /// when `all` is set, every program, variable and network grant. Returns what was dropped, one line each.
    fn confine(
        &mut self,
        section: &str,
        workspace: &str,
        cwd: &str,
        home: Option<&str>,
        all: bool,
    ) -> Vec<String> {
        let mut dropped = Vec::new();
        let inside = |dir: &String| within(&canonical(&resolve(dir, cwd, home)), workspace);
        for (key, list) in [("read", &mut self.read), ("write", &mut self.write)] {
            if !all && key == "read" {
                continue;
            }
            let (kept, outside): (Vec<String>, Vec<String>) = list.drain(..).partition(inside);
            *list = kept;
            dropped.extend(
                outside
                    .into_iter()
                    .map(|d| format!("{section} {key} = \"{d}\" (outside the workspace)")),
            );
        }
        if all {
            dropped.extend(self.spawn.drain(..).map(|r| format!("{section} spawn = {r}")));
            if std::mem::take(&mut self.unconfined_spawn) {
                dropped.push(format!("{section} unconfined-spawn = true"));
            }
            for (key, list) in [("env", &mut self.env), ("network", &mut self.network)] {
                dropped.extend(list.drain(..).map(|v| format!("{section} {key} = \"{v}\"")));
            }
        }
        dropped
    }

    /// Add `other`'s grants, denials and pins to these; the stricter limit wins.
    pub fn merge(&mut self, other: PluginPolicy) {
        for pin in other.sha256 {
            if !self.sha256.contains(&pin) {
                self.sha256.push(pin);
            }
        }
        self.read.extend(other.read);
        self.write.extend(other.write);
        self.spawn.extend(other.spawn);
        self.unconfined_spawn |= other.unconfined_spawn;
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
        self.fuel = min_opt(self.fuel, other.fuel);
    }
}

/// Whether `text` is a SHA-256 digest in hex (64 digits).
fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit())
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
    /// The programs with their argument rules, one per entry of `programs`.
    pub spawn_rules: Vec<SpawnRule>,
    /// Whether its programs may run unconfined where Landlock is not available.
    pub unconfined_spawn: bool,
    /// Environment variables (`*`: all).
    pub env: Vec<String>,
    /// Variables the policy grants by name (a `*` does not count): only these of the ones that steer what code
    /// a program runs (`PATH`, `LD_PRELOAD`, ...) may be set for the programs the plugin starts.
    pub settable_env: Vec<String>,
    /// Network addresses it may connect to (`HOST:PORT` patterns).
    pub network: Vec<String>,
    /// Network addresses it may never connect to, whatever name it uses for them (`HOST:PORT` patterns).
    pub network_deny: Vec<String>,
    /// Per request: granted or refused, and why.
    pub decisions: Vec<Decision>,
    /// Wall-clock limit per call.
    pub timeout_ms: Option<u64>,
    /// Memory limit in MiB.
    pub memory_mib: Option<u64>,
    /// Fuel per call.
    pub fuel: Option<u64>,
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
        fuel: policy.fuel,
        network_deny: policy.deny.network.clone(),
        unconfined_spawn: policy.unconfined_spawn,
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
                            if !out.network.contains(&text) {
                                out.network.push(text.clone());
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
    let writable: Vec<String> = out
        .dirs
        .iter()
        .filter(|(_, w)| *w)
        .map(|(d, _)| d.clone())
        .collect();
    out.dirs.retain(|(d, w)| *w || !writable.contains(d));
    out
}

/// A program a policy grants, with the argument prefixes it may be started with.
///
/// In a policy file either a name (`"git"`: any arguments) or a table (`{ program = "git", args = [["status"],
/// ["log"]] }`: the arguments must start with one of the lists).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(from = "SpawnEntry", into = "SpawnEntry")]
pub struct SpawnRule {
    /// The program: a name looked up on the host's `PATH`, an absolute path, or `*` (whatever is requested).
    pub program: String,
    /// The argument prefixes it may be started with (none: any arguments).
    pub args: Option<Vec<Vec<String>>>,
}

/// How a [`SpawnRule`] is spelled in a policy file.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
enum SpawnEntry {
    Program(String),
    Rule(SpawnTable),
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct SpawnTable {
    program: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    args: Option<Vec<Vec<String>>>,
}

impl From<SpawnEntry> for SpawnRule {
    fn from(entry: SpawnEntry) -> Self {
        match entry {
            SpawnEntry::Program(program) => SpawnRule { program, args: None },
            SpawnEntry::Rule(t) => SpawnRule {
                program: t.program,
                args: t.args,
            },
        }
    }
}

impl From<SpawnRule> for SpawnEntry {
    fn from(rule: SpawnRule) -> Self {
        match rule.args {
            None => SpawnEntry::Program(rule.program),
            args => SpawnEntry::Rule(SpawnTable {
                program: rule.program,
                args,
            }),
        }
    }
}

impl From<&str> for SpawnRule {
    fn from(program: &str) -> Self {
        SpawnRule {
            program: program.to_owned(),
            args: None,
        }
    }
}

impl SpawnRule {
    /// What the grants among `rules` naming `program` (or `*`) allow together: any arguments if one of them
    /// allows any, else the union of their prefixes; none when no rule names it.
    pub fn combined(program: &str, rules: &[SpawnRule]) -> Option<SpawnRule> {
        let matching: Vec<&SpawnRule> = rules
            .iter()
            .filter(|r| r.program == program || r.program == "*")
            .collect();
        if matching.is_empty() {
            return None;
        }
        let args = if matching.iter().any(|r| r.args.is_none()) {
            None
        } else {
            Some(
                matching
                    .iter()
                    .flat_map(|r| r.args.iter().flatten().cloned())
                    .collect(),
            )
        };
        Some(SpawnRule {
            program: program.to_owned(),
            args,
        })
    }

    /// Whether `args` start with one of the allowed prefixes (always, without a restriction).
    pub fn allows_args(&self, args: &[String]) -> bool {
        self.args
            .as_ref()
            .is_none_or(|prefixes| prefixes.iter().any(|p| args.starts_with(p)))
    }
}

impl std::fmt::Display for SpawnRule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.args {
            None => write!(f, "\"{}\"", self.program),
            Some(args) => write!(f, "{{ program = \"{}\", args = {args:?} }}", self.program),
        }
    }
}

/// A network address pattern: `HOST:PORT`, HOST an IP address (IPv6 in brackets), a name or `*`, PORT a
/// number or `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetPattern {
    /// The host, lower-cased (`*`: any).
    pub host: String,
    /// The port (none: any).
    pub port: Option<u16>,
}

impl NetPattern {
    /// Parse `HOST:PORT`; none when it is not one.
    pub fn parse(text: &str) -> Option<NetPattern> {
        let (host, port) = text.trim().rsplit_once(':')?;
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host);
        if host.is_empty() || host.contains(['/', ' ']) {
            return None;
        }
        let port = match port {
            "*" => None,
            p => Some(p.parse().ok()?),
        };
        Some(NetPattern {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// Whether every address this pattern allows is allowed by `outer`.
    pub fn within(&self, outer: &NetPattern) -> bool {
        (outer.host == "*" || outer.host == self.host) && (outer.port.is_none() || outer.port == self.port)
    }
}

impl std::fmt::Display for NetPattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let host = if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        };
        match self.port {
            Some(port) => write!(f, "{host}:{port}"),
            None => write!(f, "{host}:*"),
        }
    }
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
        for (text, why) in [
            (
                "[builtins]\nnetwork = [\"*:*\"]\n",
                "network: the built-in tools open no sockets",
            ),
            (
                "[builtins]\nfuel = 5\n",
                "fuel: the built-in tools are not metered (use timeout-ms)",
            ),
        ] {
            let err = Policy::parse(Path::new("t.toml"), text).unwrap_err();
            assert_eq!(err.to_string(), format!("t.toml: [builtins] cannot set {why}"));
        }
        for (text, bad) in [
            ("[plugins.x]\nnetwork = [\"example.com\"]\n", "\"example.com\""),
            (
                "[plugins.x]\ndeny = { network = [\"10.0.0.0/8:*\"] }\n",
                "\"10.0.0.0/8:*\"",
            ),
        ] {
            let err = Policy::parse(Path::new("t.toml"), text).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!(
                    "t.toml: [plugins.x] network: {bad} is not HOST:PORT (HOST an IP address, a name or *, PORT a \
                     number or *)"
                )
            );
        }
    }

    #[test]
    fn the_projects_grants_are_kept_apart_from_the_trusted_files() {
        let dir = tempfile::tempdir().unwrap();
        let (user, project) = (dir.path().join("user.toml"), dir.path().join("toolwright.toml"));
        let pin = "AB".repeat(32);
        std::fs::write(&user, "[plugins.x]\nread = [\"/etc\"]\n").unwrap();
        std::fs::write(
            &project,
            format!("[plugins.x]\nread = [\".\"]\nsha256 = \"{pin}\"\n"),
        )
        .unwrap();
        let cwd = dir.path().to_string_lossy();
        let p = Policy::load_with_project(&[user], Some(&project), &cwd, None).unwrap();
        assert_eq!(p.plugins["x"].read, ["/etc"]);
        assert_eq!(p.project_plugins["x"].read, ["."]);
        assert_eq!(p.project_plugins["x"].sha256, [pin.to_lowercase()]);
    }

    #[test]
    fn spawn_grants_are_names_or_tables_with_argument_prefixes() {
        let p = Policy::parse(
            Path::new("t.toml"),
            "[plugins.x]\nspawn = [\"echo\", { program = \"git\", args = [[\"status\"], [\"log\"]] },              { program = \"ls\" }]\nunconfined-spawn = true\n",
        )
        .unwrap();
        let x = &p.plugins["x"];
        assert!(x.unconfined_spawn);
        assert_eq!(
            x.spawn,
            [
                SpawnRule::from("echo"),
                SpawnRule {
                    program: "git".into(),
                    args: Some(vec![vec!["status".into()], vec!["log".into()]]),
                },
                SpawnRule::from("ls"),
            ]
        );
        assert_eq!(
            x.spawn[1].to_string(),
            "{ program = \"git\", args = [[\"status\"], [\"log\"]] }"
        );
        let err = Policy::parse(
            Path::new("t.toml"),
            "[plugins.x]\nspawn = [{ program = \"git\", arg = [] }]\n",
        )
        .unwrap_err();
        assert!(err.to_string().starts_with("t.toml: "), "{err}");
        let err = Policy::parse(Path::new("t.toml"), "[builtins]\nunconfined-spawn = true\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "t.toml: [builtins] cannot set unconfined-spawn: the built-in tools' programs are not confined"
        );

        // Rules naming the same program add up; one without a restriction lifts them.
        let rules = [
            SpawnRule {
                program: "git".into(),
                args: Some(vec![vec!["status".into()]]),
            },
            SpawnRule {
                program: "*".into(),
                args: Some(vec![vec!["--version".into()]]),
            },
        ];
        let git = SpawnRule::combined("git", &rules).unwrap();
        assert_eq!(
            git.args,
            Some(vec![vec!["status".into()], vec!["--version".into()]])
        );
        assert!(git.allows_args(&["status".into(), "-s".into()]));
        assert!(!git.allows_args(&["-c".into(), "alias.x=!sh".into(), "x".into()]));
        assert_eq!(SpawnRule::combined("cat", &rules[..1]), None);
        let any = SpawnRule::combined("git", &[rules[0].clone(), "git".into()]).unwrap();
        assert_eq!(any.args, None);

        // What only a name grants: `*` does not count.
        let e = decide(
            "p",
            &[req(Capability::Spawn("git".into()))],
            Some(&PluginPolicy {
                spawn: rules.to_vec(),
                env: vec!["*".into(), "PATH".into(), "LD_PRELOAD".into()],
                deny: Deny {
                    env: vec!["LD_PRELOAD".into()],
                    ..Default::default()
                },
                ..Default::default()
            }),
            "/w",
            None,
        );
        assert_eq!(e.spawn_rules, [git]);
        assert_eq!(e.settable_env, ["PATH"]);
    }

    #[test]
    fn network_patterns_parse_and_nest() {
        let p = |t: &str| NetPattern::parse(t).unwrap();
        assert_eq!(
            p("Example.COM:443"),
            NetPattern {
                host: "example.com".into(),
                port: Some(443)
            }
        );
        assert_eq!(
            p("[::1]:*"),
            NetPattern {
                host: "::1".into(),
                port: None
            }
        );
        assert_eq!(p("[::1]:*").to_string(), "[::1]:*");
        for bad in ["example.com", ":80", "host:http", "10.0.0.0/8:80", "a b:1"] {
            assert_eq!(NetPattern::parse(bad), None, "{bad}");
        }
        assert!(p("127.0.0.1:80").within(&p("127.0.0.1:*")));
        assert!(p("127.0.0.1:80").within(&p("*:*")));
        assert!(!p("127.0.0.1:*").within(&p("127.0.0.1:80")));
        assert!(!p("10.0.0.1:80").within(&p("127.0.0.1:*")));
        let e = decide(
            "p",
            &[
                req(Capability::Network("*:443".into())),
                req(Capability::Network("db:5432".into())),
            ],
            Some(&PluginPolicy {
                network: vec!["api.example.com:443".into(), "*:5432".into()],
                deny: Deny {
                    network: vec!["db:*".into()],
                    ..Default::default()
                },
                ..Default::default()
            }),
            "/w",
            None,
        );
        assert_eq!(e.network, ["api.example.com:443"]);
        assert_eq!(
            e.decisions[1].refused.as_deref(),
            Some("db:5432 is denied by the policy (deny db:*); deny wins")
        );
    }
}

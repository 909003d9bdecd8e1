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
//! instance = "reuse"        # optional: keep an instance between calls (default "fresh": a new one per call)
//! instance-max-calls = 1000 # with "reuse": calls one instance serves before it is replaced (default 1000)
//! instance-idle-ms = 10000  # with "reuse": how long an idle instance is kept (default 10 s)
//! sha256 = "5e0b…"         # optional: only the .wasm file with this SHA-256 gets these grants
//! deny = { read = ["./secrets"] }
//!
//! [builtins]                # replaces the built-ins' default grants (read "/", write ".", spawn any, env "*");
//!                           # a section of limits only (timeout-ms, memory-mib, instance…) keeps them
//! write = ["./src"]
//! sandbox = "workspace-write" # how bash's programs are confined: "workspace-write" (default), "read-only", "off"
//! network = ["crates.io:443"] # hosts bash's programs reach through the host's proxy (none by default)
//! ```
//!
//! A project's `toolwright.toml` comes with the repository, so it is not trusted by default: it may deny,
//! lower limits, and grant directories inside the workspace, but its grants of programs, variables, network
//! and directories outside the workspace are ignored (and listed by `toolwright plugins`) until the user's
//! config names the project in `trusted-projects`. Otherwise cloning a repository with a plugin and a policy
//! granting it `spawn = ["sh"]` would hand that plugin the machine.
//!
//! Grants of the trusted files reach only plugins from trusted locations; the project's grants are kept apart in
//! [`Policy::project_plugins`]. Which entry applies to which plugin is decided in `toolwright::trust::identity`.

mod decide;
mod rules;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use decide::within;
pub use decide::{Decision, DirGrant, Effective, intersect, intersect_granted, resolve};
pub use rules::{NetPattern, SpawnRule, is_local_address, names_this_machine};

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
    /// plugins from trusted locations (see `toolwright::trust::identity`).
    #[serde(default)]
    pub plugins: BTreeMap<String, PluginPolicy>,
    /// Grants by plugin name from the project's `toolwright.toml` (confined unless the project is trusted): they
    /// apply to every plugin of that name, wherever it was loaded from.
    #[serde(skip)]
    pub project_plugins: BTreeMap<String, PluginPolicy>,
    /// Grants of the built-in tools, replacing their defaults.
    #[serde(default)]
    pub builtins: Option<PluginPolicy>,
    /// Grants of the MCP servers Toolwright starts, by server name (`[mcp.NAME]`): what each stdio server's
    /// sandbox lets it read, write, reach and see, besides its defaults (the system, its own install
    /// directories, a private temporary directory). Keys: `read`, `write`, `env`, `network`, `deny`,
    /// `process-memory-mib`, and `sandbox = "off"` (ignored from an untrusted project's file).
    #[serde(default)]
    pub mcp: BTreeMap<String, PluginPolicy>,
    /// Built-in tools a plugin may replace with a tool of the same name (honoured in the user's files only):
    /// without it, a plugin's tool named like a built-in is an error and the built-in stays.
    #[serde(default)]
    pub replace: Vec<String>,
    /// Bounds on the host's memory that hold for every plugin together.
    #[serde(default)]
    pub limits: HostLimits,
    /// Which changes to an installed plugin keep its approval without asking (honoured in the user's files only;
    /// see `toolwright::trust::lock`).
    #[serde(default, rename = "auto-approve")]
    pub auto_approve: Option<AutoApprove>,
    /// Where the audit log goes: one JSON line per tool call ([`crate::audit`]). Relative to the file's
    /// directory; `~/` is the user's home. Honoured in the user's files only.
    #[serde(default)]
    pub audit: Option<PathBuf>,
    /// pi's codemode settings (`codemode.mode`, `codemode.inlineBudget`). The first file that sets a key wins.
    #[serde(default)]
    pub codemode: CodemodeSettings,
    /// The `[ask]` section: whether a call refused a grant may ask the user for it (honoured in the user's files
    /// only: a project's file can neither turn asking on nor answer for the user).
    #[serde(default)]
    pub ask: AskSettings,
}

/// The `[ask]` section ([`crate::ask`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AskSettings {
    /// Ask the user (through the MCP client, or on the terminal with `exec --ask`) when a plugin's call is
    /// refused a file, directory or program it declared it needs. Off unless set.
    #[serde(default)]
    pub grants: Option<bool>,
    /// The plugins that may ask the MCP client's model (`sampling/createMessage`, [`crate::client`]): a plugin's
    /// request spends the user's model. Forms for the user and the client's roots need no grant.
    #[serde(default)]
    pub sampling: Vec<String>,
}

impl AskSettings {
    /// Whether refused grants may be asked for.
    pub fn grants(&self) -> bool {
        self.grants == Some(true)
    }

    /// Whether the plugin `name` may ask the client's model.
    pub fn samples(&self, name: &str) -> bool {
        self.sampling.iter().any(|n| n == name)
    }
}

/// The `[codemode]` section: how codemode presents the tools scripts can call.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodemodeSettings {
    /// `"on"` (pi's default: declared tools say how scripts call them, codemode lists the rest) or `"only"`
    /// (codemode lists every callable tool, and `direct` tools are not declared: the model goes through
    /// codemode).
    #[serde(default)]
    pub mode: Option<CodemodeMode>,
    /// Tokens (4 characters each) of tool sections codemode's description may list (pi's default 3000).
    #[serde(default, rename = "inline-budget")]
    pub inline_budget: Option<u64>,
}

/// The `mode` of the `[codemode]` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CodemodeMode {
    /// pi's default.
    On,
    /// Everything through codemode.
    Only,
}

/// The `auto-approve` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum AutoApprove {
    /// A new file whose tool surface is the same and whose capabilities did not grow keeps its approval.
    #[serde(rename = "same-surface")]
    SameSurface,
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
    /// Tools its nested calls may reach (none by default): a built-in it reaches runs within its grants, another
    /// plugin only if that plugin's grants lie within its own (see `toolwright_core::authority`).
    #[serde(default)]
    pub tools: Vec<String>,
    /// Tools whose calls it may rewrite, as a `tool_call` handler (none by default: a handler may block any
    /// call, but rewrite only the arguments of the tools named here).
    #[serde(default)]
    pub rewrite: Vec<String>,
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
    /// `"fresh"` (the default: every call gets a new instance, nothing carries over) or `"reuse"`: an instance
    /// that finished a call cleanly may serve the plugin's next one, faster, at the price of isolation between
    /// calls (what one call leaves in the plugin's memory, the next one sees). Honoured in trusted files only.
    #[serde(default)]
    pub instance: Option<InstanceMode>,
    /// With `instance = "reuse"`: how many calls one instance serves before it is replaced (default
    /// [`DEFAULT_REUSE_MAX_CALLS`]).
    #[serde(default)]
    pub instance_max_calls: Option<u64>,
    /// With `instance = "reuse"`: how long, in milliseconds, an instance may wait for the next call before it is
    /// dropped (default [`DEFAULT_REUSE_IDLE_MS`]).
    #[serde(default)]
    pub instance_idle_ms: Option<u64>,
    /// Pinned SHA-256 digests of the plugin's `.wasm` file (lower-case hex; `sha256 = "…"` in a file, one per
    /// file that pins): a plugin whose file does not match every pin gets no grant.
    #[serde(default, deserialize_with = "one_pin")]
    pub sha256: Vec<String>,
    /// `[builtins]` only: how the programs the built-in tools start (`bash`'s) are confined (default
    /// [`SandboxMode::WorkspaceWrite`]).
    #[serde(default)]
    pub sandbox: Option<SandboxMode>,
    /// `[builtins]` only: the memory the processes of one sandboxed call may use together, in MiB (the call's
    /// cgroup; none by default). Past it the kernel kills in that cgroup, never in the host.
    #[serde(default)]
    pub process_memory_mib: Option<u64>,
    /// `[builtins]` only: the paths the built-ins' programs may never read or write, even below a grant,
    /// replacing [`DEFAULT_SECRETS`] (`[]`: none). `deny = { read = [...] }` refuses whole grants instead.
    #[serde(default)]
    pub secrets: Option<Vec<String>>,
    /// Whether a file's `[builtins]` section names a grant or denial key (`read`, `write`, `spawn`, `env`,
    /// `deny`), even with an empty list: `read = []` says "nothing", which an absent key does not.
    #[serde(skip)]
    pub names_grants: bool,
}

/// How the programs of the built-in tools are confined (`[builtins] sandbox`), as Codex names its modes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// pi's behaviour: unconfined, with the host's own authority.
    Off,
    /// Read below the read grants but the user's secrets, write the workspace (the write grants) and the
    /// temporary directory, no network (the default).
    #[default]
    WorkspaceWrite,
    /// As `workspace-write`, writing nothing.
    ReadOnly,
}

impl SandboxMode {
    /// Its name in a policy file.
    pub fn name(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::ReadOnly => "read-only",
        }
    }
}

/// The user's secrets the built-ins' programs may not read or write under the default policy (`~`: the home
/// directory): keys, cloud and registry credentials, password stores, browser profiles, Toolwright's and pi's
/// own configuration. `[builtins] secrets = [...]` replaces the list.
pub const DEFAULT_SECRETS: &[&str] = &[
    "~/.ssh",
    "~/.gnupg",
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.kube",
    "~/.docker",
    "~/.netrc",
    "~/.git-credentials",
    "~/.config/gh",
    "~/.config/hub",
    "~/.pypirc",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.password-store",
    "~/.local/share/keyrings",
    "~/.vault-token",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.mozilla",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.config/BraveSoftware",
    "~/.config/microsoft-edge",
    "~/.config/toolwright",
    "~/.pi/agent",
];

/// The `instance` setting of a plugin's section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMode {
    /// A new instance for every call (the default).
    Fresh,
    /// An instance that finished a call cleanly may serve the next (see [`InstanceReuse`]).
    Reuse,
}

/// Calls a reused instance serves before it is replaced, unless `instance-max-calls` says otherwise.
pub const DEFAULT_REUSE_MAX_CALLS: u64 = 1000;
/// How long a reused instance may wait idle, in milliseconds, unless `instance-idle-ms` says otherwise.
pub const DEFAULT_REUSE_IDLE_MS: u64 = 10_000;

/// What `instance = "reuse"` decided: the bounds on one instance's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceReuse {
    /// Calls one instance serves before it is replaced (at least 1).
    pub max_calls: u64,
    /// How long an instance may wait idle before it is dropped.
    pub idle: std::time::Duration,
}

impl PluginPolicy {
    /// For the `[builtins]` section: whether it grants or denies anything, or names a key that does (`read`,
    /// `write`, `spawn`, `env`, `deny`; `read = []` counts), and so replaces the built-ins' default grant. A
    /// section of limits, instance settings, `sandbox`, `secrets` or `network` (which only opens the sandbox's
    /// proxy to the hosts it names) keeps it.
    pub fn replaces_builtin_defaults(&self) -> bool {
        self.names_grants
            || !(self.read.is_empty()
                && self.write.is_empty()
                && self.spawn.is_empty()
                && self.env.is_empty()
                && Deny {
                    network: Vec::new(),
                    ..self.deny.clone()
                } == Deny::default())
    }

    /// The instance reuse this section asks for: none unless `instance = "reuse"`.
    pub fn reuse(&self) -> Option<InstanceReuse> {
        (self.instance == Some(InstanceMode::Reuse)).then(|| InstanceReuse {
            max_calls: self.instance_max_calls.unwrap_or(DEFAULT_REUSE_MAX_CALLS).max(1),
            idle: std::time::Duration::from_millis(self.instance_idle_ms.unwrap_or(DEFAULT_REUSE_IDLE_MS)),
        })
    }
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
        let mut policy: Policy = toml::from_str(text).map_err(|e| PolicyError {
            path: path.to_owned(),
            message: e.to_string(),
        })?;
        if let Some(builtins) = &mut policy.builtins {
            // `network` only opens the sandbox's proxy: it does not replace the default file grants.
            const GRANT_KEYS: [&str; 5] = ["read", "write", "spawn", "env", "deny"];
            let table: toml::Table = toml::from_str(text).unwrap_or_default();
            builtins.names_grants = table
                .get("builtins")
                .and_then(toml::Value::as_table)
                .is_some_and(|section| GRANT_KEYS.iter().any(|key| section.contains_key(*key)));
        }
        if let Some(audit) = &mut policy.audit
            && audit.is_relative()
            && !audit.starts_with("~")
            && let Some(dir) = path.parent()
        {
            *audit = dir.join(&*audit);
        }
        // Keys that would do nothing are errors, like unknown keys: a grant (or a denial) must never be
        // silently void.
        let sections = policy
            .plugins
            .iter()
            .map(|(name, p)| (format!("[plugins.{name}]"), p))
            .chain(policy.builtins.iter().map(|b| ("[builtins]".to_owned(), b)))
            .chain(policy.mcp.iter().map(|(name, p)| (format!("[mcp.{name}]"), p)));
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
            if section != "[builtins]"
                && !section.starts_with("[mcp.")
                && (p.sandbox.is_some() || p.secrets.is_some() || p.process_memory_mib.is_some())
            {
                return Err(PolicyError {
                    path: path.to_owned(),
                    message: format!(
                        "{section} sandbox, secrets, process-memory-mib: only the [builtins] section sets them (a \
                         plugin's programs are confined to its own grants)"
                    ),
                });
            }
            if p.instance_max_calls == Some(0) {
                return Err(PolicyError {
                    path: path.to_owned(),
                    message: format!("{section} instance-max-calls: 0 calls would serve none (at least 1)"),
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
        for (name, p) in &policy.mcp {
            if let Some(key) = p.void_for_mcp() {
                return Err(PolicyError {
                    path: path.to_owned(),
                    message: format!(
                        "[mcp.{name}] cannot set {key}: an MCP server is a process, granted read, write, env, \
                         network, deny, process-memory-mib and sandbox (it may run any program it can read)"
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
        Self::load_with_trusted_project(files, project, cwd, home, false)
    }

    /// [`Policy::load_with_project`], with the project's file in full also when `trusted` (the user trusted
    /// the project as it is now: `toolwright trust`).
    pub fn load_with_trusted_project(
        files: &[PathBuf],
        project: Option<&Path>,
        cwd: &str,
        home: Option<&str>,
        trusted: bool,
    ) -> Result<Policy, PolicyError> {
        let mut policy = Policy::load(files)?;
        let Some(project) = project.filter(|p| !files.iter().any(|f| f == p)) else {
            return Ok(policy);
        };
        let mut theirs = Policy::load(&[project.to_owned()])?;
        if let Some(audit) = theirs.audit.take() {
            policy.ignored.push(format!(
                "audit = {:?} (only the user's config says where the audit log goes)",
                audit.display().to_string()
            ));
        }
        if !theirs.replace.is_empty() {
            policy.ignored.push(format!(
                "replace = {:?} (only the user's config lets a plugin replace a built-in)",
                std::mem::take(&mut theirs.replace)
            ));
        }
        if std::mem::take(&mut theirs.ask) != AskSettings::default() {
            policy
                .ignored
                .push("[ask] (only the user's config decides whether the user is asked for grants, and which plugins may ask the client's model)".into());
        }
        if theirs.auto_approve.take().is_some() {
            policy.ignored.push(
                "auto-approve = \"same-surface\" (only the user's config decides what approves itself)"
                    .into(),
            );
        }
        if !theirs.trusted_projects.is_empty() {
            policy.ignored.push(format!(
                "trusted-projects = {:?} (only the user's config can trust a project)",
                theirs.trusted_projects
            ));
            theirs.trusted_projects.clear();
        }
        let workspace = canonical(cwd);
        let trusted = trusted
            || policy
                .trusted_projects
                .iter()
                .any(|t| canonical(&resolve(t, cwd, home)) == workspace);
        if !trusted {
            for (name, p) in &mut theirs.plugins {
                policy
                    .ignored
                    .extend(p.confine(&format!("[plugins.{name}]"), &workspace, cwd, home, true));
            }
            for (name, p) in &mut theirs.mcp {
                let section = format!("[mcp.{name}]");
                if p.sandbox == Some(SandboxMode::Off) {
                    p.sandbox = None;
                    policy.ignored.push(format!(
                        "{section} sandbox = \"off\" (only the user's config can run a server unconfined)"
                    ));
                }
                policy
                    .ignored
                    .extend(p.confine(&section, &workspace, cwd, home, true));
            }
            if let Some(b) = &mut theirs.builtins {
                // A repository may make the built-ins' sandbox stricter, never looser.
                if b.sandbox == Some(SandboxMode::Off) {
                    b.sandbox = None;
                    policy.ignored.push(
                        "[builtins] sandbox = \"off\" (only the user's config can turn the sandbox off)"
                            .into(),
                    );
                }
                if !b.network.is_empty() {
                    policy.ignored.push(format!(
                        "[builtins] network = {:?} (only the user's config lets commands reach hosts)",
                        std::mem::take(&mut b.network)
                    ));
                }
                if let Some(secrets) = b.secrets.take() {
                    policy.ignored.push(format!(
                        "[builtins] secrets = {secrets:?} (only the user's config says which secrets the sandbox \
                         hides; a project may deny more with deny.read)"
                    ));
                }
                if policy
                    .builtins
                    .as_ref()
                    .is_some_and(PluginPolicy::replaces_builtin_defaults)
                {
                    // The user's config set the built-ins' grants: a project may only narrow them (deny, limits),
                    // or its grants would be added to the user's.
                    policy.ignored.extend(b.drop_grants("[builtins]"));
                } else {
                    // The built-ins' default already reads anywhere and starts any program: only writing
                    // outside the workspace would widen it.
                    policy
                        .ignored
                        .extend(b.confine("[builtins]", &workspace, cwd, home, false));
                }
            }
        }
        // The project's grants are kept apart: a trusted file's grants are for plugins from trusted locations
        // only, the project's for any plugin of the name (toolwright::trust::identity).
        let project_plugins = std::mem::take(&mut theirs.plugins);
        policy.merge(theirs);
        for (name, p) in project_plugins {
            policy.project_plugins.entry(name).or_default().merge(p);
        }
        Ok(policy)
    }

    fn merge(&mut self, other: Policy) {
        self.trusted_projects.extend(other.trusted_projects);
        self.replace.extend(other.replace);
        self.auto_approve = self.auto_approve.or(other.auto_approve);
        self.audit = self.audit.take().or(other.audit);
        self.ask.grants = self.ask.grants.or(other.ask.grants);
        self.ask.sampling.extend(other.ask.sampling);
        self.codemode.mode = self.codemode.mode.or(other.codemode.mode);
        self.codemode.inline_budget = self.codemode.inline_budget.or(other.codemode.inline_budget);
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
        for (name, p) in other.mcp {
            self.mcp.entry(name).or_default().merge(p);
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
        // Reuse trades isolation between calls for speed: the user's call, not a repository's.
        if self.instance == Some(InstanceMode::Reuse) {
            self.instance = None;
            dropped.push(format!("{section} instance = \"reuse\""));
        }
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
            for (key, list) in [("tools", &mut self.tools), ("rewrite", &mut self.rewrite)] {
                dropped.extend(list.drain(..).map(|v| format!("{section} {key} = \"{v}\"")));
            }
            if std::mem::take(&mut self.unconfined_spawn) {
                dropped.push(format!("{section} unconfined-spawn = true"));
            }

            for (key, list) in [("env", &mut self.env), ("network", &mut self.network)] {
                dropped.extend(list.drain(..).map(|v| format!("{section} {key} = \"{v}\"")));
            }
        }
        dropped
    }

    /// The first key set that means nothing for an MCP server's section (`[mcp.NAME]`), if any.
    fn void_for_mcp(&self) -> Option<&'static str> {
        [
            (!self.spawn.is_empty(), "spawn"),
            (self.unconfined_spawn, "unconfined-spawn"),
            (!self.tools.is_empty(), "tools"),
            (!self.rewrite.is_empty(), "rewrite"),
            (!self.deny.spawn.is_empty(), "deny.spawn"),
            (
                self.timeout_ms.is_some(),
                "timeout-ms (the server's `timeout` in mcp.json)",
            ),
            (self.memory_mib.is_some(), "memory-mib (use process-memory-mib)"),
            (self.fuel.is_some(), "fuel"),
            (self.instance.is_some(), "instance"),
            (self.instance_max_calls.is_some(), "instance-max-calls"),
            (self.instance_idle_ms.is_some(), "instance-idle-ms"),
            (
                !self.sha256.is_empty(),
                "sha256 (`toolwright mcp-servers approve` pins a server)",
            ),
            (
                self.secrets.is_some(),
                "secrets (the [builtins] secrets apply to every server)",
            ),
            (
                self.sandbox.is_some_and(|s| s != SandboxMode::Off),
                "a sandbox mode but \"off\" (a server's sandbox is its grants)",
            ),
        ]
        .into_iter()
        .find_map(|(set, key)| set.then_some(key))
    }

    /// Drop every grant (keeping denials and limits): what was dropped, one line each, as `section` says it.
    pub fn drop_grants(&mut self, section: &str) -> Vec<String> {
        let why = "the user's config sets the built-ins' grants; a project may only narrow them";
        let mut dropped = Vec::new();
        for (key, list) in [
            ("read", &mut self.read),
            ("write", &mut self.write),
            ("env", &mut self.env),
            ("network", &mut self.network),
        ] {
            if !list.is_empty() {
                dropped.push(format!("{section} {key} = {list:?} ({why})"));
                list.clear();
            }
        }
        if !self.spawn.is_empty() {
            let rules: Vec<String> = self.spawn.iter().map(ToString::to_string).collect();
            dropped.push(format!("{section} spawn = [{}] ({why})", rules.join(", ")));
            self.spawn.clear();
        }
        self.names_grants = false;
        dropped
    }

    /// Add `other`'s grants, denials and pins to these; the stricter limit wins.
    pub fn merge(&mut self, other: PluginPolicy) {
        for pin in other.sha256 {
            if !self.sha256.contains(&pin) {
                self.sha256.push(pin);
            }
        }
        self.process_memory_mib = min_opt(self.process_memory_mib, other.process_memory_mib);
        // The stricter sandbox wins; secrets add up.
        self.sandbox = match (self.sandbox, other.sandbox) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        if let Some(theirs) = other.secrets {
            let ours = self.secrets.get_or_insert_with(Vec::new);
            for secret in theirs {
                if !ours.contains(&secret) {
                    ours.push(secret);
                }
            }
        }
        self.read.extend(other.read);
        self.write.extend(other.write);
        self.spawn.extend(other.spawn);
        self.tools.extend(other.tools);
        self.rewrite.extend(other.rewrite);
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
        // A fresh instance per call is the stricter setting: it wins over reuse.
        self.instance = match (self.instance, other.instance) {
            (Some(InstanceMode::Fresh), _) | (_, Some(InstanceMode::Fresh)) => Some(InstanceMode::Fresh),
            (a, b) => a.or(b),
        };
        self.instance_max_calls = min_opt(self.instance_max_calls, other.instance_max_calls);
        self.instance_idle_ms = min_opt(self.instance_idle_ms, other.instance_idle_ms);
        self.names_grants |= other.names_grants;
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

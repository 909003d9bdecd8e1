//! The built-in tools of a toolset and the policy they run under: [`load_policy`] (step 1), [`native_builtins`]
//! (step 2), and the `[builtins]` section's grants ([`BuiltinGrants`]) for the native and the wasm built-ins
//! alike.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{ToolsetError, ToolsetOptions};
use crate::definition::ToolDefinition;
use crate::grants::{Grant, GrantedFiles};
use crate::native::sandbox::{BuiltinSandbox, SandboxMode};
use crate::native::{FileMutationQueue, HostEnv, NativeEnv, ProgramGrant};
use crate::policy::{PluginPolicy, Policy};
#[cfg(feature = "wasm")]
use crate::wasm::{Preopen, WasmGrants};

/// Step 1: the policy in force for `options` (trusted files, then the project's, confined unless trusted).
/// What the project's file may not set is logged and left out.
pub fn load_policy(options: &ToolsetOptions, host: &HostEnv) -> Result<Policy, ToolsetError> {
    load_policy_trusted(options, host, project_trusted(options))
}

/// [`load_policy`] when whether the user trusted the project is already known (`trusted`).
pub(crate) fn load_policy_trusted(
    options: &ToolsetOptions,
    host: &HostEnv,
    trusted: bool,
) -> Result<Policy, ToolsetError> {
    let cwd = toolwright_sdk::paths::normalize(&options.cwd.to_string_lossy());
    let policy = Policy::load_with_trusted_project(
        &options.policy_files,
        options.project_policy.as_deref(),
        &cwd,
        host.home.as_deref(),
        trusted,
    )?;
    for line in &policy.ignored {
        tracing::warn!("ignored from the project's untrusted toolwright.toml: {line}");
    }
    Ok(policy)
}

/// Whether the user trusted the project as it is now (`toolwright trust`; feature `wasm`).
fn project_trusted(options: &ToolsetOptions) -> bool {
    #[cfg(feature = "wasm")]
    if options.require_project_trust {
        return crate::trust::project::check(&options.cwd) == crate::trust::project::ProjectTrust::Trusted;
    }
    let _ = options;
    false
}

/// Step 2: the built-in tools running natively in `options.cwd`, under the policy's `[builtins]` grants when it
/// has some (else the defaults: read anywhere, write in the workspace and the temp directory), sharing
/// `mutations` with the other tools.
pub fn native_builtins(
    options: &ToolsetOptions,
    policy: &Policy,
    host: &HostEnv,
    mutations: &Arc<FileMutationQueue>,
) -> Result<Vec<ToolDefinition>, ToolsetError> {
    let granted = policy
        .builtins
        .as_ref()
        .filter(|section| section.replaces_builtin_defaults())
        .map(|section| BuiltinGrants::open(section, &options.cwd, host));
    native_builtins_granted(options, policy, granted.as_ref(), host, mutations)
}

/// [`native_builtins`] with the `[builtins]` section already decided (`None`: the defaults).
pub(crate) fn native_builtins_granted(
    options: &ToolsetOptions,
    policy: &Policy,
    granted: Option<&BuiltinGrants>,
    host: &HostEnv,
    mutations: &Arc<FileMutationQueue>,
) -> Result<Vec<ToolDefinition>, ToolsetError> {
    let workspace_error = |source| ToolsetError::Workspace {
        path: options.cwd.clone(),
        source,
    };
    let mut env = NativeEnv::builtin_in(&options.cwd, host).map_err(workspace_error)?;
    if let Some(granted) = granted {
        env.files = Arc::new(GrantedFiles::open(&granted.dirs).map_err(workspace_error)?);
        env.programs = granted.programs.clone();
        env.env = Arc::new(granted.vars.clone());
    }
    #[cfg_attr(not(feature = "wasm"), allow(unused_mut))]
    let mut sandbox = builtin_sandbox(options, policy, granted, host);
    // Asking for grants (a server's, feature `wasm`): the hosts the proxy refuses bash's programs are recorded to
    // be asked about.
    #[cfg(feature = "wasm")]
    if policy.ask.grants() {
        sandbox.asks_network = true;
        env.refusals = Some(options.refusals.clone());
    }
    env.programs = sandboxed(&env.programs, &sandbox);
    env.mutations = mutations.clone();
    let origin = Arc::new(crate::audit::Origin {
        grants: granted.map(|g| {
            let dirs = g.dirs.iter().map(|d| {
                let verb = if d.write { "write" } else { "read" };
                format!("{verb} {}", d.path.display())
            });
            let env = g.vars.iter().map(|(name, _)| format!("env {name}"));
            dirs.chain(program_words(&g.programs)).chain(env).collect()
        }),
        secrets: Arc::new(crate::audit::secret_looking(&env.env)),
        ..Default::default()
    });
    let mut definitions = crate::builtins::definitions(&env);
    for definition in &mut definitions {
        definition.origin = Some(origin.clone());
    }
    Ok(definitions)
}

/// The name of a lockfile beside a policy file (`toolwright::trust::lock::FILE_NAME`, also without the `wasm`
/// feature).
const LOCK_FILE_NAME: &str = "toolwright.lock";

/// What no third-party plugin may write, with what each is: the component cache (compiled code runs outside
/// the sandbox), the plugin directories, the trusted policy files with their lockfiles (a plugin writing
/// them would grant itself more at the next start), and the audit logs (a plugin writing one would erase what
/// it did; a grant of the directory that holds one is refused with it).
pub(crate) fn trusted_paths(options: &ToolsetOptions, policy: &Policy) -> Vec<(PathBuf, &'static str)> {
    let mut paths = Vec::new();
    for log in super::audit_logs(options, policy) {
        paths.push((log, "the audit log"));
    }
    if let Some(cache) = &options.cache_dir {
        paths.push((cache.clone(), "the component cache"));
    }
    for dir in &options.plugin_dirs {
        paths.push((dir.clone(), "the plugin directory"));
    }
    for file in &options.policy_files {
        paths.push((file.clone(), "the policy file"));
        if let Some(dir) = file.parent() {
            paths.push((dir.join(LOCK_FILE_NAME), "the lockfile"));
            #[cfg(all(feature = "wasm", feature = "mcp"))]
            paths.push((dir.join(super::mcp::PIN_FILE_NAME), "the MCP servers' lockfile"));
        }
    }
    // A program that rewrote one would start servers with the user's trust at the next load.
    for file in &options.mcp_files {
        paths.push((file.clone(), "an MCP configuration file"));
    }
    // `toolwright dev` runs the project's build outside the sandbox at every change.
    #[cfg(feature = "wasm")]
    if let Some(dev) = &options.dev {
        if dev.guarded {
            paths.push((dev.project.clone(), "the plugin project `toolwright dev` builds"));
        }
        if let Some(dir) = dev.file.parent() {
            paths.push((dir.to_owned(), "the dev build's directory"));
        }
    }
    paths
}

/// What the built-in `read` reads inside the workspace under `policy`, opened for another reader of the
/// workspace on its behalf (the MCP server's resources): the directories of its `[builtins]` section (else the
/// defaults: anywhere), each cut to the workspace, through cap-std as `read` reads them, so a symlink in the
/// workspace cannot lead the reader out of it. An error names a directory that cannot be opened.
pub fn builtin_read_files(options: &ToolsetOptions, policy: &Policy) -> std::io::Result<GrantedFiles> {
    let dirs = match policy.builtins.as_ref().filter(|s| s.replaces_builtin_defaults()) {
        Some(section) => BuiltinGrants::open(section, &options.cwd, &HostEnv::current()).dirs,
        None => crate::grants::builtin_default(&options.cwd),
    };
    let cwd = options.cwd.as_path();
    let mut inside: Vec<Grant> = Vec::new();
    for dir in dirs {
        let cut = if cwd.starts_with(&dir.path) {
            cwd.to_path_buf()
        } else if dir.path.starts_with(cwd) {
            dir.path
        } else {
            continue;
        };
        if !inside.iter().any(|g| g.path == cut) {
            inside.push(Grant::read_only(cut));
        }
    }
    GrantedFiles::open(&inside)
}

/// Where the built-in tools may write under `policy`: the write grants of its `[builtins]` section (else the
/// workspace), and, unless its sandbox is `read-only`, the temporary directories bash's programs write. `None`
/// when bash's programs run unconfined (`sandbox = "off"`): anywhere the user can.
pub fn builtin_write_dirs(options: &ToolsetOptions, policy: &Policy) -> Option<Vec<PathBuf>> {
    let section = policy.builtins.as_ref();
    let mode = section.and_then(|s| s.sandbox).unwrap_or_default();
    if mode == SandboxMode::Off {
        return None;
    }
    let host = HostEnv::current();
    let mut dirs: Vec<PathBuf> = match section.filter(|s| s.replaces_builtin_defaults()) {
        Some(section) => BuiltinGrants::open(section, &options.cwd, &host)
            .dirs
            .into_iter()
            .filter(|g| g.write)
            .map(|g| g.path)
            .collect(),
        None => vec![options.cwd.clone()],
    };
    if mode != SandboxMode::ReadOnly {
        dirs.extend([host.temp_dir, PathBuf::from("/dev/shm")]);
    }
    Some(dirs)
}

/// The built-ins' sandbox under `policy`'s `[builtins]` section (its `sandbox` mode and `secrets`), over the
/// file grants in force (`granted`'s, else the defaults), keeping out of what would give a program more at the
/// host's next start ([`trusted_paths`]).
pub(crate) fn builtin_sandbox(
    options: &ToolsetOptions,
    policy: &Policy,
    granted: Option<&BuiltinGrants>,
    host: &HostEnv,
) -> BuiltinSandbox {
    let mut sandbox = BuiltinSandbox::default_for(&options.cwd, host);
    if let Some(section) = &policy.builtins {
        sandbox.mode = section.sandbox.unwrap_or_default();
        if let Some(secrets) = &section.secrets {
            sandbox.hidden = crate::native::sandbox::secrets(secrets, &options.cwd, host.home.as_deref());
        }
        sandbox.memory = section.process_memory_mib.map(|m| m.saturating_mul(1 << 20));
        let patterns = |list: &[String]| {
            list.iter()
                .filter_map(|p| crate::policy::NetPattern::parse(p))
                .collect()
        };
        sandbox.network = crate::native::sandbox::Hosts {
            allow: patterns(&section.network),
            deny: patterns(&section.deny.network),
        };
    }
    if let Some(granted) = granted {
        let (write, read): (Vec<&Grant>, Vec<&Grant>) = granted.dirs.iter().partition(|g| g.write);
        sandbox.write = write.iter().map(|g| g.path.clone()).collect();
        sandbox.read = read.iter().chain(&write).map(|g| g.path.clone()).collect();
    }
    sandbox.protected = trusted_paths(options, policy)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    sandbox
}

/// The sandbox the built-ins' programs run in under `policy`, in a sentence (what `toolwright plugins` and
/// `toolwright tools` show): its mode, what it writes, the secrets it keeps out of, and its network.
pub fn sandbox_summary(policy: &Policy) -> (SandboxMode, String) {
    let section = policy.builtins.as_ref();
    let mode = section.and_then(|s| s.sandbox).unwrap_or_default();
    let secrets = section
        .and_then(|s| s.secrets.as_ref())
        .map_or(crate::policy::DEFAULT_SECRETS.len(), Vec::len);
    let network: Vec<&String> = section.map(|s| s.network.iter().collect()).unwrap_or_default();
    let network = if network.is_empty() {
        "no network".to_owned()
    } else {
        let hosts: Vec<&str> = network.iter().map(|h| h.as_str()).collect();
        format!(
            "the network only to {} through the host's proxy",
            hosts.join(", ")
        )
    };
    let text = match mode {
        SandboxMode::Off => {
            "off: the shells' programs run unconfined, with the host's authority (pi's behaviour)".to_owned()
        }
        SandboxMode::WorkspaceWrite => format!(
            "workspace-write: the shells' programs write the workspace (the write grants) and the temporary directory, \
             read all but {secrets} secrets, {network}"
        ),
        SandboxMode::ReadOnly => {
            format!(
                "read-only: the shells' programs write nothing, read all but {secrets} secrets, {network}"
            )
        }
    };
    (mode, text)
}

/// What network a sandboxed program has with `hosts` granted (policy patterns), in words.
pub fn network_summary(hosts: &[impl std::fmt::Display]) -> String {
    if hosts.is_empty() {
        return "no network".to_owned();
    }
    let hosts: Vec<String> = hosts.iter().map(ToString::to_string).collect();
    format!(
        "the network only to {} through the host's proxy",
        hosts.join(", ")
    )
}

/// `programs` confined by `sandbox`.
pub(crate) fn sandboxed(programs: &ProgramGrant, sandbox: &BuiltinSandbox) -> ProgramGrant {
    match programs {
        ProgramGrant::None => ProgramGrant::None,
        ProgramGrant::Any(_) => sandbox.programs(),
        ProgramGrant::Only(only) => {
            let mut only = only.clone();
            only.confinement = crate::native::Confinement::for_builtins(sandbox);
            ProgramGrant::Only(only)
        }
    }
}

/// The programs of a grant in the audit log's words (`spawn git`, `spawn *`).
pub(crate) fn program_words(programs: &ProgramGrant) -> Vec<String> {
    match programs {
        ProgramGrant::None => Vec::new(),
        ProgramGrant::Any(_) => vec!["spawn *".into()],
        ProgramGrant::Only(p) => p
            .granted
            .iter()
            .map(|p| format!("spawn {}", p.rule.program))
            .collect(),
    }
}

/// What a policy's `[builtins]` section gives the built-ins: decided by the same rule as a plugin's requests
/// ([`crate::policy::intersect_granted`]: what the section grants, deny wins), then made concrete here, once per
/// load (programs are resolved on the host's `PATH`) for the native and the wasm built-ins alike.
#[cfg_attr(not(feature = "wasm"), allow(dead_code))]
pub(crate) struct BuiltinGrants {
    /// The granted directories that exist.
    pub dirs: Vec<Grant>,
    /// The programs.
    pub programs: ProgramGrant,
    /// The environment variables, with their values from the host.
    pub vars: Vec<(String, String)>,
}

impl BuiltinGrants {
    pub(crate) fn open(section: &PluginPolicy, cwd: &Path, host: &HostEnv) -> Self {
        let cwd_text = toolwright_sdk::paths::normalize(&cwd.to_string_lossy());
        let effective = crate::policy::intersect_granted(section, &cwd_text, host.home.as_deref());
        let dirs: Vec<Grant> = effective
            .dirs
            .iter()
            .filter(|d| d.path.is_dir())
            .map(|d| {
                if d.write {
                    Grant::read_write(d.path.clone())
                } else {
                    Grant::read_only(d.path.clone())
                }
            })
            .collect();
        let any_program = effective
            .spawn_rules
            .iter()
            .any(|r| r.program == "*" && r.args.is_none());
        // Confined by the built-ins' sandbox where they are used (`sandboxed`).
        let programs = if any_program && section.deny.spawn.is_empty() {
            ProgramGrant::Any(None)
        } else {
            let writable: Vec<PathBuf> = dirs.iter().filter(|g| g.write).map(|g| g.path.clone()).collect();
            // The built-ins' programs are resolved like a plugin's, with any variables (the built-in tools are
            // the host's own code), in the built-ins' sandbox rather than a plugin's confinement.
            ProgramGrant::Only(crate::native::Programs::new(
                &effective.spawn_rules,
                &host.path,
                &writable,
                None,
                None,
            ))
        };
        let vars = host.vars_granted(&effective.env, &section.deny.env);
        BuiltinGrants { dirs, programs, vars }
    }
}

/// The wasm built-ins' grants: the defaults, or what `policy`'s `[builtins]` section grants (`granted`),
/// with the section's limits and instance setting either way (they bind the wasm built-ins; natively they are
/// the host's own code, as in pi).
#[cfg(feature = "wasm")]
pub(super) fn wasm_builtin_grants(
    options: &ToolsetOptions,
    policy: &Policy,
    host: &HostEnv,
    granted: Option<&BuiltinGrants>,
) -> WasmGrants {
    let mut grants = WasmGrants::builtin(&options.cwd, host);
    // A section of limits only keeps the default grant (`granted` is none then).
    if let Some(granted) = granted {
        let temp = grants.preopens.pop();
        grants.preopens = granted
            .dirs
            .iter()
            .map(|g| Preopen {
                host: g.path.clone(),
                guest: g.path.to_string_lossy().into_owned(),
                write: g.write,
            })
            .chain(temp)
            .collect();
        grants.programs = granted.programs.clone();
        grants.env = Arc::new(granted.vars.clone());
    }
    let mut sandbox = builtin_sandbox(options, policy, granted, host);
    // As natively: the hosts the proxy refuses bash's programs are recorded to be asked about.
    if policy.ask.grants() {
        sandbox.asks_network = true;
        grants.refusals = Some(options.refusals.clone());
        grants.builtin = true;
    }
    grants.programs = sandboxed(&grants.programs, &sandbox);
    if let Some(section) = &policy.builtins {
        grants.limit(section.timeout_ms, section.memory_mib);
        grants.reuse = section.reuse();
    }
    grants
}

/// The grants of a wasm built-in in the audit log's words.
#[cfg(feature = "wasm")]
pub(super) fn builtin_words(grants: &WasmGrants) -> Vec<String> {
    let dirs = grants.preopens.iter().map(|p| {
        let verb = if p.write { "write" } else { "read" };
        format!("{verb} {}", p.host.display())
    });
    let env = grants.env.iter().map(|(name, _)| format!("env {name}"));
    dirs.chain(program_words(&grants.programs)).chain(env).collect()
}

//! A stdio server's sandbox: what it may read, write, reach and see, from its `[mcp.NAME]` grant and its
//! defaults, and its start in the host's process sandbox (`toolwright_native::sandbox`).
//!
//! The defaults: read the system's directories and the server's own install directories (its program's, and
//! the package of each script it is given), write nothing but a private temporary directory (also its `HOME`
//! and `TMPDIR`), no network (a network namespace of its own), no Unix sockets, the user's secrets hidden, the
//! host's policy files and lockfiles read-only, and an environment scrubbed to `PATH`, the locale and what is
//! granted.

use std::path::{Path, PathBuf};

use toolwright_core::policy::{NetPattern, PluginPolicy, SandboxMode};
use toolwright_native::HostEnv;
use toolwright_native::sandbox::{CallScope, Confinement, Exec, Hosts, Launch, Limits, PipedProcess, Tcp};
use toolwright_sdk::Command;

/// Directories every server may read besides the system's (`toolwright_native::sandbox::SYSTEM_EXEC` and
/// `SYSTEM_READ`, which every confined program reads): software installed outside the package manager.
pub const EXTRA_READ: &[&str] = &["/opt", "/usr/local"];

/// Variables a server sees whenever the host has them.
const BASE_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TERM", "TZ"];

/// The most processes one server may run at once.
const SERVER_PIDS: u32 = 1024;

/// What the host gives every server's sandbox besides its grant.
#[derive(Debug, Clone, Default)]
pub struct SandboxBase {
    /// The workspace (relative paths of grants and of the server's `cwd` are below it).
    pub cwd: PathBuf,
    /// The host's environment: `PATH` (where the command is found), the home directory, the variables.
    pub host: HostEnv,
    /// The user's secrets: never readable, even below a grant.
    pub hidden: Vec<PathBuf>,
    /// What no server may write, even below a grant (the host's policy files, lockfiles, plugin directories).
    pub protected: Vec<PathBuf>,
}

/// A stdio server's grant as the policy's `[mcp.NAME]` section gives it (the default: none).
#[derive(Debug, Clone, Default)]
pub struct ServerGrant {
    /// The section, merged over the policy files.
    pub policy: PluginPolicy,
}

/// What a started server holds: its process (killed with its cgroup when dropped) and its private directory.
pub struct Started {
    /// The process, whose three pipes the connection takes.
    pub process: PipedProcess,
    /// The call scope (its cgroup): dropping it kills every process the server started.
    pub scope: CallScope,
    /// The private temporary directory (removed when dropped).
    pub temp: Option<tempfile::TempDir>,
    /// What the sandbox lets it do, in one line for people.
    pub summary: String,
}

impl ServerGrant {
    /// Whether the grant runs the server outside the sandbox (`sandbox = "off"` in the user's config).
    pub fn unconfined(&self) -> bool {
        self.policy.sandbox == Some(SandboxMode::Off)
    }
}

/// The directories a server's command needs to read to run: its program's install directory (the parent of its
/// `bin`, or of a version manager's `shims`), and for each argument naming an existing file, the package it lies
/// in: the project holding its outermost `node_modules`, else the nearest directory above it with
/// `package.json`, `node_modules`, `pyproject.toml` or `setup.py`, else its own directory.
///
/// A directory that would be too wide (`/`, the home directory or one above it, the temporary directory or one
/// above it) is never granted: the file itself is, alone.
pub fn install_dirs(program: &Path, args: &[String], cwd: &Path) -> Vec<PathBuf> {
    install_dirs_within(
        program,
        args,
        cwd,
        std::env::var_os("HOME").map(PathBuf::from).as_deref(),
    )
}

fn install_dirs_within(program: &Path, args: &[String], cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let temp = std::env::temp_dir();
    let too_wide = |dir: &Path| {
        dir == Path::new("/")
            || home.is_some_and(|h| h.starts_with(dir))
            || temp.starts_with(dir)
            || temp.canonicalize().is_ok_and(|t| t.starts_with(dir))
    };
    let mut dirs = Vec::new();
    let mut add_for = |dir: PathBuf, file: &Path| {
        let grant = if too_wide(&dir) { file.to_path_buf() } else { dir };
        if !dirs.contains(&grant) {
            dirs.push(grant);
        }
    };
    for path in [Some(program.to_path_buf()), program.canonicalize().ok()]
        .into_iter()
        .flatten()
    {
        if let Some(bin) = path.parent() {
            let dir = match bin.file_name().and_then(|n| n.to_str()) {
                // A version manager's shims (pyenv, rbenv, asdf) run the manager that lies above them.
                Some("bin" | ".bin" | "sbin" | "shims") => bin.parent().unwrap_or(bin).to_path_buf(),
                _ => bin.to_path_buf(),
            };
            add_for(dir, &path);
        }
    }
    for arg in args {
        let path = cwd.join(arg);
        if !path.is_file() {
            continue;
        }
        let file = path.canonicalize().unwrap_or(path);
        // A script inside `node_modules` resolves its dependencies up to the outermost `node_modules`: the
        // project that holds it.
        let components: Vec<_> = file.components().collect();
        if let Some(at) = components.iter().position(|c| c.as_os_str() == "node_modules") {
            add_for(components[..at].iter().collect(), &file);
            continue;
        }
        let package = file.ancestors().skip(1).find(|dir| {
            ["package.json", "node_modules", "pyproject.toml", "setup.py"]
                .iter()
                .any(|marker| dir.join(marker).exists())
        });
        let dir = package
            .unwrap_or(file.parent().unwrap_or(Path::new("/")))
            .to_path_buf();
        add_for(dir, &file);
    }
    dirs
}

/// `program` as the host's `PATH` finds it (itself when it has a slash).
pub fn resolve_program(program: &str, base: &SandboxBase) -> Option<PathBuf> {
    let program = expand_home(program, base.host.home.as_deref());
    if program.contains('/') {
        let path = base.cwd.join(&program);
        return path.is_file().then_some(path);
    }
    base.host
        .path
        .split(':')
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join(&program))
        .find(|candidate| candidate.is_file())
}

/// `~` and `~/…` as the home directory (pi expands them in a server's command, arguments and `cwd`).
pub fn expand_home(text: &str, home: Option<&str>) -> String {
    match (text, home) {
        ("~", Some(home)) => home.to_owned(),
        (text, Some(home)) if text.starts_with("~/") => format!("{home}{}", &text[1..]),
        _ => text.to_owned(),
    }
}

/// Start the stdio server `name` (`command` with `args`, in `cwd`, with the configured and expanded variables
/// `env`) in its sandbox.
pub fn start(
    name: &str,
    command: &str,
    args: &[String],
    cwd: Option<&str>,
    env: &[(String, String)],
    grant: &ServerGrant,
    base: &SandboxBase,
) -> Result<Started, String> {
    let home = base.host.home.as_deref();
    let program = resolve_program(command, base).ok_or_else(|| {
        format!(
            "spawn {command} ENOENT (no such program on the host's PATH{})",
            if command.contains('/') {
                " or at that path"
            } else {
                ""
            }
        )
    })?;
    let args: Vec<String> = args.iter().map(|a| expand_home(a, home)).collect();
    let workdir = base.cwd.join(expand_home(cwd.unwrap_or("."), home));
    let cwd_text = base.cwd.to_string_lossy().into_owned();
    let resolve = |dir: &String| PathBuf::from(toolwright_sdk::paths::resolve_to_cwd(dir, &cwd_text, home));
    let policy = &grant.policy;
    let temp = if grant.unconfined() {
        None
    } else {
        Some(
            tempfile::Builder::new()
                .prefix(&format!("toolwright-mcp-{name}-"))
                .tempdir()
                .map_err(|e| format!("cannot make the server's temporary directory: {e}"))?,
        )
    };
    // The environment: the base variables and the granted ones from the host, then the configured ones.
    let granted_env = |var: &str| {
        (BASE_ENV.contains(&var) || policy.env.iter().any(|p| p == "*" || p == var))
            && !policy.deny.env.iter().any(|d| d == var || d == "*")
    };
    let mut vars: Vec<(String, String)> = if grant.unconfined() {
        base.host.vars.clone()
    } else {
        base.host
            .vars
            .iter()
            .filter(|(k, _)| granted_env(k))
            .cloned()
            .collect()
    };
    if let Some(temp) = &temp {
        let dir = temp.path().to_string_lossy().into_owned();
        vars.retain(|(k, _)| k != "HOME" && k != "TMPDIR");
        vars.push(("HOME".into(), dir.clone()));
        vars.push(("TMPDIR".into(), dir));
    }
    let denied = |dir: &PathBuf| policy.deny.read.iter().map(resolve).any(|d| dir.starts_with(&d));
    let confinement = (!grant.unconfined()).then(|| {
        let mut read: Vec<PathBuf> = EXTRA_READ
            .iter()
            .map(PathBuf::from)
            .filter(|d| d.exists())
            .collect();
        read.extend(install_dirs(&program, &args, &workdir));
        read.extend(policy.read.iter().map(resolve));
        read.retain(|d| !denied(d));
        let mut write: Vec<PathBuf> = policy.write.iter().map(resolve).collect();
        write.retain(|d| !denied(d) && !policy.deny.write.iter().map(resolve).any(|x| d.starts_with(&x)));
        write.extend(temp.as_ref().map(|t| t.path().to_path_buf()));
        write.push("/dev/shm".into());
        let mut hidden = base.hidden.clone();
        hidden.extend(policy.deny.read.iter().map(resolve));
        let hosts = Hosts {
            allow: policy
                .network
                .iter()
                .filter_map(|n| NetPattern::parse(n))
                .collect(),
            deny: policy
                .deny
                .network
                .iter()
                .filter_map(|n| NetPattern::parse(n))
                .collect(),
        };
        Confinement {
            read,
            write,
            programs: Vec::new(),
            exec: Exec::Readable,
            hidden,
            protected: base.protected.clone(),
            tcp: Tcp::Any,
            own_network: true,
            proxy: (!hosts.allow.is_empty()).then_some(hosts),
            unix_sockets: false,
            limits: Limits {
                pids: Some(SERVER_PIDS),
                memory: policy.process_memory_mib.map(|m| m << 20),
            },
            mode: None,
            unconfined_ok: false,
        }
    });
    let mut seen = vars.clone();
    seen.extend(env.iter().cloned());
    let summary = match &confinement {
        None => "unconfined (sandbox = \"off\")".to_owned(),
        Some(c) => summary(c, &seen),
    };
    if let Some(c) = &confinement
        && let Some(why) = c.unavailable()
    {
        return Err(format!(
            "the server must run in the sandbox, and {why}. `sandbox = \"off\"` in its [mcp.{name}] section of \
             the user's policy file (toolwright.toml) would start it unconfined, as pi does."
        ));
    }
    let command = Command {
        program: program.to_string_lossy().into_owned(),
        args,
        cwd: Some(workdir.to_string_lossy().into_owned()),
        env: Vec::new(),
    };
    let mut all_env = vars;
    all_env.extend(env.iter().cloned());
    let launch = Launch {
        program: command.program.clone(),
        env: all_env,
        no_new_privs: confinement.is_some(),
        confinement,
    };
    let scope = CallScope::new();
    let process = PipedProcess::spawn(
        &command,
        &launch,
        &scope,
        toolwright_core::tool::CallSink::discard(),
    )
    .map_err(|e| format!("spawn {} {e}", command.program))?;
    Ok(Started {
        process,
        scope,
        temp,
        summary,
    })
}

/// One line on what a confinement lets a server do.
pub fn summary(c: &Confinement, env: &[(String, String)]) -> String {
    let list = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    let network = match &c.proxy {
        None => "no network".to_owned(),
        Some(hosts) => format!("network: {}", hosts.describe()),
    };
    format!(
        "read: {}; write: {}; {network}; env: {}",
        list(&c.read),
        list(&c.write),
        names.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_install_directory_never_widens_to_the_home_or_the_temporary_directory() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("home");
        std::fs::create_dir_all(home.join("bin")).unwrap();
        std::fs::create_dir_all(home.join("proj/node_modules/pkg/dist")).unwrap();
        std::fs::write(home.join("package.json"), "{}").unwrap();
        std::fs::write(home.join("script.py"), "").unwrap();
        std::fs::write(home.join("bin/tool"), "").unwrap();
        std::fs::write(home.join("proj/node_modules/pkg/dist/index.js"), "").unwrap();
        let home = home.canonicalize().unwrap();
        // A command in ~/bin, a script in ~ (below a stray ~/package.json): the files alone, not the home.
        let dirs = install_dirs_within(&home.join("bin/tool"), &["script.py".into()], &home, Some(&home));
        assert_eq!(dirs, [home.join("bin/tool"), home.join("script.py")]);
        // A package's script: the project that holds its node_modules.
        let dirs = install_dirs_within(
            Path::new("/usr/bin/node"),
            &[home
                .join("proj/node_modules/pkg/dist/index.js")
                .to_string_lossy()
                .into_owned()],
            &home,
            Some(&home),
        );
        assert!(dirs.contains(&home.join("proj")), "{dirs:?}");
        // The temporary directory itself is never granted.
        let temp_script =
            std::env::temp_dir().join(format!("toolwright-install-dirs-{}.py", std::process::id()));
        std::fs::write(&temp_script, "").unwrap();
        let dirs = install_dirs_within(
            Path::new("/usr/bin/python3"),
            &[temp_script.to_string_lossy().into_owned()],
            &home,
            Some(&home),
        );
        std::fs::remove_file(&temp_script).unwrap();
        assert!(
            !dirs.iter().any(|d| std::env::temp_dir().starts_with(d)),
            "{dirs:?}"
        );
    }
}

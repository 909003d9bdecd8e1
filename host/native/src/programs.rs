//! Which programs a tool may start, and what a granted start becomes: the absolute path the host resolved
//! itself, the environment the grants allow, and the confinement the child gets.
//!
//! A plugin must not be able to change which code a granted program runs: it could write a file named `echo` in
//! a writable grant and put that directory on `PATH`, preload a library with `LD_PRELOAD`, or point git at a
//! config with an alias to a shell. So programs are resolved by the host, once, from its own `PATH`; a
//! resolution inside a writable grant is refused; and variables that steer loading or execution are refused in
//! what the plugin passes, unless the policy names them.

use std::path::{Path, PathBuf};

use toolwright_sdk::Command;

use crate::sandbox::{Confinement, Launch, Tcp};
use toolwright_core::policy::{Effective, SpawnRule};

/// Which programs a tool may start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProgramGrant {
    /// None.
    None,
    /// Any program, with any environment (the built-in `bash`), in the built-ins' sandbox (none: unconfined,
    /// `sandbox = "off"`).
    Any(Option<Confinement>),
    /// Only these, resolved by the host, with the environment rules and the confinement of [`Programs`].
    Only(Programs),
}

/// Granted programs, resolved, with what their starts may pass and how they are confined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Programs {
    /// The programs, each resolved to an absolute path (or why it could not be).
    pub granted: Vec<GrantedProgram>,
    /// The variables a start may set that [`steers_code`] refuses otherwise (none: any variable, the
    /// built-ins' way).
    pub settable_env: Option<Vec<String>>,
    /// The `PATH` a child gets when the grants pass none: the host's, without relative or writable entries.
    pub path: String,
    /// How a child is confined (none: unconfined, the built-ins' way).
    pub confinement: Option<Confinement>,
}

/// One granted program.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrantedProgram {
    /// The grant: the name (or absolute path) and the argument prefixes.
    pub rule: SpawnRule,
    /// Where the host found it.
    pub resolved: Result<PathBuf, Unresolved>,
}

/// Why a granted program cannot be started.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unresolved {
    /// No executable file of that name on the host's `PATH` (or at that absolute path).
    NotFound,
    /// A path that is neither a plain name nor absolute.
    Relative,
    /// It lies inside a directory the plugin may write.
    Writable {
        /// The resolved path.
        path: PathBuf,
        /// The writable grant.
        dir: PathBuf,
    },
}

/// Variables that change which code a process loads or runs, by exact name (compared upper-cased).
const STEERING: &[&str] = &[
    "PATH",
    "IFS",
    "ENV",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PS1",
    "PS2",
    "PROMPT_COMMAND",
    "CDPATH",
    "GLOBIGNORE",
    "ZDOTDIR",
    "HOME",
    "XDG_CONFIG_HOME",
    "XDG_CONFIG_DIRS",
    "XDG_DATA_HOME",
    "XDG_DATA_DIRS",
    "INPUTRC",
    "TERMINFO",
    "TERMINFO_DIRS",
    "SHELL",
    "EDITOR",
    "VISUAL",
    "PAGER",
    "MANPAGER",
    "BROWSER",
    "LESSOPEN",
    "LESSCLOSE",
    "LESSKEY",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GCONV_PATH",
    "LOCPATH",
    "NLSPATH",
    "GETCONF_DIR",
    "HOSTALIASES",
    "RESOLV_HOST_CONF",
    "GLIBC_TUNABLES",
    "OPENSSL_CONF",
    "OPENSSL_ENGINES",
    "OPENSSL_MODULES",
    "CURL_HOME",
    "WGETRC",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "CLASSPATH",
    "TCLLIBPATH",
    "MAKEFILES",
    "MAKEFLAGS",
    "MFLAGS",
    "GOFLAGS",
    "GOTOOLCHAIN",
    "GOROOT",
    "GOPATH",
    "GOENV",
    "RUSTC",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "RUSTDOC",
    "RUSTFLAGS",
    "EMACSLOADPATH",
    "VIMINIT",
    "VIMRUNTIME",
    "MYVIMRC",
    "EXINIT",
    "TMUX_TMPDIR",
    "SYSTEMD_PAGER",
    "SYSTEMD_EDITOR",
    "CC",
    "CXX",
    "LUA_INIT",
    "R_PROFILE",
    "R_PROFILE_USER",
    "R_ENVIRON",
    "R_ENVIRON_USER",
    "PHPRC",
    "PHP_INI_SCAN_DIR",
];

/// Variables that change which code a process loads or runs, by prefix (compared upper-cased).
const STEERING_PREFIXES: &[&str] = &[
    "LD_",
    "DYLD_",
    "BASH_",
    "PYTHON",
    "PERL",
    "RUBY",
    "NODE_",
    "NPM_CONFIG_",
    "YARN_",
    "GEM_",
    "BUNDLE_",
    "PIP_",
    "CARGO_",
    "RUSTUP_",
    "CGO_",
    "LUA_",
    "MALLOC_",
    "JAVA_",
    "GRADLE_",
    "MAVEN_",
    "DOTNET_",
    "COMPlus_",
    "CORECLR_",
];

/// Git variables that only carry identity or dates: allowed (every other `GIT_*` steers git: config, exec path,
/// ssh and askpass commands, editors, pagers, repository and work tree, templates with hooks).
const GIT_IDENTITY: &[&str] = &[
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_AUTHOR_DATE",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "GIT_COMMITTER_DATE",
];

/// Whether setting `name` can change which code a process loads or runs (and so is refused in what a plugin
/// passes, unless the policy grants it by name).
pub fn steers_code(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("GIT_") {
        return !GIT_IDENTITY.contains(&upper.as_str());
    }
    // Bash exports functions through the environment (`BASH_FUNC_name%%`), and shellshock-era shells parse
    // any value starting with `() {`.
    STEERING.contains(&upper.as_str())
        || STEERING_PREFIXES
            .iter()
            .any(|p| upper.starts_with(&p.to_ascii_uppercase()))
}

impl Programs {
    /// Resolve `rules` from the host's `PATH` (`host_path`), refusing resolutions inside `writable` (the
    /// plugin's writable grants). `settable_env` and `confinement` as in [`Programs`].
    pub fn new(
        rules: &[SpawnRule],
        host_path: &str,
        writable: &[PathBuf],
        settable_env: Option<Vec<String>>,
        mut confinement: Option<Confinement>,
    ) -> Programs {
        let writable: Vec<PathBuf> = writable.iter().map(|d| canonical(d)).collect();
        let granted = rules
            .iter()
            .map(|rule| GrantedProgram {
                rule: rule.clone(),
                resolved: resolve(&rule.program, host_path, &writable),
            })
            .collect::<Vec<GrantedProgram>>();
        if let Some(c) = &mut confinement {
            c.programs = granted.iter().filter_map(|g| g.resolved.clone().ok()).collect();
        }
        let path = std::env::split_paths(host_path)
            .filter(|d| d.is_absolute() && !writable.iter().any(|w| canonical(d).starts_with(w)))
            .collect::<Vec<_>>();
        let path = std::env::join_paths(path)
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        Programs {
            granted,
            settable_env,
            path,
            confinement,
        }
    }

    fn find(&self, program: &str) -> Option<&GrantedProgram> {
        if program.contains('/') {
            // A path must be exactly what a grant resolved to: the plugin cannot pick another binary.
            self.granted
                .iter()
                .find(|g| g.resolved.as_ref().is_ok_and(|p| p == Path::new(program)))
        } else {
            self.granted.iter().find(|g| g.rule.program == program)
        }
    }
}

/// `dir` with symlinks resolved when it exists.
fn canonical(dir: &Path) -> PathBuf {
    std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf())
}

/// Where `program` is: an absolute path as it is, a plain name on the absolute entries of `host_path`; refused
/// inside a `writable` directory (canonical paths), since the plugin could replace it.
fn resolve(program: &str, host_path: &str, writable: &[PathBuf]) -> Result<PathBuf, Unresolved> {
    let found = if program.starts_with('/') {
        Some(PathBuf::from(program)).filter(|p| is_executable(p))
    } else if program.contains('/') || program.is_empty() {
        return Err(Unresolved::Relative);
    } else {
        std::env::split_paths(host_path)
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| is_executable(p))
    };
    let path = found.ok_or(Unresolved::NotFound)?;
    let real = canonical(&path);
    if let Some(dir) = writable
        .iter()
        .find(|w| real.starts_with(w) || path.starts_with(w))
    {
        return Err(Unresolved::Writable {
            path,
            dir: dir.clone(),
        });
    }
    Ok(path)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl crate::sandbox::BuiltinSandbox {
    /// The programs the built-ins may start under it: any, confined by it.
    pub fn programs(&self) -> ProgramGrant {
        ProgramGrant::Any(Confinement::for_builtins(self))
    }
}

impl ProgramGrant {
    /// A third-party plugin's programs under its policy decision: resolved on the host's `PATH` (`host_path`),
    /// never inside its writable grants, only the variables the policy names settable, confined by Landlock to
    /// its granted directories, in a network namespace of their own that reaches its granted hosts through the
    /// host's proxy. `proxied`: the proxy serves them even with no host granted (refusing every one), so that
    /// what they try is recorded, to be asked about (`toolwright_core::ask`).
    pub fn for_plugin(effective: &Effective, host_path: &str, proxied: bool) -> ProgramGrant {
        let (write, read): (Vec<_>, Vec<_>) = effective.dirs.iter().partition(|d| d.write);
        let paths = |list: Vec<&toolwright_core::policy::DirGrant>| -> Vec<PathBuf> {
            list.into_iter().map(|d| d.path.clone()).collect()
        };
        let (read, write) = (paths(read), paths(write));
        let confinement = Confinement {
            read,
            write: write.clone(),
            // Filled in with the resolved programs.
            programs: Vec::new(),
            // No network of their own: the granted hosts, by name, through the host's proxy (the only TCP
            // Landlock lets them open is the proxy's port on their namespace's loopback).
            tcp: if effective.network.is_empty() && !proxied {
                Tcp::None
            } else {
                Tcp::Ports(vec![crate::sandbox::PROXY_PORT])
            },
            own_network: true,
            proxy: (!effective.network.is_empty() || proxied).then(|| crate::sandbox::Hosts {
                allow: effective.network.clone(),
                deny: effective.network_deny.clone(),
            }),
            unconfined_ok: effective.unconfined_spawn,
            ..Confinement::default()
        };
        ProgramGrant::Only(Programs::new(
            &effective.spawn_rules,
            host_path,
            &write,
            Some(effective.settable_env.clone()),
            Some(confinement),
        ))
    }

    /// What starting `command` runs, with `base` (the granted variables) as the environment to start from; or
    /// the refusal for the model, naming `who` ("the plugin NAME", or a tool's name).
    pub fn launch(&self, command: &Command, base: &[(String, String)], who: &str) -> Result<Launch, String> {
        let program = &command.program;
        let not_granted = || {
            format!(
                "Permission denied: starting {program} is not granted to {who}. A process grant of {program} in the \
                 policy file (toolwright.toml) would allow it."
            )
        };
        let programs = match self {
            ProgramGrant::None => return Err(not_granted()),
            ProgramGrant::Any(sandbox) => {
                let mut env = base.to_vec();
                env.extend(command.env.iter().cloned());
                let confinement = match sandbox {
                    Some(c) => c.for_start(program, who)?,
                    None => None,
                };
                return Ok(Launch {
                    program: program.clone(),
                    env,
                    no_new_privs: confinement.is_some(),
                    confinement,
                });
            }
            ProgramGrant::Only(programs) => programs,
        };
        let granted = programs.find(program).ok_or_else(not_granted)?;
        let path = match &granted.resolved {
            Ok(path) => path,
            Err(Unresolved::NotFound) => {
                return Err(format!(
                    "Permission denied: {program} is granted to {who}, but there is no such program on the host's \
                     PATH"
                ));
            }
            Err(Unresolved::Relative) => {
                return Err(format!(
                    "Permission denied: the grant of {program} to {who} is neither a program name nor an absolute \
                     path"
                ));
            }
            Err(Unresolved::Writable { path, dir }) => {
                return Err(format!(
                    "Permission denied: {program} is {}, inside {}, which {who} may write: a program it could \
                     replace is not started",
                    path.display(),
                    dir.display()
                ));
            }
        };
        if !granted.rule.allows_args(&command.args) {
            let prefixes: Vec<String> = granted
                .rule
                .args
                .iter()
                .flatten()
                .map(|p| format!("[{}]", p.join(" ")))
                .collect();
            return Err(format!(
                "Permission denied: {who} may start {program} only with arguments starting with one of {}; \
                 [{}] is not granted.",
                prefixes.join(", "),
                command.args.join(" ")
            ));
        }
        if let Some(settable) = &programs.settable_env
            && let Some((name, _)) = command
                .env
                .iter()
                .find(|(k, _)| steers_code(k) && !settable.contains(k))
        {
            return Err(format!(
                "Permission denied: {who} may not set {name} for {program}: it changes which code a program loads \
                 or runs. An env grant naming {name} (not `*`) in the policy file (toolwright.toml) would allow it."
            ));
        }
        let mut env = base.to_vec();
        if !env.iter().any(|(k, _)| k == "PATH") {
            // So what the program starts in turn is found, on the host's own (safe) path.
            env.push(("PATH".into(), programs.path.clone()));
        }
        env.retain(|(k, _)| !command.env.iter().any(|(c, _)| c == k));
        env.extend(command.env.iter().cloned());
        let confinement = match &programs.confinement {
            None => None,
            Some(c) => c.for_start(program, who)?,
        };
        Ok(Launch {
            program: path.to_string_lossy().into_owned(),
            env,
            no_new_privs: programs.confinement.is_some(),
            confinement,
        })
    }
}

#[cfg(test)]
mod tests;

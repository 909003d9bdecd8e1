//! The MCP servers of a toolset (feature `mcp`): their configuration files read in pi's order (the user's, then
//! `--mcp-config`, then the trusted project's), each stdio server's sandbox from its `[mcp.NAME]` grant, the
//! connections (kept across reloads of the same options), and each server's pin in the user's lockfile: the
//! first connection records what it is and what its tools say; later, a server that is another program holds
//! all its tools, and a tool whose surface changed (or a new one) is held until `toolwright mcp-servers
//! approve NAME`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde_json::Value;
use toolwright_mcp::client::config::{Exposure, McpConfig, Scope};
use toolwright_mcp::client::sandbox::{SandboxBase, ServerGrant};
use toolwright_mcp::client::servers::{McpServers, Planned, ServerState};

use super::ToolsetOptions;
use crate::definition::{ToolDefinition, ToolSource};
use crate::native::HostEnv;
use crate::policy::Policy;
use crate::trust::lock::{Lockfile, McpPin, McpToolPin};

/// The connections of the toolsets loaded from one set of options and its clones (a reloading MCP server keeps
/// its servers connected): shared, replaced when the configuration changes.
#[derive(Clone, Default)]
pub struct McpClients(Arc<Mutex<Option<(String, McpServers)>>>);

impl std::fmt::Debug for McpClients {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("McpClients")
    }
}

/// The user's MCP configuration files, in the order they are read: pi's (`$PI_CODING_AGENT_DIR/mcp.json`, by
/// default `~/.pi/agent/mcp.json`, so that a pi user's servers just work) and Toolwright's
/// (`~/.config/toolwright/mcp.json`).
pub fn user_mcp_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    match std::env::var_os("PI_CODING_AGENT_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => files.push(Path::new(&dir).join("mcp.json")),
        None => {
            if let Some(home) = std::env::var_os("HOME") {
                files.push(Path::new(&home).join(".pi").join("agent").join("mcp.json"));
            }
        }
    }
    files.extend(crate::policy::config_dir().map(|c| c.join("mcp.json")));
    files
}

/// A project's MCP configuration files (read only once the project is trusted): `.pi/mcp.json`, then
/// `.toolwright/mcp.json`.
pub fn project_mcp_files(cwd: &Path) -> [PathBuf; 2] {
    [
        cwd.join(".pi").join("mcp.json"),
        cwd.join(".toolwright").join("mcp.json"),
    ]
}

/// A tool (or a whole server) left out until the user approves it again.
#[derive(Debug, Clone)]
pub struct Held {
    /// The server.
    pub server: String,
    /// The tool (none: the whole server).
    pub tool: Option<String>,
    /// What changed, for people.
    pub why: String,
}

/// What the MCP step of a load found.
#[derive(Debug, Default)]
pub struct McpLoad {
    /// The servers (none when none is configured).
    pub servers: Option<McpServers>,
    /// Their tools, held ones left out.
    pub tools: Vec<ToolDefinition>,
    /// What was wrong with the configuration files, one line each.
    pub config_errors: Vec<String>,
    /// Servers that could not be reached: (name, pi's text).
    pub failed: Vec<(String, String)>,
    /// Tools and servers held since their approval.
    pub held: Vec<Held>,
    /// Servers pinned by this load (first seen): their names.
    pub pinned: Vec<String>,
    /// The project's MCP files, when they exist and the project is not trusted.
    pub skipped_project_files: Vec<PathBuf>,
    /// Whether an enabled server offers tools to codemode scripts: pi activates `codemode` then (unless
    /// `autoEnableCodemode` is false).
    pub activates_codemode: bool,
    /// Whether an enabled server leaves tools to `tool_search`: pi activates `tool_search` then.
    pub activates_tool_search: bool,
}

/// Read the configuration of `options` (the project's files only when `trusted`).
pub fn read_config(options: &ToolsetOptions, trusted: bool) -> (McpConfig, Vec<PathBuf>) {
    let mut config = McpConfig::default();
    let mut skipped = Vec::new();
    let workspace = options.cwd.canonicalize().unwrap_or_else(|_| options.cwd.clone());
    // A workspace that is the whole system or the home directory is no project of its own.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let is_project = workspace != Path::new("/") && home.as_deref() != Some(workspace.as_path());
    let untrusted = !trusted && options.require_project_trust && is_project;
    let defaults = user_mcp_files();
    for file in &options.mcp_files {
        // A file of the workspace given with `--mcp-config` (a cloned project's `.mcp.json`) is the project's:
        // its servers start once the project is trusted.
        let inside = file
            .canonicalize()
            .is_ok_and(|f| f.starts_with(&workspace) && !defaults.iter().any(|d| d == file));
        if inside && untrusted {
            skipped.push(file.clone());
            continue;
        }
        config.read_file(file, Scope::User);
    }
    if options.mcp_project {
        for file in project_mcp_files(&options.cwd) {
            if trusted || !options.require_project_trust {
                config.read_file(&file, Scope::Project);
            } else if file.exists() {
                skipped.push(file);
            }
        }
    }
    (config, skipped)
}

/// The sandbox base of every stdio server: the workspace, the host, the secrets and protected paths the
/// built-ins' sandbox keeps.
pub fn sandbox_base(options: &ToolsetOptions, policy: &Policy, host: &HostEnv) -> SandboxBase {
    let builtins = super::builtins::builtin_sandbox(options, policy, None, host);
    SandboxBase {
        cwd: options.cwd.clone(),
        host: host.clone(),
        hidden: builtins.hidden,
        protected: builtins.protected,
    }
}

/// The name of the file the MCP servers' pins are kept in, beside the user's policy file: a file of its own, so
/// that a toolwright that knows no MCP pins still reads the plugins' `toolwright.lock`.
pub const PIN_FILE_NAME: &str = "toolwright-mcp.lock";

/// The lockfile the servers' pins go to: beside the first trusted policy file (the user's config).
pub fn pin_file(options: &ToolsetOptions) -> Option<PathBuf> {
    options
        .policy_files
        .first()
        .map(|p| p.with_file_name(PIN_FILE_NAME))
}

/// Connect the configured servers (or keep those of an earlier load of the same configuration), wait for each
/// first attempt, pin what is new and hold what changed.
pub fn load(
    options: &ToolsetOptions,
    policy: &Policy,
    host: &HostEnv,
    trusted: bool,
    taken: &[String],
) -> McpLoad {
    let (config, skipped) = read_config(options, trusted);
    let exposures: Vec<Exposure> = config
        .servers
        .iter()
        .filter(|s| s.enabled)
        .flat_map(|s| std::iter::once(s.exposure).chain(s.tool_exposure.iter().map(|(_, e)| *e)))
        .collect();
    let mut load = McpLoad {
        config_errors: config.errors.clone(),
        skipped_project_files: skipped,
        activates_codemode: config.auto_enable_codemode != Some(false)
            && exposures.contains(&Exposure::Codemode),
        activates_tool_search: exposures.contains(&Exposure::Deferred),
        ..Default::default()
    };
    if config.servers.is_empty() {
        *options.mcp.0.lock().unwrap_or_else(PoisonError::into_inner) = None;
        return load;
    }
    let base = sandbox_base(options, policy, host);
    let pins = pin_file(options).map(|path| (Lockfile::load(&path), path));
    let approved = |name: &str| match &pins {
        Some((Ok(lock), _)) => lock.mcp.get(name).cloned(),
        _ => None,
    };
    // Which program each server is, before anything starts: another program than the one approved does not
    // run at all (it would have its grants and its environment before its tools could be held).
    let planned: Vec<Planned> = config
        .servers
        .iter()
        .map(|server| {
            let grant = ServerGrant {
                policy: policy.mcp.get(&server.name).cloned().unwrap_or_default(),
            };
            let (identity, described) = toolwright_mcp::client::servers::identity(server, &base);
            let held = approved(&server.name)
                .filter(|pin| pin.identity != identity)
                .filter(|_| options.mcp_approving.as_deref() != Some(server.name.as_str()))
                .map(|pin| another_program(&pin.described, &described));
            Planned {
                config: server.clone(),
                grant,
                identity,
                described,
                held,
            }
        })
        .collect();
    let key = format!(
        "{:?}|{:?}|{:?}",
        planned
            .iter()
            .map(|p| (&p.config, &p.grant.policy, &p.identity, &p.held))
            .collect::<Vec<_>>(),
        base.hidden,
        base.protected
    );
    let servers = {
        let mut shared = options.mcp.0.lock().unwrap_or_else(PoisonError::into_inner);
        match shared.as_ref() {
            Some((k, servers)) if *k == key => servers.clone(),
            _ => match McpServers::start_planned(planned, base) {
                Ok(servers) => {
                    *shared = Some((key, servers.clone()));
                    servers
                }
                Err(e) => {
                    load.config_errors
                        .push(format!("the MCP client cannot start: {e}"));
                    return load;
                }
            },
        }
    };
    let limit = servers
        .servers()
        .iter()
        .filter_map(|s| s.config.timeout)
        .fold(
            toolwright_mcp::client::connection::DEFAULT_TIMEOUT_SECONDS,
            f64::max,
        )
        .min(toolwright_mcp::client::connection::MAX_TIMEOUT_SECONDS);
    // A first attempt is a start, `initialize` and `tools/list`, each bounded by the timeout.
    servers.settle(Duration::from_secs_f64(2.0 * limit + 1.0));
    // One look at every server: what is checked against its approval is what is registered.
    let snapshot = servers.snapshot();
    for (server, state) in &snapshot {
        match state {
            ServerState::Failed(error) => load.failed.push((server.config.name.clone(), error.clone())),
            ServerState::Held(why) => load.held.push(Held {
                server: server.config.name.clone(),
                tool: None,
                why: why.clone(),
            }),
            _ => {}
        }
    }
    let (held_servers, held_tools) = pin(&snapshot, pins, &mut load);
    servers.hold(held_servers.clone());
    load.tools = servers
        .definitions_of(&snapshot, &held_servers, |name| taken.iter().any(|t| t == name))
        .into_iter()
        .filter(|d| {
            let ToolSource::Mcp { server, .. } = &d.source else {
                return true;
            };
            let raw = d.label.split_once('/').map_or("", |(_, t)| t);
            !held_tools.iter().any(|(s, t)| s == server && t == raw)
        })
        .collect();
    load.servers = Some(servers);
    load
}

fn another_program(approved: &str, now: &str) -> String {
    format!(
        "it is another program than the one approved: approved `{}`, now `{}`",
        approved.replace('\n', "; "),
        now.replace('\n', "; ")
    )
}

impl McpLoad {
    /// pi's `mcp_servers` section of the system prompt (`<mcp_servers>…</mcp_servers>`): the enabled servers
    /// whose tools are left to codemode scripts or `tool_search`; none when there is none.
    pub fn prompt_section(&self) -> Option<String> {
        let servers = self.servers.as_ref()?;
        // A server held whole is not offered: the prompt does not name it.
        let held = |name: &str| self.held.iter().any(|h| h.tool.is_none() && h.server == name);
        let states: Vec<_> = servers.servers().iter().map(|s| s.state()).collect();
        let listed: Vec<toolwright_mcp::client::prompt::Listed<'_>> = servers
            .servers()
            .iter()
            .zip(&states)
            .filter(|(server, _)| !held(&server.config.name))
            .map(|(server, state)| toolwright_mcp::client::prompt::Listed {
                config: &server.config,
                instructions: match state {
                    ServerState::Connected { info, .. } => info.instructions.as_deref(),
                    _ => None,
                },
            })
            .collect();
        toolwright_mcp::client::prompt::section(&listed)
    }
}

/// The digest of what the model reads of one MCP tool: its name, title, description, schemas and annotations
/// as the server sent them.
pub fn surface_digest(tool: &Value) -> String {
    use sha2::Digest as _;
    let fields = [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ];
    let surface: serde_json::Map<String, Value> = fields
        .iter()
        .filter_map(|f| tool.get(*f).map(|v| ((*f).to_owned(), v.clone())))
        .collect();
    let text = serde_json::to_string(&surface).unwrap_or_default();
    crate::trust::identity::hex(&sha2::Sha256::digest(text.as_bytes()).into())
}

/// The pin of a server in `state` (none unless connected): the identity it was started with (its program's
/// digest is read once a load, when the load plans the servers).
pub fn current_pin(server: &toolwright_mcp::client::servers::Server, state: &ServerState) -> Option<McpPin> {
    let ServerState::Connected { tools, info } = state else {
        return None;
    };
    Some(McpPin {
        identity: server.identity.clone(),
        described: server.described.clone(),
        instructions: info.instructions.clone().unwrap_or_default(),
        tools: tools
            .iter()
            .map(|t| {
                let name = t["name"].as_str().unwrap_or_default().to_owned();
                let pin = McpToolPin {
                    sha256: surface_digest(t),
                    description: t
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                };
                (name, pin)
            })
            .collect(),
    })
}

/// What differs between the approved pin and the server now, for people: one line each (empty: the same).
pub fn differences(approved: &McpPin, now: &McpPin) -> Vec<(Option<String>, String)> {
    let mut lines = Vec::new();
    if approved.identity != now.identity {
        lines.push((None, another_program(&approved.described, &now.described)));
    }
    if approved.instructions != now.instructions {
        lines.push((
            None,
            format!(
                "its instructions changed from {:?} to {:?}",
                approved.instructions, now.instructions
            ),
        ));
    }
    for (name, tool) in &now.tools {
        match approved.tools.get(name) {
            None => lines.push((Some(name.clone()), "a new tool, not approved".into())),
            Some(old) if old.sha256 != tool.sha256 => {
                let why = if old.description != tool.description {
                    format!(
                        "its description changed from {:?} to {:?}",
                        old.description, tool.description
                    )
                } else {
                    "its schema, title or annotations changed".into()
                };
                lines.push((Some(name.clone()), why));
            }
            Some(_) => {}
        }
    }
    lines
}

/// Pin the servers of `snapshot` seen for the first time, in the lockfile `pins` names; the servers held whole
/// and the tools (server, tool) held since their approval. Without a lockfile nothing is pinned (an embedder that
/// names no policy file); one that cannot be read holds every server.
fn pin(
    snapshot: &[(Arc<toolwright_mcp::client::servers::Server>, ServerState)],
    pins: Option<(Result<Lockfile, crate::trust::lock::LockError>, PathBuf)>,
    load: &mut McpLoad,
) -> (Vec<String>, Vec<(String, String)>) {
    let mut held_servers: Vec<String> = load.held.iter().map(|h| h.server.clone()).collect();
    let mut held_tools: Vec<(String, String)> = Vec::new();
    let Some((lock, path)) = pins else {
        return (held_servers, held_tools);
    };
    let mut lock = match lock {
        Ok(lock) => lock,
        Err(e) => {
            load.config_errors
                .push(format!("{e}: every MCP server is held until it can be read"));
            return (
                snapshot.iter().map(|(s, _)| s.config.name.clone()).collect(),
                held_tools,
            );
        }
    };
    let mut changed_lock = false;
    for (server, state) in snapshot {
        let Some(now) = current_pin(server, state) else {
            continue;
        };
        let name = &server.config.name;
        match lock.mcp.get(name) {
            None => {
                lock.mcp.insert(name.clone(), now);
                load.pinned.push(name.clone());
                changed_lock = true;
            }
            Some(approved) => {
                for (tool, why) in differences(approved, &now) {
                    match &tool {
                        None => held_servers.push(name.clone()),
                        Some(t) => held_tools.push((name.clone(), t.clone())),
                    }
                    load.held.push(Held {
                        server: name.clone(),
                        tool,
                        why,
                    });
                }
            }
        }
    }
    if changed_lock && let Err(e) = lock.save(&path) {
        // What is not recorded cannot be checked next time: the servers seen for the first time are held.
        load.config_errors
            .push(format!("{e}: the MCP servers seen for the first time are held"));
        held_servers.append(&mut load.pinned);
    }
    (held_servers, held_tools)
}

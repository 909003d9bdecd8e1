//! `toolwright mcp-servers`: the MCP servers whose tools Toolwright offers. `list` connects each and prints its
//! state, tools, sandbox and errors (exit 1 when one fails, as `pi mcp list`); `add` writes a server into the
//! user's (or the trusted project's) `mcp.json`, connects it and shows what its sandbox lets it do; `remove`
//! takes it out; `approve` records it as it is now, after a change held its tools.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};
use toolwright::mcp::client::servers::{Server, ServerState};
use toolwright::toolset::Toolset;
use toolwright::toolset::mcp::{current_pin, differences, pin_file};
use toolwright::trust::lock::Lockfile;

/// Arguments of `toolwright mcp-servers`.
#[derive(Debug, clap::Args)]
pub struct McpServersArgs {
    #[command(subcommand)]
    command: McpServersCommand,
}

#[derive(Debug, clap::Subcommand)]
enum McpServersCommand {
    /// Connect each configured server and print its state, tools, sandbox and errors (exit 1 when one fails).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        tools: super::ToolArgs,
    },
    /// Add a server to `~/.config/toolwright/mcp.json` (or, with `--project`, the project's
    /// `.toolwright/mcp.json`): `toolwright mcp-servers add NAME -- COMMAND ARGS…` or `--url URL`. It is
    /// connected, its sandbox shown and its tools approved as they are.
    Add {
        /// The server's name (letters, digits, `_` and `-`).
        name: String,
        /// Its URL (streamable HTTP) instead of a command.
        #[arg(long, conflicts_with = "command")]
        url: Option<String>,
        /// A header for an HTTP server, `NAME=VALUE` (`${VAR}` is the host's variable; repeatable).
        #[arg(long = "header", value_name = "NAME=VALUE")]
        headers: Vec<String>,
        /// A variable for a stdio server, `NAME=VALUE` (`${VAR}` is the host's variable; repeatable).
        #[arg(long = "env", value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// How its tools are offered: codemode (the default), deferred, direct or hidden.
        #[arg(long)]
        exposure: Option<String>,
        /// Write the project's `.toolwright/mcp.json` instead of the user's.
        #[arg(long)]
        project: bool,
        /// The command and its arguments (after `--`).
        #[arg(last = true, value_name = "COMMAND")]
        command: Vec<String>,
        #[command(flatten)]
        tools: super::ToolArgs,
    },
    /// Remove a server from the file that defines it, and its approval.
    Remove {
        /// The server's name.
        name: String,
        #[command(flatten)]
        tools: super::ToolArgs,
    },
    /// Approve a server as it is now: its program (or URL) and what its tools say; the differences from the last
    /// approval are printed first.
    Approve {
        /// The server's name.
        name: String,
        #[command(flatten)]
        tools: super::ToolArgs,
    },
}

pub fn run(args: McpServersArgs) -> anyhow::Result<ExitCode> {
    let cwd = std::env::current_dir().context("the current directory")?;
    match args.command {
        McpServersCommand::List { json, tools } => list(&tools, &cwd, json),
        McpServersCommand::Add {
            name,
            url,
            headers,
            env,
            exposure,
            project,
            command,
            tools,
        } => {
            let mut entry = Map::new();
            if url.is_some() && !env.is_empty() {
                bail!("--env sets a stdio server's variables: an HTTP server (--url) takes --header");
            }
            if url.is_none() && !headers.is_empty() {
                bail!("--header is sent to an HTTP server (--url): a stdio server takes --env");
            }
            match (url, command.split_first()) {
                (Some(url), _) => {
                    entry.insert("url".into(), json!(url));
                    if !headers.is_empty() {
                        entry.insert("headers".into(), pairs(&headers, "--header")?);
                    }
                }
                (None, Some((program, rest))) => {
                    entry.insert("command".into(), json!(program));
                    entry.insert("args".into(), json!(rest));
                    if !env.is_empty() {
                        entry.insert("env".into(), pairs(&env, "--env")?);
                    }
                }
                (None, None) => bail!("give the server's command after `--`, or its --url"),
            }
            if let Some(exposure) = exposure {
                entry.insert("exposure".into(), json!(exposure));
            }
            add(&tools, &cwd, &name, entry, project)
        }
        McpServersCommand::Remove { name, tools } => remove(&tools, &cwd, &name),
        McpServersCommand::Approve { name, tools } => approve(&tools, &cwd, &name),
    }
}

fn pairs(list: &[String], flag: &str) -> anyhow::Result<Value> {
    let mut map = Map::new();
    for item in list {
        let (k, v) = item
            .split_once('=')
            .with_context(|| format!("{flag} {item}: expected NAME=VALUE"))?;
        map.insert(k.to_owned(), json!(v));
    }
    Ok(Value::Object(map))
}

fn load(tools: &super::ToolArgs, cwd: &Path) -> anyhow::Result<Toolset> {
    load_options(tools.options(cwd))
}

fn load_options(mut options: toolwright::toolset::ToolsetOptions) -> anyhow::Result<Toolset> {
    // Only the servers matter here: no plugin is compiled.
    options.plugin_dirs.clear();
    options.project_plugin_dir = None;
    Ok(Toolset::load(&options)?)
}

fn state_line(server: &Server) -> String {
    match server.state() {
        ServerState::Disabled => "disabled".into(),
        ServerState::Starting => "starting".into(),
        ServerState::Connected { tools, .. } => {
            let n = tools.len();
            format!("connected, {n} tool{}", if n == 1 { "" } else { "s" })
        }
        ServerState::Failed(_) => "failed".into(),
        ServerState::Disconnected(_) => "disconnected, reconnects on next call".into(),
        ServerState::Held(_) => "held, not started".into(),
    }
}

fn exposure_name(e: toolwright::mcp::client::config::Exposure) -> &'static str {
    use toolwright::mcp::client::config::Exposure as E;
    match e {
        E::Codemode => "codemode",
        E::Deferred => "deferred",
        E::Direct => "direct",
        E::Hidden => "hidden",
    }
}

fn scope_name(s: toolwright::mcp::client::config::Scope) -> &'static str {
    match s {
        toolwright::mcp::client::config::Scope::User => "global",
        toolwright::mcp::client::config::Scope::Project => "project",
    }
}

#[allow(clippy::print_stdout)]
fn list(tools: &super::ToolArgs, cwd: &Path, as_json: bool) -> anyhow::Result<ExitCode> {
    let toolset = load(tools, cwd)?;
    let mcp = &toolset.mcp;
    let servers: Vec<_> = mcp
        .servers
        .iter()
        .flat_map(|s| s.servers().iter().cloned())
        .collect();
    let mut failed = !mcp.config_errors.is_empty();
    let mut out = Vec::new();
    for server in &servers {
        let config = &server.config;
        let state = server.state();
        if config.enabled && !matches!(state, ServerState::Connected { .. }) {
            failed = true;
        }
        let sandbox = mcp.servers.as_ref().and_then(|s| {
            let server = server.clone();
            s.run(async move { server.sandbox_summary().await })
        });
        out.push((server.clone(), state, sandbox));
    }
    if as_json {
        let list: Vec<Value> = out
            .iter()
            .map(|(server, state, sandbox)| {
                let config = &server.config;
                let version = match state {
                    ServerState::Connected { info, .. } => Some(info.protocol_version.clone()),
                    _ => None,
                };
                let (state_name, tools, error) = match state {
                    ServerState::Connected { tools, .. } => ("connected", tools.clone(), None),
                    ServerState::Disabled => ("disabled", Vec::new(), None),
                    ServerState::Starting => ("starting", Vec::new(), None),
                    ServerState::Failed(e) => ("failed", Vec::new(), Some(e.clone())),
                    ServerState::Disconnected(e) => ("disconnected", Vec::new(), Some(e.clone())),
                    ServerState::Held(e) => ("held", Vec::new(), Some(e.clone())),
                };
                let names: Vec<&Value> = tools.iter().map(|t| &t["name"]).collect();
                let mut entry = json!({
                    "name": config.name,
                    "scope": scope_name(config.scope),
                    "source": config.source,
                    "enabled": config.enabled,
                    "exposure": exposure_name(config.exposure),
                    "transport": match config.transport {
                        toolwright::mcp::client::config::Transport::Stdio { .. } => "stdio",
                        toolwright::mcp::client::config::Transport::Http { .. } => "http",
                    },
                    "state": state_name,
                    "tools": names,
                    "identity": server.identity,
                });
                if let Some(error) = error {
                    entry["error"] = json!(error);
                }
                if let Some(version) = version {
                    entry["protocolVersion"] = json!(version);
                }
                if let Some(sandbox) = sandbox {
                    entry["sandbox"] = json!(sandbox);
                }
                let held: Vec<Value> = mcp
                    .held
                    .iter()
                    .filter(|h| h.server == config.name)
                    .map(|h| json!({"tool": h.tool, "why": h.why}))
                    .collect();
                if !held.is_empty() {
                    entry["held"] = Value::Array(held);
                }
                entry
            })
            .collect();
        let text = serde_json::to_string_pretty(&json!({"servers": list, "errors": mcp.config_errors}))?;
        println!("{text}");
        return Ok(if failed {
            ExitCode::FAILURE
        } else {
            ExitCode::SUCCESS
        });
    }
    if servers.is_empty() && mcp.config_errors.is_empty() {
        println!(
            "No MCP servers configured. Add them to ~/.config/toolwright/mcp.json (or ~/.pi/agent/mcp.json), \
             .toolwright/mcp.json in a trusted project, or with `toolwright mcp-servers add`."
        );
    }
    for (server, state, sandbox) in &out {
        let config = &server.config;
        println!(
            "{}: {} ({}, {})",
            config.name,
            state_line(server),
            exposure_name(config.exposure),
            scope_name(config.scope)
        );
        match &config.transport {
            toolwright::mcp::client::config::Transport::Stdio { command, args, .. } => {
                let mut words = vec![command.clone()];
                words.extend(args.iter().cloned());
                println!("  {}", words.join(" "));
            }
            toolwright::mcp::client::config::Transport::Http { url, .. } => println!("  {url}"),
        }
        if let ServerState::Connected { tools, info } = state {
            let names: Vec<String> = tools
                .iter()
                .map(|t| {
                    let raw = t["name"].as_str().unwrap_or_default();
                    let exposure = config.tool_exposure(raw);
                    let name = toolwright::text::escape(raw);
                    if exposure == config.exposure {
                        name.into_owned()
                    } else {
                        format!("{name} [{}]", exposure_name(exposure))
                    }
                })
                .collect();
            if !names.is_empty() {
                println!("  tools: {}", names.join(", "));
            }
            if info.resources {
                println!("  offers resources");
            }
        }
        if let Some(sandbox) = sandbox {
            println!("  sandbox: {sandbox}");
        }
        for held in mcp.held.iter().filter(|h| h.server == config.name) {
            match &held.tool {
                Some(tool) => println!("  held: {}: {}", toolwright::text::escape(tool), held.why),
                None => println!("  held: every tool: {}", held.why),
            }
        }
        if let ServerState::Failed(error) | ServerState::Disconnected(error) = state {
            println!("  {}", super::indented(error));
        }
    }
    for error in &mcp.config_errors {
        println!("config error: {error}");
    }
    for file in &mcp.skipped_project_files {
        println!(
            "{} is ignored because the project is not trusted. `toolwright trust` trusts it.",
            file.display()
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The file a new server goes to.
fn target_file(cwd: &Path, project: bool) -> anyhow::Result<PathBuf> {
    if project {
        return Ok(cwd.join(".toolwright").join("mcp.json"));
    }
    let dir = toolwright::policy::config_dir()
        .context("no configuration directory: set HOME or XDG_CONFIG_HOME")?;
    Ok(dir.join("mcp.json"))
}

fn read_servers(path: &Path) -> anyhow::Result<Value> {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let value: Value = serde_json::from_str(&text).with_context(|| format!("{}", path.display()))?;
            if !value.get("mcpServers").is_none_or(Value::is_object) {
                bail!(
                    "{}: expected an object with an \"mcpServers\" object",
                    path.display()
                );
            }
            Ok(value)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(json!({"mcpServers": {}})),
        Err(e) => Err(anyhow::Error::new(e).context(format!("{}", path.display()))),
    }
}

fn write_servers(path: &Path, value: &Value) -> anyhow::Result<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(value)? + "\n";
    toolwright::trust::lock::replace_file(path, text.as_bytes())
        .with_context(|| format!("{}", path.display()))
}

#[allow(clippy::print_stdout)]
fn add(
    tools: &super::ToolArgs,
    cwd: &Path,
    name: &str,
    entry: Map<String, Value>,
    project: bool,
) -> anyhow::Result<ExitCode> {
    let path = target_file(cwd, project)?;
    let mut file = read_servers(&path)?;
    // Checked as a load would check it, before anything is written.
    let mut check = toolwright::mcp::client::config::McpConfig::default();
    let probe = json!({"mcpServers": {name: Value::Object(entry.clone())}});
    check.read_text(
        &path,
        &probe.to_string(),
        toolwright::mcp::client::config::Scope::User,
    );
    if let Some(error) = check.errors.first() {
        bail!("{error}");
    }
    let servers = file["mcpServers"].as_object_mut().expect("checked above");
    let replaced = servers.insert(name.to_owned(), Value::Object(entry)).is_some();
    write_servers(&path, &file)?;
    let scope = if project { "project" } else { "user" };
    println!(
        "{} {scope} MCP server \"{name}\" in {}.",
        if replaced { "Replaced" } else { "Added" },
        path.display()
    );
    if project {
        println!("A project's servers start only once the project is trusted: `toolwright trust`.");
    }
    // Forget an older approval of the name, then connect and approve it as it is.
    if let Some(lock_path) = pin_file(&tools.options(cwd)) {
        let mut lock = Lockfile::load(&lock_path)?;
        if lock.mcp.remove(name).is_some() {
            lock.save(&lock_path)?;
        }
    }
    let toolset = load(tools, cwd)?;
    let Some(server) = find(&toolset, name) else {
        println!(
            "It is not loaded (another file defines it, or it is disabled): `toolwright mcp-servers list`."
        );
        return Ok(ExitCode::SUCCESS);
    };
    report_one(&toolset, &server);
    Ok(match server.state() {
        ServerState::Connected { .. } => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

fn find(toolset: &Toolset, name: &str) -> Option<std::sync::Arc<Server>> {
    toolset
        .mcp
        .servers
        .as_ref()?
        .servers()
        .iter()
        .find(|s| s.config.name == name)
        .cloned()
}

#[allow(clippy::print_stdout)]
fn report_one(toolset: &Toolset, server: &std::sync::Arc<Server>) {
    println!("{}: {}", server.config.name, state_line(server));
    if let Some(servers) = &toolset.mcp.servers {
        let s = server.clone();
        match servers.run(async move { s.sandbox_summary().await }) {
            Some(sandbox) => println!("  sandbox: {sandbox}"),
            None if matches!(
                server.config.transport,
                toolwright::mcp::client::config::Transport::Http { .. }
            ) =>
            {
                println!("  reached over HTTP: no process of its own")
            }
            None => {}
        }
        println!(
            "  more: read, write, env and network in its [mcp.{}] section of the policy (toolwright.toml)",
            server.config.name
        );
    }
    if let ServerState::Failed(error) = server.state() {
        println!("  {}", super::indented(&error));
    }
}

#[allow(clippy::print_stdout)]
fn remove(tools: &super::ToolArgs, cwd: &Path, name: &str) -> anyhow::Result<ExitCode> {
    let options = tools.options(cwd);
    let mut files: Vec<PathBuf> = options.mcp_files.clone();
    files.extend(toolwright::toolset::project_mcp_files(cwd));
    let mut removed = false;
    for path in files.iter().filter(|p| p.is_file()) {
        let mut file = read_servers(path)?;
        if let Some(servers) = file["mcpServers"].as_object_mut()
            && servers.remove(name).is_some()
        {
            write_servers(path, &file)?;
            println!("Removed MCP server \"{name}\" from {}.", path.display());
            removed = true;
        }
    }
    if let Some(lock_path) = pin_file(&options) {
        let mut lock = Lockfile::load(&lock_path)?;
        if lock.mcp.remove(name).is_some() {
            lock.save(&lock_path)?;
            println!("Its approval is removed from {}.", lock_path.display());
        }
    }
    if !removed {
        let toolset = load(tools, cwd)?;
        let names: Vec<String> = toolset
            .mcp
            .servers
            .iter()
            .flat_map(|s| s.servers().iter().map(|s| s.config.name.clone()))
            .collect();
        println!(
            "No MCP server named \"{name}\". Configured: {}.",
            if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            }
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

#[allow(clippy::print_stdout)]
fn approve(tools: &super::ToolArgs, cwd: &Path, name: &str) -> anyhow::Result<ExitCode> {
    let mut options = tools.options(cwd);
    options.mcp_approving = Some(name.to_owned());
    let lock_path =
        pin_file(&options).context("no policy file to keep approvals beside: set HOME or give --policy")?;
    let toolset = load_options(options.clone())?;
    let Some(server) = find(&toolset, name) else {
        bail!("no MCP server named \"{name}\" is configured (`toolwright mcp-servers list` lists them)");
    };
    let Some(now) = current_pin(&server, &server.state()) else {
        report_one(&toolset, &server);
        bail!("the MCP server \"{name}\" is not connected: it can be approved once it answers");
    };
    let mut lock = Lockfile::load(&lock_path)?;
    match lock.mcp.get(name) {
        Some(approved) => {
            let changes = differences(approved, &now);
            if changes.is_empty() {
                println!("The MCP server \"{name}\" is as approved: nothing to do.");
                return Ok(ExitCode::SUCCESS);
            }
            for (tool, why) in changes {
                match tool {
                    Some(tool) => println!("  {tool}: {why}"),
                    None => println!("  the server: {why}"),
                }
            }
        }
        None => println!("  first approval"),
    }
    let tools_count = now.tools.len();
    lock.mcp.insert(name.to_owned(), now);
    lock.save(&lock_path)?;
    println!(
        "Approved the MCP server \"{name}\" as it is now ({tools_count} tool{}), in {}.",
        if tools_count == 1 { "" } else { "s" },
        lock_path.display()
    );
    Ok(ExitCode::SUCCESS)
}

//! Command-line parsing and dispatch. Only this crate uses `clap` and `anyhow`.

mod ask;
mod audit;
mod cache;
mod check;
mod dev;
mod exec;
mod install;
mod mcp;
mod mcp_servers;
mod new;
mod oci;
mod plugins;
mod registry;
mod trust;
mod wit;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

/// Toolwright: run AI-agent tool calls through pi's pipeline, natively or in a WebAssembly sandbox.
#[derive(Debug, Parser)]
#[command(name = "toolwright", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one batch of tool calls (as one assistant message carries them) and print the events.
    Exec(exec::ExecArgs),
    /// Print the audit log for people: one line per call, with its decision path, spawns and connections.
    Audit(audit::AuditArgs),
    /// List the plugins: versions, tools, what each requests and why, and what failed to load.
    Plugins(plugins::PluginsArgs),
    /// List every registered tool: source, exposure, whether it is active, declared and callable, annotations,
    /// and a plugin's grants.
    Tools(registry::ToolsArgs),
    /// Print the system prompt's tool sections (`<tools>` and `<rules>`) for the active tools, and pi's `<mcp_servers>` when an
    /// MCP server's tools are left to codemode or `tool_search`.
    Prompt(registry::PromptArgs),
    /// Print the tool declarations a provider request would carry, as JSON.
    Declarations(registry::DeclarationsArgs),
    /// Create a plugin project that builds, tests and runs: `toolwright new my-tool && cd my-tool && ./build.sh`.
    New(new::NewArgs),
    /// The compiled-component cache: list it, prune it to its cap, or clear it.
    Cache(cache::CacheArgs),
    /// Check a plugin file: whether the host can load it, what it offers and requests, and how to fix it if not.
    Check(check::CheckArgs),
    /// Print the WIT plugins are built against, or write the whole tree (with the WASI packages) with `--out`.
    Wit(wit::WitArgs),
    /// Trust a project (default: the current directory) as it is now: its own plugins, handlers, policy and
    /// lockfile (`.toolwright/`, `toolwright.toml`, `toolwright.lock`) load from then on, until what it ships
    /// changes. `--remove` takes the trust back; `--list` lists the trusted projects.
    Trust(trust::TrustArgs),
    /// The MCP servers whose tools are offered (`list`, `add`, `remove`, `approve`): each stdio server runs in the
    /// sandbox with its `[mcp.NAME]` grants, and a change of what its tools say holds them until approved.
    McpServers(mcp_servers::McpServersArgs),
    /// Serve the active tools over the Model Context Protocol on stdin/stdout, or on streamable HTTP with `--http`
    /// (logs go to stderr).
    Mcp(mcp::McpArgs),
    /// Develop a plugin: build the plugin project in DIR (default: here), serve it over MCP as `mcp` does, ahead
    /// of the installed plugin of its name and under that plugin's grants, and build and reload it whenever its
    /// sources change (no `plugins update` or `approve` per rebuild).
    Dev(dev::DevArgs),
}

/// Where the tools come from; shared by the commands that run or list tools.
#[derive(Debug, clap::Args)]
pub struct ToolArgs {
    /// A plugin directory; every `.wasm` in it is loaded (repeatable; after the default directories). Trusted
    /// like the user's plugin directory: grants of the user's config and `--policy` files apply to its plugins.
    #[arg(long = "plugins", value_name = "DIR")]
    plugin_dirs: Vec<PathBuf>,
    /// Do not load the default plugin directories (`<cwd>/.toolwright/plugins`, `~/.config/toolwright/plugins`).
    #[arg(long)]
    no_default_plugins: bool,
    /// Run the built-in tools natively or as wasm plugins built from the same source.
    #[arg(long, value_enum, default_value = "native")]
    builtins: BuiltinArg,
    /// Run this built-in as a wasm plugin while the others run natively (repeatable).
    #[arg(long = "wasm-builtin", value_name = "TOOL")]
    wasm_builtins: Vec<String>,
    /// A policy file granting plugins directories, programs and variables (repeatable; after the project's
    /// `toolwright.toml` and the user's `~/.config/toolwright/toolwright.toml`).
    #[arg(long = "policy", value_name = "FILE")]
    policy_files: Vec<PathBuf>,
    /// Where compiled plugins are cached (default: `$TOOLWRIGHT_CACHE_DIR` or `~/.cache/toolwright/components`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// Allow only these tools (comma-separated names and `*` patterns; naming a tool also activates it), or,
    /// with only `+name`/`-name` entries, add to or remove from the default selection (pi's `--tools`).
    #[arg(long = "allow", value_name = "TOOLS", value_delimiter = ',')]
    allow: Option<Vec<String>>,
    /// Deny these tools (comma-separated names and `*` patterns); deny wins over allow (pi's `--exclude-tools`).
    #[arg(long = "deny", value_name = "TOOLS", value_delimiter = ',')]
    deny: Option<Vec<String>>,
    /// Start with no tools active; without `--allow`, no tool is registered at all (pi's `--no-tools`).
    #[arg(long)]
    no_tools: bool,
    /// Change how the model reaches a tool: `TOOL=direct|model-only|codemode|deferred|hidden` (repeatable), for
    /// instance `--expose word_count=deferred` to leave a plugin's tool to `tool_search`.
    #[arg(long = "expose", value_name = "TOOL=EXPOSURE", value_parser = parse_exposure)]
    expose: Vec<(String, toolwright::Exposure)>,
    /// An MCP configuration file (`{"mcpServers": {...}}`, as pi, Claude Desktop and Cursor write it) whose
    /// servers' tools are offered (repeatable; after `~/.pi/agent/mcp.json` and `~/.config/toolwright/mcp.json`).
    /// Each stdio server runs in the sandbox, with its `[mcp.NAME]` grants of the policy.
    #[arg(long = "mcp-config", value_name = "FILE")]
    mcp_configs: Vec<PathBuf>,
    /// Do not read the default MCP configuration files (the user's and the project's).
    #[arg(long)]
    no_default_mcp: bool,
    /// The build `toolwright dev` serves (set by `dev`, not an option).
    #[arg(skip)]
    dev: Option<toolwright::toolset::DevBuild>,
}

fn parse_exposure(text: &str) -> Result<(String, toolwright::Exposure), String> {
    let (tool, exposure) = text
        .split_once('=')
        .ok_or_else(|| format!("`{text}` is not TOOL=EXPOSURE"))?;
    let exposure = serde_json::from_value(serde_json::Value::String(exposure.to_owned())).map_err(|_| {
        format!("`{exposure}` is not an exposure (direct, model-only, codemode, deferred or hidden)")
    })?;
    Ok((tool.to_owned(), exposure))
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BuiltinArg {
    Native,
    Wasm,
}

impl ToolArgs {
    /// What to load for `cwd`.
    pub fn options(&self, cwd: &std::path::Path) -> toolwright::toolset::ToolsetOptions {
        let mut options = toolwright::toolset::ToolsetOptions::new(cwd);
        if self.no_default_plugins {
            options.plugin_dirs.clear();
            options.project_plugin_dir = None;
        }
        options.plugin_dirs.extend(self.plugin_dirs.iter().cloned());
        options.builtins = match self.builtins {
            BuiltinArg::Native => toolwright::toolset::BuiltinMode::Native,
            BuiltinArg::Wasm => toolwright::toolset::BuiltinMode::Wasm,
        };
        options.wasm_builtins = self.wasm_builtins.clone();
        options.policy_files.extend(self.policy_files.iter().cloned());
        if let Some(dir) = &self.cache_dir {
            options.cache_dir = Some(dir.clone());
        }
        if self.no_default_mcp {
            options.mcp_files.clear();
            options.mcp_project = false;
        }
        options.mcp_files.extend(self.mcp_configs.iter().cloned());
        options.dev = self.dev.clone();
        options
    }

    /// Load the tools for `cwd`, saying nothing about what failed (the caller reports `errors` and
    /// [`ToolArgs::warnings`]).
    pub fn load(&self, cwd: &std::path::Path) -> anyhow::Result<toolwright::toolset::Toolset> {
        Ok(toolwright::toolset::Toolset::load(&self.options(cwd))?)
    }

    /// The plugin directories given that are not directories: each a problem, one line.
    pub fn directory_problems(&self) -> Vec<String> {
        let missing_configs = self.mcp_configs.iter().filter(|f| !f.is_file()).map(|f| {
            format!(
                "the MCP configuration file {} does not exist (--mcp-config takes a file)",
                f.display()
            )
        });
        self.plugin_dirs
            .iter()
            .filter_map(|dir| {
                if dir.is_file() {
                    Some(format!(
                        "{} is a file, not a directory: --plugins takes a directory (`toolwright check {}` checks \
                         one file)",
                        dir.display(),
                        dir.display()
                    ))
                } else if !dir.exists() {
                    Some(format!("the plugin directory {} does not exist", dir.display()))
                } else {
                    None
                }
            })
            .chain(missing_configs)
            .collect()
    }

    /// What looks wrong about the set-up without stopping anything: the plugin directories given that are not
    /// directories, and [`policy_warnings`].
    pub fn warnings(&self, toolset: &toolwright::toolset::Toolset) -> Vec<String> {
        let mut warnings = self.directory_problems();
        warnings.extend(policy_warnings(toolset));
        warnings
    }
}

/// What a plugin left out of the toolset is, for the head of its line: `held: ` until approved, nothing for one
/// shadowed by its dev build (which runs in its place, as asked), `skipped: ` for the rest.
pub fn error_head(error: &toolwright::toolset::LoadError) -> &'static str {
    use toolwright::toolset::LoadError;
    use toolwright::trust::TrustError;
    match error {
        LoadError::Trust(TrustError::Held { .. }) => "held: ",
        LoadError::Trust(TrustError::Shadowed { .. }) => "",
        _ => "skipped: ",
    }
}

/// Policy sections for a plugin name that no loaded plugin has, each with the nearest name.
pub fn policy_warnings(toolset: &toolwright::toolset::Toolset) -> Vec<String> {
    // A plugin compiling in the background is loaded as far as its policy section goes; one trust left out (held
    // since it changed, shadowed by its dev build, …) is there, and its own line says why it does not run.
    let loaded: Vec<&str> = toolset
        .plugins
        .iter()
        .map(|p| p.metadata.name.as_str())
        .chain(toolset.deferred.iter().map(|d| d.name.as_str()))
        .chain(toolset.errors.iter().filter_map(|e| match e {
            toolwright::toolset::LoadError::Trust(e) => e.name(),
            toolwright::toolset::LoadError::Plugin(_) => None,
        }))
        .collect();
    let sections = toolset
        .policy
        .plugins
        .keys()
        .chain(toolset.policy.project_plugins.keys());
    let mut seen = std::collections::BTreeSet::new();
    let mut warnings: Vec<String> = toolset.skipped_project.iter().cloned().collect();
    warnings.extend(mcp_warnings(&toolset.mcp));
    for name in sections {
        if loaded.contains(&name.as_str()) || !seen.insert(name.as_str()) {
            continue;
        }
        let mut warning =
            format!("the policy has a section [plugins.{name}], but no plugin loaded is named `{name}`");
        if let Some(near) = nearest(name, &loaded) {
            warning.push_str(&format!("; did you mean [plugins.{near}]?"));
        }
        warnings.push(warning);
    }
    warnings
}

impl ToolArgs {
    /// The selection these options make. The default selection is every built-in but `powershell`
    /// (`builtins::ACTIVE_BY_DEFAULT`; pi's is `read`, `bash`, `edit` and `write`; `exec`'s contract makes those
    /// seven callable); `--allow +powershell` adds it.
    pub fn selection(&self) -> toolwright::registry::Selection {
        let clean = |list: &Option<Vec<String>>| {
            list.as_ref().map(|l| {
                l.iter()
                    .map(|e| e.trim().to_owned())
                    .filter(|e| !e.is_empty())
                    .collect::<Vec<_>>()
            })
        };
        toolwright::registry::Selection {
            tools: clean(&self.allow),
            exclude_tools: clean(&self.deny),
            no_tools: self.no_tools.then_some(toolwright::registry::NoTools::All),
            default_tools: Some(
                toolwright::builtins::ACTIVE_BY_DEFAULT
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
        }
    }

    /// The session for `cwd` with these options, running batches in `mode`, writing the audit log `audit_log`
    /// too: plugins that failed to load, built-ins replaced by plugins and failed loadout hooks reported on
    /// stderr. Every plugin is loaded (compiled if need be) before it returns.
    pub fn session(
        &self,
        cwd: &std::path::Path,
        mode: toolwright::ExecutionMode,
        audit_log: Option<&std::path::Path>,
    ) -> anyhow::Result<toolwright::Session> {
        self.build_session(cwd, mode, audit_log, false, None)
    }

    /// [`ToolArgs::session`], with installed plugins that are not in the cache compiling in the background
    /// (`ToolsetOptions::compile_in_background`): see [`toolwright::Session::waits_for`].
    pub fn session_in_background(
        &self,
        cwd: &std::path::Path,
        mode: toolwright::ExecutionMode,
        audit_log: Option<&std::path::Path>,
    ) -> anyhow::Result<toolwright::Session> {
        self.build_session(cwd, mode, audit_log, true, None)
    }

    /// The session built again once the plugins `waited` for have compiled: only what concerns them is reported
    /// (the rest was, by the first build).
    pub fn session_again(
        &self,
        cwd: &std::path::Path,
        mode: toolwright::ExecutionMode,
        audit_log: Option<&std::path::Path>,
        waited: &[PathBuf],
    ) -> anyhow::Result<toolwright::Session> {
        self.build_session(cwd, mode, audit_log, true, Some(waited))
    }

    fn build_session(
        &self,
        cwd: &std::path::Path,
        mode: toolwright::ExecutionMode,
        audit_log: Option<&std::path::Path>,
        background: bool,
        only: Option<&[PathBuf]>,
    ) -> anyhow::Result<toolwright::Session> {
        let mut options = self.options(cwd);
        options.compile_in_background = background;
        let mut builder = toolwright::Session::builder(cwd)
            .options(options)
            .selection(self.selection())
            .execution_mode(mode)
            // exec and mcp stop a batch through its cancellation token only.
            .work_here(true);
        if let Some(path) = audit_log {
            // Relative to where the command runs, not to the workspace (`--cwd`).
            let path = std::path::absolute(path)
                .with_context(|| format!("--audit-log {}: cannot make the path absolute", path.display()))?;
            builder = builder.audit_log(path);
        }
        for (tool, exposure) in &self.expose {
            builder = builder.expose(tool.clone(), *exposure);
        }
        let session = builder.build().map_err(|e| match e {
            toolwright::SessionError::UnknownTool(tool) => {
                anyhow::anyhow!("--expose: there is no tool named `{tool}`")
            }
            other => anyhow::Error::new(other),
        })?;
        let reported = |path: &std::path::Path| only.is_none_or(|only| only.iter().any(|p| p == path));
        #[allow(clippy::print_stderr)]
        {
            let toolset = session.toolset();
            for error in toolset.errors.iter().filter(|e| e.path().is_none_or(reported)) {
                eprintln!("toolwright: {}{error}", error_head(error));
            }
            if only.is_none() {
                for warning in self.warnings(toolset) {
                    eprintln!("toolwright: warning: {warning}");
                }
            }
            if only.is_none() {
                for line in mcp_notes(&session) {
                    eprintln!("toolwright: {line}");
                }
            }
            for (tool, path) in toolset.overrides.iter().filter(|(_, path)| reported(path)) {
                eprintln!(
                    "toolwright: the built-in `{tool}` is replaced by the plugin {}",
                    path.display()
                );
            }
            let loadout_errors = session.registry().update(|r| r.take_loadout_errors());
            for error in loadout_errors
                .iter()
                .filter(|e| reported(std::path::Path::new(&e.extension_path)))
            {
                eprintln!(
                    "toolwright: the loadout hook of `{}` ({}) failed: {}",
                    error.tool, error.extension_path, error.error
                );
            }
        }
        Ok(session)
    }
}

/// What the MCP step of a load has to say: configuration errors, servers that could not be reached, servers
/// pinned for the first time, tools held since their approval, project files left unread.
pub fn mcp_warnings(mcp: &toolwright::toolset::McpLoad) -> Vec<String> {
    let mut warnings: Vec<String> = mcp
        .config_errors
        .iter()
        .map(|e| format!("MCP config: {e}"))
        .collect();
    for (server, error) in &mcp.failed {
        warnings.push(format!("the MCP server `{server}` failed: {}", indented(error)));
    }
    for held in &mcp.held {
        let what = match &held.tool {
            Some(tool) => format!(
                "the tool `{}` of the MCP server `{}`",
                toolwright::text::escape(tool),
                held.server
            ),
            None => format!("every tool of the MCP server `{}`", held.server),
        };
        warnings.push(format!(
            "{what} is held since its approval: {}; `toolwright mcp-servers approve {}` approves it as it is now",
            held.why, held.server
        ));
    }
    for file in &mcp.skipped_project_files {
        warnings.push(format!(
            "{} is ignored because the project is not trusted (`toolwright trust` trusts it)",
            file.display()
        ));
    }
    warnings
}

/// A server's text (its error, the tail of its stderr) for a terminal: each line with its control characters
/// escaped (a server may not move the cursor or recolour what follows), the lines after the first indented.
pub fn indented(text: &str) -> String {
    text.lines()
        .map(|line| toolwright::text::escape(line).into_owned())
        .collect::<Vec<_>>()
        .join("\n  ")
}

/// What a session's MCP servers have to say besides warnings: the servers pinned by this load, and pi's warning
/// when their tools are left to codemode or `tool_search` and neither is active.
pub fn mcp_notes(session: &toolwright::Session) -> Vec<String> {
    let mcp = &session.toolset().mcp;
    let mut notes: Vec<String> = Vec::new();
    if !mcp.pinned.is_empty() {
        let lock = toolwright::toolset::mcp::pin_file(session.options())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        for server in &mcp.pinned {
            notes.push(format!(
                "approved the MCP server `{server}` as it is now (its program and what its tools say, in {lock}); a \
                 change holds what changed until `toolwright mcp-servers approve {server}`"
            ));
        }
    }
    let unreachable = session.toolset().mcp_tools().iter().any(|d| {
        matches!(
            d.exposure,
            toolwright::Exposure::Deferred | toolwright::Exposure::Codemode
        )
    });
    if unreachable {
        let active = session.registry().read(|r| r.active_names());
        if !active.iter().any(|n| n == "codemode" || n == "tool_search") {
            notes.push(
                "MCP tools are only reachable from the codemode or tool_search tool, but neither is active; they \
                 cannot be called."
                    .into(),
            );
        }
    }
    notes
}

/// The name in `names` nearest to `name` (the same once `_` and `-` and case are alike, or within a third of its
/// length in edits), if one is near enough to be a likely slip.
fn nearest<'a>(name: &str, names: &[&'a str]) -> Option<&'a str> {
    let fold = |s: &str| s.to_lowercase().replace('_', "-");
    let folded = fold(name);
    if let Some(same) = names.iter().find(|n| fold(n) == folded) {
        return Some(same);
    }
    names
        .iter()
        .map(|n| (edit_distance(&folded, &fold(n)), *n))
        .filter(|(d, _)| *d <= folded.chars().count().div_ceil(3))
        .min()
        .map(|(_, n)| n)
}

/// Levenshtein's distance between `a` and `b`, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (diagonal + usize::from(ca != *cb)).min(row[j] + 1).min(above + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The workspace: `cwd` or the current directory, made absolute; it must be a directory.
pub fn workspace(cwd: Option<PathBuf>) -> anyhow::Result<PathBuf> {
    let cwd = match cwd {
        Some(cwd) => cwd,
        None => std::env::current_dir().context("cannot determine the current directory")?,
    };
    if !cwd.is_dir() {
        anyhow::bail!("the workspace {} is not a directory", cwd.display());
    }
    Ok(std::path::absolute(&cwd).unwrap_or(cwd))
}

/// Run the command line of this process: parse its arguments, run the command, and end as it says (2 when it
/// failed with an error, printed to stderr).
pub fn main() -> ExitCode {
    // Colour only for a person reading a terminal (and not with `NO_COLOR`): escape codes in a log file or a
    // client's captured stderr are noise.
    let colour =
        std::io::IsTerminal::is_terminal(&std::io::stderr()) && std::env::var_os("NO_COLOR").is_none();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("TOOLWRIGHT_LOG"))
        .with_writer(std::io::stderr)
        .with_ansi(colour)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Exec(args) => exec::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Plugins(args) => plugins::run(args),
        Command::Tools(args) => registry::tools(args),
        Command::Prompt(args) => registry::prompt(args),
        Command::Declarations(args) => registry::declarations(args),
        Command::Mcp(args) => mcp::run(args),
        Command::Dev(args) => dev::run(args),
        Command::McpServers(args) => mcp_servers::run(args),
        Command::Check(args) => check::run(args),
        Command::New(args) => new::run(args),
        Command::Cache(args) => cache::run(args),
        Command::Wit(args) => wit::run(args),
        Command::Trust(args) => trust::run(args),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("toolwright: {error:#}");
            }
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_in_a_plugin_name_finds_the_name_meant() {
        let names = ["rust-plugin", "word-count", "guard"];
        assert_eq!(nearest("rust_plugin", &names), Some("rust-plugin"));
        assert_eq!(nearest("Word_Count", &names), Some("word-count"));
        assert_eq!(nearest("gaurd", &names), Some("guard"));
        assert_eq!(nearest("something-else", &names), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}

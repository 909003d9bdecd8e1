//! Command-line parsing and dispatch. Only the binary uses `clap` and `anyhow`.

mod exec;
mod mcp;
mod plugins;
mod registry;

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
    /// List the plugins: versions, tools, what each requests and why, and what failed to load.
    Plugins(plugins::PluginsArgs),
    /// List every registered tool: source, exposure, whether it is active, declared and callable, annotations,
    /// and a plugin's grants.
    Tools(registry::ToolsArgs),
    /// Print the system prompt's tool sections (`<tools>` and `<rules>`) for the active tools.
    Prompt(registry::PromptArgs),
    /// Print the tool declarations a provider request would carry, as JSON.
    Declarations(registry::DeclarationsArgs),
    /// Serve the active tools over the Model Context Protocol on stdin/stdout (logs go to stderr).
    Mcp(mcp::McpArgs),
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
        options
    }

    /// Load the tools for `cwd`, reporting plugins that failed to load on stderr.
    pub fn load(&self, cwd: &std::path::Path) -> anyhow::Result<toolwright::toolset::Toolset> {
        let options = self.options(cwd);
        let toolset = toolwright::toolset::Toolset::load(&options)?;
        #[allow(clippy::print_stderr)]
        {
            for error in &toolset.errors {
                eprintln!("toolwright: skipped: {error}");
            }
            for (tool, path) in &toolset.overrides {
                eprintln!(
                    "toolwright: the built-in `{tool}` is replaced by the plugin {}",
                    path.display()
                );
            }
        }
        Ok(toolset)
    }
}

impl ToolArgs {
    /// The selection these options make. The default selection is every built-in (pi's is `read`, `bash`,
    /// `edit` and `write`; `exec`'s contract makes all seven callable).
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
                toolwright::builtins::NAMES
                    .iter()
                    .map(|s| s.to_string())
                    .collect(),
            ),
        }
    }

    /// The session for `cwd` with these options, running batches in `mode`: plugins that failed to load,
    /// built-ins replaced by plugins and failed loadout hooks reported on stderr.
    pub fn session(
        &self,
        cwd: &std::path::Path,
        mode: toolwright::ExecutionMode,
    ) -> anyhow::Result<toolwright::Session> {
        let mut builder = toolwright::Session::builder(cwd)
            .options(self.options(cwd))
            .selection(self.selection())
            .execution_mode(mode);
        for (tool, exposure) in &self.expose {
            builder = builder.expose(tool.clone(), *exposure);
        }
        let session = builder.build().map_err(|e| match e {
            toolwright::SessionError::UnknownTool(tool) => {
                anyhow::anyhow!("--expose: there is no tool named `{tool}`")
            }
            other => anyhow::Error::new(other),
        })?;
        #[allow(clippy::print_stderr)]
        {
            let toolset = session.toolset();
            for error in &toolset.errors {
                eprintln!("toolwright: skipped: {error}");
            }
            for (tool, path) in &toolset.overrides {
                eprintln!(
                    "toolwright: the built-in `{tool}` is replaced by the plugin {}",
                    path.display()
                );
            }
            for error in session.registry().update(|r| r.take_loadout_errors()) {
                eprintln!(
                    "toolwright: the loadout hook of `{}` ({}) failed: {}",
                    error.tool, error.extension_path, error.error
                );
            }
        }
        Ok(session)
    }
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

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("TOOLWRIGHT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Exec(args) => exec::run(args),
        Command::Plugins(args) => plugins::run(args),
        Command::Tools(args) => registry::tools(args),
        Command::Prompt(args) => registry::prompt(args),
        Command::Declarations(args) => registry::declarations(args),
        Command::Mcp(args) => mcp::run(args),
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

//! Command-line parsing and dispatch. Only the binary uses `clap` and `anyhow`.

mod exec;
mod plugins;

use std::process::ExitCode;

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
}

/// Where the tools come from; shared by the commands that run or list tools.
#[derive(Debug, clap::Args)]
pub struct ToolArgs {
    /// A plugin directory; every `.wasm` in it is loaded (repeatable; after the default directories).
    #[arg(long = "plugins", value_name = "DIR")]
    plugin_dirs: Vec<std::path::PathBuf>,
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
    policy_files: Vec<std::path::PathBuf>,
    /// Where compiled plugins are cached (default: `$TOOLWRIGHT_CACHE_DIR` or `~/.cache/toolwright/components`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum BuiltinArg {
    Native,
    Wasm,
}

impl ToolArgs {
    /// Load the tools for `cwd`, reporting plugins that failed to load on stderr.
    pub fn load(&self, cwd: &std::path::Path) -> anyhow::Result<toolwright::toolset::Toolset> {
        let mut options = toolwright::toolset::ToolsetOptions::new(cwd);
        if self.no_default_plugins {
            options.plugin_dirs.clear();
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

pub fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("TOOLWRIGHT_LOG"))
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Exec(args) => exec::run(args),
        Command::Plugins(args) => plugins::run(args),
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

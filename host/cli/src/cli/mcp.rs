//! `toolwright mcp`: the active, declared tools served over the Model Context Protocol on stdio.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use clap::Args;
use toolwright::toolset::{Toolset, ToolsetOptions};

/// Arguments of `toolwright mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The workspace the tools work in (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// How often to look for plugin files added, changed or removed, in milliseconds (0: never).
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    watch_plugins: u64,
    #[command(flatten)]
    tools: super::ToolArgs,
}

/// The plugin files and their sizes and modification times: a change of any is a reason to reload.
fn fingerprint(options: &ToolsetOptions) -> Vec<(PathBuf, u64, Option<SystemTime>)> {
    options
        .plugin_files()
        .into_iter()
        .map(|(path, _)| {
            let meta = std::fs::metadata(&path).ok();
            let size = meta.as_ref().map_or(0, |m| m.len());
            let modified = meta.and_then(|m| m.modified().ok());
            (path, size, modified)
        })
        .collect()
}

pub fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let cwd = super::workspace(args.cwd)?;
    // Nested calls (from plugin tools and codemode) run through the same pipeline; their events are not part of
    // the MCP conversation.
    let session = args.tools.session(&cwd, toolwright::ExecutionMode::Parallel)?;
    let options = session.options().clone();
    let exposures = args.tools.expose.clone();
    let mut seen = fingerprint(&options);
    // The loaded plugins must outlive their tools: the latest reloaded toolset is kept here (the first stays in
    // the session).
    let mut current: Option<Toolset> = None;
    let reload: toolwright::mcp::Reload = Box::new(move || {
        let now = fingerprint(&options);
        if now == seen {
            return None;
        }
        seen = now;
        let mut toolset = match Toolset::load(&options) {
            Ok(toolset) => toolset,
            Err(error) => {
                tracing::warn!("the plugin directories changed but cannot be loaded: {error}");
                return None;
            }
        };
        for error in &toolset.errors {
            tracing::warn!("skipped: {error}");
        }
        // A tool named by --expose may be gone with its plugin: nothing to do for it then.
        for (tool, exposure) in &exposures {
            toolset.set_exposure(tool, *exposure);
        }
        tracing::info!(
            "plugin directories changed: reloaded {} plugin tools",
            toolset.extension_tools.len()
        );
        let plugin_tools = toolset.extension_tools.clone();
        // The old plugins go once their tools are out of the registry (calls in flight hold their own references).
        drop(current.replace(toolset));
        Some(plugin_tools)
    });
    let watch = (args.watch_plugins > 0).then(|| (reload, Duration::from_millis(args.watch_plugins)));
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    let server = toolwright::mcp::McpServer::new(session.dispatcher().clone());
    runtime.block_on(server.serve_stdio_reloading(watch))?;
    drop(session);
    Ok(ExitCode::SUCCESS)
}

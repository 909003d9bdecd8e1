//! `toolwright mcp`: the active, declared tools served over the Model Context Protocol on stdio.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

/// Arguments of `toolwright mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// The workspace the tools work in (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    #[command(flatten)]
    tools: super::ToolArgs,
}

pub fn run(args: McpArgs) -> anyhow::Result<ExitCode> {
    let cwd = super::workspace(args.cwd)?;
    let (toolset, registry) = args.tools.registry(&cwd)?;
    let pipeline = toolset.pipeline(&cwd);
    let runtime = tokio::runtime::Runtime::new().context("cannot start the async runtime")?;
    runtime.block_on(toolwright::mcp::McpServer::new(registry, pipeline).serve_stdio())?;
    // The plugins' runtime lives as long as the server.
    drop(toolset);
    Ok(ExitCode::SUCCESS)
}

//! `toolwright tools`, `toolwright prompt` and `toolwright declarations`: the registry as people and programs see
//! it.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::{Value, json};
use toolwright::definition::ToolSource;
use toolwright::registry::{Registry, ToolInfo};
use toolwright::toolset::Toolset;

/// Arguments of `toolwright tools`.
#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// The workspace (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tools: super::ToolArgs,
}

/// Arguments of `toolwright prompt`.
#[derive(Debug, Args)]
pub struct PromptArgs {
    /// The workspace (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Print `{"tools": …, "rules": …}` (the sections' contents) instead of the tagged text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tools: super::ToolArgs,
}

/// Arguments of `toolwright declarations`.
#[derive(Debug, Args)]
pub struct DeclarationsArgs {
    /// The workspace (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    #[command(flatten)]
    tools: super::ToolArgs,
}

/// The grants of the plugin a tool comes from: `null` for built-ins and embedder tools.
fn grants(toolset: &Toolset, registry: &Registry, info: &ToolInfo) -> Value {
    let Some(ToolSource::Plugin { path }) = registry.definition(&info.name).map(|d| &d.source) else {
        return Value::Null;
    };
    let Some(plugin) = toolset.plugins.iter().find(|p| &p.path == path) else {
        return Value::Null;
    };
    match toolset.grants.iter().find(|(n, _)| *n == plugin.metadata.name) {
        Some((name, effective)) => json!({
            "plugin": name,
            "dirs": effective.dirs.iter().map(|d| json!({"path": d.path, "write": d.write})).collect::<Vec<_>>(),
            "programs": effective.programs,
            "env": effective.env,
            "decisions": effective.decisions,
        }),
        None => Value::Null,
    }
}

pub fn tools(args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let cwd = super::workspace(args.cwd)?;
    let session = args.tools.session(&cwd, Default::default(), None)?;
    let toolset = session.toolset();
    let (infos, granted): (Vec<ToolInfo>, Vec<Value>) = session.registry().read(|registry| {
        let infos = registry.tool_infos();
        let granted = infos.iter().map(|i| grants(toolset, registry, i)).collect();
        (infos, granted)
    });
    let mut out = std::io::stdout().lock();
    if args.json {
        let tools: Vec<Value> = infos
            .iter()
            .zip(&granted)
            .map(|(info, granted)| {
                let mut value = serde_json::to_value(info).unwrap_or(Value::Null);
                value["grants"] = granted.clone();
                if toolwright::builtins::SHELLS.contains(&info.name.as_str())
                    && info.source_info.path.starts_with("builtin:")
                {
                    let (mode, text) = toolwright::toolset::sandbox_summary(&toolset.policy);
                    value["sandbox"] = json!({"mode": mode.name(), "text": text});
                }
                value
            })
            .collect();
        writeln!(out, "{}", serde_json::to_string_pretty(&tools)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let width = infos.iter().map(|i| i.name.len()).max().unwrap_or(4).max(4);
    writeln!(
        out,
        "{:width$}  {:11}  {:18}  {:8}  SOURCE",
        "TOOL", "EXPOSURE", "STATE", "CALLABLE"
    )?;
    for (info, granted) in infos.iter().zip(&granted) {
        let state = match (info.active, info.declared) {
            (true, true) => "active",
            (true, false) => "active, undeclared",
            _ => "inactive",
        };
        let exposure = serde_json::to_value(info.exposure)?;
        let mut hints = Vec::new();
        if let Some(a) = &info.annotations {
            for (flag, name) in [
                (a.read_only_hint, "read-only"),
                (a.destructive_hint, "destructive"),
                (a.idempotent_hint, "idempotent"),
                (a.open_world_hint, "open-world"),
            ] {
                if flag == Some(true) {
                    hints.push(name);
                }
            }
        }
        let hints = if hints.is_empty() {
            String::new()
        } else {
            format!("  [{}]", hints.join(", "))
        };
        writeln!(
            out,
            "{:width$}  {:11}  {:18}  {:8}  {}{hints}",
            info.name,
            exposure.as_str().unwrap_or("direct"),
            state,
            if info.callable { "yes" } else { "no" },
            info.source_info.path,
        )?;
        if let Some(dirs) = granted["dirs"].as_array().filter(|d| !d.is_empty()) {
            let dirs: Vec<String> = dirs
                .iter()
                .map(|d| {
                    let mode = if d["write"] == true { "rw" } else { "ro" };
                    format!("{} ({mode})", d["path"].as_str().unwrap_or(""))
                })
                .collect();
            writeln!(out, "{:width$}  grants: {}", "", dirs.join(", "))?;
        }
        if toolwright::builtins::SHELLS.contains(&info.name.as_str())
            && info.source_info.path.starts_with("builtin:")
        {
            let (_, text) = toolwright::toolset::sandbox_summary(&toolset.policy);
            writeln!(out, "{:width$}  sandbox: {text}", "")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn prompt(args: PromptArgs) -> anyhow::Result<ExitCode> {
    let cwd = super::workspace(args.cwd)?;
    let session = args.tools.session(&cwd, Default::default(), None)?;
    let sections = session.registry().read(|r| r.prompt_sections());
    // pi's `mcp_servers` section follows the tool sections when an MCP server's tools are not declared.
    let mcp = session.toolset().mcp.prompt_section();
    let mut out = std::io::stdout().lock();
    if args.json {
        let mut value = serde_json::to_value(&sections)?;
        if let Some(mcp) = &mcp {
            value["mcpServers"] = Value::String(mcp.clone());
        }
        writeln!(out, "{}", serde_json::to_string_pretty(&value)?)?;
    } else {
        writeln!(out, "{}", sections.render())?;
        if let Some(mcp) = &mcp {
            writeln!(out, "\n{mcp}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn declarations(args: DeclarationsArgs) -> anyhow::Result<ExitCode> {
    let cwd = super::workspace(args.cwd)?;
    let session = args.tools.session(&cwd, Default::default(), None)?;
    let declarations = session.registry().read(|r| r.declarations());
    writeln!(
        std::io::stdout().lock(),
        "{}",
        serde_json::to_string_pretty(&declarations)?
    )?;
    Ok(ExitCode::SUCCESS)
}

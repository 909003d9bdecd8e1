//! `toolwright plugins`: what is loaded, what each plugin requests (with its reasons), and what failed.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::json;
use toolwright::text::escape;
use toolwright::toolset::LoadError;
use toolwright::trust::TrustError;
use toolwright::trust::identity::PinStatus;

/// Arguments of `toolwright plugins`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct PluginsArgs {
    /// Install, approve, update or remove a plugin (without one: list the plugins).
    #[command(subcommand)]
    command: Option<super::install::PluginsCommand>,
    /// The workspace (default: the current directory).
    #[arg(long)]
    cwd: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    tools: super::ToolArgs,
}

/// How the programs granted to a plugin run: confined by Landlock, refused, or unconfined by the policy's
/// choice (none when it has no program).
fn spawn_confinement(e: &toolwright::policy::Effective) -> Option<(&'static str, String)> {
    use toolwright::native::{Confinement, Tcp, landlock_abi};
    if e.programs.is_empty() {
        return None;
    }
    let confinement = Confinement {
        tcp: Tcp::from_patterns(&e.network),
        unconfined_ok: e.unconfined_spawn,
        ..Confinement::default()
    };
    let network = if e.network.is_empty() {
        "no network".to_owned()
    } else {
        let hosts: Vec<String> = e.network.iter().map(ToString::to_string).collect();
        format!(
            "the network only to {} through the host's proxy",
            hosts.join(", ")
        )
    };
    Some(match confinement.unavailable() {
        None => (
            "landlock",
            format!(
                "confined by Landlock (ABI {}) to its own grants and the system's read-only paths, {network}",
                landlock_abi()
            ),
        ),
        Some(why) if e.unconfined_spawn => (
            "unconfined",
            format!("started UNCONFINED: {why}, and the policy sets unconfined-spawn = true"),
        ),
        Some(why) => (
            "refused",
            format!("refused: {why}; unconfined-spawn = true in its policy would start them unconfined"),
        ),
    })
}

/// A third-party plugin's limits when its policy sets none.
const DEFAULT_TIMEOUT_MS: u64 = toolwright::wasm::DEFAULT_TIMEOUT.as_secs() * 1000;
const MAX_MEMORY_MIB: u64 = (toolwright::wasm::MAX_MEMORY >> 20) as u64;

pub fn run(args: PluginsArgs) -> anyhow::Result<ExitCode> {
    if let Some(command) = args.command {
        return super::install::run(command);
    }
    let cwd = super::workspace(args.cwd)?;
    // Problems are this command's report: printed once, here, not also on stderr.
    let toolset = args.tools.load(&cwd)?;
    let problems = args.tools.directory_problems();
    let warnings = super::policy_warnings(&toolset);
    // A plugin skipped or a directory that is not one: the set-up is not what was asked for.
    let code = if toolset.errors.is_empty() && problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    let mut out = std::io::stdout().lock();
    if args.json {
        let plugins: Vec<_> = toolset
            .plugins
            .iter()
            .map(|p| {
                let effective = toolset
                    .grants
                    .iter()
                    .find(|(n, _)| *n == p.metadata.name)
                    .map(|(_, e)| e);
                let grants = effective.map(|e| &e.decisions);
                let limits = effective.map(|e| {
                    json!({
                        "timeoutMs": e.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
                        "memoryMib": e.memory_mib.unwrap_or(MAX_MEMORY_MIB).min(MAX_MEMORY_MIB),
                        "fuel": e.fuel,
                    })
                });
                let identity = toolset.identity(p);
                let programs = effective
                    .and_then(spawn_confinement)
                    .map(|(how, text)| json!({"confinement": how, "text": text}));
                json!({
                    "path": p.path,
                    "name": p.metadata.name,
                    "location": identity.map(|i| i.location),
                    "sha256": identity.map(|i| &i.sha256),
                    "pin": identity.map(|i| &i.pin),
                    "version": p.metadata.version,
                    "description": p.metadata.description,
                    "tools": p.tools.iter().map(|t| &t.name).collect::<Vec<_>>(),
                    "handler": p.is_handler,
                    "requested": p.metadata.capabilities,
                    "decisions": grants,
                    "limits": limits,
                    "programs": programs,
                    "cached": p.compilation == toolwright::wasm::Compilation::Cached,
                    "loadMs": p.load_time.as_secs_f64() * 1000.0,
                })
            })
            .collect();
        // Plugins held by their lockfile, for programs: what changed, and the command that approves it.
        let held: Vec<_> = toolset
            .errors
            .iter()
            .filter_map(|e| match e {
                LoadError::Trust(TrustError::Held {
                    path,
                    name,
                    changes,
                    lockfile,
                }) => Some(json!({
                    "name": name,
                    "path": path,
                    "changes": changes,
                    "lockfile": lockfile,
                    "approve": format!("toolwright plugins approve {name}"),
                })),
                _ => None,
            })
            .collect();
        let mut errors: Vec<String> = toolset.errors.iter().map(ToString::to_string).collect();
        errors.extend(problems.iter().cloned());
        let (mode, text) = toolwright::toolset::sandbox_summary(&toolset.policy);
        let sandbox = json!({"mode": mode.name(), "text": text});
        writeln!(
            out,
            "{}",
            json!({"plugins": plugins, "held": held, "errors": errors, "warnings": warnings,
                "ignoredFromProject": toolset.policy.ignored, "builtinsSandbox": sandbox})
        )?;
        return Ok(code);
    }
    writeln!(
        out,
        "built-ins' sandbox: {}",
        toolwright::toolset::sandbox_summary(&toolset.policy).1
    )?;
    if toolset.plugins.is_empty() && toolset.errors.is_empty() && problems.is_empty() {
        writeln!(
            out,
            "No plugins. Put .wasm files in {} or pass --plugins DIR.",
            cwd.join(".toolwright/plugins").display()
        )?;
    }
    // Names, descriptions, reasons and errors hold what plugins chose: escaped, so that none prints a line of its
    // own or rewrites the ones around it.
    for p in &toolset.plugins {
        let m = &p.metadata;
        let origin = match p.compilation {
            toolwright::wasm::Compilation::Cached => "from the cache",
            toolwright::wasm::Compilation::Compiled => "compiled",
            toolwright::wasm::Compilation::Later => "described from the cache, compiled at its first call,",
        };
        writeln!(
            out,
            "{} {} ({}; {origin} in {:.1} ms)",
            escape(&m.name),
            escape(&m.version),
            escape(&p.path.to_string_lossy()),
            p.load_time.as_secs_f64() * 1000.0
        )?;
        if let Some(identity) = toolset.identity(p) {
            writeln!(
                out,
                "  from: {} ({}); sha256 {}",
                identity.location.as_str(),
                identity.location.describe(),
                identity.sha256
            )?;
            match &identity.pin {
                PinStatus::Unpinned => {}
                PinStatus::Matches => writeln!(out, "  pin: sha256 matches")?,
                PinStatus::Mismatch { pinned, actual } => writeln!(
                    out,
                    "  pin: DOES NOT MATCH: the policy pins sha256 = \"{pinned}\", the file's is {actual}; nothing is \
                     granted until the pin is updated"
                )?,
            }
        }
        if !m.description.is_empty() {
            writeln!(out, "  {}", escape(&m.description))?;
        }
        let tools: Vec<String> = p.tools.iter().map(|t| escape(&t.name).into_owned()).collect();
        if !tools.is_empty() {
            writeln!(out, "  tools: {}", tools.join(", "))?;
        }
        if p.is_handler {
            writeln!(out, "  handler: tool_call / tool_result")?;
        }
        if m.capabilities.is_empty() {
            writeln!(out, "  requests: nothing")?;
        }
        let effective = toolset.grants.iter().find(|(n, _)| *n == m.name).map(|(_, e)| e);
        let decisions = effective.map(|e| &e.decisions);
        if let Some(e) = effective {
            let mut limits = format!(
                "  limits: {} ms per call, {} MiB of memory",
                e.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
                e.memory_mib.unwrap_or(MAX_MEMORY_MIB).min(MAX_MEMORY_MIB)
            );
            if let Some(fuel) = e.fuel {
                limits.push_str(&format!(", {fuel} units of fuel"));
            }
            writeln!(out, "{limits}")?;
            if let Some((_, text)) = spawn_confinement(e) {
                writeln!(out, "  programs: {text}")?;
            }
            let names = |list: &[String]| {
                list.iter()
                    .map(|t| escape(t).into_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            if !e.tools.is_empty() {
                writeln!(out, "  may call: {} (within its own grants)", names(&e.tools))?;
            }
            if !e.rewrite.is_empty() {
                writeln!(out, "  may rewrite the arguments of: {}", names(&e.rewrite))?;
            }
        }
        for (i, c) in m.capabilities.iter().enumerate() {
            writeln!(
                out,
                "  requests: {} (because: {})",
                escape(&c.capability.describe()),
                escape(&c.reason)
            )?;
            match decisions.and_then(|d| d.get(i)) {
                None => writeln!(
                    out,
                    "    granted: the built-ins' default grant (or the policy's [builtins])"
                )?,
                Some(d) => {
                    for g in &d.granted {
                        writeln!(out, "    granted: {}", escape(&g.describe()))?;
                    }
                    if let Some(why) = &d.refused {
                        writeln!(out, "    refused: {}", escape(why))?;
                    }
                }
            }
        }
    }
    for error in &toolset.errors {
        writeln!(out, "{}{}", super::error_head(error), escape(&error.to_string()))?;
    }
    for problem in &problems {
        writeln!(out, "problem: {}", escape(problem))?;
    }
    for warning in &warnings {
        writeln!(out, "warning: {}", escape(warning))?;
    }
    if !toolset.policy.ignored.is_empty() {
        writeln!(
            out,
            "ignored from the project's toolwright.toml (the project is not trusted; `toolwright trust` trusts it \
             as it is now, or grant these in your own toolwright.toml):"
        )?;
        for line in &toolset.policy.ignored {
            writeln!(out, "  {}", escape(line))?;
        }
    }
    Ok(code)
}

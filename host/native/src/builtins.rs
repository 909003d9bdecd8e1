//! The built-in tools: `read`, `bash`, `powershell`, `edit`, `write`, `grep`, `find` and `ls`, pi 1.6.0's
//! semantics, linked natively from their plugin crates and run under the built-ins' default grants. As in pi,
//! `powershell` is registered but not active unless a selection names it ([`ACTIVE_BY_DEFAULT`]).

use std::path::Path;
use std::sync::Arc;

use toolwright_sdk::Tool;

use crate::{NativeEnv, definition};
use toolwright_core::definition::{ToolDefinition, ToolSource, wrap_tool_definition};
use toolwright_core::hooks::{AfterToolCall, AfterToolCallContext, AfterToolCallResult, after_tool_call};
use toolwright_core::pipeline::Work;
use toolwright_core::tool::AgentTool;

/// The built-in tools' names, in pi's order (pi's `allToolNames`).
pub const NAMES: [&str; 8] = [
    "read",
    "bash",
    "powershell",
    "edit",
    "write",
    "grep",
    "find",
    "ls",
];

/// The built-ins the command line and `toolwright::Session::builder` make active when the selection does not
/// say: all but `powershell`, which pi keeps inactive unless asked for
/// (`--allow +powershell`). pi's own default is `read, bash, edit, write`.
pub const ACTIVE_BY_DEFAULT: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The built-in shells (their work may stream and call tools; their programs' hosts may be asked about).
pub use toolwright_core::ask::SHELLS;

/// The built-in tools as SDK tools, in pi's order.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(toolwright_tool_read::Read),
        Arc::new(toolwright_tool_bash::Bash),
        Arc::new(toolwright_tool_powershell::PowerShell),
        Arc::new(toolwright_tool_edit::Edit),
        Arc::new(toolwright_tool_write::Write),
        Arc::new(toolwright_tool_grep::Grep),
        Arc::new(toolwright_tool_find::Find),
        Arc::new(toolwright_tool_ls::Ls),
    ]
}

/// pi's image normalisation of every result (auto-resize on: too large images scaled down, unsupported formats
/// converted), as an `after_tool_call` hook. A session runs it after every other hook, whoever added the
/// images; the structured content is kept.
pub fn normalize_images() -> AfterToolCall {
    after_tool_call(|ctx: AfterToolCallContext, _cancel| async move {
        let content = toolwright_tool_read::normalize_images(&ctx.result.content);
        Ok(content.map(|content| AfterToolCallResult {
            content: Some(content),
            structured_content: ctx.result.structured_content,
            ..Default::default()
        }))
    })
}

/// What the built-in `name`'s work may do, natively or as wasm: [`Work::Short`] for all but the [`SHELLS`], which
/// stream their output as updates ([`Work::Waiting`] natively; as wasm they relay them themselves).
pub fn work(name: &str) -> Work {
    if SHELLS.contains(&name) {
        Work::Waiting
    } else {
        Work::Short
    }
}

/// The built-in tools' definitions, running natively in `env`.
pub fn definitions(env: &NativeEnv) -> Vec<ToolDefinition> {
    tools()
        .into_iter()
        .map(|tool| {
            let work = work(&tool.spec().name);
            definition(tool, env.clone(), ToolSource::Builtin, work)
        })
        .collect()
}

/// The built-in tools for the workspace `cwd`, with their default grants, ready for the pipeline.
pub fn agent_tools(cwd: &Path) -> std::io::Result<Vec<AgentTool>> {
    let env = NativeEnv::builtin(cwd)?;
    Ok(definitions(&env)
        .iter()
        .map(|d| wrap_tool_definition(d, None))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_gives_all_four_mcp_hints() {
        for tool in tools() {
            let spec = toolwright_sdk::declaration(tool.as_ref());
            let a = spec
                .annotations
                .unwrap_or_else(|| panic!("{} has no annotations", spec.name));
            let set = [
                a.read_only_hint,
                a.destructive_hint,
                a.idempotent_hint,
                a.open_world_hint,
            ];
            assert!(set.iter().all(Option::is_some), "{}: {a:?}", spec.name);
            // Read-only and destructive exclude each other.
            assert_ne!(a.read_only_hint, a.destructive_hint, "{}", spec.name);
        }
    }

    #[test]
    fn every_built_in_schema_can_be_enforced() {
        for tool in tools() {
            let spec = toolwright_sdk::declaration(tool.as_ref());
            if let Err(e) = toolwright_core::schema::Validator::new(spec.parameters.clone()) {
                panic!("{}: {e}", spec.name);
            }
        }
    }
}

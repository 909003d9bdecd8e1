//! The built-in tools: `read`, `bash`, `edit`, `write`, `grep`, `find` and `ls`, pi 1.6.0's semantics, linked
//! natively from their plugin crates and run under the built-ins' default grants.

use std::path::Path;
use std::sync::Arc;

use toolwright_sdk::Tool;

use crate::definition::{ToolDefinition, ToolSource, wrap_tool_definition};
use crate::native::{NativeEnv, tool_definition};
use crate::tool::AgentTool;

/// The built-in tools' names, in pi's order.
pub const NAMES: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// The built-in tools as SDK tools, in pi's order.
pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(toolwright_tool_read::Read),
        Arc::new(toolwright_tool_bash::Bash),
        Arc::new(toolwright_tool_edit::Edit),
        Arc::new(toolwright_tool_write::Write),
        Arc::new(toolwright_tool_grep::Grep),
        Arc::new(toolwright_tool_find::Find),
        Arc::new(toolwright_tool_ls::Ls),
    ]
}

/// The built-in tools' definitions, running natively in `env`.
pub fn definitions(env: &NativeEnv) -> Vec<ToolDefinition> {
    tools()
        .into_iter()
        .map(|tool| tool_definition(tool, env.clone(), ToolSource::Builtin))
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

/// The built-in tools compiled as wasm components by `build.rs` (`None` when built with
/// `TOOLWRIGHT_SKIP_WASM_BUILD`).
pub mod wasm {
    include!(concat!(env!("OUT_DIR"), "/builtin_wasm.rs"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_schema_can_be_enforced() {
        for tool in tools() {
            let spec = tool.spec();
            if let Err(e) = crate::schema::Validator::new(spec.parameters.clone()) {
                panic!("{}: {e}", spec.name);
            }
        }
    }
}

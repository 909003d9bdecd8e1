//! The built-in tools, as the pipeline runs them.

use std::path::Path;

use crate::tool::AgentTool;

/// The built-in tools for the workspace `cwd`, in pi's order.
pub fn agent_tools(_cwd: &Path) -> Vec<AgentTool> {
    Vec::new()
}

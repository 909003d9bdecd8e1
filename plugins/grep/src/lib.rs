//! The built-in `grep` tool.
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec};
/// The tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Grep;
impl Tool for Grep {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "grep".into(),
            label: "grep".into(),
            parameters: serde_json::json!({"type":"object"}),
            ..Default::default()
        }
    }
    fn execute(&self, _: &str, _: serde_json::Value, _: &dyn Ctx) -> Result<ToolResult, ToolError> {
        Err(ToolError::new("not yet"))
    }
}

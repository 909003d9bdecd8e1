//! The built-in `find` tool.
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec};
/// The tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Find;
impl Tool for Find {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "find".into(),
            label: "find".into(),
            parameters: serde_json::json!({"type":"object"}),
            ..Default::default()
        }
    }
    fn execute(&self, _: &str, _: serde_json::Value, _: &dyn Ctx) -> Result<ToolResult, ToolError> {
        Err(ToolError::new("not yet"))
    }
}

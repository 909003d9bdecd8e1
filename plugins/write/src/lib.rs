//! # toolwright-tool-write
//!
//! pi 1.6.0's `write` tool: write a whole file, creating missing parent directories.
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_tool_write::Write.spec().name, "write");
//! ```

use serde_json::{Value, json};
use toolwright_sdk::arguments::{self, Unchecked};
use toolwright_sdk::{Ctx, FileMutations, Tool, ToolError, ToolResult, ToolSpec, paths};

/// The `write` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Write;

impl Tool for Write {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write".into(),
            label: "write".into(),
            description: "Write content to a file. Creates the file if it doesn't exist, overwrites if it does. Automatically creates parent directories.".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Path to the file to write (relative or absolute)"},
                    "content": {"type": "string", "description": "Content to write to the file"}
                },
                "required": ["path", "content"]
            }),
            prompt_snippet: Some("Create or overwrite files".into()),
            prompt_guidelines: vec!["Use write only for new files or complete rewrites.".into()],
            constrained_sampling: Some(json!({"type": "json_schema", "strict": "prefer"})),
            // MCP's hints for clients that decide what to auto-approve (README, "Serving MCP clients").
            annotations: Some(toolwright_sdk::ToolAnnotations::hints(false, true, true, false)),
            ..Default::default()
        }
    }

    fn file_mutations(&self) -> Option<&dyn FileMutations> {
        Some(self)
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        // pi checks in this order: destructuring, the path (resolveToCwd), then Node's `data` check, which pi
        // meets after creating the parent directories; here nothing is created for a call that cannot write.
        let Args { path, content } = arguments::destructure(args, "path")?;
        let path = path.path()?;
        let content = content.data()?;
        let absolute = paths::resolve_to_cwd(path, ctx.cwd(), ctx.home().as_deref());
        let dir = paths::parent(&absolute);
        let aborted = || {
            if ctx.is_cancelled() {
                Err(ToolError::new("Operation aborted"))
            } else {
                Ok(())
            }
        };
        aborted()?;
        ctx.files()
            .create_dir_all(dir)
            .map_err(|e| ToolError::io(&e, "mkdir", dir))?;
        aborted()?;
        ctx.files()
            .write(&absolute, content.as_bytes())
            .map_err(|e| ToolError::io(&e, "open", &absolute))?;
        aborted()?;
        Ok(ToolResult::text(format!("Successfully wrote to {path}")))
    }
}

/// The arguments of `write`, as pi destructures them.
#[derive(serde::Deserialize)]
struct Args {
    #[serde(default)]
    path: Unchecked,
    #[serde(default)]
    content: Unchecked,
}

impl FileMutations for Write {
    // By hand: a typed read would copy the whole arguments (the content too) to learn the path.
    fn mutated_path(&self, args: &Value) -> Option<String> {
        args.get("path").and_then(Value::as_str).map(str::to_owned)
    }
}

toolwright_sdk::export_tool!(Write; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read("/".into()), "reads the file before changing it"),
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Write(".".into()), "writes the files the model asks for, inside the workspace"),
]);

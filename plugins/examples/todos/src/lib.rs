//! # toolwright-example-todos
//!
//! A tool plugin that needs a grant: `todos` lists the `TODO` lines of the workspace's files. It requests read
//! access to the workspace (`.`), with a reason; until a policy grants it, every call fails with a clear
//! error. Grant it in `toolwright.toml`:
//!
//! ```toml
//! [plugins.toolwright-example-todos]
//! read = ["."]
//! ```
//!
//! ```
//! use toolwright_sdk::Tool;
//! assert_eq!(toolwright_example_todos::Todos.spec().name, "todos");
//! ```

use serde_json::{Value, json};
use toolwright_sdk::{Ctx, Tool, ToolError, ToolResult, ToolSpec, paths};

/// The `todos` tool.
#[derive(Debug, Clone, Copy, Default)]
pub struct Todos;

/// Files larger than this are skipped (binary blobs, logs).
const MAX_FILE: u64 = 1 << 20;

impl Tool for Todos {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "todos".into(),
            label: "todos".into(),
            description: "List the TODO comments of the workspace, as path:line: text.".into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string", "description": "Directory to scan (default: the workspace)"}}}),
            ..Default::default()
        }
    }

    fn execute(&self, _call_id: &str, args: Value, ctx: &dyn Ctx) -> Result<ToolResult, ToolError> {
        let root = paths::resolve_to_cwd(args["path"].as_str().unwrap_or("."), ctx.cwd(), None);
        let mut found = Vec::new();
        let mut stack = vec![root.clone()];
        while let Some(dir) = stack.pop() {
            if ctx.is_cancelled() {
                return Err(ToolError::new("Operation aborted"));
            }
            let mut names = ctx
                .files()
                .read_dir(&dir)
                .map_err(|e| ToolError::io(&e, "scandir", &dir))?;
            names.sort();
            for name in names.into_iter().filter(|n| !n.starts_with('.')) {
                let path = paths::join(&dir, &name);
                let Ok(meta) = ctx.files().metadata(&path) else {
                    continue;
                };
                if meta.is_dir() {
                    stack.push(path);
                } else if meta.is_file()
                    && meta.len <= MAX_FILE
                    && let Ok(bytes) = ctx.files().read(&path)
                {
                    for (i, line) in String::from_utf8_lossy(&bytes).lines().enumerate() {
                        if let Some(at) = line.find("TODO") {
                            found.push(format!(
                                "{}:{}: {}",
                                paths::relative(&root, &path),
                                i + 1,
                                line[at..].trim()
                            ));
                        }
                    }
                }
            }
        }
        if found.is_empty() {
            return Ok(ToolResult::text("No TODOs found"));
        }
        found.sort();
        Ok(ToolResult::text(found.join("\n")))
    }
}

toolwright_sdk::export_tool!(Todos; capabilities = [
    toolwright_sdk::CapabilityRequest::new(toolwright_sdk::Capability::Read(".".into()), "scans the workspace's files for TODO comments"),
]);

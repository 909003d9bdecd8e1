//! # toolwright-example-guard
//!
//! A handler plugin: it sits in the call path of every tool (pi's `tool_call` and `tool_result` hooks).
//!
//! - `bash` commands containing `rm -rf` are blocked, with a reason the model sees;
//! - a leading `sudo ` is dropped from `bash` commands (the arguments are rewritten);
//! - `SECRET=…` values in text results are replaced by `SECRET=[redacted]`.
//!
//! Arguments containing `__guard_trap__`, or a result containing `__guard_trap_result__`, make it panic, which
//! shows how the host treats a failing handler: the call is blocked (`tool_call`), or the handler is skipped
//! (`tool_result`).
//!
//! ```
//! use toolwright_sdk::{Handler, ToolCallDecision, ToolCallEvent};
//! let event = ToolCallEvent {
//!     tool_name: "bash".into(),
//!     tool_call_id: "c1".into(),
//!     parent_tool_call_id: None,
//!     input: serde_json::json!({"command": "rm -rf /"}),
//! };
//! assert!(matches!(toolwright_example_guard::Guard.tool_call(&event), ToolCallDecision::Block { .. }));
//! ```

use serde_json::Value;
use toolwright_sdk::{Content, Handler, ToolCallDecision, ToolCallEvent, ToolResultChanges, ToolResultEvent};

/// The guard.
#[derive(Debug, Clone, Copy, Default)]
pub struct Guard;

fn trap_requested(value: &Value) -> bool {
    value.to_string().contains("__guard_trap__")
}

impl Handler for Guard {
    fn tool_call(&self, event: &ToolCallEvent) -> ToolCallDecision {
        assert!(!trap_requested(&event.input), "guard asked to fail");
        if event.tool_name != "bash" {
            return ToolCallDecision::Allow;
        }
        let command = event.input["command"].as_str().unwrap_or_default();
        if command.contains("rm -rf") {
            return ToolCallDecision::Block {
                reason: Some("guard: recursive deletes are not allowed".into()),
                terminate: false,
            };
        }
        match command.strip_prefix("sudo ") {
            Some(rest) => {
                let mut input = event.input.clone();
                input["command"] = Value::String(rest.to_owned());
                ToolCallDecision::Rewrite(input)
            }
            None => ToolCallDecision::Allow,
        }
    }

    fn tool_result(&self, event: &ToolResultEvent) -> Option<ToolResultChanges> {
        let text: String = event.content.iter().filter_map(Content::as_text).collect();
        assert!(!text.contains("__guard_trap_result__"), "guard asked to fail");
        let mut changed = false;
        let content = event
            .content
            .iter()
            .map(|block| match block {
                Content::Text { text } if text.contains("SECRET=") => {
                    changed = true;
                    Content::text(redact(text))
                }
                other => other.clone(),
            })
            .collect();
        changed.then(|| ToolResultChanges {
            content: Some(content),
            ..Default::default()
        })
    }
}

/// Every `SECRET=value` (up to the end of the word) becomes `SECRET=[redacted]`.
fn redact(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("SECRET=") {
        out.push_str(&rest[..i + 7]);
        out.push_str("[redacted]");
        let after = &rest[i + 7..];
        let end = after.find(char::is_whitespace).unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

toolwright_sdk::export_handler!(Guard);

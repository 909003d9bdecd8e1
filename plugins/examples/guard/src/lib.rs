//! # toolwright-example-guard
//!
//! A handler plugin in the call path of every tool (pi's `tool_call` hook):
//!
//! - `bash` commands containing `rm -rf` are blocked, with a reason the model sees;
//! - a leading `sudo ` is dropped from `bash` commands (the arguments are rewritten).
//!
//! Arguments containing `__guard_fail__` make it fail with the message `guard asked to fail`, which shows how
//! the host treats a failing `tool_call` handler: the call is blocked and the model sees the message, as pi shows
//! a throwing extension's; arguments containing `__guard_trap__` make it panic, a trap, which blocks the call
//! with the host's text. It asks for no capability: a handler sees the calls whatever it is granted, and
//! may block any; its rewrite of `bash` takes effect only where the user grants it
//! (`[plugins.toolwright-example-guard] rewrite = ["bash"]`), else the rewritten call is blocked.
//!
//! ```
//! use toolwright_sdk::{Handler, ToolCallDecision, ToolCallEvent};
//! let event = ToolCallEvent {
//!     tool_name: "bash".into(),
//!     tool_call_id: "c1".into(),
//!     parent_tool_call_id: None,
//!     input: serde_json::json!({"command": "rm -rf /"}),
//! };
//! assert!(matches!(toolwright_example_guard::Guard.tool_call(&event), Ok(ToolCallDecision::Block { .. })));
//! ```

use serde_json::Value;
use toolwright_sdk::{Handler, ToolCallDecision, ToolCallEvent, ToolError};

/// The guard.
#[derive(Debug, Clone, Copy, Default)]
pub struct Guard;

/// Whether `value` holds the word `word` anywhere.
fn asks(value: &Value, word: &str) -> bool {
    value.to_string().contains(word)
}

impl Handler for Guard {
    fn tool_call(&self, event: &ToolCallEvent) -> Result<ToolCallDecision, ToolError> {
        assert!(!asks(&event.input, "__guard_trap__"), "guard asked to trap");
        if asks(&event.input, "__guard_fail__") {
            return Err(ToolError::new("guard asked to fail"));
        }
        if event.tool_name != "bash" {
            return Ok(ToolCallDecision::Allow);
        }
        let command = event.input["command"].as_str().unwrap_or_default();
        if command.contains("rm -rf") {
            return Ok(ToolCallDecision::Block {
                reason: Some("guard: recursive deletes are not allowed".into()),
                terminate: false,
            });
        }
        Ok(match command.strip_prefix("sudo ") {
            Some(rest) => {
                let mut input = event.input.clone();
                input["command"] = Value::String(rest.to_owned());
                ToolCallDecision::Rewrite(input)
            }
            None => ToolCallDecision::Allow,
        })
    }
}

toolwright_sdk::export_handler!(Guard);

//! # toolwright-example-guard
//!
//! A handler plugin in the call path of every tool (pi's `tool_call` hook):
//!
//! - `bash` commands containing `rm -rf` are blocked, with a reason the model sees;
//! - a leading `sudo ` is dropped from `bash` commands (the arguments are rewritten).
//!
//! Arguments containing `__guard_trap__` make it panic, which shows how the host treats a failing `tool_call`
//! handler: the call is blocked. It asks for no capability: a handler sees the calls whatever it is granted, and
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
//! assert!(matches!(toolwright_example_guard::Guard.tool_call(&event), ToolCallDecision::Block { .. }));
//! ```

use serde_json::Value;
use toolwright_sdk::{Handler, ToolCallDecision, ToolCallEvent};

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
}

toolwright_sdk::export_handler!(Guard);

//! The [`Handler`] trait: a plugin in the call path (pi's `tool_call` and `tool_result` hooks).

use serde_json::Value;

use crate::{Content, PluginMetadata, Usage};

/// A call about to execute, after validation.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallEvent {
    /// The tool.
    pub tool_name: String,
    /// The call id.
    pub tool_call_id: String,
    /// The calling tool's call id, for nested calls.
    pub parent_tool_call_id: Option<String>,
    /// The validated arguments (as rewritten by earlier handlers).
    pub input: Value,
}

/// What a `tool_call` handler decides.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum ToolCallDecision {
    /// Let the call run.
    #[default]
    Allow,
    /// Block it: the model sees `reason` (or `Tool execution was blocked`).
    Block {
        /// The text the model sees.
        reason: Option<String>,
        /// Vote to end the run after this batch.
        terminate: bool,
    },
    /// Let it run with these arguments (not validated again).
    Rewrite(Value),
}

/// A call that executed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolResultEvent {
    /// The tool.
    pub tool_name: String,
    /// The call id.
    pub tool_call_id: String,
    /// The calling tool's call id, for nested calls.
    pub parent_tool_call_id: Option<String>,
    /// The arguments it ran with.
    pub input: Value,
    /// Its content (as changed by earlier handlers).
    pub content: Vec<Content>,
    /// Its details.
    pub details: Option<Value>,
    /// Its structured content.
    pub structured_content: Option<Value>,
    /// Its error flag.
    pub is_error: bool,
    /// Its usage.
    pub usage: Option<Usage>,
}

/// Replacements for a result; `None` keeps a field. Replacing `content` without giving `structured_content`
/// drops the structured content, as in pi.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolResultChanges {
    /// New content.
    pub content: Option<Vec<Content>>,
    /// New details.
    pub details: Option<Value>,
    /// New structured content.
    pub structured_content: Option<Value>,
    /// New error flag.
    pub is_error: Option<bool>,
    /// New usage.
    pub usage: Option<Usage>,
}

/// A handler plugin: sees every call before it executes and every result before the model does.
pub trait Handler: Send + Sync {
    /// What the plugin is; by default the crate's name, version and description (set by `export_handler!`).
    fn metadata(&self) -> Option<PluginMetadata> {
        None
    }

    /// pi's `tool_call`: allow, block with a reason, or rewrite the arguments.
    fn tool_call(&self, event: &ToolCallEvent) -> ToolCallDecision {
        let _ = event;
        ToolCallDecision::Allow
    }

    /// pi's `tool_result`: changes to the result, or `None` to leave it.
    fn tool_result(&self, event: &ToolResultEvent) -> Option<ToolResultChanges> {
        let _ = event;
        None
    }
}

//! The [`Handler`] trait: a plugin in the call path (pi's `tool_call` and `tool_result` hooks).

use serde_json::Value;

use crate::{Content, PluginMetadata, ToolError, Usage};

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
///
/// A hook that returns an error fails as a pi extension handler that throws: a failing `tool_call` blocks the
/// call, and the model sees the error's message (exactly, as pi's `throw new Error(message)`); a failing
/// `tool_result` leaves the result as it was and is reported in the host's log. A panic is a trap: the call is
/// blocked (or the result kept) with the host's text for it, not the plugin's.
///
/// ```
/// use toolwright_sdk::{Handler, ToolCallDecision, ToolCallEvent, ToolError};
///
/// struct OnlyWorkspace;
///
/// impl Handler for OnlyWorkspace {
///     fn tool_call(&self, event: &ToolCallEvent) -> Result<ToolCallDecision, ToolError> {
///         let Some(path) = event.input.get("path") else { return Ok(ToolCallDecision::Allow) };
///         let path = path.as_str().ok_or("only-workspace: `path` is not a string")?;
///         if path.starts_with('/') {
///             return Ok(ToolCallDecision::Block {
///                 reason: Some(format!("only-workspace: {path} is outside the workspace")),
///                 terminate: false,
///             });
///         }
///         Ok(ToolCallDecision::Allow)
///     }
/// }
///
/// let call = |input| ToolCallEvent {
///     tool_name: "read".into(),
///     tool_call_id: "c1".into(),
///     parent_tool_call_id: None,
///     input,
/// };
/// let error = OnlyWorkspace.tool_call(&call(serde_json::json!({"path": 7}))).unwrap_err();
/// assert_eq!(error.message(), "only-workspace: `path` is not a string");
/// ```
pub trait Handler: Send + Sync {
    /// What the plugin is; by default the crate's name, version and description (set by `export_handler!`).
    fn metadata(&self) -> Option<PluginMetadata> {
        None
    }

    /// pi's `tool_call`: allow, block with a reason, or rewrite the arguments; an error blocks the call with
    /// its message.
    fn tool_call(&self, event: &ToolCallEvent) -> Result<ToolCallDecision, ToolError> {
        let _ = event;
        Ok(ToolCallDecision::Allow)
    }

    /// pi's `tool_result`: changes to the result, or `None` to leave it; an error leaves it too, and is
    /// reported.
    fn tool_result(&self, event: &ToolResultEvent) -> Result<Option<ToolResultChanges>, ToolError> {
        let _ = event;
        Ok(None)
    }
}

//! The two hook points of the pipeline (pi's `beforeToolCall` and `afterToolCall`), as a Rust API.
//!
//! Embedders pass closures; later, handler plugins and policies plug into the same two points.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::tool::{BoxFuture, ToolError};
use crate::types::{AgentToolResult, AssistantMessage, Content, ToolCall, Usage};

/// What a `before_tool_call` hook sees: the call after validation, before execution.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct BeforeToolCallContext {
    /// The assistant message carrying the batch.
    pub assistant_message: Arc<AssistantMessage>,
    /// The raw tool call, as the model issued it (before `prepareArguments`).
    pub tool_call: ToolCall,
    /// The validated, coerced arguments that `execute` will receive.
    pub args: Value,
    /// The calling tool's call id, for nested calls only.
    pub parent_tool_call_id: Option<String>,
}

/// What a `before_tool_call` hook decides.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BeforeToolCallResult {
    /// Block the call: it becomes an error result and does not execute.
    pub block: bool,
    /// Why; the model sees it. Empty or `None` gives `Tool execution was blocked`.
    pub reason: Option<String>,
    /// With `block`, vote to end the run after this batch.
    pub terminate: bool,
    /// Replacement arguments for `execute` (pi's in-place mutation of `args`); not validated again.
    pub args: Option<Value>,
}

impl BeforeToolCallResult {
    /// Block the call with a reason.
    pub fn block(reason: impl Into<String>) -> Self {
        BeforeToolCallResult {
            block: true,
            reason: Some(reason.into()),
            ..Default::default()
        }
    }

    /// Let the call run with different arguments.
    pub fn rewrite(args: Value) -> Self {
        BeforeToolCallResult {
            args: Some(args),
            ..Default::default()
        }
    }
}

/// What an `after_tool_call` hook sees: the executed call and its result, before overrides.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct AfterToolCallContext {
    /// The assistant message carrying the batch.
    pub assistant_message: Arc<AssistantMessage>,
    /// The raw tool call.
    pub tool_call: ToolCall,
    /// The arguments `execute` received.
    pub args: Value,
    /// The executed result.
    pub result: AgentToolResult,
    /// The executed error flag.
    pub is_error: bool,
    /// The calling tool's call id, for nested calls only.
    pub parent_tool_call_id: Option<String>,
}

/// Field-by-field replacements an `after_tool_call` hook returns; `None` keeps the executed value.
///
/// Replacing `content` without giving `structured_content` drops the structured content, as in pi.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AfterToolCallResult {
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
    /// New terminate vote.
    pub terminate: Option<bool>,
}

/// A `before_tool_call` hook: `Ok(None)` allows the call unchanged; `Err` blocks it with the error's message.
pub type BeforeToolCall = Arc<
    dyn Fn(
            BeforeToolCallContext,
            CancellationToken,
        ) -> BoxFuture<'static, Result<Option<BeforeToolCallResult>, ToolError>>
        + Send
        + Sync,
>;

/// An `after_tool_call` hook: `Ok(None)` keeps the result; `Err` turns it into an error result.
pub type AfterToolCall = Arc<
    dyn Fn(
            AfterToolCallContext,
            CancellationToken,
        ) -> BoxFuture<'static, Result<Option<AfterToolCallResult>, ToolError>>
        + Send
        + Sync,
>;

/// Make a [`BeforeToolCall`] from an async closure.
pub fn before_tool_call<F, Fut>(f: F) -> BeforeToolCall
where
    F: Fn(BeforeToolCallContext, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<BeforeToolCallResult>, ToolError>> + Send + 'static,
{
    Arc::new(move |ctx, cancel| Box::pin(f(ctx, cancel)))
}

/// Make an [`AfterToolCall`] from an async closure.
pub fn after_tool_call<F, Fut>(f: F) -> AfterToolCall
where
    F: Fn(AfterToolCallContext, CancellationToken) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Option<AfterToolCallResult>, ToolError>> + Send + 'static,
{
    Arc::new(move |ctx, cancel| Box::pin(f(ctx, cancel)))
}

/// pi's `afterToolCall` merge (§7.5): each given field replaces the executed one, shallowly.
pub(crate) fn merge_after(
    result: AgentToolResult,
    is_error: bool,
    after: AfterToolCallResult,
) -> (AgentToolResult, bool) {
    let content_replaced = after.content.is_some();
    let structured_content = match after.structured_content.filter(|v| !v.is_null()) {
        Some(v) => Some(v),
        None if content_replaced => None,
        None => result.structured_content,
    };
    let merged = AgentToolResult {
        content: after.content.unwrap_or(result.content),
        details: after.details.filter(|v| !v.is_null()).or(result.details),
        structured_content,
        usage: after.usage.or(result.usage),
        is_error: result.is_error,
        terminate: after.terminate.or(result.terminate),
    };
    (merged, after.is_error.unwrap_or(is_error))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn executed() -> AgentToolResult {
        AgentToolResult::text("old")
            .with_structured_content(json!({"a": 1}))
            .with_details(json!({"d": 1}))
    }

    #[test]
    fn replacing_content_drops_structured_content_unless_given() {
        let after = AfterToolCallResult {
            content: Some(vec![Content::text("new")]),
            ..Default::default()
        };
        let (r, _) = merge_after(executed(), false, after);
        assert_eq!(r.text_content(), "new");
        assert_eq!(r.structured_content, None);
        assert_eq!(r.details, Some(json!({"d": 1})));

        let after = AfterToolCallResult {
            content: Some(Vec::new()),
            structured_content: Some(json!({"b": 2})),
            ..Default::default()
        };
        let (r, _) = merge_after(executed(), false, after);
        assert!(r.content.is_empty());
        assert_eq!(r.structured_content, Some(json!({"b": 2})));
    }

    #[test]
    fn details_only_and_error_flag() {
        let after = AfterToolCallResult {
            details: Some(json!({"x": 1})),
            is_error: Some(true),
            ..Default::default()
        };
        let (r, is_error) = merge_after(executed(), false, after);
        assert_eq!(r.structured_content, Some(json!({"a": 1})));
        assert_eq!(r.details, Some(json!({"x": 1})));
        assert!(is_error);
    }
}

//! The two hook points of the pipeline (pi's `beforeToolCall` and `afterToolCall`), as a Rust API.
//!
//! Embedders pass closures; handler plugins and pi's image normalisation plug into the same two points. A
//! pipeline has one hook of each kind: several are put in order in a [`HookChain`], never replaced by each other.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::audit::{Stage, Step, Trail, Verdict};
use crate::tool::{BoxFuture, ToolError};
use crate::types::{AssistantMessage, Content, ToolCall, ToolResult, Usage};

/// What the model reads when a hook blocks a call without a reason (pi's text).
pub const BLOCKED: &str = "Tool execution was blocked";

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
    /// The call's decision path for the audit log: a hook that decides for several parties (a handler-plugin
    /// hook, one step per plugin) records its own [`Step`]s; a [`HookChain`] names the others.
    pub trail: Trail,
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
    pub result: ToolResult,
    /// The executed error flag.
    pub is_error: bool,
    /// The calling tool's call id, for nested calls only.
    pub parent_tool_call_id: Option<String>,
    /// The call's decision path for the audit log (see [`BeforeToolCallContext::trail`]).
    pub trail: Trail,
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

/// A hook with the name the audit log gives it.
pub type Named<H> = (String, H);

/// Several hooks of each kind, run in the order they were added (pi runs extension handlers in load order).
///
/// - `before_tool_call`: each hook sees the arguments as the previous hooks left them; the first to block (or
///   fail, which blocks with its message) ends the chain, and later hooks do not run.
/// - `after_tool_call`: each hook sees the result as the previous hooks left it (pi's merge applied after each);
///   a failing hook turns the result into an error result, as a single failing hook does, and ends the chain.
///
/// A session chains, in this order: the embedder's `before_tool_call` hooks, then the handler plugins'
/// `tool_call`; after execution, the embedder's `after_tool_call` hooks, then the handler plugins'
/// `tool_result`, then image normalisation (so the model always gets images it can take).
///
/// Each hook has a name, which the audit log's decision path gives it (`embedder hook 1`, `handler plugins`).
#[derive(Clone, Default)]
pub struct HookChain {
    before: Vec<Named<BeforeToolCall>>,
    after: Vec<Named<AfterToolCall>>,
}

impl std::fmt::Debug for HookChain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HookChain")
            .field("before", &self.before.len())
            .field("after", &self.after.len())
            .finish()
    }
}

impl HookChain {
    /// An empty chain.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a `before_tool_call` hook at the end of the chain (named `before_tool_call hook N` in the audit log).
    pub fn push_before(&mut self, hook: BeforeToolCall) {
        let name = format!("before_tool_call hook {}", self.before.len() + 1);
        self.before.push((name, hook));
    }

    /// Add an `after_tool_call` hook at the end of the chain (named `after_tool_call hook N`).
    pub fn push_after(&mut self, hook: AfterToolCall) {
        let name = format!("after_tool_call hook {}", self.after.len() + 1);
        self.after.push((name, hook));
    }

    /// Add a `before_tool_call` hook named `name` (for the audit log) at the end of the chain.
    pub fn push_before_named(&mut self, name: impl Into<String>, hook: BeforeToolCall) {
        self.before.push((name.into(), hook));
    }

    /// Add an `after_tool_call` hook named `name` at the end of the chain.
    pub fn push_after_named(&mut self, name: impl Into<String>, hook: AfterToolCall) {
        self.after.push((name.into(), hook));
    }

    /// How many hooks of each kind: `(before, after)`.
    pub fn len(&self) -> (usize, usize) {
        (self.before.len(), self.after.len())
    }

    /// The hooks with their names, in order: `(before, after)`.
    pub fn into_parts(self) -> (Vec<Named<BeforeToolCall>>, Vec<Named<AfterToolCall>>) {
        (self.before, self.after)
    }

    /// Whether the chain has no hook.
    pub fn is_empty(&self) -> bool {
        self.before.is_empty() && self.after.is_empty()
    }

    /// The `before_tool_call` hooks as one (`None` without any). With the call's trail on, each hook that
    /// records no step of its own gets one with its name and verdict.
    pub fn before_tool_call(&self) -> Option<BeforeToolCall> {
        match self.before.as_slice() {
            [] => None,
            [(name, hook)] => Some(single_before(name.clone(), hook.clone())),
            _ => {
                let hooks = Arc::new(self.before.clone());
                Some(Arc::new(
                    move |ctx: BeforeToolCallContext, cancel: CancellationToken| {
                        let hooks = hooks.clone();
                        Box::pin(async move {
                            let mut args = ctx.args.clone();
                            for (name, hook) in hooks.iter() {
                                let mut seen = ctx.clone();
                                seen.args = args.clone();
                                let recorded = ctx.trail.steps_len();
                                let decision = recording_panic(
                                    &ctx.trail,
                                    name,
                                    Stage::Before,
                                    hook(seen, cancel.clone()),
                                )
                                .await;
                                if ctx.trail.is_on() && ctx.trail.steps_len() == recorded {
                                    ctx.trail.step(before_step(name, &decision, &args));
                                }
                                match decision? {
                                    Some(decision) if decision.block => return Ok(Some(decision)),
                                    Some(BeforeToolCallResult { args: Some(new), .. }) => args = new,
                                    Some(_) | None => {}
                                }
                            }
                            Ok((args != ctx.args).then(|| BeforeToolCallResult::rewrite(args)))
                        })
                    },
                ))
            }
        }
    }

    /// The `after_tool_call` hooks as one (`None` without any). With the call's trail on, each hook that
    /// changed the result or failed, and recorded no step of its own, gets a step with its name.
    pub fn after_tool_call(&self) -> Option<AfterToolCall> {
        match self.after.as_slice() {
            [] => None,
            [(name, hook)] => Some(single_after(name.clone(), hook.clone())),
            _ => {
                let hooks = Arc::new(self.after.clone());
                Some(Arc::new(
                    move |ctx: AfterToolCallContext, cancel: CancellationToken| {
                        let hooks = hooks.clone();
                        Box::pin(async move {
                            let (mut result, mut is_error) = (ctx.result.clone(), ctx.is_error);
                            let mut changed = false;
                            for (name, hook) in hooks.iter() {
                                let mut seen = ctx.clone();
                                seen.result = result.clone();
                                seen.is_error = is_error;
                                let recorded = ctx.trail.steps_len();
                                let outcome = recording_panic(
                                    &ctx.trail,
                                    name,
                                    Stage::After,
                                    hook(seen, cancel.clone()),
                                )
                                .await;
                                if ctx.trail.is_on() && ctx.trail.steps_len() == recorded {
                                    after_step(&ctx.trail, name, &outcome);
                                }
                                if let Some(after) = outcome? {
                                    (result, is_error) = merge_after(result, is_error, after);
                                    changed = true;
                                }
                            }
                            // The whole outcome, so that the pipeline's one merge gives exactly this result.
                            Ok(changed.then(|| AfterToolCallResult {
                                content: Some(result.content),
                                details: result.details,
                                structured_content: result.structured_content,
                                is_error: Some(is_error),
                                usage: result.usage,
                                terminate: result.terminate,
                            }))
                        })
                    },
                ))
            }
        }
    }
}

/// Await a hook's `future`; should it panic, record a failed step under its `name` (with the trail on) before
/// the panic goes on to the pipeline, which turns it into the call's error.
async fn recording_panic<T>(trail: &Trail, name: &str, stage: Stage, future: BoxFuture<'static, T>) -> T {
    use futures::FutureExt;
    match std::panic::AssertUnwindSafe(future).catch_unwind().await {
        Ok(value) => value,
        Err(panic) => {
            trail.step(Step::new(name, stage, Verdict::Failed).with_reason("panicked"));
            std::panic::resume_unwind(panic)
        }
    }
}

/// A chain of one `before_tool_call` hook: the hook itself, its step recorded when the trail is on.
fn single_before(name: String, hook: BeforeToolCall) -> BeforeToolCall {
    Arc::new(move |ctx: BeforeToolCallContext, cancel: CancellationToken| {
        if !ctx.trail.is_on() {
            return hook(ctx, cancel);
        }
        let (trail, args, name, hook) = (ctx.trail.clone(), ctx.args.clone(), name.clone(), hook.clone());
        Box::pin(async move {
            let recorded = trail.steps_len();
            let decision = recording_panic(&trail, &name, Stage::Before, hook(ctx, cancel)).await;
            if trail.steps_len() == recorded {
                trail.step(before_step(&name, &decision, &args));
            }
            decision
        })
    })
}

/// A chain of one `after_tool_call` hook: the hook itself, a change or failure recorded when the trail is on.
fn single_after(name: String, hook: AfterToolCall) -> AfterToolCall {
    Arc::new(move |ctx: AfterToolCallContext, cancel: CancellationToken| {
        if !ctx.trail.is_on() {
            return hook(ctx, cancel);
        }
        let (trail, name, hook) = (ctx.trail.clone(), name.clone(), hook.clone());
        Box::pin(async move {
            let recorded = trail.steps_len();
            let outcome = recording_panic(&trail, &name, Stage::After, hook(ctx, cancel)).await;
            if trail.steps_len() == recorded {
                after_step(&trail, &name, &outcome);
            }
            outcome
        })
    })
}

/// Record the step of an `after_tool_call` hook named `name` that returned `outcome`: a change or a failure
/// (a hook that kept the result leaves no step).
pub fn after_step(trail: &Trail, name: &str, outcome: &Result<Option<AfterToolCallResult>, ToolError>) {
    match outcome {
        Ok(Some(_)) => trail.step(Step::new(name, Stage::After, Verdict::Changed)),
        Ok(None) => {}
        Err(e) => trail.step(Step::new(name, Stage::After, Verdict::Failed).with_reason(e.message())),
    }
}

/// The step of a `before_tool_call` hook named `name` that decided `decision` on `args`.
pub fn before_step(
    name: &str,
    decision: &Result<Option<BeforeToolCallResult>, ToolError>,
    args: &Value,
) -> Step {
    match decision {
        Err(e) => Step::new(name, Stage::Before, Verdict::Failed).with_reason(e.message()),
        Ok(Some(d)) if d.block => {
            let reason = d.reason.as_deref().filter(|r| !r.is_empty()).unwrap_or(BLOCKED);
            Step::new(name, Stage::Before, Verdict::Blocked).with_reason(reason)
        }
        Ok(Some(BeforeToolCallResult { args: Some(new), .. })) if new != args => {
            Step::new(name, Stage::Before, Verdict::Rewrote)
        }
        Ok(_) => Step::new(name, Stage::Before, Verdict::Allowed),
    }
}

/// pi's `afterToolCall` merge (§7.5): each given field replaces the executed one, shallowly.
pub(crate) fn merge_after(
    result: ToolResult,
    is_error: bool,
    after: AfterToolCallResult,
) -> (ToolResult, bool) {
    let content_replaced = after.content.is_some();
    let structured_content = match after.structured_content.filter(|v| !v.is_null()) {
        Some(v) => Some(v),
        None if content_replaced => None,
        None => result.structured_content,
    };
    let merged = ToolResult {
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

    fn executed() -> ToolResult {
        ToolResult::text("old")
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

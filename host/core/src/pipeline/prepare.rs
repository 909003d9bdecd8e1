//! Preflight of one call (pi's `prepareToolCall`): abort check, lookup, argument shim, validation and the
//! `before_tool_call` hook. The outcome is an immediate error result, or a call ready to execute.

use std::sync::Arc;

use futures::FutureExt;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{Pipeline, texts};
use crate::audit::{Stage, Step, Trail, Verdict};
use crate::hooks::BeforeToolCallContext;
use crate::tool::{AgentTool, ToolError};
use crate::types::{AssistantMessage, ToolCall, ToolResult};
use toolwright_sdk::js;

/// What every step of one call shares.
pub(super) struct CallContext<'a> {
    pub pipeline: &'a Pipeline,
    pub tools: &'a [AgentTool],
    pub assistant: Arc<AssistantMessage>,
    pub cancel: &'a CancellationToken,
    pub parent: Option<String>,
    /// The authority a nested call was made under (none: the host's).
    pub authority: Option<Arc<crate::authority::Authority>>,
}

/// A call that passed preflight.
pub(super) struct Ready {
    pub tool: AgentTool,
    pub args: Value,
    /// The call's decision path and activity, for the audit log.
    pub trail: Trail,
}

/// The outcome of preflight. (Returned once and taken apart at once: boxing the result would only add an
/// allocation to every refused call.)
#[allow(clippy::large_enum_variant)]
pub(super) enum Prepared {
    /// An error result (maybe voting terminate); the call does not execute.
    Immediate(ToolResult),
    /// Execute `tool` with `args`.
    Ready(Ready),
}

pub(super) async fn prepare(ctx: &CallContext<'_>, call: &ToolCall, trail: &Trail) -> Prepared {
    if ctx.cancel.is_cancelled() {
        return Prepared::Immediate(ToolResult::error(texts::OPERATION_ABORTED));
    }
    let Some(tool) = ctx.tools.iter().find(|t| t.name() == call.name) else {
        let error = texts::not_found(&call.name);
        trail.step(Step::new("lookup", Stage::Preflight, Verdict::Refused).with_reason(&error));
        return Prepared::Immediate(ToolResult::error(error));
    };
    // A plugin reaches only the tools its grant names, whatever reaches them for it.
    if let Some(authority) = ctx.authority.as_ref().filter(|a| !a.may_call(&call.name)) {
        let error = authority.refusal(&call.name);
        trail.step(Step::new("authority", Stage::Preflight, Verdict::Refused).with_reason(&error));
        return Prepared::Immediate(ToolResult::error(error));
    }
    match checked(ctx, tool, call, trail).await {
        Ok(prepared) => prepared,
        Err(error) => Prepared::Immediate(ToolResult::error(error.message())),
    }
}

/// `result`, with a refusal by `by` recorded on the trail when it is an error.
fn refusing<T>(trail: &Trail, by: &str, result: Result<T, ToolError>) -> Result<T, ToolError> {
    if let Err(e) = &result {
        trail.step(Step::new(by, Stage::Preflight, Verdict::Refused).with_reason(e.message()));
    }
    result
}

/// The steps inside pi's try/catch: any error becomes an immediate result with its message.
async fn checked(
    ctx: &CallContext<'_>,
    tool: &AgentTool,
    call: &ToolCall,
    trail: &Trail,
) -> Result<Prepared, ToolError> {
    // Without a shim the model's arguments are validated where they are (validation makes its own copy).
    let arguments = match tool.prepare_arguments() {
        Some(shim) => std::borrow::Cow::Owned(refusing(
            trail,
            "prepareArguments",
            guard(&call.name, "prepareArguments", || shim(&call.arguments)),
        )?),
        None => std::borrow::Cow::Borrowed(&call.arguments),
    };
    let args = refusing(trail, "validation", validate(tool, call, &arguments))?;
    let Some(hook) = &ctx.pipeline.before_tool_call else {
        return Ok(Prepared::Ready(Ready {
            tool: tool.clone(),
            args,
            trail: trail.clone(),
        }));
    };
    let hook_ctx = BeforeToolCallContext {
        assistant_message: ctx.assistant.clone(),
        tool_call: call.clone(),
        args: args.clone(),
        parent_tool_call_id: ctx.parent.clone(),
        trail: trail.clone(),
    };
    let recorded = trail.steps_len();
    let decision = std::panic::AssertUnwindSafe(hook(hook_ctx, ctx.cancel.clone()))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(panicked(&call.name, "beforeToolCall", &*panic)));
    // A hook given directly (not through a chain) records no step of its own.
    if trail.is_on() && trail.steps_len() == recorded {
        trail.step(crate::hooks::before_step("before_tool_call", &decision, &args));
    }
    let decision = decision?;
    if ctx.cancel.is_cancelled() {
        return Ok(Prepared::Immediate(ToolResult::error(texts::OPERATION_ABORTED)));
    }
    match decision {
        Some(d) if d.block => {
            let reason = d
                .reason
                .filter(|r| !r.is_empty())
                .unwrap_or_else(|| texts::BLOCKED.into());
            let mut result = ToolResult::error(reason);
            if d.terminate {
                result.terminate = Some(true);
            }
            Ok(Prepared::Immediate(result))
        }
        Some(d) => Ok(Prepared::Ready(Ready {
            tool: tool.clone(),
            args: d.args.unwrap_or(args),
            trail: trail.clone(),
        })),
        None => Ok(Prepared::Ready(Ready {
            tool: tool.clone(),
            args,
            trail: trail.clone(),
        })),
    }
}

/// pi's `validateToolArguments`: the coerced arguments, or the error text the model sees.
fn validate(tool: &AgentTool, call: &ToolCall, arguments: &Value) -> Result<Value, ToolError> {
    if let Some(error) = &call.arguments_error {
        return Err(ToolError::new(texts::invalid_arguments(&call.name, error)));
    }
    // A schema the host cannot enforce fails every call closed (the registry already logged it).
    let validator = tool.validator().map_err(|e| {
        ToolError::new(format!(
            "The tool \"{}\" cannot be called: its parameter schema cannot be enforced: {e}",
            call.name
        ))
    })?;
    validator.parse(arguments).map_err(|errors| {
        let lines: Vec<String> = errors
            .iter()
            .map(|e| format!("  - {}: {}", e.display_path(), e.message))
            .collect();
        ToolError::new(format!(
            "Validation failed for tool \"{}\":\n{}\n\nReceived arguments:\n{}",
            call.name,
            lines.join("\n"),
            js::stringify_pretty(arguments)
        ))
    })
}

/// Runs synchronous tool-supplied code, turning a panic into an error instead of taking the host down.
fn guard<T>(tool: &str, what: &str, f: impl FnOnce() -> Result<T, ToolError>) -> Result<T, ToolError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .unwrap_or_else(|p| Err(panicked(tool, what, &*p)))
}

/// The error a panic in tool or hook code becomes: a host fault reported to the model, never a crash.
pub(super) fn panicked(tool: &str, what: &str, payload: &(dyn std::any::Any + Send)) -> ToolError {
    let message = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    ToolError::new(format!("{what} of tool \"{tool}\" panicked: {message}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::ToolExecution;
    use serde_json::json;

    fn tool(parameters: Value) -> AgentTool {
        AgentTool::new("t", "A tool", parameters, |_run: ToolExecution| async {
            Ok(ToolResult::text("ran"))
        })
    }

    #[test]
    fn a_tool_whose_schema_cannot_be_enforced_fails_every_call_closed() {
        let call = ToolCall::new("c1", "t", json!({}));
        let err = validate(&tool(json!({"$ref": "#"})), &call, &json!({})).unwrap_err();
        assert_eq!(
            err.message(),
            "The tool \"t\" cannot be called: its parameter schema cannot be enforced: the schema at # refers to \
             itself without descending into the value (# -> #)"
        );
        let pattern = json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "(?<"}}});
        let err = validate(&tool(pattern), &call, &json!({"a": "x"})).unwrap_err();
        assert!(
            err.message()
                .contains("the pattern \"(?<\" at #/properties/a/pattern does not compile"),
            "{}",
            err.message()
        );
    }

    #[test]
    fn a_look_ahead_pattern_is_enforced_on_the_arguments() {
        let schema =
            json!({"type": "object", "properties": {"cmd": {"type": "string", "pattern": "^(?!rm )"}}});
        let t = tool(schema);
        let call = ToolCall::new("c1", "t", json!({}));
        assert!(validate(&t, &call, &json!({"cmd": "ls -l"})).is_ok());
        let err = validate(&t, &call, &json!({"cmd": "rm -rf /"})).unwrap_err();
        assert!(
            err.message()
                .starts_with("Validation failed for tool \"t\":\n  - cmd: expected to match ^(?!rm )\n"),
            "{}",
            err.message()
        );
    }
}

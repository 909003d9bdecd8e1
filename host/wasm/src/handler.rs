//! Handler plugins as the pipeline's hooks: `tool_call` handlers run in load order before execution (block,
//! rewrite, allow), `tool_result` handlers in load order after it, with pi's runner semantics (§8.1, §8.2). A
//! handler that fails blocks the call (`tool_call`) or is reported and skipped (`tool_result`), as pi treats
//! throwing extension handlers: a handler's own error (its hook's `err`) is pi's thrown `Error`, its message the
//! text the model sees; a trap or a limit gives the host's text.

use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::ToolError;

mod exports;

pub(crate) use exports::{Exports, Indices};

use crate::gate::{self, Entry};
use crate::grants::WasmGrants;
use crate::plugin::PluginInner;
use crate::{Plugin, bindings, convert};
use toolwright_core::audit::{Stage, Step, Verdict};
use toolwright_core::hooks::{
    AfterToolCall, AfterToolCallContext, AfterToolCallResult, BeforeToolCall, BeforeToolCallContext,
    BeforeToolCallResult, after_tool_call, before_tool_call,
};
use toolwright_core::tool::CallSink;
use toolwright_core::types::ToolResult;

type HandlerList = Arc<Vec<(Arc<PluginInner>, Arc<WasmGrants>)>>;

/// The handler plugins' hooks: `before_tool_call` running `plugins`' `tool_call` handlers in load order, and
/// `after_tool_call` running their `tool_result` handlers (both `None` when none of them is a handler). Each
/// handler runs under its grants (`grants[i]` for the i-th handler). Image normalisation is not part of them:
/// a session chains it after every other hook ([`toolwright_core::hooks::HookChain`]).
pub fn hooks(plugins: &[&Plugin], grants: &[WasmGrants]) -> (Option<BeforeToolCall>, Option<AfterToolCall>) {
    let handlers: Vec<_> = plugins
        .iter()
        .filter(|p| p.is_handler)
        .zip(grants)
        .map(|(p, g)| (p.inner.clone(), Arc::new(g.clone())))
        .collect();
    if handlers.is_empty() {
        return (None, None);
    }
    let handlers: HandlerList = Arc::new(handlers);
    let before = {
        let handlers = handlers.clone();
        before_tool_call(move |ctx, cancel| run_tool_call(handlers.clone(), ctx, cancel))
    };
    let after = after_tool_call(move |ctx, cancel| run_tool_result(handlers.clone(), ctx, cancel));
    (Some(before), Some(after))
}

async fn run_tool_call(
    handlers: HandlerList,
    ctx: BeforeToolCallContext,
    cancel: CancellationToken,
) -> Result<Option<BeforeToolCallResult>, ToolError> {
    let mut args = ctx.args.clone();
    for (plugin, grants) in handlers.iter() {
        let event = bindings::handler::ToolCallEvent {
            tool_name: ctx.tool_call.name.clone(),
            tool_call_id: ctx.tool_call.id.clone(),
            parent_tool_call_id: ctx.parent_tool_call_id.clone(),
            input: args.to_string(),
        };
        let by = format!("handler plugin {}", plugin.name);
        ctx.trail.add_secrets(&grants.env);
        let updates = CallSink::for_trail(ctx.trail.clone(), &by);
        let decision = match tool_call(plugin, grants.clone(), event, cancel.clone(), updates).await {
            Ok(Ok(decision)) => decision,
            // The handler's own error: pi's `throw new Error(message)` in a `tool_call` handler, whose message
            // is the blocked call's text.
            Ok(Err(message)) => {
                ctx.trail
                    .step(Step::new(by, Stage::Before, Verdict::Failed).with_reason(&message));
                return Err(ToolError::new(message));
            }
            Err(e) => {
                ctx.trail
                    .step(Step::new(by, Stage::Before, Verdict::Failed).with_reason(e.message()));
                return Err(e);
            }
        };
        match decision {
            bindings::handler::ToolCallDecision::Allow => {
                ctx.trail.step(Step::new(by, Stage::Before, Verdict::Allowed));
            }
            bindings::handler::ToolCallDecision::Block(block) => {
                let reason = block.reason.as_deref().filter(|r| !r.is_empty());
                ctx.trail.step(
                    Step::new(by, Stage::Before, Verdict::Blocked)
                        .with_reason(reason.unwrap_or(toolwright_core::hooks::BLOCKED)),
                );
                return Ok(Some(BeforeToolCallResult {
                    block: true,
                    reason: block.reason,
                    terminate: block.terminate,
                    args: None,
                }));
            }
            bindings::handler::ToolCallDecision::Rewrite(text) => {
                let tool = &ctx.tool_call.name;
                // A handler narrows, never widens: it rewrites only what its grant names, and never into
                // something that is not an object of arguments.
                if !grants.rewrite.iter().any(|t| t == tool || t == "*") {
                    let reason = format!(
                        "Permission denied: the handler plugin {name} may not rewrite the arguments of {tool}. \
                         A rewrite grant of {tool} in the policy file (toolwright.toml) would allow it \
                         ([plugins.{name}] rewrite = [\"{tool}\"]).",
                        name = plugin.name
                    );
                    return Ok(Some(refuse_rewrite(&ctx, by, reason)));
                }
                let parsed = convert::within_values("arguments", &text)
                    .map_err(|e| format!("JSON too large to parse: {e}"))
                    .and_then(|()| {
                        serde_json::from_str::<Value>(&text).map_err(|e| format!("invalid JSON: {e}"))
                    });
                args = match parsed {
                    Ok(args) if args.is_object() => args,
                    Ok(other) => {
                        let reason = format!(
                            "The handler plugin {} rewrote the arguments of {tool} to {}, not an object: the call \
                             is blocked",
                            plugin.name,
                            toolwright_sdk::arguments::kind(&other)
                        );
                        return Ok(Some(refuse_rewrite(&ctx, by, reason)));
                    }
                    Err(e) => {
                        let error = ToolError::new(format!(
                            "The handler plugin {} rewrote the arguments to {e}",
                            plugin.name
                        ));
                        ctx.trail
                            .step(Step::new(by, Stage::Before, Verdict::Failed).with_reason(error.message()));
                        return Err(error);
                    }
                };
                ctx.trail.step(Step::new(by, Stage::Before, Verdict::Rewrote));
            }
        }
    }
    Ok((args != ctx.args).then(|| BeforeToolCallResult::rewrite(args)))
}

/// A rewrite the handler may not make: the call is blocked with `reason`, on the trail.
fn refuse_rewrite(ctx: &BeforeToolCallContext, by: String, reason: String) -> BeforeToolCallResult {
    ctx.trail
        .step(Step::new(by, Stage::Before, Verdict::Blocked).with_reason(&reason));
    BeforeToolCallResult::block(reason)
}

/// The result as handlers see and change it (pi's working copy of the event).
struct Working {
    content: Vec<toolwright_sdk::Content>,
    details: Option<Value>,
    structured_content: Option<Value>,
    is_error: bool,
    usage: Option<toolwright_sdk::Usage>,
}

async fn run_tool_result(
    handlers: HandlerList,
    ctx: AfterToolCallContext,
    cancel: CancellationToken,
) -> Result<Option<AfterToolCallResult>, ToolError> {
    let mut work = Working {
        content: ctx.result.content.clone(),
        details: ctx.result.details.clone(),
        structured_content: ctx.result.structured_content.clone(),
        is_error: ctx.is_error,
        usage: ctx.result.usage.clone(),
    };
    let mut modified = false;
    for (plugin, grants) in handlers.iter() {
        let current = ToolResult {
            content: work.content.clone(),
            details: work.details.clone(),
            structured_content: work.structured_content.clone(),
            usage: work.usage.clone(),
            ..Default::default()
        };
        let wit = convert::result_to_wit(&current);
        let event = bindings::handler::ToolResultEvent {
            tool_name: ctx.tool_call.name.clone(),
            tool_call_id: ctx.tool_call.id.clone(),
            parent_tool_call_id: ctx.parent_tool_call_id.clone(),
            input: ctx.args.to_string(),
            content: wit.content,
            details: wit.details,
            structured_content: wit.structured_content,
            is_error: work.is_error,
            usage: wit.usage,
        };
        // Error level, not warn: the CLI's default filter (no TOOLWRIGHT_LOG) shows errors only, and a handler
        // that silently stops (say, a redactor) must be seen.
        let by = format!("handler plugin {}", plugin.name);
        ctx.trail.add_secrets(&grants.env);
        let updates = CallSink::for_trail(ctx.trail.clone(), &by);
        let changes = match tool_result(plugin, grants.clone(), event, cancel.clone(), updates).await {
            Ok(Ok(changes)) => changes,
            // The handler's own error (pi's throw in a `tool_result` handler): reported, and the next one runs.
            Ok(Err(message)) => {
                tracing::error!(plugin = %plugin.name, "tool_result handler failed: {message}");
                ctx.trail.step(
                    Step::new(by, Stage::After, Verdict::Failed).with_reason(format!("skipped: {message}")),
                );
                continue;
            }
            Err(error) => {
                tracing::error!(plugin = %plugin.name, "tool_result handler skipped: {}", error.message());
                let skipped = format!("skipped: {}", error.message());
                ctx.trail
                    .step(Step::new(by, Stage::After, Verdict::Failed).with_reason(skipped));
                continue;
            }
        };
        let Some(changes) = changes else { continue };
        match apply(&mut work, changes) {
            Ok(()) => {
                modified = true;
                ctx.trail.step(Step::new(by, Stage::After, Verdict::Changed));
            }
            Err(e) => {
                tracing::error!(plugin = %plugin.name, "tool_result handler skipped: {e}");
                ctx.trail
                    .step(Step::new(by, Stage::After, Verdict::Failed).with_reason(format!("skipped: {e}")));
            }
        }
    }
    if !modified {
        return Ok(None);
    }
    Ok(Some(AfterToolCallResult {
        content: Some(work.content),
        details: work.details,
        structured_content: work.structured_content,
        is_error: Some(work.is_error),
        usage: work.usage,
        terminate: None,
    }))
}

/// pi's runner: new content drops the structured content unless the handler gives one; every other given
/// field replaces the current one.
fn apply(work: &mut Working, changes: bindings::handler::ToolResultChanges) -> Result<(), String> {
    let parsed = convert::result_from_wit(bindings::types::ToolResult {
        content: changes.content.clone().unwrap_or_default(),
        details: changes.details,
        structured_content: changes.structured_content,
        usage: changes.usage,
        is_error: None,
        terminate: None,
    })?;
    if changes.content.is_some() {
        work.content = parsed.content;
        if parsed.structured_content.is_none() {
            work.structured_content = None;
        }
    }
    if let Some(details) = parsed.details {
        work.details = Some(details);
    }
    if let Some(structured) = parsed.structured_content {
        work.structured_content = Some(structured);
    }
    if let Some(is_error) = changes.is_error {
        work.is_error = is_error;
    }
    if let Some(usage) = parsed.usage {
        work.usage = Some(usage);
    }
    Ok(())
}

async fn tool_call(
    plugin: &Arc<PluginInner>,
    grants: Arc<WasmGrants>,
    event: bindings::handler::ToolCallEvent,
    cancel: CancellationToken,
    updates: CallSink,
) -> Result<Result<bindings::handler::ToolCallDecision, String>, ToolError> {
    let entry = Entry {
        cancel,
        updates,
        reusable: true,
        short: false,
        ..Entry::bare("tool_call")
    };
    let inner = plugin.clone();
    gate::enter_async(plugin, grants, entry, move |store, instance| {
        let decision = inner
            .handler_exports(store, instance)?
            .call_tool_call(&mut *store, &event)?;
        // A rewrite (or an error's text) counts against the call's cap as text, before the host parses it.
        let bytes = match &decision {
            Ok(bindings::handler::ToolCallDecision::Rewrite(text)) | Err(text) => text.len(),
            Ok(_) => 0,
        };
        store
            .data_mut()
            .carried
            .add(bytes)
            .map_err(wasmtime::Error::new)?;
        Ok(decision)
    })
    .await
    .map_err(handler_error)
}

async fn tool_result(
    plugin: &Arc<PluginInner>,
    grants: Arc<WasmGrants>,
    event: bindings::handler::ToolResultEvent,
    cancel: CancellationToken,
    updates: CallSink,
) -> Result<Result<Option<bindings::handler::ToolResultChanges>, String>, ToolError> {
    let entry = Entry {
        cancel,
        updates,
        reusable: true,
        short: false,
        ..Entry::bare("tool_result")
    };
    let inner = plugin.clone();
    gate::enter_async(plugin, grants, entry, move |store, instance| {
        let changes = inner
            .handler_exports(store, instance)?
            .call_tool_result(&mut *store, &event)?;
        // New content, details and structured content count against the call's cap as text, before the
        // host parses them.
        if let Err(message) = &changes {
            store
                .data_mut()
                .carried
                .add(message.len())
                .map_err(wasmtime::Error::new)?;
        }
        if let Ok(Some(changes)) = &changes {
            let bytes = changes
                .content
                .iter()
                .flatten()
                .map(convert::content_bytes)
                .sum::<usize>()
                + changes.details.as_ref().map_or(0, String::len)
                + changes.structured_content.as_ref().map_or(0, String::len);
            store
                .data_mut()
                .carried
                .add(bytes)
                .map_err(wasmtime::Error::new)?;
        }
        Ok(changes)
    })
    .await
    .map_err(handler_error)
}

/// A tool-plugin error text as a handler's: "The plugin X …" becomes "The handler plugin X …".
fn handler_error(error: ToolError) -> ToolError {
    match error.message().strip_prefix("The plugin ") {
        Some(rest) => ToolError::new(format!("The handler plugin {rest}")),
        None => error,
    }
}

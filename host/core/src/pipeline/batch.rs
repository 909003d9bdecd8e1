//! Batches (pi's `executeToolCalls`): the length guard, mode selection, and the sequential and parallel orders.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::ExecutionMode;

use super::audited::CallAudit;
use super::execute::{execute_with_events, finalize};
use super::placement::scoped;
use super::prepare::{CallContext, Prepared, prepare};
use super::{BatchOutcome, EventSink, Pipeline, texts};
use crate::record::CallRecords;
use crate::tool::AgentTool;
use crate::types::{AgentEvent, AssistantMessage, StopReason, ToolCall, ToolResult, ToolResultMessage};

/// A call's final state, before its message is made.
struct Finalized<'a> {
    call: &'a ToolCall,
    result: ToolResult,
    is_error: bool,
    duration_ms: Option<u64>,
}

impl Finalized<'_> {
    /// An error result from preflight: the call did not execute.
    fn immediate(call: &ToolCall, result: ToolResult) -> Finalized<'_> {
        Finalized {
            call,
            result,
            is_error: true,
            duration_ms: None,
        }
    }
}

/// Execute a prepared call and apply the `after_tool_call` hook, emitting its updates; its audit record is
/// written.
async fn run_prepared<'a>(
    ctx: &CallContext<'_>,
    call: &'a ToolCall,
    ready: super::prepare::Ready,
    sink: &dyn EventSink,
    audit: CallAudit,
    alone: bool,
) -> Finalized<'a> {
    // Only the execution runs alone: the hooks around it run as they always do.
    let alone = alone && ctx.pipeline.work_here;
    let executed = scoped(alone, execute_with_events(&ready, call, ctx.cancel, sink, None)).await;
    let (result, is_error) = finalize(ctx, call, &ready, executed.result, executed.is_error).await;
    audit.finish(ctx, &result, is_error, executed.fault);
    Finalized {
        call,
        result,
        is_error,
        duration_ms: Some(executed.duration_ms),
    }
}

pub(super) async fn run(
    pipeline: &Pipeline,
    tools: &[AgentTool],
    assistant: Arc<AssistantMessage>,
    sink: &dyn EventSink,
    cancel: &CancellationToken,
    records: Option<&dyn CallRecords>,
) -> BatchOutcome {
    let calls = &assistant.tool_calls;
    if matches!(assistant.stop_reason, StopReason::Error | StopReason::Aborted) {
        return BatchOutcome {
            messages: Vec::new(),
            results: Vec::new(),
            terminate: false,
            mode: pipeline.tool_execution,
        };
    }
    if assistant.stop_reason == StopReason::Length {
        return length_guard(pipeline, tools, calls, sink, records).await;
    }
    let sequential_tool = calls.iter().any(|c| {
        tools
            .iter()
            .find(|t| t.name() == c.name)
            .and_then(AgentTool::execution_mode)
            == Some(ExecutionMode::Sequential)
    });
    let mode = if pipeline.tool_execution == ExecutionMode::Sequential || sequential_tool {
        ExecutionMode::Sequential
    } else {
        ExecutionMode::Parallel
    };
    let ctx = CallContext {
        pipeline,
        tools,
        assistant: assistant.clone(),
        cancel,
        parent: None,
        authority: None,
    };
    let finalized = match mode {
        ExecutionMode::Sequential => sequential(&ctx, calls, sink, records).await,
        ExecutionMode::Parallel => parallel(&ctx, calls, sink, records).await,
    };
    let mut messages = Vec::with_capacity(finalized.len());
    let mut results: Vec<ToolResult> = Vec::with_capacity(finalized.len());
    for (f, message) in finalized {
        // Sequential mode emitted each message right after its call.
        if mode == ExecutionMode::Parallel {
            emit_message(sink, message.clone()).await;
        }
        messages.push(message);
        results.push(f.result);
    }
    let terminate = !results.is_empty() && results.iter().all(ToolResult::terminates);
    BatchOutcome {
        messages,
        results,
        terminate,
        mode,
    }
}

async fn length_guard(
    pipeline: &Pipeline,
    tools: &[AgentTool],
    calls: &[ToolCall],
    sink: &dyn EventSink,
    records: Option<&dyn CallRecords>,
) -> BatchOutcome {
    let mode = pipeline.tool_execution;
    let mut messages = Vec::new();
    let mut results = Vec::new();
    let ctx = CallContext {
        pipeline,
        tools,
        assistant: Arc::default(),
        cancel: &CancellationToken::new(),
        parent: None,
        authority: None,
    };
    for call in calls {
        emit_start(sink, call).await;
        let f = Finalized::immediate(call, ToolResult::error(texts::length_guard(&call.name)));
        let audit = CallAudit::begin(&ctx, call);
        audit.trail().step(
            crate::audit::Step::new(
                "length guard",
                crate::audit::Stage::Preflight,
                crate::audit::Verdict::Refused,
            )
            .with_reason(f.result.text_content()),
        );
        audit.finish(&ctx, &f.result, true, None);
        emit_end(sink, &f).await;
        let message = result_message(records, &f);
        emit_message(sink, message.clone()).await;
        messages.push(message);
        results.push(f.result);
    }
    BatchOutcome {
        messages,
        results,
        terminate: false,
        mode,
    }
}

async fn sequential<'a>(
    ctx: &CallContext<'_>,
    calls: &'a [ToolCall],
    sink: &dyn EventSink,
    records: Option<&dyn CallRecords>,
) -> Vec<(Finalized<'a>, ToolResultMessage)> {
    let mut out = Vec::with_capacity(calls.len());
    for call in calls {
        emit_start(sink, call).await;
        let audit = CallAudit::begin(ctx, call);
        let f = match prepare(ctx, call, audit.trail()).await {
            Prepared::Immediate(result) => {
                audit.finish(ctx, &result, true, None);
                Finalized::immediate(call, result)
            }
            Prepared::Ready(ready) => run_prepared(ctx, call, ready, sink, audit, true).await,
        };
        emit_end(sink, &f).await;
        let message = result_message(records, &f);
        emit_message(sink, message.clone()).await;
        out.push((f, message));
    }
    out
}

async fn parallel<'a>(
    ctx: &CallContext<'_>,
    calls: &'a [ToolCall],
    sink: &dyn EventSink,
    records: Option<&dyn CallRecords>,
) -> Vec<(Finalized<'a>, ToolResultMessage)> {
    // Preflight in call order, one call at a time: hooks see calls in order and never concurrently.
    let mut preflight = Vec::with_capacity(calls.len());
    for call in calls {
        emit_start(sink, call).await;
        let audit = CallAudit::begin(ctx, call);
        match prepare(ctx, call, audit.trail()).await {
            Prepared::Immediate(result) => {
                audit.finish(ctx, &result, true, None);
                let f = Finalized::immediate(call, result);
                emit_end(sink, &f).await;
                preflight.push(Err(f));
            }
            Prepared::Ready(ready) => preflight.push(Ok((call, ready, audit))),
        }
    }
    // Execution: every prepared call at once; each emits its end event when it finishes (completion order). The
    // only call a batch executes runs alone.
    let alone = preflight.iter().filter(|entry| entry.is_ok()).count() == 1;
    let finalized = join_all(preflight.into_iter().map(|entry| async move {
        let (call, ready, audit) = match entry {
            Err(done) => return done,
            Ok(prepared) => prepared,
        };
        let f = if ctx.cancel.is_cancelled() {
            let result = ToolResult::error(texts::OPERATION_ABORTED);
            audit.finish(ctx, &result, true, None);
            Finalized::immediate(call, result)
        } else {
            run_prepared(ctx, call, ready, sink, audit, alone).await
        };
        emit_end(sink, &f).await;
        f
    }))
    .await;
    finalized
        .into_iter()
        .map(|f| {
            let message = result_message(records, &f);
            (f, message)
        })
        .collect()
}

async fn emit_start(sink: &dyn EventSink, call: &ToolCall) {
    sink.emit(AgentEvent::ToolExecutionStart {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        args: call.arguments.clone(),
        parent_tool_call_id: None,
    })
    .await;
}

async fn emit_end(sink: &dyn EventSink, f: &Finalized<'_>) {
    sink.emit(AgentEvent::ToolExecutionEnd {
        tool_call_id: f.call.id.clone(),
        tool_name: f.call.name.clone(),
        result: f.result.clone(),
        is_error: f.is_error,
        duration_ms: f.duration_ms,
        parent_tool_call_id: None,
    })
    .await;
}

async fn emit_message(sink: &dyn EventSink, message: ToolResultMessage) {
    sink.emit(AgentEvent::MessageStart {
        message: message.clone(),
    })
    .await;
    sink.emit(AgentEvent::MessageEnd { message }).await;
}

/// pi's `createToolResultMessage` (`structuredContent` and `terminate` are not copied), with the record of the
/// nested calls the tool made, as pi's session adds it at `message_start`. Its content is the model's view
/// ([`crate::model_view`]): audio and embedded resources become what pi shows of an MCP server's.
fn result_message(records: Option<&dyn CallRecords>, f: &Finalized<'_>) -> ToolResultMessage {
    let mut message = ToolResultMessage {
        role: "toolResult".into(),
        tool_call_id: f.call.id.clone(),
        tool_name: f.call.name.clone(),
        content: crate::model_view::model_view(&f.result.content),
        details: f.result.details.clone(),
        usage: f.result.usage.clone(),
        nested_calls: None,
        is_error: f.is_error,
        duration_ms: f.duration_ms,
        timestamp: now_ms(),
    };
    if let Some(record) = records.and_then(|r| r.take_record(&f.call.id)) {
        record.attach(&mut message);
    }
    message
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

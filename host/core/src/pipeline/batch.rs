//! Batches (pi's `executeToolCalls`): the length guard, mode selection, and the sequential and parallel orders.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use futures::future::join_all;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::ExecutionMode;

use super::execute::{execute_with_events, finalize};
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
        return length_guard(pipeline, calls, sink, records).await;
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
    };
    let finalized = match mode {
        ExecutionMode::Sequential => sequential(&ctx, calls, sink, records).await,
        ExecutionMode::Parallel => parallel(&ctx, calls, sink, records).await,
    };
    let messages = if mode == ExecutionMode::Sequential {
        // Sequential mode emitted each message right after its call.
        finalized.iter().map(|f| f.1.clone()).collect()
    } else {
        let mut messages = Vec::with_capacity(finalized.len());
        for (_, message) in &finalized {
            emit_message(sink, message.clone()).await;
            messages.push(message.clone());
        }
        messages
    };
    let results: Vec<ToolResult> = finalized.into_iter().map(|(f, _)| f.result).collect();
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
    calls: &[ToolCall],
    sink: &dyn EventSink,
    records: Option<&dyn CallRecords>,
) -> BatchOutcome {
    let mode = pipeline.tool_execution;
    let mut messages = Vec::new();
    let mut results = Vec::new();
    for call in calls {
        emit_start(sink, call).await;
        let f = Finalized {
            call,
            result: ToolResult::error(texts::length_guard(&call.name)),
            is_error: true,
            duration_ms: None,
        };
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
        let f = match prepare(ctx, call).await {
            Prepared::Immediate(result) => Finalized {
                call,
                result,
                is_error: true,
                duration_ms: None,
            },
            Prepared::Ready(ready) => {
                let executed = execute_with_events(&ready, call, ctx.cancel, sink, None).await;
                let (result, is_error) =
                    finalize(ctx, call, &ready, executed.result, executed.is_error).await;
                Finalized {
                    call,
                    result,
                    is_error,
                    duration_ms: Some(executed.duration_ms),
                }
            }
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
        match prepare(ctx, call).await {
            Prepared::Immediate(result) => {
                let f = Finalized {
                    call,
                    result,
                    is_error: true,
                    duration_ms: None,
                };
                emit_end(sink, &f).await;
                preflight.push(Err(f));
            }
            Prepared::Ready(ready) => preflight.push(Ok((call, ready))),
        }
    }
    // Execution: every prepared call at once; each emits its end event when it finishes (completion order).
    let finalized = join_all(preflight.into_iter().map(|entry| async move {
        let (call, ready) = match entry {
            Err(done) => return done,
            Ok(prepared) => prepared,
        };
        let f = if ctx.cancel.is_cancelled() {
            Finalized {
                call,
                result: ToolResult::error(texts::OPERATION_ABORTED),
                is_error: true,
                duration_ms: None,
            }
        } else {
            let executed = execute_with_events(&ready, call, ctx.cancel, sink, None).await;
            let (result, is_error) = finalize(ctx, call, &ready, executed.result, executed.is_error).await;
            Finalized {
                call,
                result,
                is_error,
                duration_ms: Some(executed.duration_ms),
            }
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
/// nested calls the tool made, as pi's session adds it at `message_start`.
fn result_message(records: Option<&dyn CallRecords>, f: &Finalized<'_>) -> ToolResultMessage {
    let mut message = ToolResultMessage {
        role: "toolResult".into(),
        tool_call_id: f.call.id.clone(),
        tool_name: f.call.name.clone(),
        content: f.result.content.clone(),
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

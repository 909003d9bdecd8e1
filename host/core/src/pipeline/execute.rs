//! Execution and finalisation of a prepared call (pi's `executePreparedToolCall` and `finalizeExecutedToolCall`).

use std::time::Instant;

use futures::FutureExt;
use tokio_util::sync::CancellationToken;

use super::placement;
use super::prepare::{CallContext, Ready, panicked};
use super::{EventSink, ToolLog};
use crate::hooks::{AfterToolCallContext, merge_after};
use crate::tool::{BoxFuture, CallSink, LogLine, Sent, ToolExecution, UpdateReceiver};
use crate::types::{AgentEvent, ToolCall, ToolResult};

/// The outcome of `execute`.
pub(super) struct Executed {
    pub result: ToolResult,
    pub is_error: bool,
    pub duration_ms: u64,
    /// Why the host ended the call, when it did (for the audit log's outcome).
    pub fault: Option<crate::tool::HostFault>,
}

/// Execute `ready`, emitting each partial result as a `tool_execution_update` before returning.
pub(super) async fn execute_with_events(
    ready: &Ready,
    call: &ToolCall,
    cancel: &CancellationToken,
    sink: &dyn EventSink,
    parent: Option<&str>,
) -> Executed {
    execute(ready, call, cancel, Forward::Events { sink, parent }).await
}

/// Where partial results go. (An enum rather than an async closure: futures holding async closures are not
/// provably `Send` for every lifetime, which a server spawning calls on tasks needs.)
pub(super) enum Forward<'a> {
    /// As `tool_execution_update` events.
    Events {
        sink: &'a dyn EventSink,
        parent: Option<&'a str>,
    },
    /// To the caller's update sink.
    Updates(CallSink),
    /// A nested call's: to the calling tool's sink, and as events with the parent.
    Nested {
        sink: &'a dyn EventSink,
        parent: &'a str,
        updates: CallSink,
    },
}

impl Forward<'_> {
    async fn forward(&self, call: &ToolCall, sent: Sent) {
        match sent {
            Sent::Update(partial) => self.send(call, partial).await,
            Sent::Log(line) => self.log(call, line).await,
        }
    }

    /// A log line goes where the call's events go, or to the caller's sink.
    async fn log(&self, call: &ToolCall, line: LogLine) {
        let (sink, parent) = match self {
            Forward::Events { sink, parent } => (*sink, *parent),
            Forward::Nested { sink, parent, .. } => (*sink, Some(*parent)),
            Forward::Updates(updates) => return updates.log(line.level, line.message),
        };
        let log = ToolLog {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            parent_tool_call_id: parent.map(str::to_owned),
            line,
        };
        sink.log(log).await;
    }

    async fn send(&self, call: &ToolCall, partial_result: ToolResult) {
        match self {
            Forward::Events { sink, parent } => {
                let event = AgentEvent::ToolExecutionUpdate {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    args: call.arguments.clone(),
                    partial_result,
                    parent_tool_call_id: parent.map(str::to_owned),
                };
                sink.emit(event).await;
            }
            Forward::Updates(updates) => updates.update(partial_result),
            Forward::Nested {
                sink,
                parent,
                updates,
            } => {
                updates.update(partial_result.clone());
                let event = AgentEvent::ToolExecutionUpdate {
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    args: call.arguments.clone(),
                    partial_result,
                    parent_tool_call_id: Some((*parent).to_owned()),
                };
                sink.emit(event).await;
            }
        }
    }
}

/// Run `execute`, handing each partial result to `forward` while the call runs, in the order they were sent.
/// Every update sent before `execute` settled is forwarded before this returns; later ones are dropped.
pub(super) async fn execute(
    ready: &Ready,
    call: &ToolCall,
    cancel: &CancellationToken,
    forward: Forward<'_>,
) -> Executed {
    let (updates, mut receiver) = CallSink::channel();
    let started = Instant::now();
    let run = ToolExecution {
        call_id: call.id.clone(),
        params: ready.args.clone(),
        cancel: cancel.clone(),
        updates,
    };
    let outcome = {
        // Work placed here hands on what it sends itself: this loop is not polled while it runs.
        let forwarding = Forwarding {
            receiver: &receiver,
            forward: &forward,
            call,
        };
        let execution = placement::owing(&forwarding, ready.tool.execute(run));
        let execution = std::panic::AssertUnwindSafe(execution).catch_unwind();
        tokio::pin!(execution);
        loop {
            tokio::select! {
                biased;
                sent = receiver.recv() => forward.forward(call, sent).await,
                outcome = &mut execution => break outcome,
            }
        }
    };
    let duration_ms = elapsed_ms(started);
    receiver.close();
    while let Some(sent) = receiver.try_recv() {
        forward.forward(call, sent).await;
    }
    if ready.trail.is_on() {
        ready.trail.add_activity(receiver.take_activity());
    }
    settle(&call.name, outcome, duration_ms)
}

/// What a call's execution owes while work placed here blocks [`execute`]'s loop: its partial results and log
/// lines, handed on in the order they were sent (see [`placement`]).
struct Forwarding<'a> {
    receiver: &'a UpdateReceiver,
    forward: &'a Forward<'a>,
    call: &'a ToolCall,
}

impl placement::Owed for Forwarding<'_> {
    fn flush(&self) -> Option<BoxFuture<'_, ()>> {
        Some(Box::pin(async move {
            while let Some(sent) = self.receiver.try_recv() {
                self.forward.forward(self.call, sent).await;
            }
        }))
    }
}

type ExecuteOutcome = Result<Result<ToolResult, crate::ToolError>, Box<dyn std::any::Any + Send>>;

fn settle(tool: &str, outcome: ExecuteOutcome, duration_ms: u64) -> Executed {
    match outcome {
        Ok(Ok(result)) => Executed {
            is_error: result.is_error(),
            result,
            duration_ms,
            fault: None,
        },
        Ok(Err(error)) => Executed {
            result: ToolResult::error(error.message()),
            is_error: true,
            duration_ms,
            fault: error.host_fault(),
        },
        Err(panic) => {
            let error = panicked(tool, "execute", &*panic);
            Executed {
                result: ToolResult::error(error.message()),
                is_error: true,
                duration_ms,
                fault: None,
            }
        }
    }
}

/// `Math.round` of the elapsed milliseconds.
fn elapsed_ms(started: Instant) -> u64 {
    (started.elapsed().as_secs_f64() * 1000.0).round() as u64
}

/// Apply the `after_tool_call` hook (pi's merge); a failing hook turns the result into an error result.
pub(super) async fn finalize(
    ctx: &CallContext<'_>,
    call: &ToolCall,
    ready: &Ready,
    result: ToolResult,
    is_error: bool,
) -> (ToolResult, bool) {
    let Some(hook) = &ctx.pipeline.after_tool_call else {
        return (result, is_error);
    };
    let hook_ctx = AfterToolCallContext {
        assistant_message: ctx.assistant.clone(),
        tool_call: call.clone(),
        args: ready.args.clone(),
        result: result.clone(),
        is_error,
        parent_tool_call_id: ctx.parent.clone(),
        trail: ready.trail.clone(),
    };
    let recorded = ready.trail.steps_len();
    let outcome = std::panic::AssertUnwindSafe(hook(hook_ctx, ctx.cancel.clone()))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| Err(panicked(&call.name, "afterToolCall", &*panic)));
    // A hook given directly (not through a chain) records no step of its own.
    if ready.trail.is_on() && ready.trail.steps_len() == recorded {
        crate::hooks::after_step(&ready.trail, "after_tool_call", &outcome);
    }
    match outcome {
        Ok(Some(after)) => merge_after(result, is_error, after),
        Ok(None) => (result, is_error),
        Err(error) => (ToolResult::error(error.message()), true),
    }
}

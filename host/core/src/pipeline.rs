//! The execution pipeline (pi's `agent-loop.ts`): one assistant message's tool calls in, one result message per
//! call and the tool events out.
//!
//! Per call: lookup, `prepareArguments`, validation, `before_tool_call`, `execute`, `after_tool_call`, result
//! message. A batch runs in parallel (preflight in call order, execution concurrent, end events in completion
//! order, messages in call order) or sequentially. Every failure becomes an error result with pi's exact text;
//! nothing a tool or hook does makes the pipeline fail.

mod audited;
mod batch;
mod execute;
pub(crate) mod placement;
mod prepare;

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::ExecutionMode;

use crate::hooks::{AfterToolCall, BeforeToolCall};
use crate::record::CallRecords;
use crate::tool::{AgentTool, BoxFuture, CallSink};
use crate::types::{
    AgentEvent, AgentToolCallOutcome, AssistantMessage, ToolCall, ToolResult, ToolResultMessage,
};

pub use placement::{
    Blocked, Placement, Work, beside, block_on_nested, flush_owed, runs_here, serve_others, short_threads,
};

/// The texts the pipeline itself produces, byte for byte as pi 1.6.0's (§7.12).
pub mod texts {
    /// The batch was aborted.
    pub const OPERATION_ABORTED: &str = "Operation aborted";
    /// A hook blocked the call without a reason.
    pub const BLOCKED: &str = crate::hooks::BLOCKED;

    /// No callable tool has the name.
    pub fn not_found(name: &str) -> String {
        format!("Tool {name} not found")
    }

    /// The provider could not parse the model's arguments.
    pub fn invalid_arguments(name: &str, error: &str) -> String {
        format!("Invalid arguments for tool \"{name}\": {error}")
    }

    /// The output-token-limit guard.
    pub fn length_guard(name: &str) -> String {
        format!(
            "Tool call \"{name}\" was not executed: the response hit the output token limit, so its arguments may be \
             truncated. Re-issue the tool call with complete arguments."
        )
    }
}

/// Receives the pipeline's events, in emission order. The pipeline awaits each emission.
pub trait EventSink: Send + Sync {
    /// Handle one event.
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()>;

    /// Handle a line a running call wrote to its log (not one of pi's events: an MCP server turns them into
    /// `notifications/message`). The default drops it; the tool already wrote it to the host's `tracing` log.
    fn log(&self, line: ToolLog) -> BoxFuture<'_, ()> {
        drop(line);
        Box::pin(async {})
    }
}

/// A log line of a running call, with the call it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolLog {
    /// The call's id.
    pub tool_call_id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The calling tool's call id, for a nested call.
    pub parent_tool_call_id: Option<String>,
    /// The line.
    pub line: crate::tool::LogLine,
}

/// An [`EventSink`] that ignores every event.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn emit(&self, _event: AgentEvent) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

/// An [`EventSink`] that keeps every event, for tests and inspection.
#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<Vec<AgentEvent>>,
}

impl EventLog {
    /// An empty log.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events so far.
    pub fn events(&self) -> Vec<AgentEvent> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl EventSink for EventLog {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        self.events.lock().unwrap_or_else(|e| e.into_inner()).push(event);
        Box::pin(async {})
    }
}

impl EventSink for mpsc::UnboundedSender<AgentEvent> {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        // A closed receiver means nobody listens any more; the batch still runs to the end.
        let _ = self.send(event);
        Box::pin(async {})
    }
}

/// An [`EventSink`] from an async closure.
pub fn event_sink<F, Fut>(f: F) -> impl EventSink
where
    F: Fn(AgentEvent) -> Fut + Send + Sync,
    Fut: Future<Output = ()> + Send + 'static,
{
    struct FnSink<F>(F);
    impl<F, Fut> EventSink for FnSink<F>
    where
        F: Fn(AgentEvent) -> Fut + Send + Sync,
        Fut: Future<Output = ()> + Send + 'static,
    {
        fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
            Box::pin((self.0)(event))
        }
    }
    FnSink(f)
}

/// The result of one batch.
#[derive(Debug, Clone)]
pub struct BatchOutcome {
    /// One result message per call, in call order.
    pub messages: Vec<ToolResultMessage>,
    /// The final result of each call (with `structuredContent`), in call order.
    pub results: Vec<ToolResult>,
    /// Whether the run ends after this batch: every result voted to terminate.
    pub terminate: bool,
    /// The mode the batch ran in.
    pub mode: ExecutionMode,
}

/// The pipeline's configuration (pi's `AgentLoopConfig`, the parts that concern tools).
#[derive(Clone, Default)]
pub struct Pipeline {
    /// `Parallel` (the default) or `Sequential` for every batch.
    pub tool_execution: ExecutionMode,
    /// Runs after validation, before execution.
    pub before_tool_call: Option<BeforeToolCall>,
    /// Runs after execution, before the result message.
    pub after_tool_call: Option<AfterToolCall>,
    /// Receives one [`AuditRecord`](crate::audit::AuditRecord) per call, nested calls included, as each
    /// settles.
    pub audit: Option<Arc<dyn crate::audit::AuditSink>>,
    /// Whether a call that runs alone does a tool's blocking work on the thread that polls the batch (see
    /// [`Pipeline::with_work_here`]).
    pub work_here: bool,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("tool_execution", &self.tool_execution)
            .field("before_tool_call", &self.before_tool_call.is_some())
            .field("after_tool_call", &self.after_tool_call.is_some())
            .field("audit", &self.audit.is_some())
            .field("work_here", &self.work_here)
            .finish()
    }
}

impl Pipeline {
    /// A parallel pipeline without hooks.
    pub fn new() -> Self {
        Self::default()
    }

    /// This pipeline with an execution mode for every batch.
    pub fn with_tool_execution(mut self, mode: ExecutionMode) -> Self {
        self.tool_execution = mode;
        self
    }

    /// This pipeline letting a call that runs alone (the current call of a sequential batch, the only call a
    /// batch executes) do a tool's blocking work on the thread that polls the batch ([`Placement::Here`]), instead
    /// of a round trip through another thread (see [`Placement::of`]). The trade: while that work runs, nothing
    /// else in the task polling the batch is polled, so a batch must be stopped through its cancellation token
    /// (the tools check it), not by dropping its future or by a `timeout` around it, which fire only when the
    /// work returns. Off by default; `toolwright exec` and `toolwright mcp` turn it on.
    pub fn with_work_here(mut self, on: bool) -> Self {
        self.work_here = on;
        self
    }

    /// This pipeline with a `before_tool_call` hook.
    pub fn with_before_tool_call(mut self, hook: BeforeToolCall) -> Self {
        self.before_tool_call = Some(hook);
        self
    }

    /// This pipeline with an `after_tool_call` hook.
    pub fn with_after_tool_call(mut self, hook: AfterToolCall) -> Self {
        self.after_tool_call = Some(hook);
        self
    }

    /// This pipeline writing an audit record of every call to `sink` (see [`crate::audit`]).
    pub fn with_audit(mut self, sink: Arc<dyn crate::audit::AuditSink>) -> Self {
        self.audit = Some(sink);
        self
    }

    /// This pipeline with `chain` as its hooks, in the chain's order (replacing the hooks it had: put those in the
    /// chain first).
    pub fn with_hooks(mut self, chain: &crate::hooks::HookChain) -> Self {
        self.before_tool_call = chain.before_tool_call();
        self.after_tool_call = chain.after_tool_call();
        self
    }

    /// Run the tool calls of `assistant` against `tools` (pi's `executeToolCalls`), emitting events to `sink`.
    ///
    /// `cancel` aborts the batch: calls not yet executed get `Operation aborted`; running tools see their token
    /// cancelled. Every call always gets its start, end and message events.
    pub async fn execute_tool_calls(
        &self,
        tools: &[AgentTool],
        assistant: &AssistantMessage,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> BatchOutcome {
        batch::run(self, tools, Arc::new(assistant.clone()), sink, cancel, None).await
    }

    /// [`Pipeline::execute_tool_calls`], with each result message given the record of the nested calls its
    /// tool made, taken from `records` (a session's [`NestedCalls`](crate::nested::NestedCalls)).
    pub async fn execute_tool_calls_recorded(
        &self,
        tools: &[AgentTool],
        assistant: &AssistantMessage,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
        records: &dyn CallRecords,
    ) -> BatchOutcome {
        batch::run(
            self,
            tools,
            Arc::new(assistant.clone()),
            sink,
            cancel,
            Some(records),
        )
        .await
    }

    /// Run one call without events (pi's `runToolCall`). Never fails: every failure is an error outcome.
    pub async fn run_tool_call(
        &self,
        tools: &[AgentTool],
        call: &ToolCall,
        cancel: &CancellationToken,
        updates: CallSink,
    ) -> AgentToolCallOutcome {
        self.run_one(
            tools,
            call,
            None,
            None,
            cancel,
            execute::Forward::Updates(updates),
        )
        .await
    }

    /// Run the nested call `call` made by `parent` (the caller's id, and the authority it runs under): hooks see
    /// the parent; partial results go to `updates` and, as `tool_execution_update` events with the parent, to
    /// `sink`.
    pub(crate) async fn run_nested_call(
        &self,
        tools: &[AgentTool],
        call: &ToolCall,
        (parent, authority): (&str, Option<Arc<crate::authority::Authority>>),
        cancel: &CancellationToken,
        updates: CallSink,
        sink: &dyn EventSink,
    ) -> AgentToolCallOutcome {
        let forward = execute::Forward::Nested {
            sink,
            parent,
            updates,
        };
        // A nested call runs beside its parent and its siblings, whatever its parent does.
        placement::scoped(
            false,
            self.run_one(tools, call, Some(parent.to_owned()), authority, cancel, forward),
        )
        .await
    }

    async fn run_one(
        &self,
        tools: &[AgentTool],
        call: &ToolCall,
        parent: Option<String>,
        authority: Option<Arc<crate::authority::Authority>>,
        cancel: &CancellationToken,
        forward: execute::Forward<'_>,
    ) -> AgentToolCallOutcome {
        let assistant = Arc::new(AssistantMessage {
            tool_calls: vec![call.clone()],
            ..Default::default()
        });
        let ctx = prepare::CallContext {
            pipeline: self,
            tools,
            assistant,
            cancel,
            parent,
            authority,
        };
        let audit = audited::CallAudit::begin(&ctx, call);
        let (result, is_error, duration_ms) = match prepare::prepare(&ctx, call, audit.trail()).await {
            prepare::Prepared::Immediate(result) => {
                audit.finish(&ctx, &result, true, None);
                (result, true, None)
            }
            prepare::Prepared::Ready(ready) => {
                let executed = execute::execute(&ready, call, cancel, forward).await;
                let (result, is_error) =
                    execute::finalize(&ctx, call, &ready, executed.result, executed.is_error).await;
                audit.finish(&ctx, &result, is_error, executed.fault);
                (result, is_error, Some(executed.duration_ms))
            }
        };
        AgentToolCallOutcome {
            tool_call: call.clone(),
            result,
            is_error,
            duration_ms,
        }
    }
}

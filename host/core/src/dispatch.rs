//! [`Dispatcher`]: a session's registry, pipeline and nested-call runner, wired together once.
//!
//! Building one wires nested calls in (a runner over the registry's callable tools, and every tool's context
//! bound to it), so no caller can forget it or get the order wrong. Every batch takes the active tools afresh
//! (after `tool_search` changed them), its result messages get their `nestedCalls` records, and the events of
//! its nested calls go to the batch's own sink, in order with the batch's.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use crate::nested::{CallableInfos, CallableTools, NestedCalls};
use crate::pipeline::{BatchOutcome, EventSink, NoEvents, Pipeline, ToolLog};
use crate::registry::SharedRegistry;
use crate::tool::{AgentTool, BoxFuture};
use crate::types::{AgentEvent, AssistantMessage, ToolCall, ToolResult, ToolResultMessage};

/// The registry, the pipeline and the nested-call runner of one session. Cloning is cheap and shares them.
#[derive(Clone)]
pub struct Dispatcher {
    inner: Arc<Inner>,
}

struct Inner {
    registry: SharedRegistry,
    pipeline: Pipeline,
    nested: Arc<NestedCalls>,
    cwd: PathBuf,
    calls: AtomicU64,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("cwd", &self.inner.cwd)
            .field("pipeline", &self.inner.pipeline)
            .finish_non_exhaustive()
    }
}

/// What one call made with [`Dispatcher::call`] ended with: its final result and its result message (not the
/// SDK's [`CallOutcome`](toolwright_sdk::CallOutcome) of a nested call, which a tool sees).
#[derive(Debug, Clone)]
pub struct Dispatched {
    /// The final result, with its structured content.
    pub result: ToolResult,
    /// The result message, as the transcript would get it (with the record of the nested calls made).
    pub message: ToolResultMessage,
}

impl Dispatched {
    /// Whether the call ended in an error.
    pub fn is_error(&self) -> bool {
        self.message.is_error
    }
}

impl Dispatcher {
    /// A dispatcher over `registry` whose calls (and the nested calls of its tools) run through `pipeline`'s
    /// hooks and mode, with tools working in `cwd`. It binds every tool's context to its nested-call runner:
    /// give a registry one dispatcher (a second takes the contexts over).
    ///
    /// A tool must not block the thread that polls [`Dispatcher::run`] while it waits for a nested call (an
    /// async tool awaits it; native and wasm tools call from blocking threads).
    pub fn new(registry: SharedRegistry, pipeline: Pipeline, cwd: impl Into<PathBuf>) -> Self {
        let cwd = cwd.into();
        let weak = registry.downgrade();
        let weak_infos = weak.clone();
        let tools: CallableTools = Arc::new(move || {
            weak.upgrade()
                .map(|r| r.read(|r| r.callable_tools()))
                .unwrap_or_default()
        });
        let infos: CallableInfos = Arc::new(move || {
            weak_infos
                .upgrade()
                .map(|r| r.read(|r| r.callable_infos()))
                .unwrap_or_default()
        });
        let nested = NestedCalls::new(&pipeline, tools, infos, Arc::new(NoEvents));
        let factory = nested.context_factory(cwd.clone());
        registry.update(|r| r.set_context_factory(Some(factory)));
        Dispatcher {
            inner: Arc::new(Inner {
                registry,
                pipeline,
                nested,
                cwd,
                calls: AtomicU64::new(0),
            }),
        }
    }

    /// The registry.
    pub fn registry(&self) -> &SharedRegistry {
        &self.inner.registry
    }

    /// The pipeline calls run through.
    pub fn pipeline(&self) -> &Pipeline {
        &self.inner.pipeline
    }

    /// The nested-call runner.
    pub fn nested_calls(&self) -> &Arc<NestedCalls> {
        &self.inner.nested
    }

    /// The workspace.
    pub fn cwd(&self) -> &Path {
        &self.inner.cwd
    }

    /// The active tools now, as pi's agent loop sees them.
    pub fn active_tools(&self) -> Vec<AgentTool> {
        self.inner.registry.read(|r| r.active_tools())
    }

    /// Run the tool calls of `message` against the active tools (pi's `executeToolCalls`), emitting every
    /// event, the nested calls' included, to `sink`. A call to a tool that is not active is `Tool NAME not
    /// found`; `cancel` aborts the batch.
    pub async fn run(
        &self,
        message: &AssistantMessage,
        sink: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> BatchOutcome {
        let tools = self.active_tools();
        let nested = &self.inner.nested;
        // Nested events travel to this batch's sink through a channel, each acknowledged once written: they keep
        // their order with the batch's own events (a nested end comes before its parent's end). The write of a
        // forwarded event is polled beside the batch, so a sink that waits (a lock, a full pipe) stalls neither.
        let (tx, rx) = mpsc::unbounded_channel::<(Forwarded, oneshot::Sender<()>)>();
        let forward: Arc<dyn EventSink> = Arc::new(Forward { tx });
        let _routes = Routes::new(nested, &message.tool_calls, &forward);
        let outbox = Outbox {
            sink,
            state: std::sync::Mutex::new(OutboxState { rx, writing: None }),
        };
        let batch = self
            .inner
            .pipeline
            .execute_tool_calls_recorded(&tools, message, sink, cancel, &**nested);
        // Work a call places here writes the nested events itself while it waits for them (`placement`).
        let batch = crate::pipeline::placement::owing(&outbox, batch);
        tokio::pin!(batch);
        // (The outbox stays open while `forward` lives: its first branch never ends the loop.)
        let mut open = true;
        let outcome = loop {
            tokio::select! {
                biased;
                () = std::future::poll_fn(|cx| outbox.poll_write(cx)), if open => open = false,
                outcome = &mut batch => break outcome,
            }
        };
        drop(_routes);
        drop(forward);
        // A nested call still running after its batch (a tool returned without awaiting it; codemode cancels the
        // calls a script left running) sends nothing after its caller ended (`nested`): what was sent before is
        // written now, in order, for at most WRITE_WAIT (a sink that hangs), and the batch returns without
        // waiting for the straggler to wind down.
        let queued = std::future::poll_fn(|cx| outbox.poll_queued(cx));
        if tokio::time::timeout(WRITE_WAIT, queued).await.is_err() {
            tracing::warn!(
                "the batch's sink took over {} ms to take its last nested events; they are dropped",
                WRITE_WAIT.as_millis()
            );
        }
        outcome
    }

    /// Run one call of `name` with `args` (id `call-N`), without events: its result and result message.
    pub async fn call(&self, name: &str, args: Value, cancel: &CancellationToken) -> Dispatched {
        let n = self.inner.calls.fetch_add(1, Ordering::Relaxed) + 1;
        let message = AssistantMessage {
            tool_calls: vec![ToolCall::new(format!("call-{n}"), name, args)],
            ..Default::default()
        };
        let outcome = self.run(&message, &NoEvents, cancel).await;
        // A batch of one call with no stop reason always has one result and one message.
        let pair = outcome.results.into_iter().zip(outcome.messages).next();
        let (result, message) = pair.unwrap_or_else(|| unreachable!("one call, one result"));
        Dispatched { result, message }
    }
}

/// How long a batch's end waits for its sink to take the nested events sent before the batch ended.
pub const WRITE_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// The nested events on their way to a batch's sink, in the order they were sent, and the one being written.
struct Outbox<'a> {
    sink: &'a dyn EventSink,
    state: std::sync::Mutex<OutboxState<'a>>,
}

struct OutboxState<'a> {
    rx: mpsc::UnboundedReceiver<(Forwarded, oneshot::Sender<()>)>,
    writing: Option<(BoxFuture<'a, ()>, oneshot::Sender<()>)>,
}

impl Outbox<'_> {
    /// Write what was sent, in order, each acknowledged once written (a nested call waits for that): `Pending`
    /// while senders remain, ready once they are gone and everything is written. Polled by [`Dispatcher::run`]'s
    /// loop, or by work a call places here, which blocks the loop (the lock is held only while polled).
    fn poll_write(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        use std::task::Poll;
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if let Some((write, _)) = &mut state.writing {
                if write.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                if let Some((_, ack)) = state.writing.take() {
                    let _ = ack.send(());
                }
            }
            match state.rx.poll_recv(cx) {
                Poll::Ready(Some((forwarded, ack))) => {
                    state.writing = Some((forwarded.write(self.sink), ack));
                }
                Poll::Ready(None) => return Poll::Ready(()),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl Outbox<'_> {
    /// Write what was sent so far, as [`Outbox::poll_write`] does, and be ready once nothing is left to write,
    /// whether or not senders remain.
    fn poll_queued(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        use std::task::Poll;
        match self.poll_write(cx) {
            Poll::Ready(()) => Poll::Ready(()),
            Poll::Pending => {
                let state = self
                    .state
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                if state.writing.is_none() && state.rx.is_empty() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            }
        }
    }
}

impl crate::pipeline::placement::Owed for Outbox<'_> {
    fn poll_serve(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        self.poll_write(cx)
    }
}

/// The routes of one batch's nested events, removed when the batch ends or its future is dropped.
struct Routes<'a> {
    nested: &'a NestedCalls,
    ids: Vec<String>,
    sink: Arc<dyn EventSink>,
}

impl<'a> Routes<'a> {
    fn new(nested: &'a NestedCalls, calls: &[ToolCall], sink: &Arc<dyn EventSink>) -> Self {
        let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
        for id in &ids {
            nested.route(id, sink.clone());
        }
        Routes {
            nested,
            ids,
            sink: sink.clone(),
        }
    }
}

impl Drop for Routes<'_> {
    fn drop(&mut self) {
        for id in &self.ids {
            self.nested.unroute(id, &self.sink);
        }
    }
}

/// What a nested call sends to its batch's sink. (Moved once, through a channel: the size difference is moot.)
#[allow(clippy::large_enum_variant)]
enum Forwarded {
    Event(AgentEvent),
    Log(ToolLog),
}

impl Forwarded {
    fn write(self, sink: &dyn EventSink) -> BoxFuture<'_, ()> {
        match self {
            Forwarded::Event(event) => sink.emit(event),
            Forwarded::Log(line) => sink.log(line),
        }
    }
}

/// Hands events and log lines to [`Dispatcher::run`]'s loop and waits until they are written.
struct Forward {
    tx: mpsc::UnboundedSender<(Forwarded, oneshot::Sender<()>)>,
}

impl Forward {
    fn send(&self, forwarded: Forwarded) -> BoxFuture<'_, ()> {
        let (ack, written) = oneshot::channel();
        let sent = self.tx.send((forwarded, ack)).is_ok();
        Box::pin(async move {
            if sent {
                let _ = written.await;
            }
        })
    }
}

impl EventSink for Forward {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        self.send(Forwarded::Event(event))
    }

    fn log(&self, line: ToolLog) -> BoxFuture<'_, ()> {
        self.send(Forwarded::Log(line))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::definition::{ToolContext, ToolDefinition};
    use crate::pipeline::event_sink;
    use crate::registry::{Registry, RegistrySources, Selection};
    use crate::tool::{CallSink, ToolExecution};
    use toolwright_sdk::ExecutionMode;

    fn dispatcher() -> Dispatcher {
        let inner = ToolDefinition::new(
            "inner",
            "Answers",
            json!({"type": "object"}),
            |_run: ToolExecution, _ctx: Option<ToolContext>| async { Ok(ToolResult::text("inner says hi")) },
        );
        let outer = ToolDefinition::new(
            "outer",
            "Calls inner",
            json!({"type": "object"}),
            |_run: ToolExecution, ctx: Option<ToolContext>| async move {
                let ctx = ctx.expect("a context");
                let outcome = ctx.execute_tool("inner", json!({}), CallSink::discard()).await;
                Ok(ToolResult::text(format!(
                    "heard: {}",
                    outcome.result.text_lines()
                )))
            },
        );
        let plain = ToolDefinition::new(
            "plain",
            "Does nothing",
            json!({"type": "object"}),
            |_run: ToolExecution, _ctx: Option<ToolContext>| async { Ok(ToolResult::text("ok")) },
        );
        let sources = RegistrySources {
            embedder: vec![inner, outer, plain],
            ..Default::default()
        };
        let registry = SharedRegistry::new(Registry::new(sources, &Selection::default()).unwrap());
        Dispatcher::new(registry, Pipeline::new(), std::env::temp_dir())
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nested_events_reach_a_sink_that_waits_in_order_without_deadlock() {
        // A sink that holds an async lock across a wait: a forwarded nested event must not stall the batch
        // events that hold the lock.
        let lock = Arc::new(tokio::sync::Mutex::new(()));
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let (l, seen) = (lock.clone(), log.clone());
        let sink = event_sink(move |event: AgentEvent| {
            let (lock, seen) = (l.clone(), seen.clone());
            async move {
                let _held = lock.lock().await;
                tokio::time::sleep(Duration::from_millis(2)).await;
                seen.lock()
                    .unwrap()
                    .push(format!("{} {}", event.kind(), event.tool_call_id()));
            }
        });
        let dispatcher = dispatcher();
        let message = AssistantMessage {
            tool_calls: (0..4)
                .map(|i| ToolCall::new(format!("c{i}"), if i == 0 { "outer" } else { "plain" }, json!({})))
                .collect(),
            ..Default::default()
        };
        let outcome = tokio::time::timeout(
            Duration::from_secs(20),
            dispatcher.run(&message, &sink, &CancellationToken::new()),
        )
        .await
        .expect("the batch finished");
        assert_eq!(
            outcome.messages[0].content[0].as_text(),
            Some("heard: inner says hi")
        );
        let record = outcome.messages[0].nested_calls.as_ref().expect("a record");
        assert_eq!(record.calls[0].id, "c0/1");
        let log = log.lock().unwrap().clone();
        let at = |line: &str| {
            log.iter()
                .position(|l| l == line)
                .unwrap_or_else(|| panic!("{line}: {log:?}"))
        };
        assert!(at("tool_execution_start c0") < at("tool_execution_start c0/1"));
        assert!(at("tool_execution_end c0/1") < at("tool_execution_end c0"));
        assert_eq!(log.len(), 4 * 4 + 2, "every event once: {log:?}");
    }

    /// A dispatcher over `tools` whose batches run in `mode`.
    fn dispatcher_of(tools: Vec<ToolDefinition>, mode: ExecutionMode) -> Dispatcher {
        let sources = RegistrySources {
            embedder: tools,
            ..Default::default()
        };
        let registry = SharedRegistry::new(Registry::new(sources, &Selection::default()).unwrap());
        let pipeline = Pipeline::new().with_tool_execution(mode);
        Dispatcher::new(registry, pipeline, std::env::temp_dir())
    }

    /// A sink that logs `kind id` of every event.
    fn logging_sink() -> (impl EventSink, Arc<Mutex<Vec<String>>>) {
        let log = Arc::new(Mutex::new(Vec::<String>::new()));
        let seen = log.clone();
        let sink = event_sink(move |event: AgentEvent| {
            let seen = seen.clone();
            async move {
                seen.lock()
                    .unwrap()
                    .push(format!("{} {}", event.kind(), event.tool_call_id()));
            }
        });
        (sink, log)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn nothing_of_a_straggler_follows_its_callers_end() {
        // A tool returns without awaiting its nested call (as a script's unawaited call): the call stays
        // unfinished in the record, and what it sends after its caller ended (sealed) reaches no sink.
        let go = Arc::new(tokio::sync::Notify::new());
        let wait = go.clone();
        let slow = ToolDefinition::new(
            "slow",
            "Ends when told",
            json!({"type": "object"}),
            move |run: ToolExecution, _ctx: Option<ToolContext>| {
                let wait = wait.clone();
                async move {
                    run.updates.update(ToolResult::text("started"));
                    wait.notified().await;
                    run.updates.update(ToolResult::text("late"));
                    Ok(ToolResult::text("late end"))
                }
            },
        );
        let notify = go.clone();
        let leaver = ToolDefinition::new(
            "leaver",
            "Leaves a call running",
            json!({"type": "object"}),
            move |_run: ToolExecution, ctx: Option<ToolContext>| {
                let go = notify.clone();
                async move {
                    let ctx = ctx.expect("a context");
                    let call = ctx.clone();
                    let straggler = tokio::spawn(async move {
                        call.execute_tool("slow", json!({}), CallSink::discard()).await
                    });
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    ctx.seal();
                    // The straggler ends while its caller winds down.
                    go.notify_waiters();
                    let _ = straggler.await;
                    Ok(ToolResult::text("returned"))
                }
            },
        );
        let dispatcher = dispatcher_of(vec![slow, leaver], ExecutionMode::Parallel);
        let (sink, log) = logging_sink();
        let message = AssistantMessage {
            tool_calls: vec![ToolCall::new("c0", "leaver", json!({}))],
            ..Default::default()
        };
        let outcome = dispatcher.run(&message, &sink, &CancellationToken::new()).await;
        let record = outcome.messages[0].nested_calls.as_ref().expect("a record");
        assert_eq!(record.calls[0].status, "unfinished");
        let log = log.lock().unwrap().clone();
        assert!(log.contains(&"tool_execution_start c0/1".to_owned()), "{log:?}");
        assert!(
            !log.contains(&"tool_execution_end c0/1".to_owned()),
            "a straggler's end after its caller ended: {log:?}"
        );
    }

    #[tokio::test]
    async fn a_dropped_batch_leaves_no_routes() {
        let dispatcher = dispatcher();
        let message = AssistantMessage {
            tool_calls: vec![ToolCall::new("c1", "outer", json!({}))],
            ..Default::default()
        };
        let cancel = CancellationToken::new();
        {
            let run = dispatcher.run(&message, &NoEvents, &cancel);
            tokio::pin!(run);
            // Polled once, then dropped mid-batch.
            let _ = futures::poll!(run.as_mut());
        }
        assert_eq!(dispatcher.nested_calls().routes(), 0);
        let outcome = dispatcher.call("outer", json!({}), &cancel).await;
        assert_eq!(outcome.result.text_lines(), "heard: inner says hi");
        assert_eq!(dispatcher.nested_calls().routes(), 0);
    }
}

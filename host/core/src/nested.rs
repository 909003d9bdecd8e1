//! Nested tool calls (pi's `nested-tool-calls.ts`): tools that call tools while they run.
//!
//! A tool reaches other tools through its [`ToolContext`] ([`ToolContext::execute_tool`], natively; the `host`
//! import's `call-tool`, from a plugin). [`NestedCalls`] runs each such call through the same pipeline as a
//! model-issued one (lookup among the *callable* tools, argument shim, validation, `before_tool_call`, execution,
//! `after_tool_call`, image normalisation), gives it the id `<caller id>/<n>`, emits its `tool_execution_*`
//! events with `parentToolCallId`, and records it for the model-issued call it descends from. The record
//! (`nestedCalls`) and the summed usage land on that call's result message; nothing else reaches the transcript.
//!
//! Calls that must not overlap (the host runs sequentially, or the target tool is sequential) wait in one FIFO
//! queue shared by the whole session (`Turns`), in the order they were made: a call takes its place when it is
//! made, before any await, so calls a tool makes together (`Promise.all`) run and end in call order however the
//! machine schedules them, as pi's promise chain does. A call that already holds the queue does not wait again
//! for its own descendants, so a sequential parent never deadlocks on its children.
//!
//! Nothing of a nested call is seen after its caller has ended (pi's event stream ends with the call): a call a
//! tool left running when it returned (a script's unawaited call, cancelled with it) sends no more events, and
//! stays `unfinished` in the record (see [`NestedCallRecorder::seal`]).

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::{ExecutionMode, LoadoutTool};

use crate::authority::Authority;
use crate::definition::{ContextFactory, ToolCaller, ToolContext};
use crate::pipeline::{EventSink, Pipeline};
pub use crate::record::{CallRecords, NestedCallRecorder, NestedRecord, limits};
use crate::tool::{AgentTool, BoxFuture, CallSink};
use crate::types::{AgentEvent, AgentToolCallOutcome, ToolCall};

struct Scope {
    recorder: Arc<Mutex<NestedCallRecorder>>,
    next_id: u64,
    holds_queue: bool,
    /// The model-issued call this scope descends from.
    root: String,
    /// The authority the call runs under (none: the host's).
    authority: Option<Arc<Authority>>,
    /// Whether this call and its callers are still running: the events of the calls it makes are sent while they
    /// are.
    lineage: Arc<Lineage>,
}

/// A call and the calls above it, each with whether it has ended.
#[derive(Debug, Default)]
struct Lineage {
    ended: AtomicBool,
    caller: Option<Arc<Lineage>>,
}

impl Lineage {
    fn below(caller: &Arc<Lineage>) -> Arc<Lineage> {
        Arc::new(Lineage {
            ended: AtomicBool::new(false),
            caller: Some(caller.clone()),
        })
    }

    /// This call has ended: the calls below it are stragglers from now on.
    fn end(&self) {
        self.ended.store(true, Ordering::Release);
    }

    /// Whether this call and every call above it are still running.
    fn running(&self) -> bool {
        let mut at = Some(self);
        while let Some(l) = at {
            if l.ended.load(Ordering::Acquire) {
                return false;
            }
            at = l.caller.as_deref();
        }
        true
    }
}

/// The events of the calls one caller makes: sent while the caller (and every call above it) runs, dropped after.
struct Gated {
    sink: Arc<dyn EventSink>,
    caller: Arc<Lineage>,
}

impl EventSink for Gated {
    fn emit(&self, event: AgentEvent) -> BoxFuture<'_, ()> {
        if self.caller.running() {
            self.sink.emit(event)
        } else {
            Box::pin(async {})
        }
    }

    fn log(&self, line: crate::pipeline::ToolLog) -> BoxFuture<'_, ()> {
        // Log lines are not pi's events: a straggler's stay (the sink decides what to do with them).
        self.sink.log(line)
    }
}

/// The session's exclusive queue: FIFO by the order calls were made in. A call takes a ticket when it is made
/// (synchronously) and waits until every earlier ticket is done or abandoned.
#[derive(Debug, Default)]
struct Turns {
    state: Mutex<TurnState>,
    changed: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct TurnState {
    /// The next ticket to give.
    next: u64,
    /// The ticket whose turn it is.
    serving: u64,
    /// Tickets given up before their turn (their waiters were dropped).
    abandoned: BTreeSet<u64>,
}

impl Turns {
    fn ticket(self: &Arc<Self>) -> Ticket {
        let mut state = lock(&self.state);
        let number = state.next;
        state.next += 1;
        Ticket {
            turns: self.clone(),
            number,
        }
    }
}

/// A place in [`Turns`]; dropping it (served or not) passes the turn on.
struct Ticket {
    turns: Arc<Turns>,
    number: u64,
}

impl Ticket {
    /// Wait for this ticket's turn.
    async fn turn(&mut self) {
        loop {
            let notified = self.turns.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if lock(&self.turns.state).serving == self.number {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut state = lock(&self.turns.state);
        if state.serving == self.number {
            state.serving += 1;
        } else {
            state.abandoned.insert(self.number);
        }
        loop {
            let serving = state.serving;
            if !state.abandoned.remove(&serving) {
                break;
            }
            state.serving += 1;
        }
        drop(state);
        self.turns.changed.notify_waiters();
    }
}

/// Where nested calls find their tools: the callable set, evaluated at call time.
pub type CallableTools = Arc<dyn Fn() -> Vec<AgentTool> + Send + Sync>;

/// Where nested callers see the callable tools' descriptions (pi's `ctx.tools`).
pub type CallableInfos = Arc<dyn Fn() -> Vec<LoadoutTool> + Send + Sync>;

/// pi's `NestedToolCallRunner`: runs the nested calls of one session (see the module docs).
pub struct NestedCalls {
    pipeline: Pipeline,
    tools: CallableTools,
    infos: CallableInfos,
    events: Arc<dyn EventSink>,
    /// Where the events of the calls descending from a model-issued call go, by that call's id, while its batch
    /// runs ([`NestedCalls::route`]); `events` for the others.
    routes: Mutex<HashMap<String, Arc<dyn EventSink>>>,
    scopes: Mutex<HashMap<String, Scope>>,
    queue: Arc<Turns>,
}

impl std::fmt::Debug for NestedCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scopes = self.scopes.lock().map(|s| s.len()).unwrap_or_default();
        f.debug_struct("NestedCalls")
            .field("pipeline", &self.pipeline)
            .field("scopes", &scopes)
            .finish_non_exhaustive()
    }
}

impl NestedCalls {
    /// A runner whose calls go through `pipeline`'s hooks and mode, find their tools with `tools`, show them to
    /// callers with `infos`, and send their events to `events`.
    pub fn new(
        pipeline: &Pipeline,
        tools: CallableTools,
        infos: CallableInfos,
        events: Arc<dyn EventSink>,
    ) -> Arc<Self> {
        // Nested results are not messages: the pipeline holds no records, so nothing points back here.
        Arc::new(NestedCalls {
            pipeline: pipeline.clone(),
            tools,
            infos,
            events,
            routes: Mutex::new(HashMap::new()),
            scopes: Mutex::new(HashMap::new()),
            queue: Arc::new(Turns::default()),
        })
    }

    fn scopes(&self) -> std::sync::MutexGuard<'_, HashMap<String, Scope>> {
        self.scopes.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tools a nested call can reach now, as callers see them.
    pub fn callable_infos(&self) -> Vec<LoadoutTool> {
        (self.infos)()
    }

    /// Run `name` with `args` on behalf of the call `caller_id` (pi's `execute`). Partial results go to
    /// `updates` and, as events, to the session. Never fails: every failure is an error outcome.
    pub async fn execute(
        &self,
        caller_id: &str,
        name: &str,
        args: Value,
        authority: Option<Arc<Authority>>,
        cancel: &CancellationToken,
        updates: CallSink,
    ) -> AgentToolCallOutcome {
        let tools = (self.tools)();
        let (call, recorder, index, holds_queue, root, caller) = {
            let mut scopes = self.scopes();
            let scope = scopes.entry(caller_id.to_owned()).or_insert_with(|| Scope {
                recorder: Arc::new(Mutex::new(NestedCallRecorder::new())),
                next_id: 1,
                holds_queue: false,
                root: caller_id.to_owned(),
                authority: None,
                lineage: Arc::default(),
            });
            let call = ToolCall::new(format!("{caller_id}/{}", scope.next_id), name, args);
            scope.next_id += 1;
            let index = lock(&scope.recorder).start(&call);
            (
                call,
                scope.recorder.clone(),
                index,
                scope.holds_queue,
                scope.root.clone(),
                scope.lineage.clone(),
            )
        };
        // The call's place in the exclusive queue is taken as it is made, before the first await.
        let exclusive = !holds_queue
            && (self.pipeline.tool_execution == ExecutionMode::Sequential
                || tools
                    .iter()
                    .find(|t| t.name() == name)
                    .and_then(AgentTool::execution_mode)
                    == Some(ExecutionMode::Sequential));
        let mut ticket = exclusive.then(|| self.queue.ticket());
        let events = Gated {
            sink: lock(&self.routes)
                .get(&root)
                .cloned()
                .unwrap_or_else(|| self.events.clone()),
            caller: caller.clone(),
        };
        events
            .emit(AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
                parent_tool_call_id: Some(caller_id.to_owned()),
            })
            .await;
        if let Some(ticket) = &mut ticket {
            ticket.turn().await;
        }
        let lineage = Lineage::below(&caller);
        self.scopes().insert(
            call.id.clone(),
            Scope {
                recorder: recorder.clone(),
                next_id: 1,
                holds_queue: holds_queue || exclusive,
                root,
                authority: authority.clone(),
                lineage: lineage.clone(),
            },
        );
        // The scope goes away even if this future is dropped mid-call.
        let _child = ScopeGuard {
            runner: self,
            id: &call.id,
            lineage,
        };
        let outcome = self
            .pipeline
            .run_nested_call(&tools, &call, (caller_id, authority), cancel, updates, &events)
            .await;
        drop(_child);
        drop(ticket);
        {
            let mut recorder = lock(&recorder);
            recorder.finish(index, outcome.is_error, &outcome.result.text_lines());
            if let Some(usage) = &outcome.result.usage {
                recorder.add_usage(usage);
            }
        }
        events
            .emit(AgentEvent::ToolExecutionEnd {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                result: outcome.result.clone(),
                is_error: outcome.is_error,
                duration_ms: outcome.duration_ms,
                parent_tool_call_id: Some(caller_id.to_owned()),
            })
            .await;
        outcome
    }

    /// Remove and return the record of the calls `call_id` made (pi's `takeRecord`); `None` when it made none.
    pub fn take_record(&self, call_id: &str) -> Option<NestedRecord> {
        let scope = self.scopes().remove(call_id)?;
        scope.lineage.end();
        let recorder = lock(&scope.recorder);
        Some(NestedRecord {
            calls: recorder.snapshot(),
            usage: recorder.total_usage().cloned(),
        })
    }

    /// Send the events of the nested calls that descend from the model-issued call `call_id` to `sink` (until
    /// [`NestedCalls::unroute`]), instead of the runner's own sink: each batch's nested events go with the
    /// batch's.
    pub fn route(&self, call_id: &str, sink: Arc<dyn EventSink>) {
        lock(&self.routes).insert(call_id.to_owned(), sink);
    }

    /// Stop routing the events of `call_id`'s nested calls to `sink` (a route another batch set since, for a
    /// call of the same id, stays).
    pub fn unroute(&self, call_id: &str, sink: &Arc<dyn EventSink>) {
        let mut routes = lock(&self.routes);
        if routes.get(call_id).is_some_and(|s| Arc::ptr_eq(s, sink)) {
            routes.remove(call_id);
        }
    }

    /// How many model-issued calls have their nested events routed now.
    pub fn routes(&self) -> usize {
        lock(&self.routes).len()
    }

    /// Drop every record (pi's `clear` at the end of a run).
    pub fn clear(&self) {
        self.scopes().clear();
    }

    /// The authority the running call `call_id` was made under (none: the host's, or no such call).
    fn authority_of(&self, call_id: &str) -> Option<Arc<Authority>> {
        self.scopes().get(call_id).and_then(|s| s.authority.clone())
    }

    /// Contexts for the tools of this session: each execution gets its call id, `cwd`, its cancellation, this
    /// runner, and the authority a nested call was made under.
    pub fn context_factory(self: &Arc<Self>, cwd: impl Into<PathBuf>) -> ContextFactory {
        let runner = self.clone();
        let cwd = cwd.into();
        Arc::new(move |id: &str, cancel: &CancellationToken| {
            ToolContext::new(id, cwd.clone(), cancel.clone())
                .with_caller(runner.clone())
                .with_authority(runner.authority_of(id))
        })
    }
}

impl CallRecords for NestedCalls {
    fn take_record(&self, call_id: &str) -> Option<NestedRecord> {
        NestedCalls::take_record(self, call_id)
    }
}

impl ToolCaller for NestedCalls {
    fn call<'a>(
        &'a self,
        caller_id: &'a str,
        name: &'a str,
        args: Value,
        authority: Option<Arc<Authority>>,
        cancel: &'a CancellationToken,
        updates: CallSink,
    ) -> BoxFuture<'a, AgentToolCallOutcome> {
        Box::pin(self.execute(caller_id, name, args, authority, cancel, updates))
    }

    fn tools(&self) -> Vec<LoadoutTool> {
        self.callable_infos()
    }

    fn seal(&self, caller_id: &str) {
        let scope = self
            .scopes()
            .get(caller_id)
            .map(|s| (s.recorder.clone(), s.lineage.clone()));
        if let Some((recorder, lineage)) = scope {
            // Before the record: no event of a straggler after this, and it stays unfinished.
            lineage.end();
            lock(&recorder).seal(caller_id);
        }
    }
}

struct ScopeGuard<'a> {
    runner: &'a NestedCalls,
    id: &'a str,
    lineage: Arc<Lineage>,
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
        self.lineage.end();
        self.runner.scopes().remove(self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, args: Value) -> ToolCall {
        ToolCall::new(id, "echo", args)
    }

    #[test]
    fn the_recorder_keeps_arguments_within_pis_limits() {
        let mut r = NestedCallRecorder::new();
        assert_eq!(r.snapshot(), None);
        let small = r.start(&call("c/1", json!({"a": 1})));
        r.finish(small, false, "fine");
        let big = "x".repeat(limits::MAX_ARGUMENT_BYTES_PER_CALL);
        let too_big = r.start(&call("c/2", json!({ "text": big })));
        r.finish(too_big, true, &"e".repeat(600));
        let record = r.snapshot().unwrap();
        assert!(!record.complete);
        assert_eq!(record.calls[0].arguments, Some(json!({"a": 1})));
        assert_eq!(record.calls[0].status, "ok");
        assert_eq!(record.calls[0].error, None);
        assert_eq!(record.calls[1].arguments, None);
        assert_eq!(
            record.calls[1].arguments_bytes,
            Some((limits::MAX_ARGUMENT_BYTES_PER_CALL + 11) as u64)
        );
        assert_eq!(record.calls[1].error.as_deref().map(str::len), Some(500));
    }

    #[test]
    fn the_recorder_drops_calls_past_256_and_caps_the_total_arguments() {
        let mut r = NestedCallRecorder::new();
        let arg = "y".repeat(5000);
        for i in 0..300 {
            let index = r.start(&call(&format!("c/{i}"), json!({ "t": arg })));
            assert_eq!(index.is_some(), i < limits::MAX_CALLS);
            r.finish(index, false, "");
        }
        let record = r.snapshot().unwrap();
        assert_eq!(record.calls.len(), limits::MAX_CALLS);
        assert!(!record.complete);
        // 5010 bytes each: six fit in 32 KiB, the seventh does not.
        let kept = record.calls.iter().filter(|c| c.arguments.is_some()).count();
        assert_eq!(kept, 6);
    }

    #[test]
    fn an_unfinished_call_makes_the_record_incomplete() {
        let mut r = NestedCallRecorder::new();
        r.start(&call("c/1", json!({})));
        let record = r.snapshot().unwrap();
        assert_eq!(record.calls[0].status, "unfinished");
        assert!(!record.complete);
    }

    #[test]
    fn calls_sealed_with_their_caller_stay_unfinished() {
        let mut r = NestedCallRecorder::new();
        let own = r.start(&call("c/1", json!({})));
        let below = r.start(&call("c/1/1", json!({})));
        let sibling = r.start(&call("c/10", json!({})));
        r.seal("c/1");
        for index in [own, below, sibling] {
            r.finish(index, true, "Command aborted");
        }
        let record = r.snapshot().unwrap();
        let status: Vec<&str> = record.calls.iter().map(|c| c.status.as_str()).collect();
        assert_eq!(status, ["error", "unfinished", "error"]);
        assert_eq!(record.calls[1].duration_ms, None);
        assert_eq!(record.calls[1].error, None);
        assert!(!record.complete);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn calls_made_together_take_the_exclusive_queue_in_call_order() {
        // In a sequential session, two calls made together (`Promise.all`) run in the order they were made, even
        // when the first one's start event is slow to be written (a busy machine).
        use crate::definition::{ToolDefinition, wrap_tool_definition};
        use crate::pipeline::event_sink;
        use crate::tool::ToolExecution;
        use crate::types::ToolResult;

        let ran = Arc::new(Mutex::new(Vec::<String>::new()));
        let r = ran.clone();
        let note = ToolDefinition::new(
            "note",
            "Notes its argument",
            json!({"type": "object"}),
            move |run: ToolExecution, _ctx: Option<ToolContext>| {
                let ran = r.clone();
                async move {
                    ran.lock().unwrap().push(run.params["n"].to_string());
                    Ok(ToolResult::text("noted"))
                }
            },
        );
        let tool = wrap_tool_definition(&note, None);
        let tools: CallableTools = Arc::new(move || vec![tool.clone()]);
        let infos: CallableInfos = Arc::new(Vec::new);
        let ended = Arc::new(Mutex::new(Vec::<String>::new()));
        let e = ended.clone();
        let events = Arc::new(event_sink(move |event: AgentEvent| {
            let ended = e.clone();
            async move {
                match &event {
                    AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "c/1" => {
                        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    }
                    AgentEvent::ToolExecutionEnd { tool_call_id, .. } => {
                        ended.lock().unwrap().push(tool_call_id.clone());
                    }
                    _ => {}
                }
            }
        }));
        let pipeline = Pipeline::new().with_tool_execution(ExecutionMode::Sequential);
        let runner = NestedCalls::new(&pipeline, tools, infos, events);
        let cancel = CancellationToken::new();
        let (a, b) = tokio::join!(
            runner.execute("c", "note", json!({"n": 1}), None, &cancel, CallSink::discard()),
            runner.execute("c", "note", json!({"n": 2}), None, &cancel, CallSink::discard()),
        );
        assert!(!a.is_error && !b.is_error, "{a:?} {b:?}");
        assert_eq!(*ran.lock().unwrap(), ["1", "2"]);
        assert_eq!(*ended.lock().unwrap(), ["c/1", "c/2"]);
    }

    #[test]
    fn error_text_is_cut_in_utf16_units_as_javascript_does() {
        let mut r = NestedCallRecorder::new();
        let index = r.start(&call("c/1", json!({})));
        r.finish(index, true, &format!("{}😀b", "a".repeat(499)));
        assert_eq!(r.snapshot().unwrap().calls[0].error, Some("a".repeat(499)));
    }
}

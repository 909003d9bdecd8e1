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
//! queue shared by the whole session; a call that already holds the queue does not wait again for its own
//! descendants, so a sequential parent never deadlocks on its children.

use std::collections::HashMap;
use std::path::PathBuf;
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
    queue: Arc<tokio::sync::Mutex<()>>,
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
            queue: Arc::new(tokio::sync::Mutex::new(())),
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
        let (call, recorder, index, holds_queue, root) = {
            let mut scopes = self.scopes();
            let scope = scopes.entry(caller_id.to_owned()).or_insert_with(|| Scope {
                recorder: Arc::new(Mutex::new(NestedCallRecorder::new())),
                next_id: 1,
                holds_queue: false,
                root: caller_id.to_owned(),
                authority: None,
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
            )
        };
        let events = lock(&self.routes)
            .get(&root)
            .cloned()
            .unwrap_or_else(|| self.events.clone());
        events
            .emit(AgentEvent::ToolExecutionStart {
                tool_call_id: call.id.clone(),
                tool_name: call.name.clone(),
                args: call.arguments.clone(),
                parent_tool_call_id: Some(caller_id.to_owned()),
            })
            .await;
        let tools = (self.tools)();
        let exclusive = !holds_queue
            && (self.pipeline.tool_execution == ExecutionMode::Sequential
                || tools
                    .iter()
                    .find(|t| t.name() == name)
                    .and_then(AgentTool::execution_mode)
                    == Some(ExecutionMode::Sequential));
        let turn = if exclusive {
            Some(self.queue.clone().lock_owned().await)
        } else {
            None
        };
        self.scopes().insert(
            call.id.clone(),
            Scope {
                recorder: recorder.clone(),
                next_id: 1,
                holds_queue: holds_queue || exclusive,
                root,
                authority: authority.clone(),
            },
        );
        // The scope goes away even if this future is dropped mid-call.
        let _child = ScopeGuard {
            runner: self,
            id: &call.id,
        };
        let outcome = self
            .pipeline
            .run_nested_call(&tools, &call, (caller_id, authority), cancel, updates, &*events)
            .await;
        drop(_child);
        drop(turn);
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
        let recorder = self.scopes().get(caller_id).map(|s| s.recorder.clone());
        if let Some(recorder) = recorder {
            lock(&recorder).seal(caller_id);
        }
    }
}

struct ScopeGuard<'a> {
    runner: &'a NestedCalls,
    id: &'a str,
}

impl Drop for ScopeGuard<'_> {
    fn drop(&mut self) {
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

    #[test]
    fn error_text_is_cut_in_utf16_units_as_javascript_does() {
        let mut r = NestedCallRecorder::new();
        let index = r.start(&call("c/1", json!({})));
        r.finish(index, true, &format!("{}😀b", "a".repeat(499)));
        assert_eq!(r.snapshot().unwrap().calls[0].error, Some("a".repeat(499)));
    }
}

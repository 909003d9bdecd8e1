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
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use serde_json::Value;
use tokio_util::sync::CancellationToken;
use toolwright_sdk::{ExecutionMode, LoadoutTool, js};

use crate::definition::{ContextFactory, ToolContext};
use crate::pipeline::{EventSink, Pipeline};
use crate::registry::Registry;
use crate::tool::{AgentTool, UpdateSink};
use crate::types::{
    AgentEvent, AgentToolCallOutcome, NestedToolCallRecord, NestedToolCalls, ToolCall, ToolResultMessage,
    Usage,
};

/// pi's `NESTED_CALL_LIMITS`: what the record of one model-issued call keeps.
pub mod limits {
    /// Calls recorded; later ones are counted in the usage but left out of the record.
    pub const MAX_CALLS: usize = 256;
    /// Bytes of JSON arguments kept per call; larger arguments are recorded as their size.
    pub const MAX_ARGUMENT_BYTES_PER_CALL: usize = 8 * 1024;
    /// Bytes of JSON arguments kept over the whole record.
    pub const MAX_ARGUMENT_BYTES_TOTAL: usize = 32 * 1024;
    /// Characters of error text kept per call.
    pub const MAX_ERROR_CHARS: usize = 500;
}

/// pi's `NestedCallRecorder`: the nested calls of one model-issued call, at every depth, and their usage.
#[derive(Debug, Default)]
pub struct NestedCallRecorder {
    calls: Vec<NestedToolCallRecord>,
    started: Vec<Instant>,
    complete: bool,
    argument_bytes: usize,
    usage: Option<Usage>,
}

impl NestedCallRecorder {
    /// An empty, complete record.
    pub fn new() -> Self {
        NestedCallRecorder {
            complete: true,
            ..Default::default()
        }
    }

    /// Record `call` as it starts: its index, or `None` when the record is full (and now incomplete).
    pub fn start(&mut self, call: &ToolCall) -> Option<usize> {
        if self.calls.len() >= limits::MAX_CALLS {
            self.complete = false;
            return None;
        }
        let json = serde_json::to_string(&call.arguments).unwrap_or_else(|_| "{}".into());
        let bytes = json.len();
        let mut record = NestedToolCallRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: None,
            arguments_bytes: None,
            status: "unfinished".into(),
            duration_ms: None,
            error: None,
        };
        if bytes > limits::MAX_ARGUMENT_BYTES_PER_CALL
            || self.argument_bytes + bytes > limits::MAX_ARGUMENT_BYTES_TOTAL
        {
            record.arguments_bytes = Some(bytes as u64);
            self.complete = false;
        } else {
            record.arguments = Some(call.arguments.clone());
            self.argument_bytes += bytes;
        }
        self.calls.push(record);
        self.started.push(Instant::now());
        Some(self.calls.len() - 1)
    }

    /// Settle the record `index` (from [`NestedCallRecorder::start`]): status, rounded duration, and the first
    /// 500 characters of the error text.
    pub fn finish(&mut self, index: Option<usize>, is_error: bool, text: &str) {
        let Some(index) = index else { return };
        let started = self.started[index];
        let record = &mut self.calls[index];
        record.status = if is_error { "error" } else { "ok" }.into();
        record.duration_ms = Some((started.elapsed().as_secs_f64() * 1000.0).round() as u64);
        if is_error && !text.is_empty() {
            record.error = Some(js::utf16_prefix(text, limits::MAX_ERROR_CHARS).to_owned());
        }
    }

    /// Add a nested result's usage (counted even for calls the record left out).
    pub fn add_usage(&mut self, usage: &Usage) {
        self.usage = Some(match &self.usage {
            Some(total) => total.combine(usage),
            None => usage.clone(),
        });
    }

    /// The summed usage of every nested result.
    pub fn total_usage(&self) -> Option<&Usage> {
        self.usage.as_ref()
    }

    /// The record so far, or `None` when no call was made; `complete` is false when anything was left out or a
    /// call is still unfinished.
    pub fn snapshot(&self) -> Option<NestedToolCalls> {
        if self.calls.is_empty() && self.complete {
            return None;
        }
        Some(NestedToolCalls {
            calls: self.calls.clone(),
            complete: self.complete && self.calls.iter().all(|c| c.status != "unfinished"),
        })
    }
}

/// The calls a model-issued call made, taken for its result message.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NestedRecord {
    /// The record (`nestedCalls`), when calls were made.
    pub calls: Option<NestedToolCalls>,
    /// Their summed usage, when any reported usage.
    pub usage: Option<Usage>,
}

impl NestedRecord {
    /// pi's `message_start` step: `nestedCalls` set and the usage added to the message's own.
    pub fn attach(self, message: &mut ToolResultMessage) {
        if let Some(calls) = self.calls {
            message.nested_calls = Some(calls);
        }
        if let Some(usage) = self.usage {
            message.usage = Some(match &message.usage {
                Some(own) => own.combine(&usage),
                None => usage,
            });
        }
    }
}

struct Scope {
    recorder: Arc<Mutex<NestedCallRecorder>>,
    next_id: u64,
    holds_queue: bool,
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
        let mut pipeline = pipeline.clone();
        // Nested results are not messages: nothing to attach, and no cycle through the pipeline.
        pipeline.nested = None;
        Arc::new(NestedCalls {
            pipeline,
            tools,
            infos,
            events,
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
        cancel: &CancellationToken,
        updates: UpdateSink,
    ) -> AgentToolCallOutcome {
        let (call, recorder, index, holds_queue) = {
            let mut scopes = self.scopes();
            let scope = scopes.entry(caller_id.to_owned()).or_insert_with(|| Scope {
                recorder: Arc::new(Mutex::new(NestedCallRecorder::new())),
                next_id: 1,
                holds_queue: false,
            });
            let call = ToolCall::new(format!("{caller_id}/{}", scope.next_id), name, args);
            scope.next_id += 1;
            let index = lock(&scope.recorder).start(&call);
            (call, scope.recorder.clone(), index, scope.holds_queue)
        };
        self.events
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
            },
        );
        // The scope goes away even if this future is dropped mid-call.
        let _child = ScopeGuard {
            runner: self,
            id: &call.id,
        };
        let outcome = self
            .pipeline
            .run_nested_call(&tools, &call, caller_id, cancel, updates, &*self.events)
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
        self.events
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

    /// Drop every record (pi's `clear` at the end of a run).
    pub fn clear(&self) {
        self.scopes().clear();
    }

    /// Contexts for the tools of this session: each execution gets its call id, `cwd`, its cancellation and this
    /// runner.
    pub fn context_factory(self: &Arc<Self>, cwd: impl Into<PathBuf>) -> ContextFactory {
        let runner = self.clone();
        let cwd = cwd.into();
        Arc::new(move |id: &str, cancel: &CancellationToken| {
            ToolContext::new(id, cwd.clone(), cancel.clone()).with_nested(runner.clone())
        })
    }

    /// Wire nested calls into a session: a runner over `registry`'s callable tools with `pipeline`'s hooks, set as
    /// the registry's context factory (in `cwd`), and `pipeline` with the runner attached so result messages get
    /// their records. Events of nested calls go to `events`.
    pub fn install(
        registry: &Arc<Mutex<Registry>>,
        pipeline: Pipeline,
        cwd: impl Into<PathBuf>,
        events: Arc<dyn EventSink>,
    ) -> Pipeline {
        let weak: Weak<Mutex<Registry>> = Arc::downgrade(registry);
        let weak_infos = weak.clone();
        let tools: CallableTools = Arc::new(move || {
            weak.upgrade()
                .map(|r| lock(&r).callable_tools())
                .unwrap_or_default()
        });
        let infos: CallableInfos = Arc::new(move || {
            weak_infos
                .upgrade()
                .map(|r| lock(&r).callable_infos())
                .unwrap_or_default()
        });
        let runner = NestedCalls::new(&pipeline, tools, infos, events);
        lock(registry).set_context_factory(Some(runner.context_factory(cwd)));
        pipeline.with_nested_calls(runner)
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
    fn error_text_is_cut_in_utf16_units_as_javascript_does() {
        let mut r = NestedCallRecorder::new();
        let index = r.start(&call("c/1", json!({})));
        r.finish(index, true, &format!("{}😀b", "a".repeat(499)));
        assert_eq!(r.snapshot().unwrap().calls[0].error, Some("a".repeat(499)));
    }
}

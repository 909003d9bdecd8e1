//! Nested tool calls (pi's `ctx.executeTool`, spec §9): the conformance cases, each run with the calling tools
//! linked natively and loaded as a wasm component (`tests/programs/nested`): ids, events with parents, the record
//! and its limits, usage sums, exposure, the exclusive queue, hooks, abort, and calls across native and wasm.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::registry::{Registry, RegistrySources, Selection, SharedRegistry};
use toolwright::toolset::{BuiltinMode, Toolset, ToolsetOptions};
use toolwright::{
    AgentEvent, AssistantMessage, Dispatcher, EventLog, ExecutionMode, Pipeline, ToolCall, ToolDefinition,
    ToolResultMessage,
};
use toolwright_tests::programs;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Variant {
    Native,
    Wasm,
    /// The wasm component under a pipeline that works here: a call that runs alone is placed on the thread
    /// that polls its batch, and serves its own updates and its nested calls' events while it waits for them.
    WasmHere,
}

const VARIANTS: [Variant; 3] = [Variant::Native, Variant::Wasm, Variant::WasmHere];

fn program_tools(variant: Variant, cwd: &Path) -> Vec<ToolDefinition> {
    match variant {
        Variant::Native => programs::native(toolwright_test_nested::tools(), cwd),
        Variant::Wasm | Variant::WasmHere => programs::wasm(programs::NESTED, cwd),
    }
}

struct Session {
    dispatcher: Dispatcher,
    events: Arc<EventLog>,
}

impl Session {
    fn new(
        builtins: Vec<ToolDefinition>,
        embedder: Vec<ToolDefinition>,
        pipeline: Pipeline,
        cwd: &Path,
    ) -> Self {
        let sources = RegistrySources {
            builtins,
            extensions: Vec::new(),
            embedder,
        };
        let selection = Selection {
            default_tools: Some(
                ["read", "bash", "edit", "write", "grep", "find", "ls"]
                    .map(String::from)
                    .to_vec(),
            ),
            ..Default::default()
        };
        let registry = SharedRegistry::new(Registry::new(sources, &selection).unwrap());
        Session {
            dispatcher: Dispatcher::new(registry, pipeline, cwd),
            events: Arc::new(EventLog::new()),
        }
    }

    fn program(variant: Variant, pipeline: Pipeline, cwd: &Path) -> Self {
        let pipeline = pipeline.with_work_here(variant == Variant::WasmHere);
        Session::new(Vec::new(), program_tools(variant, cwd), pipeline, cwd)
    }

    async fn run(&self, calls: Vec<ToolCall>) -> Vec<ToolResultMessage> {
        self.run_cancellable(calls, &CancellationToken::new()).await
    }

    async fn run_cancellable(
        &self,
        calls: Vec<ToolCall>,
        cancel: &CancellationToken,
    ) -> Vec<ToolResultMessage> {
        let message = AssistantMessage {
            tool_calls: calls,
            ..Default::default()
        };
        self.dispatcher
            .run(&message, &*self.events, cancel)
            .await
            .messages
    }

    /// The nested calls' events as `TYPE ID PARENT`.
    fn nested_events(&self) -> Vec<String> {
        self.events
            .events()
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolExecutionStart {
                    tool_call_id,
                    parent_tool_call_id: Some(parent),
                    ..
                } => Some(format!("start {tool_call_id} {parent}")),
                AgentEvent::ToolExecutionEnd {
                    tool_call_id,
                    parent_tool_call_id: Some(parent),
                    ..
                } => Some(format!("end {tool_call_id} {parent}")),
                _ => None,
            })
            .collect()
    }
}

fn nest(id: &str, calls: Value) -> ToolCall {
    ToolCall::new(id, "nest", json!({ "calls": calls }))
}

fn text(message: &ToolResultMessage) -> String {
    message.content[0].as_text().unwrap().to_owned()
}

/// The record without durations (they vary), as JSON.
fn record(message: &ToolResultMessage) -> Value {
    let mut record = serde_json::to_value(message.nested_calls.as_ref().unwrap()).unwrap();
    for call in record["calls"].as_array_mut().unwrap() {
        assert!(
            call["durationMs"].is_u64(),
            "every finished call has a duration: {call}"
        );
        call.as_object_mut().unwrap().remove("durationMs");
    }
    record
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ids_events_and_the_record_follow_pi() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let calls = json!([
            {"name": "leaf", "arguments": {"text": "a"}},
            {"name": "leaf", "arguments": {"fail": true}},
            {"name": "nope"},
            {"name": "leaf", "arguments": {"text": 5}},
            {"name": "leaf", "arguments": {"sleepMs": "soon"}},
        ]);
        let messages = session.run(vec![nest("c1", calls)]).await;
        assert_eq!(
            text(&messages[0]),
            "leaf ok ran: leaf a\nleaf error ran: leaf failed on purpose\nnope error: Tool nope not found\n\
             leaf ok ran: leaf 5\nleaf error: Validation failed for tool \"leaf\":\n  - sleepMs: expected number, got string\n\n\
             Received arguments:\n{\n  \"sleepMs\": \"soon\"\n}",
            "{variant:?}"
        );
        assert_eq!(
            record(&messages[0]),
            json!({"calls": [
                {"id": "c1/1", "name": "leaf", "arguments": {"text": "a"}, "status": "ok"},
                {"id": "c1/2", "name": "leaf", "arguments": {"fail": true}, "status": "error",
                 "error": "leaf failed on purpose"},
                {"id": "c1/3", "name": "nope", "arguments": {}, "status": "error", "error": "Tool nope not found"},
                {"id": "c1/4", "name": "leaf", "arguments": {"text": 5}, "status": "ok"},
                {"id": "c1/5", "name": "leaf", "arguments": {"sleepMs": "soon"}, "status": "error",
                 "error": "Validation failed for tool \"leaf\":\n  - sleepMs: expected number, got string\n\nReceived arguments:\n{\n  \"sleepMs\": \"soon\"\n}"},
            ], "complete": true}),
            "{variant:?}"
        );
        let mut expected = Vec::new();
        for n in 1..=5 {
            expected.push(format!("start c1/{n} c1"));
            expected.push(format!("end c1/{n} c1"));
        }
        assert_eq!(session.nested_events(), expected, "{variant:?}");
        // Nested calls are not messages: the batch made exactly one.
        assert_eq!(messages.len(), 1);
        let kinds: Vec<&str> = session.events.events().iter().map(AgentEvent::kind).collect();
        assert_eq!(kinds.first(), Some(&"tool_execution_start"));
        assert_eq!(kinds.iter().filter(|k| **k == "message_end").count(), 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_without_nested_calls_has_no_record() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let messages = session
            .run(vec![ToolCall::new("c1", "leaf", json!({"text": "x"}))])
            .await;
        assert_eq!(messages[0].nested_calls, None);
        let json = serde_json::to_value(&messages[0]).unwrap();
        assert!(json.get("nestedCalls").is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exposure_decides_what_nested_calls_reach() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let calls = json!([
            {"name": "helper", "arguments": {"text": "codemode"}},
            {"name": "later_helper", "arguments": {"text": "deferred"}},
            {"name": "solo"},
            {"name": "ghost"},
            {"name": "list_tools"},
        ]);
        let messages = session.run(vec![nest("c1", calls)]).await;
        assert_eq!(
            text(&messages[0]),
            "helper ok ran: helper codemode\nlater_helper ok ran: later_helper deferred\n\
             solo error: Tool solo not found\nghost error: Tool ghost not found\n\
             list_tools ok ran: nest,leaf,seq_leaf,helper,later_helper,list_tools",
            "{variant:?}"
        );
        // The model reaches `solo` (model-only) directly, but not `helper` (codemode).
        let direct = session
            .run(vec![
                ToolCall::new("m1", "solo", json!({"text": "direct"})),
                ToolCall::new("m2", "helper", json!({})),
            ])
            .await;
        assert_eq!(text(&direct[0]), "solo direct");
        assert_eq!(text(&direct[1]), "Tool helper not found");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeper_calls_share_the_record_and_usage_sums_every_level() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let call = ToolCall::new(
            "c1",
            "nest",
            json!({"usage": 1, "calls": [
                {"name": "nest", "arguments": {"usage": 5, "calls": [{"name": "leaf", "arguments": {"usage": 10}}]}},
                {"name": "leaf", "arguments": {"usage": 10}},
            ]}),
        );
        let messages = session.run(vec![call]).await;
        let ids: Vec<String> = messages[0]
            .nested_calls
            .as_ref()
            .unwrap()
            .calls
            .iter()
            .map(|c| c.id.clone())
            .collect();
        assert_eq!(ids, ["c1/1", "c1/1/1", "c1/2"], "{variant:?}");
        // Own 1 + middle 5 + leaf-in-middle 10 + leaf 10.
        let usage = messages[0].usage.as_ref().unwrap();
        assert_eq!(usage.input, 26.0, "{variant:?}");
        assert_eq!(usage.total_tokens, 26.0, "{variant:?}");
        assert_eq!(
            session.nested_events(),
            [
                "start c1/1 c1",
                "start c1/1/1 c1/1",
                "end c1/1/1 c1/1",
                "end c1/1 c1",
                "start c1/2 c1",
                "end c1/2 c1"
            ],
            "{variant:?}"
        );
    }
}

/// `(start, end)` of each `seq_leaf` answer (`TEXT START-END`).
fn intervals(text: &str) -> Vec<(u128, u128)> {
    text.lines()
        .map(|line| {
            let span = line.rsplit(' ').next().unwrap();
            let (a, b) = span.split_once('-').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_targets_wait_in_one_queue_and_parallel_ones_overlap() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let three = |tool: &str, ms: u64| {
            json!({"concurrent": true, "calls": [
                {"name": tool, "arguments": {"text": "a", "sleepMs": ms}},
                {"name": tool, "arguments": {"text": "b", "sleepMs": ms}},
                {"name": tool, "arguments": {"text": "c", "sleepMs": ms}},
            ]})
        };
        // Two model-issued callers at once: their sequential nested calls share the one queue.
        let messages = session
            .run(vec![
                ToolCall::new("c1", "nest", three("seq_leaf", 150)),
                ToolCall::new("c2", "nest", three("seq_leaf", 150)),
            ])
            .await;
        let mut spans: Vec<(u128, u128)> = messages.iter().flat_map(|m| intervals(&text(m))).collect();
        spans.sort();
        assert_eq!(spans.len(), 6);
        for pair in spans.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "{variant:?}: sequential calls overlapped: {spans:?}"
            );
        }
        // Start events come before queueing: all six starts precede the last end.
        let started = Instant::now();
        let messages = session
            .run(vec![ToolCall::new("p1", "nest", three("leaf", 500))])
            .await;
        assert_eq!(text(&messages[0]).lines().count(), 3);
        assert!(
            // One after another would take 1.5 s.
            started.elapsed() < Duration::from_millis(1300),
            "{variant:?}: parallel nested calls did not overlap ({:?})",
            started.elapsed()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_host_does_not_deadlock_a_parent_holding_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let pipeline = Pipeline::new().with_tool_execution(ExecutionMode::Sequential);
        let session = Session::program(variant, pipeline, dir.path());
        let call = nest(
            "c1",
            json!([{"name": "nest", "arguments": {"calls": [
                {"name": "seq_leaf", "arguments": {"text": "deep"}},
                {"name": "nest", "arguments": {"calls": [{"name": "leaf", "arguments": {"text": "deeper"}}]}},
            ]}}]),
        );
        let messages = tokio::time::timeout(Duration::from_secs(20), session.run(vec![call]))
            .await
            .expect("nested calls under a sequential host deadlocked");
        let record = messages[0].nested_calls.as_ref().unwrap();
        let ids: Vec<&str> = record.calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["c1/1", "c1/1/1", "c1/1/2", "c1/1/2/1"], "{variant:?}");
        assert!(
            record.calls.iter().all(|c| c.status == "ok"),
            "{variant:?}: {record:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_nested_calls_hits_the_record_limits_and_the_host_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let big = "z".repeat(5000);
        let calls: Vec<Value> = (0..300)
            .map(|i| json!({"name": "leaf", "arguments": {"text": if i < 10 { big.clone() } else { "s".into() }, "usage": 1}}))
            .collect();
        let messages = session
            .run(vec![ToolCall::new(
                "c1",
                "nest",
                json!({"calls": calls, "concurrent": true}),
            )])
            .await;
        let record = messages[0].nested_calls.as_ref().unwrap();
        assert_eq!(record.calls.len(), 256, "{variant:?}");
        assert!(!record.complete);
        // Six 5 KB argument sets fit in 32 KiB; the rest of the big ones are recorded by size.
        assert_eq!(record.calls[5].arguments.as_ref().unwrap()["text"], json!(big));
        assert_eq!(record.calls[6].arguments, None);
        assert_eq!(record.calls[6].arguments_bytes, Some(5021));
        assert_eq!(record.calls[255].id, "c1/256");
        // Every call counts in the usage, recorded or not.
        assert_eq!(messages[0].usage.as_ref().unwrap().input, 300.0, "{variant:?}");
        let next = session
            .run(vec![ToolCall::new("c2", "leaf", json!({"text": "still here"}))])
            .await;
        assert_eq!(text(&next[0]), "leaf still here");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_see_the_parent_and_can_block_a_nested_call() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let hook = toolwright::hooks::before_tool_call(move |ctx, _cancel| {
            let log = log.clone();
            async move {
                log.lock()
                    .unwrap()
                    .push(format!("{} {:?}", ctx.tool_call.id, ctx.parent_tool_call_id));
                if ctx.args["text"] == json!("forbidden") {
                    return Ok(Some(toolwright::hooks::BeforeToolCallResult::block(
                        "not that one",
                    )));
                }
                Ok(None)
            }
        });
        let session = Session::program(variant, Pipeline::new().with_before_tool_call(hook), dir.path());
        let messages = session
            .run(vec![nest(
                "c1",
                json!([{"name": "leaf", "arguments": {"text": "fine"}}, {"name": "leaf", "arguments": {"text": "forbidden"}}]),
            )])
            .await;
        assert_eq!(
            text(&messages[0]),
            "leaf ok ran: leaf fine\nleaf error: not that one",
            "{variant:?}"
        );
        assert_eq!(
            *seen.lock().unwrap(),
            ["c1 None", "c1/1 Some(\"c1\")", "c1/2 Some(\"c1\")"]
        );
        assert_eq!(
            messages[0].nested_calls.as_ref().unwrap().calls[1]
                .error
                .as_deref(),
            Some("not that one")
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_parent_reaches_its_children() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        let session = Session::program(variant, Pipeline::new(), dir.path());
        let cancel = CancellationToken::new();
        let later = cancel.clone();
        let events = session.events.clone();
        // Cancel once the first child is running (loading a plugin can take longer than any fixed delay).
        tokio::spawn(async move {
            while !events.events().iter().any(|e| {
                matches!(e, AgentEvent::ToolExecutionStart { tool_call_id, .. } if tool_call_id == "c1/1")
            }) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            later.cancel();
        });
        let started = Instant::now();
        let call = nest(
            "c1",
            json!([{"name": "leaf", "arguments": {"sleepMs": 20000}}, {"name": "leaf", "arguments": {"text": "after"}}]),
        );
        let messages = session.run_cancellable(vec![call], &cancel).await;
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{variant:?}: the nested call outlived its parent's cancellation ({:?})",
            started.elapsed()
        );
        // The sleeping child saw the cancellation and ended. A native caller goes on and its next child is aborted
        // before it runs; a wasm caller is itself stopped by the cancellation (maybe before its next call).
        let record = messages[0].nested_calls.as_ref().unwrap();
        assert_eq!(record.calls[0].status, "ok", "{variant:?}");
        match variant {
            Variant::Native => assert_eq!(record.calls[1].error.as_deref(), Some("Operation aborted")),
            Variant::Wasm | Variant::WasmHere => assert!(
                record.calls.len() == 1 || record.calls[1].error.as_deref() == Some("Operation aborted"),
                "{record:?}"
            ),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_runner_a_nested_call_is_pis_error() {
    let dir = tempfile::tempdir().unwrap();
    for variant in VARIANTS {
        // The plain pipeline, no session: tools get no nested-call runner.
        let tools: Vec<toolwright::AgentTool> = program_tools(variant, dir.path())
            .iter()
            .map(|d| toolwright::wrap_tool_definition(d, None))
            .collect();
        let message = AssistantMessage {
            tool_calls: vec![nest("c1", json!([{"name": "leaf"}]))],
            ..Default::default()
        };
        let outcome = Pipeline::new()
            .execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new())
            .await;
        assert_eq!(
            text(&outcome.messages[0]),
            "leaf error: Nested tool calls are not available in this context",
            "{variant:?}"
        );
        assert_eq!(outcome.messages[0].nested_calls, None);
    }
}

/// The built-ins natively or as wasm plugins.
fn builtins(mode: BuiltinMode, cwd: &Path) -> Vec<ToolDefinition> {
    let mut options = ToolsetOptions::new(cwd);
    options.builtins = mode;
    options.plugin_dirs = Vec::new();
    options.policy_files = Vec::new();
    options.cache_dir = None;
    let toolset = Toolset::load(&options).unwrap();
    let builtins = toolset.builtins.clone();
    std::mem::forget(toolset);
    builtins
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wasm_tools_call_native_tools_and_native_tools_call_wasm_tools() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "alpha\nbeta\n").unwrap();
    for (caller, builtin) in [
        (Variant::Wasm, BuiltinMode::Native),
        (Variant::WasmHere, BuiltinMode::Native),
        (Variant::Native, BuiltinMode::Wasm),
    ] {
        let session = Session::new(
            builtins(builtin, dir.path()),
            program_tools(caller, dir.path()),
            Pipeline::new().with_work_here(caller == Variant::WasmHere),
            dir.path(),
        );
        let messages = session
            .run(vec![nest(
                "c1",
                json!([{"name": "read", "arguments": {"path": "notes.txt"}},
                       {"name": "grep", "arguments": {"pattern": "beta"}}]),
            )])
            .await;
        assert_eq!(
            text(&messages[0]),
            "read ok ran: alpha\nbeta\n\ngrep ok ran: notes.txt:2: beta",
            "{caller:?} caller, {builtin:?} built-ins"
        );
    }
}

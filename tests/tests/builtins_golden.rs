//! Replays every case of `tests/fixtures/builtins` (the built-in tools on a real workspace) through the same
//! pipeline `toolwright exec` runs, and compares the events and the files left behind with what pi 1.6.0 did
//! (recorded by `tests/oracle/record-builtins.mjs`).

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;
use toolwright::{AssistantMessage, EventLog, ExecutionMode, Pipeline, StopReason, ToolCall};
use toolwright_tests::{fixtures_dir, normalize, workspace};

#[derive(Deserialize)]
struct Fixture {
    files: Map<String, Value>,
    calls: Calls,
    recorded: Recorded,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Calls {
    tool_calls: Vec<ToolCall>,
    #[serde(default)]
    mode: Option<ExecutionMode>,
    #[serde(default)]
    stop_reason: Option<StopReason>,
}

#[derive(Deserialize)]
struct Recorded {
    events: Vec<Value>,
    files: Map<String, Value>,
}

async fn replay(fixture: &Fixture) -> (Vec<Value>, Map<String, Value>) {
    let ws = workspace::create(&fixture.files);
    let cwd = ws.path().to_string_lossy().into_owned();
    let real = std::fs::canonicalize(ws.path())
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let tools = toolwright::builtins::agent_tools(ws.path()).unwrap();
    let message = AssistantMessage {
        tool_calls: fixture.calls.tool_calls.clone(),
        stop_reason: fixture.calls.stop_reason.unwrap_or_default(),
    };
    let pipeline = Pipeline::new().with_tool_execution(fixture.calls.mode.unwrap_or_default());
    let log = EventLog::new();
    pipeline
        .execute_tool_calls(&tools, &message, &log, &CancellationToken::new())
        .await;
    let events = log
        .events()
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    let files = workspace::snapshot(ws.path(), Path::new(""));
    (normalize::builtin_events(events, &[cwd, real]), files)
}

/// Events grouped by call id, each group in emission order, groups in order of first appearance.
fn by_call(events: &[Value]) -> Vec<Value> {
    let mut groups: Vec<(Value, Vec<Value>)> = Vec::new();
    for e in events {
        let id = e
            .get("toolCallId")
            .or_else(|| e.pointer("/message/toolCallId"))
            .cloned()
            .unwrap_or_default();
        match groups.iter_mut().find(|(k, _)| *k == id) {
            Some((_, g)) => g.push(e.clone()),
            None => groups.push((id, vec![e.clone()])),
        }
    }
    // Updates of parallel calls interleave, so runs of one call's updates are cut differently from run to run:
    // per call, only its first and last update are compared.
    groups
        .into_iter()
        .map(|(_, g)| {
            let updates: Vec<usize> = (0..g.len())
                .filter(|&i| g[i]["type"] == "tool_execution_update")
                .collect();
            let keep =
                |i: &usize| updates.len() < 3 || Some(i) == updates.first() || Some(i) == updates.last();
            Value::Array(
                g.into_iter()
                    .enumerate()
                    .filter(|(i, _)| !updates.contains(i) || keep(i))
                    .map(|(_, e)| e)
                    .collect(),
            )
        })
        .collect()
}

/// The parallel order of the CLI contract (§1.4): result messages come last, all of them, in call order.
fn check_parallel_phases(name: &str, events: &[Value], failures: &mut Vec<String>) {
    let first_message = events
        .iter()
        .position(|e| e["type"] == "message_end")
        .unwrap_or(events.len());
    if events[first_message..].iter().any(|e| e["type"] != "message_end") {
        failures.push(format!("{name}: a tool event follows the first result message"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn builtin_tools_match_pi_golden_fixtures() {
    let dir = fixtures_dir().join("builtins");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.retain(|p| p.extension().is_some_and(|e| e == "json"));
    paths.sort();
    assert!(!paths.is_empty());
    let mut failures = Vec::new();
    for path in &paths {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let fixture: Fixture = serde_json::from_str(&std::fs::read_to_string(path).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (events, files) = replay(&fixture).await;
        let expected: Vec<Value> = fixture
            .recorded
            .events
            .iter()
            .cloned()
            .map(normalize::integers)
            .collect();
        // In a parallel batch, end events come in completion order: compare each call's events in order, and
        // check the phases (every start before any end of an executed call, messages last, in call order).
        let parallel = fixture.calls.mode.unwrap_or_default() == ExecutionMode::Parallel
            && fixture.calls.stop_reason != Some(StopReason::Length);
        let (events, expected) = if parallel {
            check_parallel_phases(&name, &events, &mut failures);
            (by_call(&events), by_call(&expected))
        } else {
            (events, expected)
        };
        for (i, (a, e)) in events.iter().zip(&expected).enumerate() {
            if a != e {
                failures.push(format!(
                    "{name}: event {i} differs\n  pi:         {}\n  toolwright: {}",
                    serde_json::to_string(e).unwrap(),
                    serde_json::to_string(a).unwrap()
                ));
                break;
            }
        }
        if events.len() != expected.len() {
            failures.push(format!("{name}: {} events, pi {}", events.len(), expected.len()));
        }
        if files != fixture.recorded.files {
            failures.push(format!(
                "{name}: files differ\n  pi:         {:?}\n  toolwright: {files:?}",
                fixture.recorded.files
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} fixtures differ from pi:\n{}",
        failures.len(),
        paths.len(),
        failures.join("\n")
    );
}

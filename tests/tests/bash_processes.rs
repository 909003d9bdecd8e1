//! The bash tool against real processes: a timed-out or aborted command leaves no process of its group
//! running, and 200 MB of output keep the host's memory bounded while every byte reaches the temp file.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::{AssistantMessage, EventLog, Pipeline, ToolCall, ToolResultMessage};

async fn run_bash(
    ws: &std::path::Path,
    args: Value,
    cancel: CancellationToken,
) -> (ToolResultMessage, Vec<Value>) {
    let (_toolset, tools) = bash_tools(false, ws);
    run_tools(&tools, args, cancel).await
}

/// The built-ins, natively or as wasm plugins (then with the toolset that owns their runtime and its epoch: keep
/// it alive while calls run). Loading may compile the plugins: do it before timing anything.
fn bash_tools(
    wasm: bool,
    ws: &std::path::Path,
) -> (Option<toolwright::toolset::Toolset>, Vec<toolwright::AgentTool>) {
    if !wasm {
        return (None, toolwright::builtins::agent_tools(ws).unwrap());
    }
    let mut options = toolwright::toolset::ToolsetOptions::new(ws);
    options.builtins = toolwright::toolset::BuiltinMode::Wasm;
    options.plugin_dirs = Vec::new();
    options.policy_files = Vec::new();
    options.project_policy = None;
    options.cache_dir = Some(std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"));
    let toolset = toolwright::toolset::Toolset::load(&options).unwrap();
    let tools = toolset.agent_tools();
    (Some(toolset), tools)
}

async fn run_tools(
    tools: &[toolwright::AgentTool],
    args: Value,
    cancel: CancellationToken,
) -> (ToolResultMessage, Vec<Value>) {
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("b1", "bash", args)],
        ..Default::default()
    };
    let log = EventLog::new();
    let outcome = Pipeline::new()
        .execute_tool_calls(tools, &message, &log, &cancel)
        .await;
    let events = log
        .events()
        .into_iter()
        .map(|e| serde_json::to_value(e).unwrap())
        .collect();
    (outcome.messages.into_iter().next().unwrap(), events)
}

/// Processes whose process group is `pgid`, from `/proc`.
fn group_members(pgid: u32) -> Vec<u32> {
    let mut members = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command name (which is in parentheses and may contain spaces): state ppid pgrp ...
        let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or_default();
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(pgid) && fields.first() != Some(&"Z") {
            members.push(pid);
        }
    }
    members
}

/// Starts background sleepers that would outlive the shell, prints the group id, then waits.
const SPAWN_TREE: &str = "echo pgid=$$; sleep 60 & (sleep 60 &) ; sleep 60";

fn pgid_of(text: &str) -> u32 {
    text.lines()
        .find_map(|l| l.strip_prefix("pgid="))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timed_out_command_leaves_no_process_of_its_group() {
    let ws = tempfile::tempdir().unwrap();
    let (message, _) = run_bash(
        ws.path(),
        json!({"command": SPAWN_TREE, "timeout": 0.5}),
        CancellationToken::new(),
    )
    .await;
    let text = message.content[0].as_text().unwrap();
    assert!(message.is_error);
    assert!(text.ends_with("Command timed out after 0.5 seconds"), "{text}");
    let pgid = pgid_of(text);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(
        group_members(pgid),
        Vec::<u32>::new(),
        "processes of group {pgid} survived the timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_command_leaves_no_process_of_its_group() {
    // The wasm bash gets control back on cancellation and answers as the native one does.
    for wasm in [false, true] {
        let ws = tempfile::tempdir().unwrap();
        let (_toolset, tools) = bash_tools(wasm, ws.path());
        let cancel = CancellationToken::new();
        let trigger = cancel.clone();
        // Cancelled once the command runs (its processes started), however long the call took to get there: a
        // call cancelled before its command started is `Operation aborted`, which is not what this tests.
        let started = ws.path().join("started");
        let marker = started.clone();
        tokio::spawn(async move {
            let deadline = std::time::Instant::now() + Duration::from_secs(30);
            while !marker.exists() && std::time::Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            trigger.cancel();
        });
        let command = format!(
            "echo pgid=$$; sleep 60 & (sleep 60 &) ; touch {}; sleep 60",
            started.display()
        );
        let (message, _) = run_tools(&tools, json!({"command": command}), cancel).await;
        let text = message.content[0].as_text().unwrap();
        assert!(text.ends_with("\n\nCommand aborted"), "wasm: {wasm}: {text}");
        let pgid = pgid_of(text);
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(
            group_members(pgid),
            Vec::<u32>::new(),
            "processes of group {pgid} survived the abort (wasm: {wasm})"
        );
    }
}

/// Whether process `pid` still runs (a zombie only waits for its new parent to reap it).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_command_leaves_no_background_process_even_in_a_new_session() {
    // pi's bash lets background processes outlive the command; here every process a call started dies with
    // the call, also one that left the group with setsid (where the host may make a cgroup per call).
    for wasm in [false, true] {
        let ws = tempfile::tempdir().unwrap();
        let (_toolset, tools) = bash_tools(wasm, ws.path());
        let (message, _) = run_tools(
            &tools,
            json!({"command": "sleep 60 & echo pid=$!; setsid sleep 60 & echo pid=$!"}),
            CancellationToken::new(),
        )
        .await;
        let text = message.content[0].as_text().unwrap();
        assert!(!message.is_error, "wasm: {wasm}: {text}");
        let pids: Vec<u32> = text
            .lines()
            .filter_map(|l| l.strip_prefix("pid=")?.trim().parse().ok())
            .collect();
        assert_eq!(pids.len(), 2, "wasm: {wasm}: {text}");
        if !toolwright::native::CallScope::available() {
            continue; // without a cgroup per call only the process group dies (covered above)
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(3);
        while pids.iter().any(|p| running(*p)) && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let alive: Vec<&u32> = pids.iter().filter(|p| running(**p)).collect();
        assert!(alive.is_empty(), "wasm: {wasm}: {alive:?} outlived the call");
    }
}

//! The MCP server in process, over a pipe: calls to a tool whose execution mode is sequential never overlap
//! (as pi runs a batch that contains one), while calls to other tools run at once; a result carries the record
//! of the nested calls its tool made.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolwright::mcp::McpServer;
use toolwright::registry::{Registry, RegistrySources, Selection, SharedRegistry};
use toolwright::{Dispatcher, ExecutionMode, Pipeline, ToolDefinition, ToolResult};

/// A tool that sleeps 200 ms and records when it ran.
fn sleeper(
    name: &str,
    mode: ExecutionMode,
    log: Arc<Mutex<Vec<(String, Instant, Instant)>>>,
) -> ToolDefinition {
    let tool = name.to_owned();
    let mut definition = ToolDefinition::new(name, "Sleeps", json!({"type": "object"}), move |_run, _ctx| {
        let (log, tool) = (log.clone(), tool.clone());
        async move {
            let started = Instant::now();
            tokio::time::sleep(Duration::from_millis(200)).await;
            log.lock().unwrap().push((tool, started, Instant::now()));
            Ok(ToolResult::text("slept"))
        }
    });
    definition.execution_mode = Some(mode);
    definition
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_tools_run_alone_and_parallel_ones_together() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sources = RegistrySources {
        embedder: vec![
            sleeper("seq", ExecutionMode::Sequential, log.clone()),
            sleeper("par", ExecutionMode::Parallel, log.clone()),
        ],
        ..Default::default()
    };
    let registry = SharedRegistry::new(Registry::new(sources, &Selection::default()).unwrap());
    let ws = tempfile::tempdir().unwrap();
    let dispatcher = Dispatcher::new(registry, Pipeline::new(), ws.path());
    let (mut sender, mut lines, running) = connect(dispatcher).await;

    for (round, tool) in [(1, "seq"), (2, "par")] {
        let started = Instant::now();
        for i in 0..3 {
            sender
                .send(
                    json!({"jsonrpc": "2.0", "id": round * 10 + i, "method": "tools/call",
                "params": {"name": tool, "arguments": {}}}),
                )
                .await;
        }
        let mut answered = 0;
        while answered < 3 {
            let message: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
            if message.get("id").is_some() {
                assert_eq!(message["result"]["content"][0]["text"], "slept", "{message}");
                answered += 1;
            }
        }
        let elapsed = started.elapsed();
        let runs: Vec<(Instant, Instant)> = log
            .lock()
            .unwrap()
            .iter()
            .filter(|(t, _, _)| t == tool)
            .map(|(_, s, e)| (*s, *e))
            .collect();
        assert_eq!(runs.len(), 3);
        let overlapping = runs
            .iter()
            .enumerate()
            .any(|(i, a)| runs.iter().skip(i + 1).any(|b| a.0 < b.1 && b.0 < a.1));
        if tool == "seq" {
            assert!(!overlapping, "sequential calls overlapped");
            assert!(elapsed >= Duration::from_millis(600), "{elapsed:?}");
        } else {
            assert!(overlapping, "parallel calls ran one at a time");
            assert!(elapsed < Duration::from_millis(550), "{elapsed:?}");
        }
    }
    drop(sender);
    running.abort();
}

type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

/// Writes one JSON-RPC message to the server.
struct Sender(tokio::io::WriteHalf<tokio::io::DuplexStream>);

impl Sender {
    async fn send(&mut self, message: Value) {
        self.0.write_all(format!("{message}\n").as_bytes()).await.unwrap();
    }
}

/// A server for `registry` and `pipeline` on a pipe, initialized: the client's writer, its lines, the server.
async fn connect(dispatcher: Dispatcher) -> (Sender, Lines, tokio::task::JoinHandle<()>) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let running = tokio::spawn(async move {
        let service = McpServer::new(dispatcher)
            .serve((server_read, server_write))
            .await
            .unwrap();
        service.waiting().await.unwrap();
    });
    let (client_read, client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut sender = Sender(client_write);
    sender
        .send(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}))
        .await;
    let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "toolwright");
    sender
        .send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    (sender, lines, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_carries_the_record_of_its_nested_calls() {
    let inner = ToolDefinition::new(
        "inner",
        "Answers",
        json!({"type": "object"}),
        |_run, _ctx| async { Ok(ToolResult::text("inner says hi")) },
    );
    let outer = ToolDefinition::new(
        "outer",
        "Calls inner",
        json!({"type": "object"}),
        |_run, ctx: Option<toolwright::ToolContext>| async move {
            let ctx = ctx.expect("a session context");
            let outcome = ctx
                .execute_tool("inner", json!({}), toolwright::CallSink::discard())
                .await;
            Ok(ToolResult::text(format!(
                "outer heard: {}",
                outcome.result.text_lines()
            )))
        },
    );
    let sources = RegistrySources {
        embedder: vec![inner, outer],
        ..Default::default()
    };
    let registry = SharedRegistry::new(Registry::new(sources, &Selection::default()).unwrap());
    let ws = tempfile::tempdir().unwrap();
    let (mut sender, mut lines, running) =
        connect(Dispatcher::new(registry, Pipeline::new(), ws.path())).await;
    sender
        .send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "outer", "arguments": {}}}))
        .await;
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    let result = &answer["result"];
    assert_eq!(
        result["content"][0]["text"], "outer heard: inner says hi",
        "{answer}"
    );
    let record = &result["_meta"][toolwright::mcp::NESTED_CALLS_META];
    assert_eq!(record["complete"], true, "{answer}");
    assert_eq!(record["calls"].as_array().unwrap().len(), 1, "{answer}");
    assert_eq!(record["calls"][0]["name"], "inner");
    assert_eq!(record["calls"][0]["status"], "ok");
    assert!(
        record["calls"][0]["id"].as_str().unwrap().ends_with("/1"),
        "{answer}"
    );

    // A tool that made no nested call has no record.
    sender
        .send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "inner", "arguments": {}}}))
        .await;
    let answer: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert!(answer["result"].get("_meta").is_none(), "{answer}");
    drop(sender);
    running.abort();
}

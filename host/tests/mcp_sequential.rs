//! The MCP server's concurrency rule, in process: calls to a tool whose execution mode is sequential never
//! overlap (as pi runs a batch that contains one), while calls to other tools run at once.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ServiceExt;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use toolwright::mcp::McpServer;
use toolwright::registry::{Registry, RegistrySources, Selection};
use toolwright::{AgentToolResult, ExecutionMode, Pipeline, ToolDefinition};

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
            Ok(AgentToolResult::text("slept"))
        }
    });
    definition.execution_mode = Some(mode);
    definition
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sequential_tools_run_alone_and_parallel_ones_together() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let sources = RegistrySources {
        sdk: vec![
            sleeper("seq", ExecutionMode::Sequential, log.clone()),
            sleeper("par", ExecutionMode::Parallel, log.clone()),
        ],
        ..Default::default()
    };
    let registry = Arc::new(Mutex::new(Registry::new(sources, &Selection::default()).unwrap()));
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let running = tokio::spawn(async move {
        let service = McpServer::new(registry, Pipeline::new())
            .serve((server_read, server_write))
            .await
            .unwrap();
        service.waiting().await.unwrap();
    });
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut send = async |message: Value| {
        client_write
            .write_all(format!("{message}\n").as_bytes())
            .await
            .unwrap();
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}),
    )
    .await;
    let init: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
    assert_eq!(init["result"]["serverInfo"]["name"], "toolwright");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;

    for (round, tool) in [(1, "seq"), (2, "par")] {
        let started = Instant::now();
        for i in 0..3 {
            send(
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
    drop(client_write);
    running.abort();
}

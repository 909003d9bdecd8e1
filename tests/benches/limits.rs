//! How precisely limits stop a runaway plugin: the overshoot past a 300 ms deadline of a busy loop, and how
//! long a cancelled busy loop takes to return. Medians of 10 runs each.
//!
//! Run: `cargo bench -p toolwright-tests --bench limits`.

#![allow(clippy::unwrap_used, clippy::print_stdout)] // A benchmark binary.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toolwright::toolset::{Toolset, ToolsetOptions};
use toolwright::{AssistantMessage, EventLog, ToolCall};

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let ws = tempfile::tempdir().unwrap();
        let plugins = tempfile::tempdir().unwrap();
        std::fs::copy(toolwright_tests::programs::PROBE, plugins.path().join("probe.wasm")).unwrap();
        std::fs::write(ws.path().join("toolwright.toml"), "[plugins.toolwright-test-probe]\ntimeout-ms = 300\n").unwrap();
        let mut options = ToolsetOptions::new(ws.path());
        options.plugin_dirs = vec![plugins.path().to_path_buf()];
        options.policy_files = vec![ws.path().join("toolwright.toml")];
        options.cache_dir = Some(toolwright_tests::golden::test_cache_dir());
        let toolset = Toolset::load(&options).unwrap();
        let tools = toolset.agent_tools();
        let message = AssistantMessage { tool_calls: vec![ToolCall::new("l", "probe", json!({"action": "loop"}))], ..Default::default() };
        let (mut deadline, mut cancel) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            let started = Instant::now();
            let out = toolset.pipeline(ws.path()).execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new()).await;
            assert!(out.messages[0].is_error);
            deadline.push(started.elapsed());

            let token = CancellationToken::new();
            let trigger = token.clone();
            let fired = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                trigger.cancel();
                Instant::now()
            });
            toolset.pipeline(ws.path()).execute_tool_calls(&tools, &message, &EventLog::new(), &token).await;
            let returned = Instant::now();
            cancel.push(returned - fired.await.unwrap());
        }
        let d = median(deadline);
        println!("| busy loop, 300 ms deadline: call returned after (median of 10) | {:.1} ms (overshoot {:.1} ms) |", d.as_secs_f64() * 1e3, d.as_secs_f64() * 1e3 - 300.0);
        println!("| busy loop, cancelled: returned after the cancel (median of 10) | {:.1} ms |", median(cancel).as_secs_f64() * 1e3);
    });
}

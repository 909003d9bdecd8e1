//! How precisely limits stop a runaway plugin: the overshoot past a 300 ms deadline of a busy loop and of a
//! plugin blocked in a host call (an hour's sleep), how long a cancelled one takes to return, and what fuel
//! metering costs a compute-bound call (the same call, metered and not, alternating). Medians of 10 runs each.
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
        options.project_policy = None;
        options.cache_dir = Some(toolwright_tests::golden::test_cache_dir());
        let toolset = Toolset::load(&options).unwrap();
        let tools = toolset.agent_tools();
        for (what, action) in [("busy loop", json!({"action": "loop"})), ("blocked in a host call (sleep)", json!({"action": "sleep"}))] {
        let message = AssistantMessage { tool_calls: vec![ToolCall::new("l", "probe", action)], ..Default::default() };
        let (mut deadline, mut cancel) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            let started = Instant::now();
            let out = toolset.pipeline().execute_tool_calls(&tools, &message, &EventLog::new(), &CancellationToken::new()).await;
            assert!(out.messages[0].is_error);
            deadline.push(started.elapsed());

            let token = CancellationToken::new();
            let trigger = token.clone();
            let fired = tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                trigger.cancel();
                Instant::now()
            });
            toolset.pipeline().execute_tool_calls(&tools, &message, &EventLog::new(), &token).await;
            let returned = Instant::now();
            cancel.push(returned - fired.await.unwrap());
        }
        let d = median(deadline);
        println!("| {what}, 300 ms deadline: call returned after (median of 10) | {:.1} ms (overshoot {:.1} ms) |", d.as_secs_f64() * 1e3, d.as_secs_f64() * 1e3 - 300.0);
        println!("| {what}, cancelled: returned after the cancel (median of 10) | {:.1} ms |", median(cancel).as_secs_f64() * 1e3);
        }

        // Fuel: the same compute-bound call on the plain and on the metered engine, alternating.
        let metered_ws = tempfile::tempdir().unwrap();
        std::fs::write(metered_ws.path().join("toolwright.toml"), "[plugins.toolwright-test-probe]\nfuel = 1_000_000_000_000\n").unwrap();
        let mut metered_options = options.clone();
        metered_options.cwd = metered_ws.path().to_path_buf();
        metered_options.policy_files = vec![metered_ws.path().join("toolwright.toml")];
        metered_options.project_policy = None;
        let metered = Toolset::load(&metered_options).unwrap();
        let spin = AssistantMessage { tool_calls: vec![ToolCall::new("s", "probe", json!({"action": "spin", "ms": 50_000_000}))], ..Default::default() };
        let (mut plain_t, mut metered_t) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            for (set, times) in [(&toolset, &mut plain_t), (&metered, &mut metered_t)] {
                let started = Instant::now();
                let out = set.pipeline().execute_tool_calls(&set.agent_tools(), &spin, &EventLog::new(), &CancellationToken::new()).await;
                assert!(!out.messages[0].is_error, "{:?}", out.messages[0].content);
                times.push(started.elapsed());
            }
        }
        let (p, m) = (median(plain_t), median(metered_t));
        println!("| 50 M rounds of arithmetic: plain / metered with fuel (median of 10) | {:.1} ms / {:.1} ms ({:.2}x) |", p.as_secs_f64() * 1e3, m.as_secs_f64() * 1e3, m.as_secs_f64() / p.as_secs_f64());
    });
}

//! Limits under `toolwright mcp`, driven over stdio as a client would: how long a busy loop with a 500 ms
//! deadline takes to come back as an error (median, min and max of 10 calls), and the server's peak resident
//! memory after six parallel calls that each try to return 100 MiB.
//!
//! Run: `cargo bench -p toolwright-tests --bench mcp_limits`.

#![allow(clippy::unwrap_used, clippy::print_stdout)] // A benchmark binary.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

fn main() {
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(
        toolwright_tests::programs::PROBE,
        plugins.path().join("probe.wasm"),
    )
    .unwrap();
    let policy = plugins.path().join("policy.toml");
    std::fs::write(&policy, "[plugins.toolwright-test-probe]\ntimeout-ms = 500\n").unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args([
            "mcp",
            "--watch-plugins",
            "0",
            "--no-default-plugins",
            "--allow",
            "probe",
            "--cwd",
        ])
        .arg(ws.path())
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--policy")
        .arg(&policy)
        .arg("--cache-dir")
        .arg(toolwright_tests::golden::test_cache_dir())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    let mut answers = move |count: usize| {
        let mut found = 0;
        while found < count {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0);
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"].as_i64().is_some_and(|id| id > 0) {
                assert_eq!(message["result"]["isError"], true, "{message}");
                found += 1;
            }
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let call = |id: i64, args: Value| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "probe", "arguments": args}});
    // The first call compiles or loads the plugin's instance template: not part of the figure.
    send(call(1, json!({"action": "panic"})));
    answers(1);
    let mut took = Vec::new();
    for id in 2..12 {
        let started = Instant::now();
        send(call(id, json!({"action": "loop"})));
        answers(1);
        took.push(started.elapsed());
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!(
        "| busy loop under `toolwright mcp`, 500 ms deadline: call answered after | median {:.1} ms, min {:.1}, max {:.1} (overshoot {:.1} %) |",
        ms(took[took.len() / 2]),
        ms(took[0]),
        ms(took[took.len() - 1]),
        (ms(took[took.len() / 2]) - 500.0) / 5.0
    );
    for id in 20..26 {
        send(call(id, json!({"action": "big", "mib": 100})));
    }
    answers(6);
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let peak = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .unwrap_or("VmHWM: ?");
    println!(
        "| six parallel calls each returning 100 MiB under `toolwright mcp`: server peak RSS | {} |",
        peak.trim_start_matches("VmHWM:").trim()
    );
    let _ = child.kill();
    let _ = child.wait();
}

//! Side-by-side measurements of the plugin runtime (one run, so machine drift hits both sides alike):
//! compile and cached-load time of every reference plugin, the per-call cost of a fresh instance against the
//! same tool native, and wasm/native ratios for `read` (small and 10 MB) and `grep` over this repository.
//!
//! Run: `cargo bench -p toolwright --bench wasm` (prints a Markdown table for `docs/performance.md`).

#![allow(clippy::unwrap_used, clippy::print_stdout)] // A benchmark binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::definition::{ToolSource, wrap_tool_definition};
use toolwright::native::{NativeEnv, tool_definition};
use toolwright::wasm::{PluginHost, WasmGrants};
use toolwright::{AgentTool, CallSink, ToolExecution};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

fn fmt(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us >= 1000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{us:.1} µs")
    }
}

async fn call(tool: &AgentTool, args: &Value) -> Duration {
    let run = ToolExecution {
        call_id: "b".into(),
        params: args.clone(),
        cancel: CancellationToken::new(),
        updates: CallSink::discard(),
    };
    let started = Instant::now();
    let result = tool.execute(run).await;
    let elapsed = started.elapsed();
    assert!(result.as_ref().is_ok_and(|r| !r.is_error()), "{result:?}");
    elapsed
}

/// Median per-call time over `rounds` rounds of `per_round` calls.
async fn per_call(tool: &AgentTool, args: &Value, rounds: usize, per_round: usize) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..rounds {
        let mut total = Duration::ZERO;
        for _ in 0..per_round {
            total += call(tool, args).await;
        }
        samples.push(total / per_round as u32);
    }
    median(samples)
}

fn wasm_tool(host: &PluginHost, name: &str, bytes: &[u8], grants: &WasmGrants) -> AgentTool {
    let plugin = host.load_bytes(Path::new(name), bytes).unwrap();
    wrap_tool_definition(&plugin.tool_definitions(grants)[0], None)
}

fn native_tool(tool: Arc<dyn toolwright_sdk::Tool>, env: &NativeEnv) -> AgentTool {
    wrap_tool_definition(&tool_definition(tool, env.clone(), ToolSource::Builtin), None)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let builtins = toolwright::wasm::components::BUILTINS.expect("built with the wasm built-ins");
    let examples = toolwright_tests::programs::EXAMPLES;
    println!("## Plugin compile and load times\n");
    println!("| plugin | size | compile (Cranelift) | load from cache | ratio |");
    println!("|---|---|---|---|---|");
    for (name, bytes) in builtins.iter().chain(examples.iter()) {
        let compile = median(
            (0..3)
                .map(|_| {
                    let host = PluginHost::new(None).unwrap();
                    let started = Instant::now();
                    host.load_bytes(Path::new(name), bytes).unwrap();
                    started.elapsed()
                })
                .collect(),
        );
        let cache = tempfile::tempdir().unwrap();
        PluginHost::new(Some(cache.path().to_path_buf()))
            .unwrap()
            .load_bytes(Path::new(name), bytes)
            .unwrap();
        let host = PluginHost::new(Some(cache.path().to_path_buf())).unwrap();
        let cached = median(
            (0..10)
                .map(|_| {
                    let started = Instant::now();
                    let plugin = host.load_bytes(Path::new(name), bytes).unwrap();
                    assert_eq!(plugin.compilation, toolwright::wasm::Compilation::Cached);
                    started.elapsed()
                })
                .collect(),
        );
        println!(
            "| {name} | {} KB | {} | {} | {:.0}x |",
            bytes.len() / 1024,
            fmt(compile),
            fmt(cached),
            compile.as_secs_f64() / cached.as_secs_f64()
        );
    }

    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("small.txt"), "x".repeat(1024)).unwrap();
    let big: String = (0..200_000)
        .map(|i| format!("line {i:06} of a ten megabyte file, padded to fifty bytes\n"))
        .collect();
    std::fs::write(ws.path().join("big.txt"), big).unwrap();
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let env = NativeEnv::builtin(ws.path()).unwrap();
    let grants = WasmGrants::builtin(ws.path(), &toolwright::native::HostEnv::current());
    let host = PluginHost::new(None).unwrap();
    let bytes_of = |n: &str| {
        builtins
            .iter()
            .chain(examples.iter())
            .find(|(name, _)| *name == n)
            .unwrap()
            .1
    };

    println!("\n## Per call, native and wasm side by side (median per call)\n");
    println!("| call | native | wasm (fresh instance, pooling) | wasm − native | wasm / native |");
    println!("|---|---|---|---|---|");
    let cases: Vec<(&str, AgentTool, AgentTool, Value, usize)> = vec![
        (
            "word_count (trivial tool)",
            native_tool(Arc::new(toolwright_example_wordcount::WordCount), &env),
            wasm_tool(
                &host,
                "wordcount",
                bytes_of("toolwright-example-wordcount"),
                &grants,
            ),
            json!({"text": "one two three"}),
            2000,
        ),
        (
            "read, 1 KB file",
            native_tool(Arc::new(toolwright_tool_read::Read), &env),
            wasm_tool(&host, "read", bytes_of("read"), &grants),
            json!({"path": "small.txt"}),
            1000,
        ),
        (
            "read, 10 MB file",
            native_tool(Arc::new(toolwright_tool_read::Read), &env),
            wasm_tool(&host, "read", bytes_of("read"), &grants),
            json!({"path": "big.txt"}),
            20,
        ),
        (
            "grep `fn ` over this repository",
            native_tool(Arc::new(toolwright_tool_grep::Grep), &env),
            wasm_tool(&host, "grep", bytes_of("grep"), &grants),
            json!({"pattern": "fn ", "path": repo.to_string_lossy()}),
            20,
        ),
    ];
    for (label, native, wasm, args, n) in cases {
        // Warm up both (page cache, lazy statics).
        call(&native, &args).await;
        call(&wasm, &args).await;
        let (mut native_samples, mut wasm_samples) = (Vec::new(), Vec::new());
        // Alternate, so drift affects both alike.
        for _ in 0..5 {
            native_samples.push(per_call(&native, &args, 1, n).await);
            wasm_samples.push(per_call(&wasm, &args, 1, n).await);
        }
        let (native, wasm) = (median(native_samples), median(wasm_samples));
        let extra = wasm.saturating_sub(native);
        println!(
            "| {label} | {} | {} | {} | {:.2} |",
            fmt(native),
            fmt(wasm),
            fmt(extra),
            wasm.as_secs_f64() / native.as_secs_f64()
        );
    }
}

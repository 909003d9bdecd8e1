//! Criterion benchmarks of the hot path, native and wasm side by side in one run:
//!
//! - `pipeline/{parallel,sequential}/N`: the pipeline alone (lookup, validation, hooks, events) on a trivial
//!   native tool, batches of 1, 10, 100 and 1000 calls;
//! - `call/CASE/{native,wasm}`: one tool call through `AgentTool::execute`, the wasm side with a fresh instance per
//!   call from the pooling allocator: a trivial tool, `read` of 1 KB and of 10 MB, `grep` over this repository,
//!   `edit` of a 10 MB file, `bash` writing 100 MB;
//! - `alone/trivial (word_count)/{native,wasm,wasm-reuse}`: the trivial tool as a batch's only call through a
//!   pipeline that works in place (as `exec` and `mcp` run it);
//! - `concurrent/1000-wasm-calls`: 1000 wasm calls at once (throughput), with the peak RSS growth printed.
//!
//! Run: `cargo bench -p toolwright --bench calls` (figures and what bounds them: `docs/performance.md`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // A benchmark binary.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::definition::{ToolSource, wrap_tool_definition};
use toolwright::native::{NativeEnv, tool_definition};
use toolwright::wasm::{PluginHost, WasmGrants};
use toolwright::{
    AgentTool, AssistantMessage, CallSink, ExecutionMode, NoEvents, Pipeline, ToolCall, ToolExecution,
    ToolResult,
};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn pipeline(c: &mut Criterion) {
    let rt = runtime();
    let noop = AgentTool::new(
        "noop",
        "Does nothing",
        json!({"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}),
        |_run: ToolExecution| async { Ok(ToolResult::text("ok")) },
    );
    let tools = vec![noop];
    let mut group = c.benchmark_group("pipeline");
    for mode in [ExecutionMode::Parallel, ExecutionMode::Sequential] {
        let pipeline = Pipeline::new().with_tool_execution(mode);
        for n in [1usize, 10, 100, 1000] {
            let message = AssistantMessage {
                tool_calls: (0..n)
                    .map(|i| ToolCall::new(format!("c{i}"), "noop", json!({"value": "x"})))
                    .collect(),
                ..Default::default()
            };
            group.throughput(Throughput::Elements(n as u64));
            let name = format!(
                "{}/{n}",
                if mode == ExecutionMode::Parallel {
                    "parallel"
                } else {
                    "sequential"
                }
            );
            group.bench_function(name, |b| {
                b.to_async(&rt).iter(|| async {
                    let outcome = pipeline
                        .execute_tool_calls(&tools, &message, &NoEvents, &CancellationToken::new())
                        .await;
                    assert_eq!(outcome.messages.len(), n);
                })
            });
        }
    }
    group.finish();
}

/// What a `Session` adds to a batch: the same no-op tool run by the pipeline alone and through a `Dispatcher`
/// (active tools read from the shared registry, nested-event routes, records), side by side.
fn dispatch(c: &mut Criterion) {
    let rt = runtime();
    let definition = toolwright::ToolDefinition::new(
        "noop",
        "Does nothing",
        json!({"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}),
        |_run: ToolExecution, _ctx: Option<toolwright::ToolContext>| async { Ok(ToolResult::text("ok")) },
    );
    let tools = vec![wrap_tool_definition(&definition, None)];
    let sources = toolwright::registry::RegistrySources {
        embedder: vec![definition],
        ..Default::default()
    };
    let registry = toolwright::registry::Registry::new(sources, &Default::default()).unwrap();
    let ws = tempfile::tempdir().unwrap();
    let dispatcher = toolwright::Dispatcher::new(
        toolwright::registry::SharedRegistry::new(registry),
        Pipeline::new(),
        ws.path(),
    );
    let pipeline = Pipeline::new();
    let mut group = c.benchmark_group("dispatch");
    for n in [1usize, 100] {
        let message = AssistantMessage {
            tool_calls: (0..n)
                .map(|i| ToolCall::new(format!("c{i}"), "noop", json!({"value": "x"})))
                .collect(),
            ..Default::default()
        };
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("pipeline/{n}"), |b| {
            b.to_async(&rt).iter(|| async {
                let outcome = pipeline
                    .execute_tool_calls(&tools, &message, &NoEvents, &CancellationToken::new())
                    .await;
                assert_eq!(outcome.messages.len(), n);
            })
        });
        group.bench_function(format!("dispatcher/{n}"), |b| {
            b.to_async(&rt).iter(|| async {
                let outcome = dispatcher
                    .run(&message, &NoEvents, &CancellationToken::new())
                    .await;
                assert_eq!(outcome.messages.len(), n);
            })
        });
    }
    group.finish();
}

async fn call(tool: &AgentTool, args: &Value) {
    let run = ToolExecution {
        call_id: "b".into(),
        params: args.clone(),
        cancel: CancellationToken::new(),
        updates: CallSink::discard(),
    };
    let result = tool.execute(run).await;
    assert!(result.as_ref().is_ok_and(|r| !r.is_error()), "{result:?}");
    // bash keeps its full output in a temp file (as pi does): 100 MB per call would fill the disk.
    if let Some(path) = result
        .ok()
        .and_then(|r| r.details)
        .and_then(|d| d.get("fullOutputPath").and_then(Value::as_str).map(str::to_owned))
    {
        let _ = std::fs::remove_file(path);
    }
}

struct Tools {
    host: PluginHost,
    env: NativeEnv,
    grants: WasmGrants,
}

/// A tool natively, as wasm with a fresh instance per call, and (for the small cases) as wasm with
/// `instance = "reuse"`.
type Sides = (AgentTool, AgentTool, Option<AgentTool>);

impl Tools {
    fn bytes(name: &str) -> &'static [u8] {
        let builtins = toolwright::wasm::components::BUILTINS.expect("built with the wasm built-ins");
        let examples = toolwright_tests::programs::EXAMPLES;
        builtins
            .iter()
            .chain(examples.iter())
            .find(|(n, _)| *n == name)
            .unwrap()
            .1
    }

    fn pair(&self, native: Arc<dyn toolwright_sdk::Tool>, plugin: &str) -> (AgentTool, AgentTool) {
        let native = wrap_tool_definition(
            &tool_definition(native, self.env.clone(), ToolSource::Builtin),
            None,
        );
        let loaded = self
            .host
            .load_bytes(Path::new(plugin), Self::bytes(plugin))
            .unwrap();
        let wasm = wrap_tool_definition(&loaded.tool_definitions(&self.grants)[0], None);
        (native, wasm)
    }

    /// [`Tools::pair`], and the plugin again under the same grants with `instance = "reuse"`.
    fn three(&self, native: Arc<dyn toolwright_sdk::Tool>, plugin: &str) -> Sides {
        let (native, wasm) = self.pair(native, plugin);
        let loaded = self
            .host
            .load_bytes(Path::new(plugin), Self::bytes(plugin))
            .unwrap();
        let mut grants = self.grants.clone();
        grants.reuse = Some(toolwright::policy::InstanceReuse {
            max_calls: u64::MAX,
            idle: Duration::from_secs(3600),
        });
        let reused = wrap_tool_definition(&loaded.tool_definitions(&grants)[0], None);
        (native, wasm, Some(reused))
    }

    fn two(&self, native: Arc<dyn toolwright_sdk::Tool>, plugin: &str) -> Sides {
        let (native, wasm) = self.pair(native, plugin);
        (native, wasm, None)
    }
}

fn tools(c: &mut Criterion) {
    let rt = runtime();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("small.txt"), "x".repeat(1024)).unwrap();
    let big: String = (0..200_000)
        .map(|i| format!("line {i:06} of a ten megabyte file, padded to fifty bytes\n"))
        .collect();
    std::fs::write(ws.path().join("big.txt"), &big).unwrap();
    let repo: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let set = Tools {
        host: PluginHost::new(None).unwrap(),
        env: NativeEnv::builtin(ws.path()).unwrap(),
        grants: WasmGrants::builtin(ws.path(), &toolwright::native::HostEnv::current()),
    };
    let cases: Vec<(&str, Sides, Value, usize)> = vec![
        (
            "trivial (word_count)",
            set.three(
                Arc::new(toolwright_example_wordcount::WordCount),
                "toolwright-example-wordcount",
            ),
            json!({"text": "one two three"}),
            100,
        ),
        (
            "read 1 KB",
            set.three(Arc::new(toolwright_tool_read::Read), "read"),
            json!({"path": "small.txt"}),
            100,
        ),
        (
            "read 10 MB",
            set.two(Arc::new(toolwright_tool_read::Read), "read"),
            json!({"path": "big.txt"}),
            10,
        ),
        (
            "grep this repository",
            set.two(Arc::new(toolwright_tool_grep::Grep), "grep"),
            json!({"pattern": "fn ", "path": repo.to_string_lossy()}),
            10,
        ),
        (
            "bash 100 MB of output",
            set.two(Arc::new(toolwright_tool_bash::Bash), "bash"),
            json!({"command": "yes 0123456789012345678901234567890123456789012345678901234567890123456789 | head -c 100000000"}),
            10,
        ),
    ];
    for (label, (native, wasm, reused), args, samples) in cases {
        let mut group = c.benchmark_group(format!("call/{label}"));
        group.sample_size(samples);
        if samples <= 10 {
            group.measurement_time(Duration::from_secs(10));
        }
        let sides = [
            ("native", Some(&native)),
            ("wasm", Some(&wasm)),
            ("wasm-reuse", reused.as_ref()),
        ];
        for (side, tool) in sides {
            if let Some(tool) = tool {
                group.bench_function(side, |b| b.to_async(&rt).iter(|| call(tool, &args)));
            }
        }
        group.finish();
    }

    // The trivial call as its batch's only call, through a pipeline that works here (as `exec` and `mcp` run
    // theirs): each side runs on the thread that polls the batch, with no thread hop; the native tool as the
    // built-ins run (`short_tool_definition`).
    let native = wrap_tool_definition(
        &toolwright::native::short_tool_definition(
            Arc::new(toolwright_example_wordcount::WordCount),
            set.env.clone(),
            ToolSource::Builtin,
        ),
        None,
    );
    let (_, wasm, reused) = set.three(
        Arc::new(toolwright_example_wordcount::WordCount),
        "toolwright-example-wordcount",
    );
    let pipeline = Pipeline::new().with_work_here(true);
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new(
            "c0",
            "word_count",
            json!({"text": "one two three"}),
        )],
        ..Default::default()
    };
    let mut group = c.benchmark_group("alone/trivial (word_count)");
    for (side, tool) in [
        ("native", native),
        ("wasm", wasm),
        ("wasm-reuse", reused.unwrap()),
    ] {
        let tools = vec![tool];
        group.bench_function(side, |b| {
            b.to_async(&rt).iter(|| async {
                let outcome = pipeline
                    .execute_tool_calls(&tools, &message, &NoEvents, &CancellationToken::new())
                    .await;
                assert!(!outcome.messages[0].is_error);
            })
        });
    }
    group.finish();

    // edit of a 10 MB file: each iteration starts from the same file (written outside the timing).
    let (native, wasm) = set.pair(Arc::new(toolwright_tool_edit::Edit), "edit");
    let edit =
        json!({"path": "big.txt", "edits": [{"oldText": "line 100000 of", "newText": "LINE 100000 OF"}]});
    let mut group = c.benchmark_group("call/edit 10 MB file");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(10));
    for (side, tool) in [("native", &native), ("wasm", &wasm)] {
        group.bench_function(side, |b| {
            b.to_async(&rt).iter_batched(
                || std::fs::write(ws.path().join("big.txt"), &big).unwrap(),
                |()| call(tool, &edit),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();

    // 1000 wasm calls at once: throughput, bounded by the live-instance limit (the rest queue).
    let (_, wasm) = set.pair(
        Arc::new(toolwright_example_wordcount::WordCount),
        "toolwright-example-wordcount",
    );
    let args = json!({"text": "one two three"});
    let thousand = || async {
        let calls = (0..1000).map(|_| call(&wasm, &args));
        futures::future::join_all(calls).await;
    };
    let before = peak_rss_kib();
    rt.block_on(thousand());
    eprintln!(
        "concurrent/1000-wasm-calls: peak RSS {} MiB before, {} MiB after the first round",
        before / 1024,
        peak_rss_kib() / 1024
    );
    let mut group = c.benchmark_group("concurrent");
    group.sample_size(10);
    group.throughput(Throughput::Elements(1000));
    group.bench_function("1000-wasm-calls", |b| b.to_async(&rt).iter(thousand));
    group.finish();
}

/// The process's peak resident set (`VmHWM`), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|n| n.parse().ok())
        })
        .unwrap_or(0)
}

/// What the sandbox costs a start: `echo` unconfined (`sandbox = "off"`), and in the default `workspace-write`
/// sandbox (Landlock with the secrets carved out, seccomp, network and mount namespaces, the pids limit) and with
/// a proxied host (the listener handed over), each waited for to its exit.
fn sandbox(c: &mut Criterion) {
    use toolwright::native::sandbox::{BuiltinSandbox, Hosts};
    use toolwright::native::{CallScope, HostEnv, NativeProcess};
    let ws = tempfile::tempdir().unwrap();
    let host = HostEnv::current();
    let mut confined = BuiltinSandbox::default_for(ws.path(), &host);
    confined.protected = vec![ws.path().join("policy.toml")];
    std::fs::write(ws.path().join("policy.toml"), "").unwrap();
    let mut proxied = confined.clone();
    proxied.network = Hosts {
        allow: vec![toolwright::policy::NetPattern::parse("127.0.0.1:9").unwrap()],
        deny: Vec::new(),
    };
    let off = BuiltinSandbox {
        mode: toolwright::native::sandbox::SandboxMode::Off,
        ..confined.clone()
    };
    let command = toolwright_sdk::Command {
        program: "echo".into(),
        args: vec!["hi".into()],
        cwd: Some(ws.path().to_string_lossy().into_owned()),
        env: Vec::new(),
    };
    let mut group = c.benchmark_group("sandbox/echo");
    for (label, sandbox) in [("off", off), ("workspace-write", confined), ("proxied", proxied)] {
        let launch = sandbox
            .programs()
            .launch(
                &command,
                &[("PATH".into(), HostEnv::DEFAULT_PATH.into())],
                "bench",
            )
            .unwrap();
        group.bench_function(label, |b| {
            b.iter(|| {
                let scope = CallScope::new();
                let mut process = NativeProcess::spawn(&command, &launch, &scope).unwrap();
                loop {
                    use toolwright_sdk::{Process, ProcessEvent};
                    if let ProcessEvent::Exited(_) = process.next(Duration::from_secs(5)).unwrap() {
                        break;
                    }
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pipeline, dispatch, tools, sandbox);
criterion_main!(benches);

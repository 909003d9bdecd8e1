//! Instance reuse (`instance = "reuse"`) at the library's edge: what one call leaves in a plugin's memory reaches
//! the next call of the same plugin only, never another plugin's (even one loaded from the same bytes under equal
//! grants), and never after a trap, a stop, the bound on calls or the idle time. The command-line cases (exec and
//! mcp) are in `redteam.rs`.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::ToolExecution;
use toolwright::definition::ToolDefinition;
use toolwright::policy::InstanceReuse;
use toolwright::tool::CallSink;
use toolwright::wasm::{PluginHost, WasmGrants};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::programs::PROBE;

/// The probe's tool, loaded as its own plugin (from `name`, a copy of the probe's bytes), under `grants`.
fn probe(host: &PluginHost, name: &str, grants: &WasmGrants) -> ToolDefinition {
    let bytes = std::fs::read(PROBE).unwrap();
    let plugin = host.load_bytes(Path::new(name), &bytes).unwrap();
    let tool = plugin.tool_definitions(grants).remove(0);
    std::mem::forget(plugin);
    tool
}

async fn call(tool: &ToolDefinition, args: Value) -> Result<String, String> {
    let run = ToolExecution {
        call_id: "c".into(),
        params: args,
        cancel: CancellationToken::new(),
        updates: CallSink::discard(),
    };
    match tool.execute.execute(run, None).await {
        Ok(result) => Ok(result.content[0].as_text().unwrap().to_owned()),
        Err(e) => Err(e.message().to_owned()),
    }
}

fn reusing(cwd: &Path, max_calls: u64, idle: Duration) -> WasmGrants {
    let mut grants = WasmGrants::none(cwd);
    grants.reuse = Some(InstanceReuse { max_calls, idle });
    grants.timeout = Some(Duration::from_millis(500));
    grants
}

fn remember(what: &str) -> Value {
    json!({"action": "remember", "target": what})
}

fn recall() -> Value {
    json!({"action": "recall"})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_plugins_from_the_same_bytes_under_equal_grants_never_share_an_instance() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let grants = reusing(ws.path(), 1000, Duration::from_secs(60));
    let a = probe(&host, "a.wasm", &grants);
    let b = probe(&host, "b.wasm", &grants);
    assert_eq!(
        call(&a, remember("a's secret")).await.unwrap(),
        "call 1 of this instance"
    );
    assert_eq!(
        call(&b, recall()).await.unwrap(),
        "call 1 of this instance, holding \"\""
    );
    assert_eq!(
        call(&a, recall()).await.unwrap(),
        "call 2 of this instance, holding \"a's secret\""
    );
    assert_eq!(
        call(&b, recall()).await.unwrap(),
        "call 2 of this instance, holding \"\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reuse_every_call_has_a_fresh_instance() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let tool = probe(&host, "p.wasm", &WasmGrants::none(ws.path()));
    for _ in 0..3 {
        assert_eq!(
            call(&tool, remember("x")).await.unwrap(),
            "call 1 of this instance"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_instance_serves_its_bound_then_is_replaced() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let tool = probe(&host, "p.wasm", &reusing(ws.path(), 2, Duration::from_secs(60)));
    assert_eq!(
        call(&tool, remember("x")).await.unwrap(),
        "call 1 of this instance"
    );
    assert_eq!(
        call(&tool, recall()).await.unwrap(),
        "call 2 of this instance, holding \"x\""
    );
    assert_eq!(
        call(&tool, recall()).await.unwrap(),
        "call 1 of this instance, holding \"\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_instance_is_dropped_after_its_idle_time() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let tool = probe(
        &host,
        "p.wasm",
        &reusing(ws.path(), 1000, Duration::from_millis(100)),
    );
    assert_eq!(
        call(&tool, remember("x")).await.unwrap(),
        "call 1 of this instance"
    );
    assert_eq!(
        call(&tool, recall()).await.unwrap(),
        "call 2 of this instance, holding \"x\""
    );
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(
        call(&tool, recall()).await.unwrap(),
        "call 1 of this instance, holding \"\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trapped_stopped_or_over_limit_instance_is_never_reused_and_limits_hold_in_a_reused_one() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let mut grants = reusing(ws.path(), 1000, Duration::from_secs(60));
    grants.memory = 32 << 20;
    let tool = probe(&host, "p.wasm", &grants);
    let fresh = "call 1 of this instance, holding \"\"";
    for (breaker, error) in [
        (json!({"action": "panic"}), "the probe panicked on purpose"),
        (json!({"action": "loop"}), "ran past its time limit of 500 ms"),
        (json!({"action": "alloc", "mib": 64}), "memory limit of 32 MiB"),
    ] {
        // A warm instance, holding state, meets the limit: its deadline, memory limit and traps are enforced in
        // it as in a fresh one, and it is gone afterwards.
        call(&tool, remember("warm")).await.unwrap();
        assert_eq!(
            call(&tool, recall()).await.unwrap(),
            "call 2 of this instance, holding \"warm\""
        );
        let failed = call(&tool, breaker.clone()).await.unwrap_err();
        assert!(failed.contains(error), "{breaker}: {failed}");
        assert_eq!(call(&tool, recall()).await.unwrap(), fresh, "after {breaker}");
        // The fresh instance just used was pooled: start the next round from a new one.
        call(&tool, json!({"action": "panic"})).await.unwrap_err();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_leaves_no_instance_to_reuse() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let tool = probe(
        &host,
        "p.wasm",
        &reusing(ws.path(), 1000, Duration::from_secs(60)),
    );
    call(&tool, remember("before the cancel")).await.unwrap();
    let cancel = CancellationToken::new();
    let run = ToolExecution {
        call_id: "c".into(),
        params: json!({"action": "loop"}),
        cancel: cancel.clone(),
        updates: CallSink::discard(),
    };
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        trigger.cancel();
    });
    let outcome = tool.execute.execute(run, None).await;
    assert_eq!(outcome.unwrap_err().message(), "Operation aborted");
    assert_eq!(
        call(&tool, recall()).await.unwrap(),
        "call 1 of this instance, holding \"\""
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_instances_give_their_memory_back_before_a_running_call_is_refused_any() {
    let ws = tempfile::tempdir().unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    host.memory_budget().set_cap(64 << 20);
    let a = probe(
        &host,
        "a.wasm",
        &reusing(ws.path(), 1000, Duration::from_secs(60)),
    );
    let b = probe(&host, "b.wasm", &WasmGrants::none(ws.path()));
    let alloc = json!({"action": "alloc", "mib": 40});
    // A's instance grew past 40 MiB and waits, idle, holding it: B's growth to as much needs it back.
    assert_eq!(
        call(&a, remember("held")).await.unwrap(),
        "call 1 of this instance"
    );
    assert_eq!(call(&a, alloc.clone()).await.unwrap(), "allocated 40 MiB");
    assert!(
        host.memory_budget().used() >= 40 << 20,
        "the idle instance holds its memory"
    );
    assert_eq!(call(&b, alloc.clone()).await.unwrap(), "allocated 40 MiB");
    assert_eq!(
        call(&a, recall()).await.unwrap(),
        "call 1 of this instance, holding \"\"",
        "the idle instance was dropped for B's growth"
    );
}

/// The workspace is every call's working directory, in a fresh instance and in a reused one whose last call
/// moved elsewhere; relative paths resolve against it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_starts_in_the_workspace_even_after_a_call_left_it() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    std::fs::write(ws.path().join("sub/a.txt"), "a").unwrap();
    std::fs::write(ws.path().join("b.txt"), "b").unwrap();
    let host = PluginHost::new(Some(test_cache_dir())).unwrap();
    let root = toolwright_sdk::paths::normalize(&ws.path().to_string_lossy());
    let with_dir = |mut grants: WasmGrants| {
        grants.preopens.push(toolwright::wasm::Preopen {
            host: ws.path().to_path_buf(),
            guest: root.clone(),
            write: false,
        });
        grants
    };
    let cwd = json!({"action": "cwd"});
    let chdir = json!({"action": "chdir", "target": "sub"});
    let fresh = probe(&host, "fresh.wasm", &with_dir(WasmGrants::none(ws.path())));
    let reused = probe(
        &host,
        "reused.wasm",
        &with_dir(reusing(ws.path(), 1000, Duration::from_secs(60))),
    );
    // One instance serves every call of `reused` (what it remembers it recalls at the end).
    call(&reused, remember("kept")).await.unwrap();
    for tool in [&fresh, &reused] {
        let at_root = format!("at {root}, 2 entries");
        assert_eq!(call(tool, cwd.clone()).await.unwrap(), at_root);
        assert_eq!(
            call(tool, chdir.clone()).await.unwrap(),
            format!("now at {root}/sub")
        );
        assert_eq!(call(tool, cwd.clone()).await.unwrap(), at_root);
    }
    assert_eq!(
        call(&reused, recall()).await.unwrap(),
        "call 2 of this instance, holding \"kept\""
    );
}

//! Every sandbox boundary, tried by a plugin that wants to cross it (`tests/programs/probe`): files outside the
//! grants, writes to read-only grants, `..` and symlink escapes, programs, environment variables, the network,
//! busy loops, memory, panics. Each must fail with a clear error while the host and the rest of the batch go on.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::toolset::{Toolset, ToolsetOptions};
use toolwright::{AssistantMessage, EventLog, ToolCall, ToolResultMessage};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::programs::PROBE;

struct Sandbox {
    ws: tempfile::TempDir,
    _plugins: tempfile::TempDir,
    toolset: Toolset,
}

/// A workspace with `a.txt`, `out/`, `secret/key`, a symlink to a file outside, and the probe plugin under
/// `policy` (the text of a toolwright.toml; empty: no policy).
fn sandbox(policy: &str) -> Sandbox {
    let outer = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "inside").unwrap();
    std::fs::create_dir(ws.path().join("out")).unwrap();
    std::fs::create_dir(ws.path().join("secret")).unwrap();
    std::fs::write(ws.path().join("secret/key"), "k").unwrap();
    std::fs::write(outer.path().join("outside.txt"), "outside").unwrap();
    std::os::unix::fs::symlink(outer.path().join("outside.txt"), ws.path().join("link")).unwrap();
    std::mem::forget(outer); // the symlink target must outlive the test's calls
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(PROBE, plugins.path().join("probe.wasm")).unwrap();
    std::fs::write(ws.path().join("toolwright.toml"), policy).unwrap();
    let mut options = ToolsetOptions::new(ws.path());
    options.plugin_dirs = vec![plugins.path().to_path_buf()];
    options.policy_files = vec![ws.path().join("toolwright.toml")];
    options.cache_dir = Some(test_cache_dir());
    let toolset = Toolset::load(&options).unwrap();
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    Sandbox {
        ws,
        _plugins: plugins,
        toolset,
    }
}

impl Sandbox {
    fn path(&self, rel: &str) -> String {
        self.ws.path().join(rel).to_string_lossy().into_owned()
    }

    async fn run(&self, probes: &[Value]) -> Vec<ToolResultMessage> {
        self.run_with(probes, CancellationToken::new()).await
    }

    async fn run_with(&self, probes: &[Value], cancel: CancellationToken) -> Vec<ToolResultMessage> {
        let message = AssistantMessage {
            tool_calls: probes
                .iter()
                .enumerate()
                .map(|(i, p)| ToolCall::new(format!("p{i}"), "probe", p.clone()))
                .collect(),
            ..Default::default()
        };
        let tools = self.toolset.agent_tools();
        self.toolset
            .pipeline(self.ws.path())
            .execute_tool_calls(&tools, &message, &EventLog::new(), &cancel)
            .await
            .messages
    }
}

/// What the guest's standard library reports for a path outside every preopen (WASI `noent`).
const NOT_THERE: &str = "NotFound: No such file or directory (os error 44)";
/// For a write into a read-only preopen, or a `..`/symlink escape (WASI `notcapable`/`perm`).
const NOT_PERMITTED: &str = "PermissionDenied: Operation not permitted (os error 63)";
/// For any socket (no address is allowed).
const NO_NETWORK: &str = "PermissionDenied: Permission denied (os error 2)";

fn text(m: &ToolResultMessage) -> &str {
    m.content[0].as_text().unwrap()
}

fn assert_refused(m: &ToolResultMessage, what: &str) {
    assert!(m.is_error, "{what} was allowed: {}", text(m));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_without_a_policy_gets_nothing() {
    let s = sandbox("");
    let out = s
        .run(&[
            json!({"action": "read", "target": s.path("a.txt")}),
            json!({"action": "list", "target": s.path(".")}),
            json!({"action": "write", "target": s.path("out/x")}),
            json!({"action": "read", "target": "/etc/passwd"}),
            json!({"action": "spawn", "target": "/bin/echo"}),
            json!({"action": "env", "target": "PATH"}),
            json!({"action": "connect", "target": "127.0.0.1:9"}),
        ])
        .await;
    for (m, what) in out
        .iter()
        .zip(["read", "list", "write", "read /etc", "spawn", "env", "connect"])
    {
        assert_refused(m, what);
    }
    // Outside every preopen, a path does not exist for the plugin at all.
    for m in &out[0..4] {
        assert_eq!(text(m), NOT_THERE);
    }
    assert_eq!(text(&out[6]), NO_NETWORK);
    assert!(
        text(&out[4]).starts_with(
            "Permission denied: starting /bin/echo is not granted to the plugin toolwright-test-probe"
        ),
        "{}",
        text(&out[4])
    );
    assert!(
        text(&out[5]).starts_with("PATH: environment variable not found"),
        "{}",
        text(&out[5])
    );
    assert!(!Path::new(&s.path("out/x")).exists());
    let (name, effective) = &s.toolset.grants[0];
    assert_eq!(name, "toolwright-test-probe");
    assert!(
        effective.decisions.iter().all(|d| d.refused.is_some()),
        "{effective:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_directories_and_nothing_around_them() {
    let s = sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\n");
    let out = s
        .run(&[
            json!({"action": "read", "target": s.path("a.txt")}),
            json!({"action": "write", "target": s.path("out/x")}),
            json!({"action": "write", "target": s.path("a.txt")}),
            json!({"action": "read", "target": s.path("../")}),
            json!({"action": "read", "target": s.path("out/../../etc-like")}),
            json!({"action": "read", "target": s.path("link")}),
            json!({"action": "read", "target": "/etc/passwd"}),
        ])
        .await;
    assert_eq!(text(&out[0]), "read 6 bytes");
    assert_eq!(text(&out[1]), "wrote");
    assert_eq!(std::fs::read_to_string(s.path("out/x")).unwrap(), "probe");
    assert_eq!(text(&out[2]), NOT_PERMITTED, "writing into a read-only grant");
    assert_eq!(std::fs::read_to_string(s.path("a.txt")).unwrap(), "inside");
    assert_eq!(text(&out[3]), NOT_PERMITTED, "`..` out of the workspace");
    assert_eq!(text(&out[4]), NOT_PERMITTED, "`..` through a granted directory");
    assert_eq!(text(&out[5]), NOT_PERMITTED, "a symlink to a file outside");
    assert_eq!(text(&out[6]), NOT_THERE, "an absolute path outside");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_wins_over_allow() {
    let s = sandbox(
        "[plugins.toolwright-test-probe]\nread = [\".\"]\nspawn = [\"/bin/echo\"]\ndeny = { read = [\"./secret\"], spawn = [\"/bin/echo\"] }\n",
    );
    let out = s
        .run(&[
            json!({"action": "read", "target": s.path("secret/key")}),
            json!({"action": "read", "target": s.path("a.txt")}),
            json!({"action": "spawn", "target": "/bin/echo"}),
        ])
        .await;
    assert_refused(&out[0], "a denied directory");
    // A preopen cannot exclude a subdirectory, so the whole grant around the denied one is refused.
    assert_refused(&out[1], "the grant that contains a denied directory");
    assert_refused(&out[2], "a denied program");
    let decisions = &s.toolset.grants[0].1.decisions;
    assert!(
        decisions[0].refused.as_deref().unwrap().contains("deny wins"),
        "{decisions:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_programs_and_variables_only() {
    let s = sandbox("[plugins.toolwright-test-probe]\nspawn = [\"/bin/echo\"]\nenv = [\"PATH\"]\n");
    let out = s
        .run(&[
            json!({"action": "spawn", "target": "/bin/echo"}),
            json!({"action": "spawn", "target": "/bin/sh"}),
            json!({"action": "env", "target": "PATH"}),
            json!({"action": "env", "target": "HOME"}),
        ])
        .await;
    assert_eq!(text(&out[0]), "probe-ran\n");
    assert_refused(&out[1], "an ungranted program");
    assert_eq!(text(&out[2]), std::env::var("PATH").unwrap());
    assert_refused(&out[3], "an ungranted variable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn limits_stop_runaway_plugins_and_the_batch_goes_on() {
    let s = sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\ntimeout-ms = 300\nmemory-mib = 64\n");
    let started = Instant::now();
    let out = s
        .run(&[
            json!({"action": "loop"}),
            json!({"action": "alloc", "mib": 512}),
            json!({"action": "panic"}),
            json!({"action": "read", "target": s.path("a.txt")}),
        ])
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "the busy loop was not stopped: {:?}",
        started.elapsed()
    );
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-test-probe was stopped: it ran past its time limit of 300 ms"
    );
    assert_eq!(
        text(&out[1]),
        "The plugin toolwright-test-probe was stopped: it tried to use more than its memory limit of 64 MiB"
    );
    assert!(
        text(&out[2]).starts_with("The plugin toolwright-test-probe failed: it trapped"),
        "{}",
        text(&out[2])
    );
    assert_eq!(
        text(&out[3]),
        "read 6 bytes",
        "the host and the rest of the batch go on"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_a_busy_loop_promptly() {
    let s = sandbox("[plugins.toolwright-test-probe]\ntimeout-ms = 60000\n");
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        trigger.cancel();
    });
    let started = Instant::now();
    let out = s.run_with(&[json!({"action": "loop"})], cancel).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(text(&out[0]), "Operation aborted");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deep_recursion_floods_and_printing_leave_the_host_serving() {
    let s = sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\n");
    let probes = [
        json!({"action": "recurse"}),
        json!({"action": "flood"}),
        json!({"action": "print"}),
        json!({"action": "read", "target": s.path("a.txt")}),
    ];
    let message = AssistantMessage {
        tool_calls: probes
            .into_iter()
            .enumerate()
            .map(|(i, a)| ToolCall::new(format!("p{i}"), "probe", a))
            .collect(),
        ..Default::default()
    };
    let log = EventLog::new();
    let tools = s.toolset.agent_tools();
    let out = s
        .toolset
        .pipeline(s.ws.path())
        .execute_tool_calls(&tools, &message, &log, &CancellationToken::new())
        .await
        .messages;
    let recursion = text(&out[0]);
    // Rust keeps its stack in linear memory: running off its end is an out-of-bounds access, stopped by the trap.
    assert_eq!(
        recursion,
        "The plugin toolwright-test-probe failed: it trapped: wasm trap: out of bounds memory access"
    );
    assert_eq!(text(&out[1]), "flooded");
    let updates = log
        .events()
        .iter()
        .filter(|e| e.kind() == "tool_execution_update" && e.tool_call_id() == "p1")
        .count();
    assert_eq!(
        updates, 10_000,
        "every update of the call arrives, before its end"
    );
    // What a plugin prints goes to the log, never into the results or the events.
    assert_eq!(text(&out[2]), "printed");
    assert!(
        !serde_json::to_string(&log.events())
            .unwrap()
            .contains("noise from the probe")
    );
    assert_eq!(text(&out[3]), "read 6 bytes");
}

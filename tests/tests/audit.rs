//! The audit log (issue 18, item 3) end to end: through `toolwright exec --audit-log`, `toolwright mcp` with the
//! user's policy naming the log, and the library's `Session`. Each case reads the lines back and checks what a
//! person investigating an incident needs: who blocked a call and why, which start was refused, the nested call
//! under its parent, a cancelled call, and that no granted variable's value is in the file.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;

use serde_json::{Value, json};
use toolwright::audit::{AuditMemory, AuditRecord, Machine, OriginKind, Outcome, Stage, Verdict};
use toolwright::hooks::{BeforeToolCallResult, before_tool_call};
use toolwright::{AssistantMessage, EventLog, Session, ToolCall};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::mcp::StdioServer;
use toolwright_tests::programs::{EXAMPLES, PROBE};

const PROBE_NAME: &str = "toolwright-test-probe";
const TOKEN: &str = "tw-secret-value-4242";

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_toolwright-cli"))
}

fn example(name: &str) -> &'static [u8] {
    EXAMPLES.iter().find(|(n, _)| *n == name).unwrap().1
}

/// A workspace, a plugin directory with the guard handler and the probe, a policy granting the probe `echo`
/// and `PATH`, and a config directory of its own (so the runner's own config plays no part).
struct Setup {
    ws: tempfile::TempDir,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let setup = Setup {
            ws: tempfile::tempdir().unwrap(),
            dir: tempfile::tempdir().unwrap(),
        };
        let plugins = setup.plugins();
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::write(plugins.join("guard.wasm"), example("toolwright-example-guard")).unwrap();
        std::fs::copy(PROBE, plugins.join("probe.wasm")).unwrap();
        std::fs::write(
            setup.policy(),
            format!(
                "[plugins.{PROBE_NAME}]\nspawn = [\"echo\"]\nenv = [\"PATH\"]\ntimeout-ms = 1500\n\
                 [plugins.toolwright-example-guard]\nrewrite = [\"bash\"]\n"
            ),
        )
        .unwrap();
        std::fs::create_dir_all(setup.config()).unwrap();
        setup
    }

    fn plugins(&self) -> PathBuf {
        self.dir.path().join("plugins")
    }

    fn policy(&self) -> PathBuf {
        self.dir.path().join("policy.toml")
    }

    fn config(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    fn log(&self) -> PathBuf {
        self.dir.path().join("logs/audit.jsonl")
    }

    fn args(&self) -> Vec<String> {
        let text = |p: &Path| p.to_string_lossy().into_owned();
        vec![
            "--no-default-plugins".into(),
            "--cwd".into(),
            text(self.ws.path()),
            "--plugins".into(),
            text(&self.plugins()),
            "--policy".into(),
            text(&self.policy()),
            "--cache-dir".into(),
            text(&test_cache_dir()),
            "--allow".into(),
            "+probe,+codemode".into(),
        ]
    }

    fn command(&self, sub: &str) -> Command {
        let mut command = Command::new(binary());
        command
            .arg(sub)
            .env("XDG_CONFIG_HOME", self.config())
            .env("TW_API_TOKEN", TOKEN)
            .stdin(Stdio::null());
        command
    }

    /// `toolwright exec --audit-log` on `calls`.
    fn exec(&self, calls: Value) {
        let file = self.dir.path().join("calls.json");
        std::fs::write(&file, json!({ "toolCalls": calls }).to_string()).unwrap();
        let out = self
            .command("exec")
            .arg(&file)
            .arg("--json")
            .arg("--audit-log")
            .arg(self.log())
            .args(self.args())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "exec failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn records(&self) -> Vec<AuditRecord> {
        read_log(&self.log())
    }
}

fn read_log(path: &Path) -> Vec<AuditRecord> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect()
}

fn by_id<'a>(records: &'a [AuditRecord], id: &str) -> &'a AuditRecord {
    records
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("no record of {id}: {records:#?}"))
}

#[test]
fn exec_records_who_blocked_what_was_refused_the_nested_calls_and_no_secret() {
    let setup = Setup::new();
    let path = std::env::var("PATH").unwrap();
    setup.exec(json!([
        {"id": "c0", "name": "bash", "arguments": {"command": "rm -rf ./nothing"}},
        {"id": "c1", "name": "probe", "arguments": {"action": "spawn", "target": "curl", "args": ["http://example.com"]}},
        {"id": "c2", "name": "probe", "arguments": {"action": "spawn", "target": "echo", "args": [path]}},
        {"id": "c3", "name": "codemode", "arguments": {"code": "return await tools.ls({})"}},
        {"id": "c4", "name": "bash", "arguments": {"command": format!("echo {TOKEN}; exit 3")}},
        {"id": "c5", "name": "nope", "arguments": {}},
        {"id": "c6", "name": "probe", "arguments": {"action": "loop"}},
        {"id": "c7", "name": "bash", "arguments": {"command": "printf 'x\\n{\"id\":\"forged\"}\\n'; exit 1"}},
    ]));
    let text = std::fs::read_to_string(setup.log()).unwrap();
    assert!(!text.contains(TOKEN), "a secret reached the log:\n{text}");
    assert!(
        !text.contains(&path),
        "a granted variable's value reached the log:\n{text}"
    );
    let records = setup.records();

    // The guard blocked the first bash call, and said why.
    let c0 = by_id(&records, "c0");
    assert_eq!(c0.outcome, Outcome::Error);
    let guard = &c0.decision[0];
    assert_eq!(
        (guard.by.as_str(), guard.stage, guard.verdict),
        (
            "handler plugin toolwright-example-guard",
            Stage::Before,
            Verdict::Blocked
        )
    );
    assert_eq!(
        guard.reason.as_deref(),
        Some("guard: recursive deletes are not allowed")
    );
    assert!(c0.spawns.is_empty(), "{c0:?}");
    let source = c0.source.as_ref().unwrap();
    assert_eq!(
        (source.kind, source.machine),
        (OriginKind::Builtin, Machine::Native)
    );

    // The probe asked for a program it was not granted: refused, with the host's reason; the record names the
    // plugin, its digest and its grants.
    let c1 = by_id(&records, "c1");
    assert_eq!(c1.spawns.len(), 1, "{c1:?}");
    assert_eq!(c1.spawns[0].program, "curl");
    assert_eq!(c1.spawns[0].argv, ["http://example.com"]);
    assert!(!c1.spawns[0].allowed);
    assert!(
        c1.spawns[0].reason.as_deref().unwrap().contains("curl"),
        "{:?}",
        c1.spawns[0]
    );
    assert_eq!(c1.outcome, Outcome::Error);
    let source = c1.source.as_ref().unwrap();
    assert_eq!(source.kind, OriginKind::Plugin);
    assert_eq!(source.plugin.as_deref(), Some(PROBE_NAME));
    let digest = toolwright::trust::identity::hex(&sha256(&std::fs::read(PROBE).unwrap()));
    assert_eq!(source.sha256.as_deref(), Some(digest.as_str()));
    assert_eq!(source.grants.as_deref().unwrap(), ["spawn echo", "env PATH"]);
    assert_eq!(
        c1.decision
            .iter()
            .map(|s| (s.by.as_str(), s.verdict))
            .collect::<Vec<_>>(),
        [("handler plugin toolwright-example-guard", Verdict::Allowed)]
    );

    // An allowed start, its argument (the value of the granted PATH) replaced by the variable's name.
    let c2 = by_id(&records, "c2");
    assert_eq!(c2.outcome, Outcome::Ok, "{c2:?}");
    assert_eq!(c2.spawns[0].argv, ["[env PATH]"]);
    assert!(c2.spawns[0].allowed);

    // The script's nested call has a record of its own, under its parent.
    let nested: Vec<&AuditRecord> = records
        .iter()
        .filter(|r| r.parent.as_deref() == Some("c3"))
        .collect();
    assert_eq!(nested.len(), 1, "{records:#?}");
    assert_eq!(nested[0].tool, "ls");
    assert_eq!(nested[0].outcome, Outcome::Ok);
    assert_eq!(by_id(&records, "c3").outcome, Outcome::Ok);

    // bash printed a secret and failed: the error is kept, the secret is not.
    let c4 = by_id(&records, "c4");
    assert_eq!(c4.outcome, Outcome::Error);
    let error = c4.error.as_deref().unwrap();
    assert!(error.contains("[env TW_API_TOKEN]"), "{error}");
    assert!(c4.spawns.iter().all(|s| s.allowed), "{c4:?}");

    // No tool of that name: the pipeline's own refusal.
    let c5 = by_id(&records, "c5");
    assert_eq!(c5.source, None);
    assert_eq!(c5.decision[0].by, "lookup");
    assert_eq!(c5.decision[0].verdict, Verdict::Refused);
    assert_eq!(c5.error.as_deref(), Some("Tool nope not found"));

    // The host stopped a busy loop at the plugin's deadline: a limit, not the tool's own error.
    let c6 = by_id(&records, "c6");
    assert_eq!(c6.outcome, Outcome::Limit, "{c6:?}");
    assert!(
        c6.error.as_deref().unwrap().contains("time limit of 1500 ms"),
        "{c6:?}"
    );
    // What a plugin says cannot forge a line: every line is one record, the panic's text inside its own.
    assert_eq!(text.lines().count(), records.len());
    let c7 = by_id(&records, "c7");
    assert_eq!(c7.outcome, Outcome::Error);
    assert!(
        c7.error.as_deref().unwrap().contains("x\n{\"id\":\"forged\"}"),
        "{c7:?}"
    );

    // `toolwright audit` prints it for people, filtered.
    let out = setup
        .command("audit")
        .args(["--file", &setup.log().to_string_lossy(), "--tool", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    let headings: Vec<&str> = printed.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(headings.len(), 3, "{printed}");
    assert!(headings[0].contains("  c0  bash  error  "), "{printed}");
    assert!(
        printed.contains("before   handler plugin toolwright-example-guard blocked: guard: recursive deletes are not allowed"),
        "{printed}"
    );
    let out = setup
        .command("audit")
        .args([
            "--file",
            &setup.log().to_string_lossy(),
            "--plugin",
            PROBE_NAME,
            "--json",
        ])
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut ids: Vec<&str> = lines.iter().map(|l| l["id"].as_str().unwrap()).collect();
    ids.sort_unstable(); // The batch ran in parallel: lines are in the order the calls settled.
    assert_eq!(ids, ["c1", "c2", "c6"]);
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

#[test]
fn mcp_writes_the_log_the_users_policy_names_and_records_a_cancelled_call() {
    let setup = Setup::new();
    let log = setup.dir.path().join("from-policy.jsonl");
    let user_config = setup.config().join("toolwright");
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(
        user_config.join("toolwright.toml"),
        format!("audit = {:?}\n", log.to_string_lossy()),
    )
    .unwrap();
    // The project's file cannot move the log (nor switch it off).
    std::fs::write(
        setup.ws.path().join("toolwright.toml"),
        "audit = \"project-audit.jsonl\"\n",
    )
    .unwrap();
    let mut command = setup.command("mcp");
    command.args(["--watch-plugins", "0"]).args(setup.args());
    let mut mcp = StdioServer::start_with(&mut command);
    let (is_error, text) = mcp.run(1, "bash", json!({"command": "sudo echo hi"}));
    assert!(!is_error && text.starts_with("hi"), "{text}");
    mcp.call(2, "bash", json!({"command": "sleep 30"}));
    std::thread::sleep(std::time::Duration::from_millis(500));
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 2, "reason": "the user pressed stop"}}));
    // The server goes on: a call after the cancelled one answers.
    let (is_error, text) = mcp.run(3, "ls", json!({}));
    assert!(!is_error && text.contains("toolwright.toml"), "{text}");
    // The cancelled call's line comes when its process has been killed and the call settled.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read_log(&log).len() < 3 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    drop(mcp);

    assert!(!setup.ws.path().join("project-audit.jsonl").exists());
    let records = read_log(&log);
    // The cancelled call settles when its process is killed: its line may come after the next call's.
    let mut tools: Vec<(&str, Outcome)> = records.iter().map(|r| (r.tool.as_str(), r.outcome)).collect();
    tools.sort_by_key(|(tool, outcome)| (*tool, *outcome as u8));
    assert_eq!(
        tools,
        [
            ("bash", Outcome::Ok),
            ("bash", Outcome::Cancelled),
            ("ls", Outcome::Ok)
        ],
        "{records:#?}"
    );
    let cancelled = records.iter().find(|r| r.outcome == Outcome::Cancelled).unwrap();
    // The guard rewrote the first call (it drops a leading `sudo`).
    assert_eq!(records[0].decision[0].verdict, Verdict::Rewrote);
    assert_eq!(records[0].spawns.len(), 1);
    assert!(cancelled.duration_ms < 20_000, "{cancelled:?}");
}

/// Under `toolwright mcp`, a built-in whose work is placed here (on the thread polling its call, see
/// `Pipeline::with_work_here`) is still cancelled by the client: `find` over the whole filesystem, which
/// walks for many seconds on its own, settles as cancelled soon after `notifications/cancelled`.
#[test]
fn a_client_cancels_a_call_whose_work_runs_here() {
    let setup = Setup::new();
    let log = setup.log();
    let mut command = setup.command("mcp");
    command
        .args(["--watch-plugins", "0", "--audit-log"])
        .arg(&log)
        .args(setup.args());
    let mut mcp = StdioServer::start_with(&mut command);
    mcp.call(
        1,
        "find",
        json!({"pattern": "toolwright-no-such-file-*.none", "path": "/"}),
    );
    std::thread::sleep(std::time::Duration::from_millis(300));
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "the user pressed stop"}}));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while (!log.exists() || read_log(&log).is_empty()) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let records = read_log(&log);
    assert_eq!(records.len(), 1, "{records:#?}");
    assert_eq!(
        (records[0].tool.as_str(), records[0].outcome),
        ("find", Outcome::Cancelled),
        "{records:#?}"
    );
    // The server goes on.
    let (is_error, text) = mcp.run(2, "ls", json!({}));
    assert!(!is_error, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_names_the_embedders_hooks_and_audits_into_any_sink() {
    let ws = tempfile::tempdir().unwrap();
    let memory = Arc::new(AuditMemory::default());
    let no_writes = before_tool_call(|ctx, _cancel| async move {
        Ok((ctx.tool_call.name == "write").then(|| BeforeToolCallResult::block("read-only session")))
    });
    let session = Session::builder(ws.path())
        .before_tool_call(no_writes)
        .audit(memory.clone())
        .build()
        .unwrap();
    let message = AssistantMessage {
        tool_calls: vec![
            ToolCall::new("a", "ls", json!({})),
            ToolCall::new("b", "write", json!({"path": "x.txt", "content": "x"})),
            ToolCall::new("c", "read", json!({"path": "missing.txt"})),
            ToolCall::new("d", "ls", json!({"limit": "many"})),
        ],
        ..Default::default()
    };
    session.run(&message, &EventLog::new(), &Default::default()).await;
    let records = memory.records();
    assert_eq!(records.len(), 4);
    let a = by_id(&records, "a");
    assert_eq!(a.outcome, Outcome::Ok);
    assert_eq!(a.decision[0].by, "embedder hook 1");
    assert_eq!(a.decision[0].verdict, Verdict::Allowed);
    assert_eq!(
        a.source.as_ref().unwrap().grants,
        None,
        "native built-ins have the host's authority"
    );
    let b = by_id(&records, "b");
    assert_eq!(b.decision[0].verdict, Verdict::Blocked);
    assert_eq!(b.decision[0].reason.as_deref(), Some("read-only session"));
    assert!(!ws.path().join("x.txt").exists());
    let c = by_id(&records, "c");
    assert_eq!(c.outcome, Outcome::Error);
    assert!(c.error.as_deref().unwrap().contains("missing.txt"), "{c:?}");
    // Arguments the schema refuses: the validation step says so, and no hook ran.
    let d = by_id(&records, "d");
    assert_eq!(d.decision.len(), 1, "{d:?}");
    assert_eq!(
        (d.decision[0].by.as_str(), d.decision[0].verdict),
        ("validation", Verdict::Refused)
    );

    // A cancelled batch: every call is recorded as cancelled.
    let cancel = tokio_util::sync::CancellationToken::new();
    cancel.cancel();
    let message = AssistantMessage {
        tool_calls: vec![ToolCall::new("e", "ls", json!({}))],
        ..Default::default()
    };
    session.run(&message, &EventLog::new(), &cancel).await;
    assert_eq!(by_id(&memory.records(), "e").outcome, Outcome::Cancelled);
}

#[test]
fn killing_the_host_mid_batch_leaves_a_valid_log_with_every_settled_call() {
    let setup = Setup::new();
    let file = setup.dir.path().join("calls.json");
    let calls = json!({"toolCalls": [
        {"id": "quick", "name": "ls", "arguments": {}},
        {"id": "slow", "name": "bash", "arguments": {"command": "sleep 30"}},
    ]});
    std::fs::write(&file, calls.to_string()).unwrap();
    let mut child = setup
        .command("exec")
        .arg(&file)
        .arg("--json")
        .arg("--audit-log")
        .arg(setup.log())
        .args(setup.args())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let settled = |log: &Path| {
        std::fs::read_to_string(log)
            .unwrap_or_default()
            .contains("\"id\":\"quick\"")
    };
    while !settled(&setup.log()) {
        assert!(
            std::time::Instant::now() < deadline,
            "the quick call never reached the log"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL: no destructor, no flush, nothing runs.
    child.wait().unwrap();
    // Every line is a whole record; the call in progress is what was lost.
    let records = setup.records();
    assert_eq!(
        records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["quick"]
    );
    assert!(std::fs::read_to_string(setup.log()).unwrap().ends_with('\n'));
}

/// `toolwright exec --audit-log LOG` of `calls` with `setup`'s plugins and policy (and `extra` arguments): its
/// stdout events and stderr.
fn exec_into(setup: &Setup, log: &Path, calls: Value, extra: &[&str]) -> (Vec<Value>, String) {
    let file = setup.dir.path().join(format!(
        "calls-{}.json",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    ));
    std::fs::write(&file, json!({ "toolCalls": calls }).to_string()).unwrap();
    let out = setup
        .command("exec")
        .arg(&file)
        .arg("--json")
        .arg("--audit-log")
        .arg(log)
        .args(setup.args())
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "exec failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let events = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (events, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// `toolwright audit --verify --file LOG`: (exit code, stdout).
fn verify(setup: &Setup, log: &Path) -> (i32, String) {
    let out = setup
        .command("audit")
        .arg("--verify")
        .arg("--file")
        .arg(log)
        .output()
        .unwrap();
    (
        out.status.code().unwrap(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The text of the result of call `id` among `events`.
fn result_text<'a>(events: &'a [Value], id: &str) -> &'a str {
    events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
        .unwrap()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
}

#[test]
fn ids_names_and_plugin_names_that_hold_newlines_or_escapes_print_escaped() {
    let setup = Setup::new();
    // A plugin whose name holds a line break followed by what looks like a heading.
    let claimed = b"toolwright-test-probe";
    let hostile_name = "x\n2026  fake  ls  ok ";
    assert_eq!(hostile_name.len(), claimed.len());
    let mut bytes = std::fs::read(toolwright_tests::programs::IMPOSTOR).unwrap();
    let at = bytes.windows(claimed.len()).position(|w| w == claimed).unwrap();
    bytes[at..at + claimed.len()].copy_from_slice(hostile_name.as_bytes());
    std::fs::remove_file(setup.plugins().join("probe.wasm")).unwrap();
    std::fs::write(setup.plugins().join("hostile.wasm"), bytes).unwrap();
    let log = setup.log();
    let forged = "2026-12-01T00:00:00.000Z  forged  ls  ok  0 ms  built-in (native)";
    exec_into(
        &setup,
        &log,
        json!([
            {"id": format!("c1\n{forged}"), "name": "ls", "arguments": {}},
            {"id": "c2", "name": format!("nope\r\u{1b}[2K\u{1b}]0;owned\u{7}{forged}"), "arguments": {}},
            {"id": "c3\u{202e}", "name": "probe", "arguments": {"action": "read", "target": "readme"}},
        ]),
        &[],
    );
    let out = setup.command("audit").arg("--file").arg(&log).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8(out.stdout).unwrap();
    // One heading per record, nothing a terminal acts on, and every character shown.
    let headings: Vec<&str> = printed.lines().filter(|l| !l.starts_with(' ')).collect();
    assert_eq!(headings.len(), 3, "{printed}");
    assert!(
        !printed.contains("\n2026-12-01T00:00:00.000Z  forged"),
        "{printed}"
    );
    assert!(
        !printed
            .chars()
            .any(|c| c != '\n' && toolwright::text::needs_escape(c)),
        "{printed:?}"
    );
    assert!(
        printed.contains(&format!("  c1\\n{forged}  ls  ok  ")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!(
            "  c2  nope\\r\\u{{1b}}[2K\\u{{1b}}]0;owned\\u{{7}}{forged}  error  "
        )),
        "{printed}"
    );
    assert!(
        printed.contains("  c3\\u{202e}  probe  error  ")
            && printed.contains(" plugin (wasm) x\\n2026  fake  ls  ok  sha256:"),
        "{printed}"
    );
}

#[test]
fn a_plugin_whose_write_grant_covers_the_audit_log_is_refused_at_load() {
    let setup = Setup::new();
    let out = setup.ws.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let log = out.join("audit.jsonl");
    exec_into(
        &setup,
        &log,
        json!([{"id": "before", "name": "ls", "arguments": {}}]),
        &[],
    );
    let kept = std::fs::read_to_string(&log).unwrap();
    // The probe asks to write `./out`, and the policy grants it: the log is inside.
    std::fs::write(
        setup.policy(),
        format!("[plugins.{PROBE_NAME}]\nwrite = [\"./out\"]\n"),
    )
    .unwrap();
    let call = json!([{"id": "erase", "name": "probe", "arguments": {"action": "write", "target": log}}]);
    let (events, stderr) = exec_into(&setup, &log, call, &[]);
    assert!(
        stderr.contains(&format!(
            "plugin `{PROBE_NAME}` is not loaded: its write grant on {} covers the audit log {}, which would let it \
             escape its sandbox; grant it a directory that does not contain that",
            out.display(),
            log.display()
        )),
        "{stderr}"
    );
    assert_eq!(result_text(&events, "erase"), "Tool probe not found");
    // The log kept its records and gained the refused call's, chained.
    let now = std::fs::read_to_string(&log).unwrap();
    assert!(now.starts_with(&kept), "{now}");
    assert!(now.contains("\"id\":\"erase\""), "{now}");
    let (code, said) = verify(&setup, &log);
    assert_eq!(code, 0, "{said}");
    assert!(said.contains(": the chain holds: 2 records,"), "{said}");
    // A grant beside the log is no grant of it: the probe loads and writes there.
    std::fs::write(
        setup.policy(),
        format!("[plugins.{PROBE_NAME}]\nwrite = [\"./out/sub\"]\n"),
    )
    .unwrap();
    std::fs::create_dir_all(out.join("sub")).unwrap();
    let call = json!([{"id": "beside", "name": "probe", "arguments": {"action": "write", "target": out.join("sub/x")}}]);
    let (events, _) = exec_into(&setup, &log, call, &[]);
    assert_eq!(result_text(&events, "beside"), "wrote");
    assert_eq!(verify(&setup, &log).0, 0);
}

#[test]
fn verify_names_the_record_edited_inserted_or_removed_and_concurrent_writers_keep_one_chain() {
    let setup = Setup::new();
    let log = setup.log();
    // Two hosts appending to one log at once, each running its calls in parallel.
    let calls = |host: &str| -> Value {
        (0..8)
            .map(|i| json!({"id": format!("{host}{i}"), "name": "ls", "arguments": {}}))
            .collect()
    };
    std::thread::scope(|s| {
        let a = s.spawn(|| exec_into(&setup, &log, calls("a"), &[]));
        let b = s.spawn(|| exec_into(&setup, &log, calls("b"), &[]));
        a.join().unwrap();
        b.join().unwrap();
    });
    let (code, said) = verify(&setup, &log);
    assert_eq!(code, 0, "{said}");
    assert!(said.starts_with(&format!("{}: the chain holds: 16 records, each carrying the hash of the one before; the last line's hash is ", log.display())), "{said}");
    let text = std::fs::read_to_string(&log).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with(&format!("{{\"prev\":\"{}\",", "0".repeat(64))),
        "{}",
        lines[0]
    );
    let check = |lines: &[String]| {
        let tampered = setup.dir.path().join("tampered.jsonl");
        std::fs::write(&tampered, lines.join("\n") + "\n").unwrap();
        let (code, said) = verify(&setup, &tampered);
        assert_eq!(code, 1, "{said}");
        said.strip_prefix(&format!("{}:", tampered.display()))
            .unwrap()
            .trim_end()
            .to_owned()
    };
    let owned: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    // Edited: the fourth record's outcome.
    let mut edited = owned.clone();
    edited[3] = edited[3].replace("\"outcome\":\"ok\"", "\"outcome\":\"error\"");
    assert_ne!(edited, owned);
    assert_eq!(
        check(&edited),
        "4: the record was edited, or records were removed after it (line 5 does not chain to it)"
    );
    // Inserted: a copy of the fourth record, renamed, after it.
    let mut inserted = owned.clone();
    inserted.insert(4, owned[3].replace("\"id\":\"", "\"id\":\"x"));
    assert_eq!(
        check(&inserted),
        "5: the record was inserted (line 6 chains to line 4)"
    );
    // Removed: the fourth record, and the first.
    let mut removed = owned.clone();
    removed.remove(3);
    assert_eq!(
        check(&removed),
        "3: the record was edited, or records were removed after it (line 4 does not chain to it)"
    );
    assert_eq!(
        check(&owned[1..]),
        "1: the first record does not start the chain: records were removed before it, or it was edited"
    );
    // The untouched log still verifies, and takes more records on the same chain.
    exec_into(
        &setup,
        &log,
        json!([{"id": "later", "name": "ls", "arguments": {}}]),
        &[],
    );
    assert!(verify(&setup, &log).1.contains(": the chain holds: 17 records,"));
}

//! The red-team suite: hostile plugins (`tests/programs/probe`, with the SDK; `tests/programs/raw`, wit-bindgen
//! alone) against the sandbox's edges, through the `toolwright` command line as a client would drive it —
//! `toolwright exec` with a calls file, and `toolwright mcp` over stdio — not only through the library. Each case
//! asserts the exact error, that the next call still works, and what was left on disk or in `/proc`.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::mcp::StdioServer as Mcp;
use toolwright_tests::programs::PROBE;
use toolwright_tests::text_of;

const PROBE_NAME: &str = "toolwright-test-probe";

/// A workspace and a plugin directory holding the probe, with `policy` as a trusted `--policy` file (`{ws}`
/// stands for the workspace).
struct Setup {
    ws: tempfile::TempDir,
    plugins: tempfile::TempDir,
    policy: PathBuf,
    /// The `--allow` list (the probe alone, unless a test lets it reach other tools).
    allow: String,
    /// The component cache.
    cache: PathBuf,
    /// `TOOLWRIGHT_HAND_OFF` for `exec_sequential` and `mcp` (none: as measured).
    hand_off: Option<&'static str>,
}

fn setup(policy: &str) -> Setup {
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(PROBE, plugins.path().join("probe.wasm")).unwrap();
    let policy_file = plugins.path().join("policy.toml");
    std::fs::write(&policy_file, policy.replace("{ws}", &ws.path().to_string_lossy())).unwrap();
    Setup {
        ws,
        plugins,
        policy: policy_file,
        allow: "probe".into(),
        cache: test_cache_dir(),
        hand_off: None,
    }
}

impl Setup {
    fn args(&self) -> Vec<String> {
        vec![
            "--no-default-plugins".into(),
            "--cwd".into(),
            self.ws.path().to_string_lossy().into_owned(),
            "--plugins".into(),
            self.plugins.path().to_string_lossy().into_owned(),
            "--policy".into(),
            self.policy.to_string_lossy().into_owned(),
            "--cache-dir".into(),
            self.cache.to_string_lossy().into_owned(),
            "--allow".into(),
            self.allow.clone(),
        ]
    }

    /// `toolwright exec` on `calls` (probe arguments): the result messages' (isError, text), in call order.
    fn exec(&self, calls: &[Value]) -> Vec<(bool, String)> {
        let file = self.plugins.path().join("calls.json");
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, args)| json!({"id": format!("c{i}"), "name": "probe", "arguments": args}))
            .collect();
        std::fs::write(&file, json!({ "toolCalls": calls }).to_string()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .arg("exec")
            .arg(&file)
            .arg("--json")
            .args(self.args())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "exec failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "message_end" || e["type"] == "tool_result_message")
            .filter_map(|e| {
                let m = if e["message"].is_object() {
                    &e["message"]
                } else {
                    &e
                };
                (m["role"] == "toolResult").then(|| (m["isError"] == true, text_of(&m["content"])))
            })
            .collect()
    }

    /// [`Setup::exec`] with the calls run one after another (`"mode": "sequential"`): each call's
    /// `tool_execution_end` as (isError, text).
    fn exec_sequential(&self, calls: &[Value]) -> Vec<(bool, String)> {
        let file = self.plugins.path().join("sequential.json");
        let listed: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, args)| json!({"id": format!("c{i}"), "name": "probe", "arguments": args}))
            .collect();
        std::fs::write(
            &file,
            json!({"mode": "sequential", "toolCalls": listed}).to_string(),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .arg("exec")
            .arg(&file)
            .arg("--json")
            .args(self.args())
            .envs(self.hand_off.map(|h| ("TOOLWRIGHT_HAND_OFF", h)))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "tool_execution_end")
            .map(|e| (e["isError"] == true, text_of(&e["result"]["content"])))
            .collect()
    }

    /// `calls` (probe arguments) one after another from an MCP client: (isError, text) of each.
    fn mcp_sequential(&self, calls: &[Value]) -> Vec<(bool, String)> {
        let mut mcp = self.mcp();
        calls
            .iter()
            .enumerate()
            .map(|(i, args)| mcp.run(i as i64 + 1, "probe", args.clone()))
            .collect()
    }

    fn mcp(&self) -> Mcp {
        Mcp::start_with(
            Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
                .args(["mcp", "--watch-plugins", "0"])
                .args(self.args())
                .envs(self.hand_off.map(|h| ("TOOLWRIGHT_HAND_OFF", h))),
        )
    }
}

fn stopped_at(limit_ms: u64) -> String {
    format!("The plugin {PROBE_NAME} was stopped: it ran past its time limit of {limit_ms} ms")
}

const LOOP_POLICY: &str = "[plugins.toolwright-test-probe]\ntimeout-ms = 500\n";

#[test]
fn a_busy_loop_is_stopped_at_its_deadline_under_exec_and_mcp() {
    let setup = setup(LOOP_POLICY);
    let started = Instant::now();
    let results = setup.exec(&[json!({"action": "loop"}), json!({"action": "print"})]);
    assert_eq!(results[0], (true, stopped_at(500)));
    assert_eq!(results[1], (false, "printed".into()));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );

    let mut mcp = setup.mcp();
    let started = Instant::now();
    assert_eq!(
        mcp.run(1, "probe", json!({"action": "loop"})),
        (true, stopped_at(500))
    );
    let took = started.elapsed();
    assert!(took < Duration::from_secs(5), "the loop under mcp took {took:?}");
    assert_eq!(
        mcp.run(2, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

/// The resident-memory high-water mark of a process, in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn six_parallel_huge_results_stay_under_the_host_memory_cap_under_mcp() {
    let setup = setup("[plugins.toolwright-test-probe]\n");
    let mut mcp = setup.mcp();
    for id in 1..=6 {
        mcp.call(id, "probe", json!({"action": "big", "mib": 100}));
    }
    for id in 1..=6 {
        let answer = mcp.response(id);
        let result = &answer["result"];
        assert_eq!(
            result["isError"],
            true,
            "{}",
            &answer.to_string()[..answer.to_string().len().min(400)]
        );
        let text = text_of(&result["content"]);
        assert!(
            text == format!(
                "The plugin {PROBE_NAME} was stopped: its results came to more than the cap of 16 MiB a call may \
                 carry into the host (result-mib)"
            ) || text
                == format!(
                    "The plugin {PROBE_NAME} was stopped: the plugins together reached the host's memory cap of \
                     192 MiB (host-memory-mib)"
                )
                || text.starts_with(&format!(
                    "The plugin {PROBE_NAME} was stopped: it tried to use more than its memory limit"
                )),
            "{text}"
        );
    }
    let peak = peak_rss(mcp.pid());
    assert!(peak < 512 << 20, "peak RSS {} MiB", peak >> 20);
    assert!(!mcp.run(7, "probe", json!({"action": "big", "mib": 1})).0);
}

#[test]
fn a_huge_result_is_an_error_naming_the_cap_under_exec() {
    let setup = setup("[plugins.toolwright-test-probe]\n[limits]\nresult-mib = 4\n");
    let results = setup.exec(&[
        json!({"action": "big", "mib": 8}),
        json!({"action": "big", "mib": 1}),
    ]);
    assert_eq!(
        results[0],
        (
            true,
            format!(
                "The plugin {PROBE_NAME} was stopped: its results came to more than the cap of 4 MiB a call may \
                 carry into the host (result-mib)"
            )
        )
    );
    assert!(!results[1].0, "{:?}", results[1]);
    assert_eq!(results[1].1.len(), 1 << 20);
}

/// Whether a process is still alive (a zombie waiting for its parent counts as gone).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| {
            let state = stat
                .rsplit(')')
                .next()
                .unwrap_or("")
                .split_whitespace()
                .next()
                .unwrap_or("");
            state != "Z" && state != "X"
        })
        .unwrap_or(false)
}

fn pids_in(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

#[test]
fn a_cancelled_call_under_mcp_leaves_no_process_behind() {
    let setup = setup(
        "[plugins.toolwright-test-probe]\nspawn = [\"/bin/sh\"]\nwrite = [\"./out\"]\ntimeout-ms = 20000\n",
    );
    std::fs::create_dir(setup.ws.path().join("out")).unwrap();
    let pidfile = setup.ws.path().join("out/pids");
    let script = format!(
        "echo $$ > {p}; sleep 300 & echo $! >> {p}; setsid sleep 300 & echo $! >> {p}; wait",
        p = pidfile.display()
    );
    let mut mcp = setup.mcp();
    mcp.call(
        1,
        "probe",
        json!({"action": "spawn", "target": "/bin/sh", "args": ["-c", script]}),
    );
    let until = Instant::now() + Duration::from_secs(10);
    while pids_in(&pidfile).len() < 3 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let pids = pids_in(&pidfile);
    assert_eq!(pids.len(), 3, "the script did not start");
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "red team"}}));
    let until = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left: Vec<_> = pids.iter().filter(|p| alive(**p)).collect();
    assert!(left.is_empty(), "still running after the cancel: {left:?}");
    assert_eq!(
        mcp.run(2, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

/// A plugin directory holding the probe and `program`, under `timeout-ms` for the probe.
fn setup_with(program: &str, file: &str) -> Setup {
    let setup = setup("[plugins.toolwright-test-probe]\n");
    std::fs::copy(program, setup.plugins.path().join(file)).unwrap();
    setup
}

#[test]
fn a_plugin_that_loops_while_describing_itself_does_not_hold_the_start_hostage() {
    let setup = setup_with(toolwright_tests::programs::STALL, "stall.wasm");
    let stall = setup.plugins.path().join("stall.wasm");
    let skipped = format!(
        "{}: invalid plugin metadata: The plugin {} was stopped: it ran past its time limit of 5000 ms",
        stall.display(),
        stall.display()
    );
    // exec: the probe runs; the stalling plugin is reported on stderr.
    let started = Instant::now();
    let file = setup.plugins.path().join("calls.json");
    std::fs::write(
        &file,
        json!({"toolCalls": [{"id": "a", "name": "probe", "arguments": {"action": "print"}}]}).to_string(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--json")
        .args(setup.args())
        .output()
        .unwrap();
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&skipped), "{stderr}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("printed"));
    assert!(took < Duration::from_secs(15), "{took:?}");

    // mcp: the server answers, with the probe.
    let started = Instant::now();
    let mut mcp = setup.mcp();
    assert!(started.elapsed() < Duration::from_secs(15));
    assert_eq!(
        mcp.run(1, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

#[test]
fn a_self_referencing_schema_is_refused_at_load_and_the_host_serves_on() {
    let setup = setup_with(toolwright_tests::programs::SELFREF, "selfref.wasm");
    let file = setup.plugins.path().join("calls.json");
    std::fs::write(
        &file,
        json!({"toolCalls": [
            {"id": "a", "name": "loop_ref", "arguments": {}},
            {"id": "b", "name": "probe", "arguments": {"action": "print"}}
        ]})
        .to_string(),
    )
    .unwrap();
    let mut args = setup.args();
    let allow = args.len() - 1;
    args[allow] = "probe,loop_ref,ping_pong".into();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--json")
        .args(&args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("invalid plugin metadata: the parameter schema of tool `loop_ref` is refused"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("Tool loop_ref not found"), "{stdout}");
    assert!(stdout.contains("printed"), "{stdout}");

    let mut mcp = Mcp::start(Path::new(env!("CARGO_BIN_EXE_toolwright-cli")), &args);
    mcp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "loop_ref", "arguments": {}}}));
    let answer = mcp.response(1);
    assert!(answer.to_string().contains("loop_ref"), "{answer}");
    assert_eq!(
        mcp.run(2, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

#[test]
fn a_granted_program_stays_what_was_granted_and_reaches_only_the_grants_under_exec_and_mcp() {
    let setup = setup(
        "[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\nenv = [\"*\"]\n\
         spawn = [\"echo\", \"cat\", { program = \"git\", args = [[\"status\"]] }]\n",
    );
    let ws = setup.ws.path();
    std::fs::create_dir(ws.join("out")).unwrap();
    std::fs::write(ws.join("a.txt"), "inside").unwrap();
    let fake = ws.join("out/echo");
    std::fs::write(&fake, "#!/bin/sh\necho hijacked\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let outside = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(outside.path(), "secret").unwrap();
    let refusal = |var: &str| {
        format!(
            "Permission denied: the plugin {PROBE_NAME} may not set {var} for echo: it changes which code a program \
             loads or runs. An env grant naming {var} (not `*`) in the policy file (toolwright.toml) would allow it."
        )
    };
    let out_dir = ws.join("out").to_string_lossy().into_owned();
    let spawn = |target: &str, env: Value, args: Value| json!({"action": "spawn", "target": target, "env": env, "args": args});
    let by_exec = setup.exec(&[
        spawn("echo", json!({"PATH": out_dir}), json!(["hi"])),
        spawn(
            "echo",
            json!({"LD_PRELOAD": format!("{out_dir}/evil.so")}),
            json!(["hi"]),
        ),
        spawn("cat", json!({}), json!([outside.path()])),
        spawn("echo", json!({}), json!(["hi"])),
    ]);
    assert_eq!(by_exec[0], (true, refusal("PATH")));
    assert_eq!(by_exec[1], (true, refusal("LD_PRELOAD")));
    if toolwright::native::landlock_abi() >= 4 {
        assert_eq!(
            by_exec[2],
            (
                false,
                format!("cat: {}: Permission denied\n", outside.path().display())
            )
        );
    }
    assert_eq!(by_exec[3], (false, "hi\n".into()));
    let mut mcp = setup.mcp();
    assert_eq!(
        mcp.run(1, "probe", spawn("echo", json!({"PATH": out_dir}), json!(["hi"]))),
        (true, refusal("PATH"))
    );
    assert_eq!(
        mcp.run(
            2,
            "probe",
            spawn(
                "echo",
                json!({"LD_PRELOAD": format!("{out_dir}/evil.so")}),
                json!(["hi"])
            )
        ),
        (true, refusal("LD_PRELOAD"))
    );
    assert_eq!(
        mcp.run(
            3,
            "probe",
            spawn("git", json!({}), json!(["-c", "alias.x=!sh -c id", "x"]))
        ),
        (
            true,
            format!(
                "Permission denied: the plugin {PROBE_NAME} may start git only with arguments starting with one of \
                 [status]; [-c alias.x=!sh -c id x] is not granted."
            )
        )
    );
    if toolwright::native::landlock_abi() >= 4 {
        assert_eq!(
            mcp.run(4, "probe", spawn("cat", json!({}), json!([ws.join("a.txt")]))),
            (false, "inside".into())
        );
        assert_eq!(
            mcp.run(5, "probe", spawn("cat", json!({}), json!([outside.path()]))),
            (
                false,
                format!("cat: {}: Permission denied\n", outside.path().display())
            )
        );
    }
    assert_eq!(
        mcp.run(6, "probe", spawn("echo", json!({}), json!(["hi"]))),
        (false, "hi\n".into())
    );
    assert_eq!(std::fs::read_to_string(outside.path()).unwrap(), "secret");
}

#[test]
fn a_look_ahead_pattern_is_enforced_under_exec_and_mcp() {
    let setup = setup_with(toolwright_tests::programs::RAW, "raw.wasm");
    let mut args = setup.args();
    let allow = args.len() - 1;
    args[allow] = "probe,guarded".into();
    let file = setup.plugins.path().join("calls.json");
    std::fs::write(
        &file,
        json!({"toolCalls": [
            {"id": "a", "name": "guarded", "arguments": {"name": "evil-twin"}},
            {"id": "b", "name": "guarded", "arguments": {"name": "good"}}
        ]})
        .to_string(),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--json")
        .args(&args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let refused = "Validation failed for tool \\\"guarded\\\":\\n  - name: expected to match ^(?!evil)";
    assert!(stdout.contains(refused), "{stdout}");
    assert!(stdout.contains("raw ok"), "{stdout}");

    let mut mcp = Mcp::start(Path::new(env!("CARGO_BIN_EXE_toolwright-cli")), &args);
    let guarded = |id: i64, name: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "guarded", "arguments": {"name": name}}})
    };
    mcp.send(&guarded(1, "evil-twin"));
    let answer = mcp.response(1);
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    assert!(
        text_of(&answer["result"]["content"])
            .starts_with("Validation failed for tool \"guarded\":\n  - name: expected to match ^(?!evil)"),
        "{answer}"
    );
    mcp.send(&guarded(2, "good"));
    assert_eq!(text_of(&mcp.response(2)["result"]["content"]), "raw ok");
}

#[test]
fn a_log_flood_reaches_an_mcp_client_bounded_and_cut_and_the_server_serves_on() {
    let setup = setup("");
    let results = setup.exec(&[json!({"action": "logflood"})]);
    assert_eq!(results, vec![(false, "logged".to_owned())]);

    let mut mcp = setup.mcp();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "debug"}}));
    mcp.response(1);
    assert_eq!(
        mcp.run(2, "probe", json!({"action": "logflood"})),
        (false, "logged".into())
    );
    let lines: Vec<&str> = mcp
        .notifications
        .iter()
        .filter(|n| n["method"] == "notifications/message")
        .filter_map(|n| n["params"]["data"].as_str())
        .collect();
    assert!(!lines.is_empty(), "no log line reached the client");
    // Each line is cut to 8 KiB; lines the client could not take in time are dropped, and it is told so.
    for line in &lines {
        assert!(
            line.len() <= 8 * 1024 + '…'.len_utf8(),
            "a line of {} bytes",
            line.len()
        );
    }
    let kept = lines
        .iter()
        .filter(|l| !l.contains("log lines were dropped"))
        .count();
    let dropped: usize = lines
        .iter()
        .filter_map(|l| {
            l.split_once(" log lines were dropped")
                .and_then(|(n, _)| n.parse::<usize>().ok())
        })
        .sum();
    assert_eq!(
        kept + dropped,
        2000,
        "every line is delivered or counted as dropped"
    );
    assert_eq!(
        mcp.run(3, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

/// A plugin's rendering for people (pi's `renderCall`) that never returns cannot hang `toolwright exec` on a
/// terminal: past the render limit the call is shown as the UI shows any call, and the result with the plugin's
/// own rendering. (MCP renders nothing: there is no such path under `toolwright mcp`.)
#[test]
fn a_renderer_that_never_returns_does_not_hang_the_terminal_view() {
    let s = setup("");
    let file = s.plugins.path().join("calls.json");
    let calls = json!({"toolCalls": [{"id": "c0", "name": "probe", "arguments": {"action": "renderloop"}}]});
    std::fs::write(&file, calls.to_string()).unwrap();
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--human")
        .args(s.args())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the renderer held exec for {:?}",
        started.elapsed()
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains(r#"{"action":"renderloop"}"#), "{shown}");
    assert!(shown.contains("\n  rendered by the probe"), "{shown}");
}

/// Waits until `file` names `n` processes (a test's script wrote them), or 10 s passed.
fn wait_for_pids(file: &Path, n: usize) -> Vec<u32> {
    let until = Instant::now() + Duration::from_secs(10);
    while pids_in(file).len() < n && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    pids_in(file)
}

/// A probe that starts a nested bash call (`host.start-call`) and returns without its outcome: the call is
/// cancelled when the probe's call ends, and its process killed, under exec and under mcp.
#[test]
fn a_nested_call_a_plugin_started_and_left_is_cancelled_with_it_under_exec_and_mcp() {
    // bash runs within the probe's grants: the workspace, `./out` and the shell.
    let mut setup = setup(
        "[plugins.toolwright-test-probe]\ntools = [\"bash\"]\nread = [\".\"]\nwrite = [\"./out\"]\nspawn = [\"sh\"]\n",
    );
    setup.allow = "probe,bash".into();
    std::fs::create_dir(setup.ws.path().join("out")).unwrap();
    let leave = |pidfile: &Path| {
        let command = format!("echo $$ > {}; sleep 300", pidfile.display());
        json!({"action": "start-and-leave", "tool": "bash", "arguments": {"command": command}, "ms": 1500})
    };
    let pidfile = setup.ws.path().join("out/exec-pid");
    let started = Instant::now();
    let results = setup.exec(&[leave(&pidfile)]);
    assert_eq!(results, vec![(false, "started call 1 and left".to_owned())]);
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let pids = wait_for_pids(&pidfile, 1);
    assert_eq!(pids.len(), 1, "the nested bash did not start");
    // Killed as exec ends; on a loaded machine the kernel may take a moment to finish it off.
    let until = Instant::now() + Duration::from_secs(5);
    while alive(pids[0]) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(pids[0]), "the left call's process outlived exec");

    let pidfile = setup.ws.path().join("out/mcp-pid");
    let mut mcp = setup.mcp();
    assert_eq!(
        mcp.run(1, "probe", leave(&pidfile)),
        (false, "started call 1 and left".into())
    );
    let pids = wait_for_pids(&pidfile, 1);
    let until = Instant::now() + Duration::from_secs(5);
    while pids.iter().any(|p| alive(*p)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        pids.len() == 1 && !alive(pids[0]),
        "the left call's process outlived its call: {pids:?}"
    );
    assert_eq!(
        mcp.run(2, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

/// A probe that starts far more nested calls than it collects gets error outcomes past the bound, under exec
/// and under mcp, and the host serves on.
#[test]
fn a_flood_of_started_calls_is_bounded_under_exec_and_mcp() {
    let mut setup =
        setup("[plugins.toolwright-test-probe]\ntimeout-ms = 60000\ntools = [\"ls\"]\nread = [\".\"]\n");
    setup.allow = "probe,ls".into();
    let flood = json!({"action": "start-flood", "tool": "ls", "count": 1100});
    let expected = (false, "ran 1024, refused 76, other errors []".to_owned());
    assert_eq!(setup.exec(std::slice::from_ref(&flood)), vec![expected.clone()]);
    let mut mcp = setup.mcp();
    assert_eq!(mcp.run(1, "probe", flood), expected);
    assert_eq!(
        mcp.run(2, "probe", json!({"action": "print"})),
        (false, "printed".into())
    );
}

const REUSE_POLICY: &str = "[plugins.toolwright-test-probe]\ninstance = \"reuse\"\ntimeout-ms = 500\n\
                            spawn = [\"/bin/sh\"]\nwrite = [\"./out\"]\n";

/// The probe's answer to `recall` in an instance that served `calls` remember or recall calls before, holding
/// `held`.
fn recalled(calls: u64, held: &str) -> (bool, String) {
    (
        false,
        format!("call {} of this instance, holding {held:?}", calls + 1),
    )
}

/// Calls that try to carry something across a reused instance's end: state after a trap and after a deadline,
/// and a process left running by a call whose instance is reused (`{pids}` is where its pid goes).
fn reuse_calls(pids: &Path) -> Vec<Value> {
    let leave = format!("sleep 300 & echo $! > {}", pids.display());
    vec![
        json!({"action": "remember", "target": "first"}),
        json!({"action": "recall"}),
        json!({"action": "panic"}),
        json!({"action": "recall"}),
        json!({"action": "remember", "target": "second"}),
        json!({"action": "loop"}),
        json!({"action": "recall"}),
        json!({"action": "spawn", "target": "/bin/sh", "args": ["-c", leave]}),
        json!({"action": "recall"}),
    ]
}

fn assert_reuse_outcomes(results: &[(bool, String)], pids: &Path) {
    assert_eq!(results[0], (false, "call 1 of this instance".into()));
    assert_eq!(results[1], recalled(1, "first"));
    assert!(
        results[2].0 && results[2].1.contains("panicked"),
        "{:?}",
        results[2]
    );
    // The trapped instance is gone: the next call starts from nothing.
    assert_eq!(results[3], recalled(0, ""));
    assert_eq!(results[4], (false, "call 2 of this instance".into()));
    assert_eq!(results[5], (true, stopped_at(500)));
    // So is the one stopped at its deadline.
    assert_eq!(results[6], recalled(0, ""));
    assert_eq!(results[7], (false, String::new()));
    // The spawning call's instance (the one the recall before it left; spawning counts no call) served the next
    // call, but what it started died with the call.
    assert_eq!(results[8], recalled(1, ""));
    let left: Vec<u32> = pids_in(pids).into_iter().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "a reused instance's call left {left:?} running");
}

/// The probe's [`reuse_calls`] under `policy`, one after another, in one `exec` and then from an MCP client;
/// `check` judges the outcomes of each.
fn reuse_calls_under_exec_and_mcp(
    policy: &str,
    hand_off: Option<&'static str>,
    check: fn(&[(bool, String)], &Path),
) {
    let mut setup = setup(policy);
    setup.hand_off = hand_off;
    std::fs::create_dir(setup.ws.path().join("out")).unwrap();
    let pids = setup.ws.path().join("out/pid");
    let calls = reuse_calls(&pids);
    check(&setup.exec_sequential(&calls), &pids);
    check(&setup.mcp_sequential(&calls), &pids);
}

#[test]
fn a_reused_instance_carries_nothing_past_a_trap_a_deadline_or_its_call_s_processes_under_exec_and_mcp() {
    // One call after another: each finds the instance the last one left, if any.
    reuse_calls_under_exec_and_mcp(REUSE_POLICY, None, assert_reuse_outcomes);
}

/// The probe's policy without reuse: every call has a fresh instance, most of them a spare made after the call
/// before (`toolwright-wasm`'s `warm`).
const FRESH_POLICY: &str =
    "[plugins.toolwright-test-probe]\ntimeout-ms = 500\nspawn = [\"/bin/sh\"]\nwrite = [\"./out\"]\n";

fn assert_fresh_outcomes(results: &[(bool, String)], pids: &Path) {
    let fresh = (false, "call 1 of this instance".to_owned());
    for (i, result) in results.iter().enumerate() {
        match i {
            2 => assert!(result.0 && result.1.contains("panicked"), "{result:?}"),
            5 => assert_eq!(*result, (true, stopped_at(500))),
            7 => assert_eq!(*result, (false, String::new())),
            0 | 4 => assert_eq!(*result, fresh, "call {i}"),
            _ => assert_eq!(
                *result,
                recalled(0, ""),
                "call {i}: a fresh instance held something"
            ),
        }
    }
    let left: Vec<u32> = pids_in(pids).into_iter().filter(|p| alive(*p)).collect();
    assert!(left.is_empty(), "a call left {left:?} running");
}

#[test]
fn a_fresh_instance_made_ahead_of_its_call_carries_nothing_from_any_call_under_exec_and_mcp() {
    // One call after another: each finds the spare made after the one before, if it is ready (made for every
    // call, not only where it pays, so that every call meets one).
    reuse_calls_under_exec_and_mcp(FRESH_POLICY, Some("always"), assert_fresh_outcomes);
}

#[test]
fn pages_kept_resident_across_a_slot_s_reset_carry_nothing_to_the_next_fresh_instance_under_exec_and_mcp() {
    // `scatter` writes 256 runs of pages, far more than wasmtime's reset keeps (32): the host merges them so that
    // they all stay resident (toolwright-wasm's `resident`), and each next instance, made in the same slot by the
    // background thread, must still see the image's zeros. Under reuse the same calls see the marks: the check
    // can tell.
    let calls = [
        json!({"action": "scatter"}),
        json!({"action": "gather"}),
        json!({"action": "scatter"}),
        json!({"action": "gather"}),
        json!({"action": "gather"}),
    ];
    let marked = (false, "marked 256 pages".to_owned());
    let found = |n: usize| (false, format!("found {n} marked pages"));
    for (policy, seen) in [(FRESH_POLICY, 0), (REUSE_POLICY, 256)] {
        let mut setup = setup(policy);
        setup.hand_off = Some("always");
        std::fs::create_dir(setup.ws.path().join("out")).unwrap();
        for results in [setup.exec_sequential(&calls), setup.mcp_sequential(&calls)] {
            assert_eq!(
                results,
                [
                    marked.clone(),
                    found(seen),
                    marked.clone(),
                    found(seen),
                    found(seen)
                ],
                "{policy}"
            );
        }
    }
}

#[test]
fn a_plugin_reads_only_the_variables_it_was_granted_under_exec_and_mcp() {
    // `wasi:cli/environment` is answered from the call's grants (toolwright-wasm's `environment`), not from a copy
    // in every store: a granted variable reads as the host's, an ungranted one does not exist, fresh or reused.
    let calls = [
        json!({"action": "env", "target": "PATH"}),
        json!({"action": "env", "target": "HOME"}),
    ];
    let path = std::env::var("PATH").unwrap();
    for instance in ["", "instance = \"reuse\"\n"] {
        let setup = setup(&format!(
            "[plugins.toolwright-test-probe]\nenv = [\"PATH\"]\n{instance}"
        ));
        for results in [setup.exec_sequential(&calls), setup.mcp_sequential(&calls)] {
            assert_eq!(results[0], (false, path.clone()), "{instance}");
            assert_eq!(
                results[1],
                (true, "HOME: environment variable not found".to_owned()),
                "{instance}"
            );
        }
    }
}

#[test]
fn an_untrusted_project_cannot_turn_reuse_on() {
    // The policy as the project's own toolwright.toml: reuse is the user's trade, not a repository's.
    let setup = setup("");
    std::fs::write(
        setup.ws.path().join("toolwright.toml"),
        "[plugins.toolwright-test-probe]\ninstance = \"reuse\"\n",
    )
    .unwrap();
    let results = setup.exec_sequential(&[
        json!({"action": "remember", "target": "x"}),
        json!({"action": "recall"}),
    ]);
    assert_eq!(results[1], recalled(0, ""), "{results:?}");
}

#[test]
fn a_write_grant_over_the_component_cache_or_the_policy_is_refused_under_exec_and_mcp() {
    let probe = |setup: &Setup, target: &Path| {
        let file = setup.plugins.path().join("calls.json");
        let call = json!({"id": "w", "name": "probe", "arguments": {"action": "write", "target": target}});
        std::fs::write(&file, json!({ "toolCalls": [call] }).to_string()).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .arg("exec")
            .arg(&file)
            .arg("--json")
            .args(setup.args())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let mut server = setup.mcp();
        server.call(1, "probe", json!({"action": "write", "target": target}));
        let answer = server.response(1);
        let result = &answer["result"];
        let mcp = if result.is_object() {
            (result["isError"] == true, text_of(&result["content"]))
        } else {
            (true, answer["error"].to_string())
        };
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            mcp,
        )
    };
    // Compiled code in the cache runs outside the sandbox at the next start: a grant that reaches it, directly or
    // through a symbolic link, or reaches the policy file, is refused with the plugin. (The probe requests
    // `write ./out`; what it gets is the narrower of request and grant.)
    for (grant, what) in [
        ("write = [\".\"]", "the component cache"),
        ("write = [\"./out\"]", "the component cache"),
        ("write = [\"./out\"]", "the policy file"),
    ] {
        let mut setup = setup("");
        let ws = setup.ws.path().to_path_buf();
        let elsewhere = tempfile::tempdir().unwrap();
        let linked = grant.contains("out") && what.contains("cache");
        if linked {
            std::os::unix::fs::symlink(elsewhere.path(), ws.join("out")).unwrap();
            setup.cache = elsewhere.path().join("components");
        } else {
            std::fs::create_dir(ws.join("out")).unwrap();
            setup.cache = ws.join("out/.cache/components");
        }
        if what.contains("policy") {
            setup.cache = elsewhere.path().join("components");
            setup.policy = ws.join("out/policy.toml");
        }
        std::fs::write(
            &setup.policy,
            format!("[plugins.toolwright-test-probe]\n{grant}\n"),
        )
        .unwrap();
        let victim = if what.contains("policy") {
            setup.policy.clone()
        } else {
            setup.cache.join("victim.cwasm")
        };
        let (stdout, stderr, mcp) = probe(&setup, &victim);
        assert!(stdout.contains("Tool probe not found"), "{grant}: {stdout}");
        assert!(
            stderr.contains("plugin `toolwright-test-probe` is not loaded: its write grant on")
                && stderr.contains(&format!("covers {what}"))
                && stderr.contains("which would let it escape its sandbox"),
            "{grant} ({what}): {stderr}"
        );
        assert!(mcp.0 && mcp.1.contains("probe"), "{grant}: {mcp:?}");
        if what.contains("policy") {
            assert!(
                std::fs::read_to_string(&victim).unwrap().contains("[plugins."),
                "{grant}"
            );
        } else {
            assert!(!victim.exists(), "{grant}");
        }
    }
    // Reading there is no escape: the plugin loads, and its write is refused by the sandbox.
    let mut setup = setup("[plugins.toolwright-test-probe]\nread = [\".\"]\nwrite = [\"./out\"]\n");
    let ws = setup.ws.path().to_path_buf();
    std::fs::create_dir(ws.join("out")).unwrap();
    setup.cache = ws.join(".cache/components");
    let victim = setup.cache.join("victim.cwasm");
    let (stdout, stderr, mcp) = probe(&setup, &victim);
    assert!(!stderr.contains("is not loaded"), "{stderr}");
    assert!(stdout.contains("\"isError\":true"), "{stdout}");
    assert!(mcp.0, "{mcp:?}");
    assert!(!victim.exists());
    assert_eq!(
        probe(&setup, &ws.join("out/ok")).2,
        (false, "wrote".into()),
        "the grant it has works"
    );
}

/// What one `toolwright exec --audit-log` run of calls one after another showed.
struct Watched {
    /// Each model-issued call's `tool_execution_end` as (isError, text), in call order.
    ends: Vec<(bool, String)>,
    /// How long exec ran.
    elapsed: Duration,
    /// The ids the audit log recorded.
    audited: Vec<String>,
    /// The highest VmHWM read while it ran (the calls should end with one that waits, so it is read late).
    peak: u64,
    /// Its stderr.
    stderr: String,
}

/// `toolwright exec --audit-log --builtins BUILTINS` on `calls` (name and arguments) run one after another,
/// killed if it outlives `limit`, its peak RSS read as it runs.
fn exec_watched(setup: &Setup, builtins: &str, calls: &[(&str, Value)], limit: Duration) -> Watched {
    let file = setup.plugins.path().join("watched.json");
    let log = setup.plugins.path().join("audit.jsonl");
    let _ = std::fs::remove_file(&log);
    let listed: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    std::fs::write(
        &file,
        json!({"mode": "sequential", "toolCalls": listed}).to_string(),
    )
    .unwrap();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--json")
        .arg("--audit-log")
        .arg(&log)
        .args(setup.args())
        .args(["--builtins", builtins])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Drained as it runs: a full pipe would stall exec.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut text).unwrap();
        text
    });
    let mut peak = 0;
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("exec still ran after {limit:?}");
        }
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{}/status", child.id())) {
            let hwm = status.lines().find(|l| l.starts_with("VmHWM:"));
            if let Some(kib) = hwm.and_then(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok()) {
                peak = peak.max(kib * 1024);
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let elapsed = started.elapsed();
    let status = child.wait().unwrap();
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(status.success(), "{stderr}");
    let ends = stdout
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_execution_end" && e["parentToolCallId"].is_null())
        .map(|e| (e["isError"] == true, text_of(&e["result"]["content"])))
        .collect();
    let audited = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["id"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    Watched {
        ends,
        elapsed,
        audited,
        peak,
        stderr,
    }
}

/// A plugin makes a FIFO in its granted directory and has the built-in `read` open it through a nested call:
/// `open()` would wait for a writer without end, beyond any deadline. The read is refused at once (natively and
/// as wasm), a nested call that does block (`sleep`) ends at its caller's 2 s deadline, exec exits, the audit
/// log holds every caller's and every nested call's record, and the next call works.
#[test]
fn a_fifo_read_through_a_nested_call_is_refused_and_a_nested_call_ends_at_its_caller_s_deadline() {
    // The probe may call read and bash, which run within its grants (bash: the workspace and the shell).
    let mut setup = setup(
        "[plugins.toolwright-test-probe]\ntimeout-ms = 2000\nspawn = [\"/bin/sh\", \"sh\"]\nwrite = [\"./out\"]\n\
         read = [\".\"]\ntools = [\"read\", \"bash\"]\n",
    );
    setup.allow = "probe,read,bash".into();
    let out = setup.ws.path().join("out");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("ok.txt"), "fine\n").unwrap();
    let pipe = out.join("pipe");
    let refused = format!(
        "error: Not a regular file: {} (pipes, sockets and devices are not read: they can block without end)",
        pipe.display()
    );
    let calls = [
        (
            "probe",
            json!({"action": "spawn", "target": "/bin/sh", "args": ["-c", format!("mkfifo {}", pipe.display())]}),
        ),
        (
            "probe",
            json!({"action": "call", "tool": "read", "arguments": {"path": "out/pipe"}}),
        ),
        (
            "probe",
            json!({"action": "call", "tool": "bash", "arguments": {"command": "sleep 30"}}),
        ),
        (
            "probe",
            json!({"action": "call", "tool": "read", "arguments": {"path": "out/ok.txt"}}),
        ),
    ];
    for mode in ["native", "wasm"] {
        let _ = std::fs::remove_file(&pipe);
        let run = exec_watched(&setup, mode, &calls, Duration::from_secs(40));
        assert_eq!(
            run.ends,
            vec![
                (false, String::new()),
                (false, refused.clone()),
                (true, stopped_at(2000)),
                (false, "ok: fine\n".to_owned()),
            ],
            "{mode}"
        );
        assert!(run.elapsed < Duration::from_secs(20), "{mode}: {:?}", run.elapsed);
        for id in ["c1", "c1/1", "c2", "c2/1", "c3", "c3/1"] {
            assert!(
                run.audited.iter().any(|i| i == id),
                "{mode}: no audit record of {id}: {:?}",
                run.audited
            );
        }
        let kind = std::fs::metadata(&pipe).unwrap().file_type();
        assert!(std::os::unix::fs::FileTypeExt::is_fifo(&kind), "{mode}");
    }
}

/// A workspace and a plugin directory holding the probe and the hostile handler (`tests/programs/bomb`), with
/// `policy`, reaching `read` and `bash`. Every plugin is compiled into the cache first (natively and with the
/// built-ins as wasm), so that a run's peak RSS measures what the bombs cost, not a compile (an empty cache on
/// CI).
fn setup_bombs(policy: &str) -> Setup {
    let mut setup = setup(policy);
    std::fs::copy(
        toolwright_tests::programs::BOMB,
        setup.plugins.path().join("bomb.wasm"),
    )
    .unwrap();
    setup.allow = "read,bash".into();
    for mode in ["native", "wasm"] {
        let warm = exec_watched(
            &setup,
            mode,
            &[("read", json!({"path": "missing.txt"}))],
            Duration::from_secs(300),
        );
        assert_eq!(warm.ends.len(), 1, "{mode}: {}", warm.stderr);
    }
    setup
}

const OMITTED: &str =
    "[Image omitted: 20000x20000 is more than the 25 megapixels an image may have to be decoded.]";

/// A 300 KB PNG declaring 20 000 × 20 000 pixels (400 MB as 8-bit grey, more once resized) from a tool (`read`)
/// and from a handler (`tool_result` content) is measured by its header and omitted with a note, natively and
/// as wasm; the host stays small, and the next call works.
#[test]
fn a_png_declaring_20000_by_20000_pixels_is_omitted_by_its_header_from_a_tool_and_a_handler() {
    let setup = setup_bombs("");
    let png = toolwright_tests::bombs::black_png(20_000, 20_000);
    assert!(png.len() < 512 << 10, "{}", png.len());
    std::fs::write(setup.ws.path().join("huge.png"), png).unwrap();
    let calls = [
        ("read", json!({"path": "huge.png"})),
        ("bash", json!({"command": ": bomb image 20000 20000"})),
        ("bash", json!({"command": "sleep 1; echo after"})),
    ];
    for mode in ["native", "wasm"] {
        let run = exec_watched(&setup, mode, &calls, Duration::from_secs(60));
        assert_eq!(
            run.ends,
            vec![
                (false, format!("Read image file [image/png]\n{OMITTED}")),
                (false, OMITTED.to_owned()),
                (false, "after\n".to_owned()),
            ],
            "{mode}: {}",
            run.stderr
        );
        assert!(run.peak < 160 << 20, "{mode}: peak RSS {} MiB", run.peak >> 20);
    }
}

/// A handler's output counts against the call's `result-mib` cap as text, and a JSON text of more values than
/// the host parses is refused before parsing: a 16 MiB rewrite of the arguments blocks the call, a 15 MiB one
/// (under the cap, 8 million values) too; 16 MiB and 15 MiB `details` are dropped (the handler skipped, the
/// result kept). The host stays small, and the next call works.
#[test]
fn handler_output_is_counted_before_it_is_parsed() {
    // Granted the rewrite: what it rewrites to is counted and parsed (an ungranted rewrite is refused unread).
    let setup = setup_bombs("[plugins.toolwright-test-bomb]\nrewrite = [\"bash\"]\n");
    let calls = [
        ("bash", json!({"command": ": bomb args 16"})),
        ("bash", json!({"command": ": bomb args 15"})),
        ("bash", json!({"command": ": bomb details 16"})),
        ("bash", json!({"command": ": bomb details 15"})),
        ("bash", json!({"command": "sleep 1; echo after"})),
    ];
    let bomb = "toolwright-test-bomb";
    let over_cap = format!(
        "The handler plugin {bomb} was stopped: its results came to more than the cap of 16 MiB a call may carry \
         into the host (result-mib)"
    );
    let too_many = format!(
        "The handler plugin {bomb} rewrote the arguments to JSON too large to parse: `arguments` holds more than \
         1000000 JSON values, the most the host parses from a plugin"
    );
    let run = exec_watched(&setup, "native", &calls, Duration::from_secs(60));
    assert_eq!(
        run.ends,
        vec![
            (true, over_cap.clone()),
            (true, too_many),
            (false, "(no output)".to_owned()),
            (false, "(no output)".to_owned()),
            (false, "after\n".to_owned()),
        ],
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains(&over_cap), "{}", run.stderr);
    assert!(
        run.stderr.contains(
            "`details` holds more than 1000000 JSON values, the most the host parses from a plugin"
        ),
        "{}",
        run.stderr
    );
    assert!(run.peak < 256 << 20, "peak RSS {} MiB", run.peak >> 20);
}

/// A plugin granted a shell and Python, and the host's loopback port it was not granted, an SSH agent's socket,
/// and a loopback datagram port: its programs share the built-ins' sandbox (no network of their own, no Unix
/// socket, no `ptrace`, no new namespace), under `exec` and `mcp`, and the next call works.
#[test]
fn a_plugins_programs_have_no_network_socket_or_namespace_of_their_own_under_exec_and_mcp() {
    const PYTHON: &str = "/usr/bin/python3";
    if toolwright::native::landlock_abi() < 6 || !Path::new(PYTHON).exists() {
        return; // no confinement here (the grant is refused, see above), or no Python
    }
    let setup = setup(&format!(
        "[plugins.toolwright-test-probe]\nread = [\".\"]\nspawn = [\"bash\", \"{PYTHON}\"]\n"
    ));
    let ws = setup.ws.path();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let agent = std::os::unix::net::UnixListener::bind(ws.join("agent.sock")).unwrap();
    agent.set_nonblocking(true).unwrap();
    let datagrams = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    datagrams.set_nonblocking(true).unwrap();
    let udp = datagrams.local_addr().unwrap().port();
    let python = |code: String| json!({"action": "spawn", "target": PYTHON, "args": ["-c", code]});
    let calls = [
        json!({"action": "spawn", "target": "bash", "args": ["-c", format!("echo > /dev/tcp/127.0.0.1/{port} && echo ESCAPED")]}),
        python(format!(
            "import socket\ntry:\n    s = socket.socket(socket.AF_UNIX); s.connect({:?}); print('ESCAPED')\n\
             except OSError as e: print('unix', e.errno)",
            ws.join("agent.sock").to_string_lossy()
        )),
        python(format!(
            "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'q', ('127.0.0.1', {udp})); print('sent')"
        )),
        python(
            "import ctypes, os; libc = ctypes.CDLL(None, use_errno=True); \
             print('ptrace', libc.ptrace(16, os.getppid(), 0, 0), ctypes.get_errno())"
                .into(),
        ),
        json!({"action": "spawn", "target": "bash", "args": ["-c", "unshare -r true && echo ESCAPED"]}),
        json!({"action": "spawn", "target": "bash", "args": ["-c", "echo next"]}),
    ];
    let check = |how: &str, out: &[(bool, String)]| {
        assert!(
            out[0].1.contains("Connection refused") || out[0].1.contains("Permission denied"),
            "{how}: {:?}",
            out[0]
        );
        assert_eq!(out[1].1, "unix 1\n", "{how}: EPERM");
        assert_eq!(out[2].1, "sent\n", "{how}");
        assert_eq!(out[3].1, "ptrace -1 1\n", "{how}");
        assert!(
            out[4].1.contains("Operation not permitted"),
            "{how}: {:?}",
            out[4]
        );
        assert_eq!(out[5], (false, "next\n".into()), "{how}");
        for (_, text) in out {
            assert!(!text.contains("ESCAPED"), "{how}: {text}");
        }
    };
    check("exec", &setup.exec_sequential(&calls));
    check("mcp", &setup.mcp_sequential(&calls));
    std::thread::sleep(Duration::from_millis(100));
    assert!(listener.accept().is_err(), "the host's loopback port was reached");
    assert!(agent.accept().is_err(), "the agent's socket was reached");
    assert!(
        datagrams.recv_from(&mut [0u8; 8]).is_err(),
        "a datagram reached the host"
    );
}

/// Through another: a plugin that may call `bash` (and start a shell) gets no more through it than its own
/// programs get: no host port, no Unix socket, nothing written outside its grant, under `exec` and `mcp`.
#[test]
fn a_plugin_reaches_nothing_more_through_a_nested_bash_under_exec_and_mcp() {
    if toolwright::native::landlock_abi() < 6 {
        return; // no confinement here: the grant is refused
    }
    let mut setup = setup(
        "[plugins.toolwright-test-probe]\ntools = [\"bash\"]\nread = [\".\"]\nwrite = [\"./out\"]\nspawn = [\"sh\"]\n",
    );
    setup.allow = "probe,bash".into();
    let ws = setup.ws.path().to_owned();
    std::fs::create_dir(ws.join("out")).unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let outside = tempfile::tempdir().unwrap();
    let command = format!(
        "bash -c 'echo > /dev/tcp/127.0.0.1/{port}' && echo ESCAPED-NET; echo x > {}/f && echo ESCAPED-FILE; echo x > out/in; echo done",
        outside.path().display()
    );
    let call = json!({"action": "call", "tool": "bash", "arguments": {"command": command}});
    let check = |how: &str, (is_error, text): (bool, String)| {
        assert!(!is_error, "{how}: {text}");
        assert!(text.starts_with("ok: "), "{how}: {text}");
        assert!(text.contains("done"), "{how}: {text}");
        assert!(!text.contains("ESCAPED"), "{how}: {text}");
        assert!(
            !outside.path().join("f").exists(),
            "{how}: written outside the grant"
        );
        assert!(ws.join("out/in").exists(), "{how}: the grant itself is writable");
        std::fs::remove_file(ws.join("out/in")).unwrap();
    };
    let by_exec = setup.exec(std::slice::from_ref(&call)).pop().unwrap();
    check("exec", by_exec);
    let mut mcp = setup.mcp();
    check("mcp", mcp.run(1, "probe", call.clone()));
    std::thread::sleep(Duration::from_millis(100));
    assert!(listener.accept().is_err(), "the host's loopback port was reached");
}

/// A plugin built against `toolwright:plugin@0.1.0` (`tests/programs/legacy`) served by `toolwright mcp` gets no
/// more through the old interfaces than under `exec` (`cli.rs` has that half): its program, its read of the
/// workspace and its nested call are refused as the current interfaces refuse them, and granted the workspace
/// it reads it.
#[test]
fn a_0_1_plugin_gets_no_more_through_the_old_interfaces_under_mcp() {
    let mut setup = setup("");
    for (program, file) in [
        (toolwright_tests::programs::LEGACY, "legacy.wasm"),
        (toolwright_tests::programs::RAW, "raw.wasm"),
    ] {
        std::fs::copy(program, setup.plugins.path().join(file)).unwrap();
    }
    std::fs::write(setup.ws.path().join("a.txt"), "one\n").unwrap();
    setup.allow = "legacy,raw".into();
    let mut mcp = setup.mcp();
    let (_, spawned) = mcp.run(1, "legacy", json!({"action": "spawn"}));
    assert!(
        spawned.starts_with(
            "refused: Permission denied: starting sh is not granted to the plugin toolwright-test-legacy"
        ),
        "{spawned}"
    );
    let (_, read) = mcp.run(2, "legacy", json!({"action": "read"}));
    assert!(
        read.starts_with("refused: ")
            && read.contains("; Permission denied: read access to ")
            && read.contains("a.txt is not granted"),
        "{read}"
    );
    let (_, nested) = mcp.run(3, "legacy", json!({"action": "nested"}));
    assert!(
        nested.starts_with(
            "nested: true\nPermission denied: the plugin toolwright-test-legacy may not call the tool raw."
        ),
        "{nested}"
    );
    drop(mcp);
    // Granted the workspace, the same read succeeds: the refusal above was the sandbox's.
    std::fs::write(
        &setup.policy,
        "[plugins.toolwright-test-legacy]\nread = [\".\"]\n",
    )
    .unwrap();
    let mut mcp = setup.mcp();
    assert_eq!(
        mcp.run(4, "legacy", json!({"action": "read"})),
        (false, "read: one\n".into())
    );
}

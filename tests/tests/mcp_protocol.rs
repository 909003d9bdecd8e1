//! `toolwright mcp` at the JSON-RPC level: only protocol messages on stdout, the protocol's errors for unknown
//! methods and tools, unparsable lines ignored (as the official SDKs do) without stopping the server, concurrent
//! calls, and a client that disconnects mid-call: the server shuts down and leaves no process behind.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Server {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The answer to `initialize`.
    init: Value,
}

impl Server {
    fn start(workspace: &std::path::Path) -> Server {
        Self::start_with(workspace, &[])
    }

    fn start_with(workspace: &std::path::Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .args(["mcp", "--no-default-plugins", "--cwd"])
            .arg(workspace)
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut server = Server {
            child,
            stdin,
            stdout,
            init: Value::Null,
        };
        server.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}}));
        server.init = server.receive();
        assert_eq!(server.init["result"]["serverInfo"]["name"], "toolwright");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}").unwrap();
        stdin.flush().unwrap();
    }

    fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// The next line on stdout, which must be a JSON-RPC message.
    fn receive(&mut self) -> Value {
        let mut line = String::new();
        self.stdout.read_line(&mut line).unwrap();
        let message: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON-RPC: {line:?}: {e}"));
        assert_eq!(message["jsonrpc"], "2.0", "{message}");
        message
    }

    /// Send request `id` of `method` with `params` and wait for its response.
    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.responses(&[id]).remove(0)
    }

    /// Responses by id, skipping notifications, until every id in `ids` has answered.
    fn responses(&mut self, ids: &[i64]) -> Vec<Value> {
        let mut found: Vec<Value> = Vec::new();
        while found.len() < ids.len() {
            let message = self.receive();
            if let Some(id) = message["id"].as_i64() {
                assert!(ids.contains(&id), "unexpected response {message}");
                found.push(message);
            }
        }
        found.sort_by_key(|m| m["id"].as_i64());
        found
    }
}

#[test]
fn errors_are_the_protocol_s_and_garbage_does_not_stop_the_server() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let mut server = Server::start(ws.path());
    server.send_line("this is not json {");
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "no/such/method"}));
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "nope", "arguments": {}}}));
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "a.txt"}}}));
    let answers = server.responses(&[1, 2, 3]);
    assert_eq!(answers[0]["error"]["code"], -32601);
    assert_eq!(
        answers[1]["error"],
        json!({"code": -32602, "message": "Tool nope not found"})
    );
    assert_eq!(
        answers[2]["result"]["content"],
        json!([{"type": "text", "text": "hello\n"}])
    );
    assert_eq!(answers[2]["result"]["isError"], false);
    // read's result is a string: a 2025-06-18 client gets it wrapped as an object, and no second text block
    // (the text already holds it).
    assert_eq!(
        answers[2]["result"]["structuredContent"],
        json!({"value": "hello\n"})
    );
}

/// The `field` of each entry of the list `list` (`resources`, `prompts`) of a response's result.
fn each<'a>(response: &'a Value, list: &str, field: &str) -> Vec<&'a str> {
    response["result"][list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list}: {response}"))
        .iter()
        .map(|entry| entry[field].as_str().unwrap())
        .collect()
}

/// A workspace with a source file, a readme, a secret directory, and what a cloned project may ship to reach
/// beyond it: a symlink to a file outside, and one to a directory outside.
fn shipped_workspace(outside: &std::path::Path) -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src")).unwrap();
    std::fs::create_dir_all(ws.path().join("secrets")).unwrap();
    std::fs::write(ws.path().join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::fs::write(ws.path().join("README.md"), "# readme\n").unwrap();
    std::fs::write(ws.path().join("secrets/key"), "in-the-workspace-secret").unwrap();
    std::fs::write(outside.join("secret"), "outside-secret").unwrap();
    std::os::unix::fs::symlink(outside.join("secret"), ws.path().join("leak")).unwrap();
    std::os::unix::fs::symlink(outside, ws.path().join("src/out")).unwrap();
    ws
}

fn file_url(path: &std::path::Path) -> String {
    format!("file://{}", path.display())
}

#[test]
fn the_workspace_is_offered_as_resources_and_nothing_beyond_it() {
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    let ws = shipped_workspace(&outside_path);
    let root = ws.path().canonicalize().unwrap();
    let mut server = Server::start(&root);
    assert_eq!(
        server.init["result"]["capabilities"]["resources"],
        // The plugin directories are watched: their resources may change.
        json!({"subscribe": true, "listChanged": true}),
        "{}",
        server.init
    );
    let listed = server.request(1, "resources/list", json!({}));
    let names = each(&listed, "resources", "name");
    // The symlinks a project ships are not listed (the walk does not follow them).
    assert_eq!(names, ["README.md", "secrets/key", "src/lib.rs"], "{listed}");
    let read = server.request(
        2,
        "resources/read",
        json!({"uri": file_url(&root.join("src/lib.rs"))}),
    );
    assert_eq!(
        read["result"]["contents"],
        json!([{"uri": file_url(&root.join("src/lib.rs")), "mimeType": "text/plain", "text": "pub fn f() {}\n"}])
    );
    let templates = server.request(3, "resources/templates/list", json!({}));
    assert_eq!(
        templates["result"]["resourceTemplates"][0]["uriTemplate"],
        "file://{+path}"
    );
    // Outside the workspace, by path, through `..`, or through the symlinks it ships: the `read` tool may read
    // there (its default grants read anywhere), but these are not the workspace's resources.
    for (id, uri) in [
        file_url(&outside_path.join("secret")),
        format!(
            "file://{}/src/../../{}/secret",
            root.display(),
            outside_path.display()
        ),
        file_url(&root.join("leak")),
        file_url(&root.join("src/out/secret")),
        "file:///etc/passwd".to_owned(),
        "test://static-text".to_owned(),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = server.request(10 + id as i64, "resources/read", json!({"uri": uri}));
        assert_eq!(answer["error"]["code"], -32602, "{uri}: {answer}");
        assert!(!answer.to_string().contains("outside-secret"), "{uri}: {answer}");
        assert!(!answer.to_string().contains("root:"), "{uri}: {answer}");
    }
}

#[test]
fn resources_are_read_under_the_read_tool_s_grants_and_can_be_turned_off() {
    let outside = tempfile::tempdir().unwrap();
    let ws = shipped_workspace(&outside.path().canonicalize().unwrap());
    let root = ws.path().canonicalize().unwrap();
    let policy = root.join("narrow.toml");
    std::fs::write(&policy, "[builtins]\nread = [\"./src\"]\n").unwrap();
    let policy = policy.to_str().unwrap().to_owned();
    let audit = root.join("audit.jsonl");
    let audit_arg = audit.to_str().unwrap().to_owned();
    let mut server = Server::start_with(&root, &["--policy", &policy, "--audit-log", &audit_arg]);
    let listed = server.request(1, "resources/list", json!({}));
    let names = each(&listed, "resources", "name");
    assert_eq!(names, ["src/lib.rs"], "{listed}");
    let refused = server.request(
        2,
        "resources/read",
        json!({"uri": file_url(&root.join("secrets/key"))}),
    );
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("Resource not readable: "), "{message}");
    assert!(!refused.to_string().contains("in-the-workspace-secret"));
    let read = server.request(
        3,
        "resources/read",
        json!({"uri": file_url(&root.join("src/lib.rs"))}),
    );
    assert!(read["result"].is_object(), "{read}");
    drop(server);
    // Each read is an audit record of its own: what was read, or refused and why.
    let records: Vec<Value> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let reads: Vec<(&str, &str, &str)> = records
        .iter()
        .filter(|r| r["tool"] == "resources/read")
        .map(|r| {
            (
                r["decision"][0]["reason"].as_str().unwrap(),
                r["decision"][0]["verdict"].as_str().unwrap(),
                r["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let key = file_url(&root.join("secrets/key"));
    let lib = file_url(&root.join("src/lib.rs"));
    assert_eq!(
        reads,
        [
            (key.as_str(), "refused", "error"),
            (lib.as_str(), "allowed", "ok")
        ],
        "{records:?}"
    );
    let refused_record = records.iter().find(|r| r["outcome"] == "error").unwrap();
    assert!(
        refused_record["error"]
            .as_str()
            .unwrap()
            .starts_with("Resource not readable: ")
    );
    // Turned off: no capability, and the methods are unknown.
    let mut server = Server::start_with(&root, &["--no-resources"]);
    let capabilities = &server.init["result"]["capabilities"];
    assert!(capabilities.get("resources").is_none() && capabilities.get("prompts").is_none());
    let answer = server.request(
        1,
        "resources/read",
        json!({"uri": file_url(&root.join("src/lib.rs"))}),
    );
    assert_eq!(answer["error"]["code"], -32601, "{answer}");
    drop(server);
    // Without the `read` tool to read for: plugins may still offer resources, the workspace's files are not.
    let mut server = Server::start_with(&root, &["--deny", "read"]);
    let answer = server.request(
        1,
        "resources/read",
        json!({"uri": file_url(&root.join("src/lib.rs"))}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(!answer.to_string().contains("pub fn f"), "{answer}");
    let listed = server.request(2, "resources/list", json!({}));
    assert_eq!(listed["result"]["resources"], json!([]), "{listed}");
}

/// A workspace served with two plugins that offer resources and prompts: the conformance plugin (first in load
/// order) and the probe, whose offers try what a hostile plugin would; the probe may read the workspace only.
fn offering_server() -> (Server, tempfile::TempDir, std::path::PathBuf) {
    offering_server_watching("0")
}

/// Likewise, the plugin directory watched every `interval` ms (`0`: not watched).
fn offering_server_watching(interval: &str) -> (Server, tempfile::TempDir, std::path::PathBuf) {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::write(root.join("a.txt"), "in the workspace\n").unwrap();
    let plugins = root.join(".plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::copy(
        toolwright_tests::programs::CONFORMANCE,
        plugins.join("a-conformance.wasm"),
    )
    .unwrap();
    std::fs::copy(toolwright_tests::programs::PROBE, plugins.join("b-probe.wasm")).unwrap();
    let policy = root.join(".policy.toml");
    std::fs::write(&policy, "[plugins.toolwright-test-probe]\nread = [\".\"]\n").unwrap();
    let cache = toolwright_tests::golden::test_cache_dir();
    let server = Server::start_with(
        &root,
        &[
            "--plugins",
            plugins.to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
            "--policy",
            policy.to_str().unwrap(),
            "--watch-plugins",
            interval,
        ],
    );
    (server, ws, root)
}

#[test]
fn plugins_offer_resources_without_claiming_the_workspace_s_or_another_plugin_s() {
    let (mut server, _ws, root) = offering_server();
    assert_eq!(
        server.init["result"]["capabilities"]["prompts"],
        json!({}),
        "{}",
        server.init
    );
    let listed = server.request(1, "resources/list", json!({}));
    let resources = listed["result"]["resources"].as_array().unwrap();
    let uris = each(&listed, "resources", "uri");
    assert!(
        uris.contains(&"test://static-text") && uris.contains(&"probe://hello"),
        "{listed}"
    );
    // The probe's claim of a file: URI is left out; its copy of the conformance plugin's URI is not listed twice.
    assert!(!uris.contains(&"file:///etc/passwd"), "{listed}");
    assert_eq!(uris.iter().filter(|u| **u == "test://static-text").count(), 1);
    assert!(!resources.iter().any(|r| r["name"] == "shadow"), "{listed}");
    // The first plugin in load order answers for its URI.
    let read = server.request(2, "resources/read", json!({"uri": "test://static-text"}));
    let text = read["result"]["contents"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("This is the content"), "{read}");
    // A file: URI is the workspace's, whatever a plugin lists.
    let passwd = server.request(3, "resources/read", json!({"uri": "file:///etc/passwd"}));
    assert_eq!(passwd["error"]["code"], -32602, "{passwd}");
    assert!(!passwd.to_string().contains("root:"), "{passwd}");
    // The probe's template reads under its grants: the workspace, and nothing outside it.
    let inside = format!("probe://read{}", root.join("a.txt").display());
    let read = server.request(4, "resources/read", json!({"uri": inside}));
    assert_eq!(
        read["result"]["contents"][0]["text"], "in the workspace\n",
        "{read}"
    );
    let outside = server.request(5, "resources/read", json!({"uri": "probe://read/etc/passwd"}));
    assert_eq!(outside["error"]["code"], -32603, "{outside}");
    let message = outside["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("the plugin toolwright-test-probe failed: /etc/passwd"),
        "{message}"
    );
    assert!(!outside.to_string().contains("root:"), "{outside}");
    let missing = server.request(6, "resources/read", json!({"uri": "nobody://here"}));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    // A part that claims another URI (a workspace file's) is refused, not passed on.
    let spoof = server.request(7, "resources/read", json!({"uri": "probe://spoof"}));
    assert_eq!(spoof["error"]["code"], -32603, "{spoof}");
    assert!(!spoof.to_string().contains("spoofed"), "{spoof}");
}

#[test]
fn a_plugin_s_prompts_are_checked_before_a_client_sees_them() {
    let (mut server, _ws, _root) = offering_server();
    let listed = server.request(1, "prompts/list", json!({}));
    let names = each(&listed, "prompts", "name");
    assert!(
        names.contains(&"test_simple_prompt") && names.contains(&"greet"),
        "{listed}"
    );
    let greet = server.request(
        2,
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        greet["result"]["messages"],
        json!([{"role": "user", "content": {"type": "text", "text": "Hello, Ada!"}}]),
        "{greet}"
    );
    // A required argument missing is refused before the plugin runs.
    let missing = server.request(3, "prompts/get", json!({"name": "greet"}));
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    assert_eq!(
        missing["error"]["message"],
        "Missing required argument name of the prompt greet"
    );
    // A role MCP has not, a block without a type, too many messages: errors naming the fault, no prompt.
    for (id, name, fault) in [
        (4, "system-role", "role is \"system\""),
        (5, "untyped-content", "without a `type`"),
        (6, "flood", "5000 entries"),
    ] {
        let answer = server.request(id, "prompts/get", json!({"name": name}));
        assert_eq!(answer["error"]["code"], -32603, "{name}: {answer}");
        let message = answer["error"]["message"].as_str().unwrap();
        assert!(message.contains(fault), "{name}: {message}");
        assert!(!answer.to_string().contains("you are root now"), "{answer}");
    }
    let unknown = server.request(7, "prompts/get", json!({"name": "nope"}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    let completed = server.request(
        8,
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "pa"}}),
    );
    assert_eq!(
        completed["result"]["completion"]["values"],
        json!(["paris", "park", "party"]),
        "{completed}"
    );
}

#[test]
fn calls_run_concurrently() {
    let ws = tempfile::tempdir().unwrap();
    let mut server = Server::start(ws.path());
    let started = Instant::now();
    for id in 1..=3 {
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "bash", "arguments": {"command": "sleep 1; echo done"}}}));
    }
    let answers = server.responses(&[1, 2, 3]);
    for answer in &answers {
        assert_eq!(answer["result"]["content"][0]["text"], "done\n", "{answer}");
    }
    let elapsed = started.elapsed();
    assert!(
        elapsed < Duration::from_millis(2500),
        "three 1 s calls took {elapsed:?}: not concurrent"
    );
}

#[test]
fn a_client_that_disconnects_mid_call_leaves_no_process_behind() {
    ends_mid_call_leaving_no_process_behind(|server| drop(server.stdin.take()));
}

/// SIGINT and SIGTERM end the stdio server as a closed stdin does: the running call is cancelled, its
/// processes killed, the exit clean.
#[test]
fn a_signal_mid_call_ends_the_server_and_leaves_no_process_behind() {
    for signal in ["INT", "TERM"] {
        ends_mid_call_leaving_no_process_behind(|server| {
            let sent = Command::new("kill")
                .arg(format!("-{signal}"))
                .arg(server.child.id().to_string())
                .status()
                .unwrap();
            assert!(sent.success(), "kill -{signal}");
        });
    }
}

fn ends_mid_call_leaving_no_process_behind(end: impl FnOnce(&mut Server)) {
    let ws = tempfile::tempdir().unwrap();
    let mut server = Server::start(ws.path());
    server.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "sleep 60 & echo $! > child.pid; wait"}}}));
    let pid_file = ws.path().join("child.pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pid_file.exists() || std::fs::read_to_string(&pid_file).unwrap().trim().is_empty() {
        assert!(Instant::now() < deadline, "the call never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    end(&mut server);
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "the server did not shut down");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    let gone = |pid: u32| {
        std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(true, |s| s.contains("State:\tZ"))
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !gone(pid) {
        assert!(
            Instant::now() < deadline,
            "the call's process {pid} outlived the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn tool_names(server: &mut Server, id: i64) -> Vec<String> {
    server.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
    let answer = server.responses(&[id]).remove(0);
    answer["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// Kills the server (so that a read of its output ends, and the test fails) unless dropped within `limit`.
struct Watchdog {
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn new(server: &Server, limit: Duration) -> Watchdog {
        let pid = server.child.id();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let thread = {
            let done = done.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + limit;
                while Instant::now() < deadline {
                    if done.load(std::sync::atomic::Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            })
        };
        Watchdog {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// The notifications read until one of `method` arrives, that one last; the server is killed (and the test
/// fails) when none has after 60 s.
fn notifications_until(server: &mut Server, method: &str) -> Vec<Value> {
    let _watchdog = Watchdog::new(server, Duration::from_secs(60));
    let mut heard = Vec::new();
    loop {
        let message = server.receive();
        if message.get("id").is_some() {
            continue;
        }
        let last = message["method"] == method;
        heard.push(message);
        if last {
            break;
        }
    }
    heard
}

#[test]
fn a_subscribed_file_s_changes_are_told_and_nothing_beyond_the_workspace_is_watched() {
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    let ws = shipped_workspace(&outside_path);
    let root = ws.path().canonicalize().unwrap();
    let audit = outside_path.join("audit.jsonl");
    let mut server = Server::start_with(&root, &["--audit-log", audit.to_str().unwrap()]);
    let readme = file_url(&root.join("README.md"));
    let lib = file_url(&root.join("src/lib.rs"));
    let subscribed = server.request(1, "resources/subscribe", json!({"uri": readme}));
    assert_eq!(subscribed["result"], json!({}), "{subscribed}");
    // What may not be read may not be watched either: outside the workspace, through `..` or the symlinks a
    // project ships, a directory, a missing file, a scheme nobody offers.
    for (id, uri) in [
        file_url(&outside_path.join("secret")),
        format!(
            "file://{}/src/../../{}/secret",
            root.display(),
            outside_path.display()
        ),
        file_url(&root.join("leak")),
        file_url(&root.join("src/out/secret")),
        file_url(&root.join("src")),
        file_url(&root.join("missing.txt")),
        "file:///etc/passwd".to_owned(),
        "test://static-text".to_owned(),
    ]
    .into_iter()
    .enumerate()
    {
        let answer = server.request(10 + id as i64, "resources/subscribe", json!({"uri": uri}));
        assert_eq!(answer["error"]["code"], -32602, "{uri}: {answer}");
    }
    // Each check is in the audit log, as a read is: one allowed, every other refused with its error.
    let outcomes: Vec<String> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["tool"] == "resources/subscribe")
        .map(|r| r["outcome"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(outcomes.len(), 9, "{outcomes:?}");
    assert_eq!(outcomes[0], "ok");
    assert!(outcomes[1..].iter().all(|o| o == "error"), "{outcomes:?}");
    std::fs::write(root.join("README.md"), "# changed\n").unwrap();
    let heard = notifications_until(&mut server, "notifications/resources/updated");
    assert_eq!(
        heard.last().unwrap()["params"]["uri"],
        readme.as_str(),
        "{heard:?}"
    );
    // Unsubscribed, a change is not told: the next update heard is the other file's.
    let answer = server.request(20, "resources/unsubscribe", json!({"uri": readme}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    std::fs::write(root.join("README.md"), "# changed again\n").unwrap();
    let answer = server.request(21, "resources/subscribe", json!({"uri": lib}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    // Outside the workspace, a change is nobody's business: the file a shipped symlink names changes too.
    std::fs::write(outside_path.join("secret"), "changed outside").unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn g() {}\n").unwrap();
    let heard = notifications_until(&mut server, "notifications/resources/updated");
    let updated: Vec<&Value> = heard
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .collect();
    assert_eq!(updated.len(), 1, "{heard:?}");
    assert_eq!(updated[0]["params"]["uri"], lib.as_str(), "{heard:?}");
    // A file replaced (an editor's save by rename) is still watched.
    std::fs::write(root.join("src/lib.rs.new"), "pub fn h() {}\n").unwrap();
    std::fs::rename(root.join("src/lib.rs.new"), root.join("src/lib.rs")).unwrap();
    let heard = notifications_until(&mut server, "notifications/resources/updated");
    assert_eq!(heard.last().unwrap()["params"]["uri"], lib.as_str(), "{heard:?}");
}

#[test]
fn a_watched_directory_moved_out_of_the_workspace_is_watched_no_more() {
    let outside = tempfile::tempdir().unwrap();
    let outside_path = outside.path().canonicalize().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/f.txt"), "f\n").unwrap();
    std::fs::write(root.join("sentinel.txt"), "s\n").unwrap();
    let mut server = Server::start(&root);
    let moved = file_url(&root.join("sub/f.txt"));
    let sentinel = file_url(&root.join("sentinel.txt"));
    for (id, uri) in [(1, &moved), (2, &sentinel)] {
        let answer = server.request(id, "resources/subscribe", json!({"uri": uri}));
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    // Moved away: its subscriber is told once, and the subscription ends.
    std::fs::rename(root.join("sub"), outside_path.join("sub")).unwrap();
    let heard = notifications_until(&mut server, "notifications/resources/updated");
    assert_eq!(
        heard.last().unwrap()["params"]["uri"],
        moved.as_str(),
        "{heard:?}"
    );
    // What now changes outside the workspace is nobody's business: the next update is the sentinel's.
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(outside_path.join("sub/f.txt"), "changed outside\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    std::fs::write(root.join("sentinel.txt"), "changed\n").unwrap();
    let heard = notifications_until(&mut server, "notifications/resources/updated");
    let updated: Vec<&Value> = heard
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .collect();
    assert_eq!(updated.len(), 1, "{heard:?}");
    assert_eq!(updated[0]["params"]["uri"], sentinel.as_str(), "{heard:?}");
}

#[test]
fn subscribing_while_watched_files_change_never_stalls_the_server() {
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    for dir in ["a", "b"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
        for n in 0..20 {
            std::fs::write(root.join(format!("{dir}/f{n}.txt")), "x").unwrap();
        }
    }
    let mut server = Server::start(&root);
    let _watchdog = Watchdog::new(&server, Duration::from_secs(120));
    // Files change all the time in both directories while their watches come and go.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, root) = (stop.clone(), root.clone());
        std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for dir in ["a", "b"] {
                    let _ = std::fs::write(root.join(format!("{dir}/f{}.txt", n % 20)), n.to_string());
                }
                n += 1;
            }
        })
    };
    for round in 0..100i64 {
        let dir = if round % 2 == 0 { "a" } else { "b" };
        let uri = file_url(&root.join(format!("{dir}/f{}.txt", round % 20)));
        let answer = server.request(1000 + round * 2, "resources/subscribe", json!({"uri": uri}));
        assert_eq!(answer["result"], json!({}), "{answer}");
        let answer = server.request(1001 + round * 2, "resources/unsubscribe", json!({"uri": uri}));
        assert_eq!(answer["result"], json!({}), "{answer}");
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    let answer = server.request(5000, "resources/list", json!({}));
    assert!(answer["result"]["resources"].is_array(), "{answer}");
}

/// Reads messages until the notification `method` arrives.
fn wait_for(server: &mut Server, method: &str) {
    loop {
        let message = server.receive();
        if message["method"] == method {
            return;
        }
    }
}

#[test]
fn adding_and_removing_a_plugin_file_changes_the_list_and_says_so() {
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut server = Server::start_with(
        ws.path(),
        &[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
            "--watch-plugins",
            "100",
        ],
    );
    assert!(!tool_names(&mut server, 1).contains(&"word_count".to_owned()));
    let (_, bytes) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap();
    let file = plugins.path().join("wordcount.wasm");
    std::fs::write(&file, bytes).unwrap();
    wait_for(&mut server, "notifications/tools/list_changed");
    assert!(tool_names(&mut server, 2).contains(&"word_count".to_owned()));
    server.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "word_count", "arguments": {"text": "a b"}}}));
    let answer = server.responses(&[3]).remove(0);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    std::fs::remove_file(&file).unwrap();
    wait_for(&mut server, "notifications/tools/list_changed");
    assert!(!tool_names(&mut server, 4).contains(&"word_count".to_owned()));
}

#[test]
fn a_reload_tells_of_the_offered_lists_and_of_the_subscribed_plugin_resources() {
    let (mut server, _ws, root) = offering_server_watching("100");
    let capabilities = &server.init["result"]["capabilities"];
    assert_eq!(
        capabilities["resources"],
        json!({"subscribe": true, "listChanged": true}),
        "{capabilities}"
    );
    assert_eq!(
        capabilities["prompts"],
        json!({"listChanged": true}),
        "{capabilities}"
    );
    let watched = "test://watched-resource";
    let answer = server.request(1, "resources/subscribe", json!({"uri": watched}));
    assert_eq!(answer["result"], json!({}), "{answer}");
    // A URI no plugin reads is no subscription.
    let answer = server.request(
        2,
        "resources/subscribe",
        json!({"uri": "test://nobody-offers-it"}),
    );
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    // Another plugin arrives: the plugins are loaded again.
    let (_, bytes) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap();
    std::fs::write(root.join(".plugins/c-wordcount.wasm"), bytes).unwrap();
    let heard = notifications_until(&mut server, "notifications/resources/updated");
    let methods: Vec<&str> = heard.iter().filter_map(|m| m["method"].as_str()).collect();
    for told in [
        "notifications/tools/list_changed",
        "notifications/resources/list_changed",
        "notifications/prompts/list_changed",
    ] {
        assert!(methods.contains(&told), "{told} not heard: {heard:?}");
    }
    assert_eq!(heard.last().unwrap()["params"]["uri"], watched, "{heard:?}");
}

#[test]
fn an_oversized_message_is_dropped_and_the_server_goes_on() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "small\n").unwrap();
    let mut server = Server::start(ws.path());
    // rmcp's stdio transport drops a line over 16 MiB without buffering it (and logs it); the session stays open.
    let huge = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"read","arguments":{{"path":"{}"}}}}}}"#,
        "x".repeat(17 << 20)
    );
    server.send_line(&huge);
    server.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read", "arguments": {"path": "a.txt"}}}));
    let answer = server.responses(&[2]).remove(0);
    assert_eq!(answer["result"]["content"][0]["text"], "small\n", "{answer}");
}

#[test]
fn a_client_of_a_revision_without_audio_gets_an_audio_block_as_the_model_sees_it() {
    // Audio blocks came with 2025-03-26: a 2024-11-05 session gets `[audio MIME omitted]` in their place, and the
    // embedded resources (which 2024-11-05 has) whole; a 2025-03-26 one gets the audio.
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(toolwright_tests::programs::RAW, plugins.path().join("raw.wasm")).unwrap();
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let blocks = toolwright_tests::programs::raw_blocks();
    for (revision, audio) in [
        (
            "2024-11-05",
            json!({"type": "text", "text": "[audio audio/wav omitted]"}),
        ),
        ("2025-03-26", blocks[1].clone()),
    ] {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
        command
            .args(["mcp", "--watch-plugins", "0", "--no-default-plugins", "--plugins"])
            .arg(plugins.path())
            .arg("--cache-dir")
            .arg(&cache);
        let mut server = toolwright_tests::mcp::StdioServer::start_as(&mut command, revision, json!({}));
        server.call(2, "raw", json!({"want": "blocks"}));
        let reply = server.response(2);
        let mut expected = blocks.clone();
        expected[1] = audio;
        assert_eq!(reply["result"]["content"], expected, "{revision}: {reply}");
    }
}

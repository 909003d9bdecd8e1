//! `toolwright mcp --http` at the HTTP level, as a hostile or careless client meets it: a foreign `Origin` or
//! `Host` is refused with 403, a missing or wrong bearer token with 401, another path with 404, a body over 4 MiB
//! with 413; listening beyond loopback without a token, or with a token file others can read, is refused at
//! start; `tools/list_changed` reaches every connected session and every `subscriptions/listen` stream that asked
//! for it; SIGTERM during a running call cancels it, kills its processes and exits cleanly; two clients sending the
//! same request ids each hear only their own call; a 2026-07-28 request hears log lines only at the level its
//! `_meta` sets, and must mirror `x-mcp-header` parameters in matching headers; with `--poll-after`, a session's
//! long call has its stream closed and its answer, even one that came meanwhile, on the reconnection of that
//! session only; and floods (idle connections
//! without the token, silent ones, handshakes) leave the client with the token served and the server's memory
//! bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwright_tests::mcp::HttpServer;

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");

/// What came back for one request.
struct Reply {
    status: u16,
    head: String,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }

    /// The JSON-RPC messages in an SSE or JSON body.
    fn messages(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data: ").or(Some(l)))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect()
    }
}

fn host_port(url: &str) -> &str {
    url.trim_start_matches("http://").trim_end_matches("/mcp")
}

/// Send one request with `Connection: close` and read until the server closes (or `until` shows up).
fn send(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
    until: Option<&str>,
) -> Reply {
    let authority = host_port(url);
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (key, value) in headers {
        request.push_str(&format!("{key}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    // A server that refuses a huge body may close before reading it all: the reply still says why.
    let _ = stream.write_all(request.as_bytes());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    while Instant::now() < deadline {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => panic!("reading the reply: {e}"),
        }
        if until.is_some_and(|marker| String::from_utf8_lossy(&raw).contains(marker)) {
            break;
        }
    }
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {text:?}"));
    Reply {
        status,
        head: head.to_owned(),
        body: body.to_owned(),
    }
}

const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
const JSON: (&str, &str) = ("Content-Type", "application/json");

fn initialize_body() -> String {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string()
}

fn post(url: &str, headers: &[(&str, &str)], body: &str) -> Reply {
    let mut all = vec![ACCEPT, JSON];
    all.extend_from_slice(headers);
    send(url, "POST", "/mcp", &all, body, None)
}

/// A session: its id, after `initialize` and `notifications/initialized`.
fn session(url: &str, extra: &[(&str, &str)]) -> String {
    let reply = post(url, extra, &initialize_body());
    assert_eq!(reply.status, 200, "{}{}", reply.head, reply.body);
    let id = reply.header("mcp-session-id").expect("a session id").to_owned();
    let mut headers = vec![
        ("mcp-session-id", id.as_str()),
        ("mcp-protocol-version", "2025-11-25"),
    ];
    headers.extend_from_slice(extra);
    let reply = post(
        url,
        &headers,
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    );
    assert_eq!(reply.status, 202, "{}", reply.head);
    id
}

/// A token file only its owner can read (the server refuses any other).
fn token_file(dir: &Path, text: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("token");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

fn workspace() -> tempfile::TempDir {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "hello\n").unwrap();
    workspace
}

fn start(workspace: &Path, extra: &[&str]) -> HttpServer {
    let mut args = vec!["--cwd", workspace.to_str().unwrap(), "--no-default-plugins"];
    args.extend_from_slice(extra);
    HttpServer::start(Path::new(BINARY), &args)
}

#[test]
fn foreign_origins_and_hosts_are_refused_with_403_and_other_paths_with_404() {
    let ws = workspace();
    let server = start(ws.path(), &["--allow-origin", "https://app.example:443"]);
    let url = &server.url;
    let origin = format!("http://{}", host_port(url));
    for (headers, expected) in [
        (vec![("Origin", "http://evil.example")], 403),
        (vec![("Origin", "null")], 403),
        (
            vec![("Host", "evil.example"), ("Origin", "http://evil.example")],
            403,
        ),
        (vec![("Host", "evil.example")], 403),
        (vec![("Origin", "https://app.example")], 200),
        (vec![("Origin", origin.as_str())], 200),
        (vec![], 200),
    ] {
        let reply = post(url, &headers, &initialize_body());
        assert_eq!(
            reply.status, expected,
            "{headers:?}: {}{}",
            reply.head, reply.body
        );
        if expected == 200 {
            let init = &reply.messages()[0];
            assert_eq!(init["result"]["serverInfo"]["name"], "toolwright", "{init}");
        }
    }
    let reply = send(url, "POST", "/other", &[ACCEPT, JSON], &initialize_body(), None);
    assert_eq!(reply.status, 404);
}

#[test]
fn a_body_over_the_cap_gets_413_without_being_buffered_and_the_server_goes_on() {
    let ws = workspace();
    let server = start(ws.path(), &[]);
    let huge = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "read", "arguments": {"path": "x".repeat(5 << 20)}}})
    .to_string();
    let reply = post(&server.url, &[], &huge);
    assert_eq!(reply.status, 413, "{}", reply.head);
    let reply = post(&server.url, &[], &initialize_body());
    assert_eq!(reply.status, 200);
}

#[test]
fn with_a_token_every_request_needs_it_and_a_wrong_one_gets_401() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let token_file = token_file(dir.path(), "s3cret-token-0123456789\n");
    let server = start(ws.path(), &["--token-file", token_file.to_str().unwrap()]);
    let url = &server.url;
    for headers in [
        vec![],
        vec![("Authorization", "Bearer wrong-token-0123456789")],
        vec![("Authorization", "Bearer s3cret-token-012345678")],
        vec![("Authorization", "s3cret-token-0123456789")],
        vec![("Authorization", "Basic czNjcmV0")],
    ] {
        let reply = post(url, &headers, &initialize_body());
        assert_eq!(reply.status, 401, "{headers:?}: {}", reply.head);
        assert_eq!(
            reply.header("www-authenticate"),
            Some("Bearer realm=\"toolwright\"")
        );
    }
    let auth = [("Authorization", "Bearer s3cret-token-0123456789")];
    let id = session(url, &auth);
    let reply = post(
        url,
        &[
            auth[0],
            ("mcp-session-id", &id),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "read", "arguments": {"path": "a.txt"}}})
        .to_string(),
    );
    let result = &reply.messages()[0]["result"];
    assert_eq!(result["content"][0]["text"], "hello\n", "{result}");
    // A foreign Origin is refused even with the token.
    let reply = post(
        url,
        &[auth[0], ("Origin", "http://evil.example")],
        &initialize_body(),
    );
    assert_eq!(reply.status, 403);
}

#[test]
fn listening_beyond_loopback_needs_a_token_and_a_weak_token_is_refused() {
    let ws = workspace();
    let out = std::process::Command::new(BINARY)
        .args(["mcp", "--http", "0.0.0.0:0", "--no-default-plugins", "--cwd"])
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("listens beyond loopback: give --token-file"),
        "{stderr}"
    );

    let dir = tempfile::tempdir().unwrap();
    let token_file = token_file(dir.path(), "short\n");
    let out = std::process::Command::new(BINARY)
        .args([
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--no-default-plugins",
            "--token-file",
        ])
        .arg(&token_file)
        .arg("--cwd")
        .arg(ws.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("must be at least 16 printable ASCII characters"),
        "{stderr}"
    );
}

fn alive(pid: i64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| !s.contains("State:\tZ"))
}

fn wait_for(what: &str, timeout: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn sigterm_cancels_the_running_calls_kills_their_processes_and_exits_cleanly() {
    let ws = workspace();
    let server = start(ws.path(), &[]);
    let url = server.url.clone();
    let id = session(&url, &[]);
    let call = std::thread::spawn({
        let url = url.clone();
        move || {
            let command = "echo $$ > shell.pid; sleep 60 & echo $! > child.pid; wait";
            post(
                &url,
                &[("mcp-session-id", &id), ("mcp-protocol-version", "2025-11-25")],
                &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                    "params": {"name": "bash", "arguments": {"command": command}}})
                .to_string(),
            )
        }
    });
    let pid_file = |name: &str| {
        std::fs::read_to_string(ws.path().join(name))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    wait_for("the bash call's processes", Duration::from_secs(10), || {
        pid_file("shell.pid").is_some() && pid_file("child.pid").is_some()
    });
    let pids: Vec<i64> = ["shell.pid", "child.pid"]
        .iter()
        .filter_map(|f| pid_file(f))
        .collect();
    assert!(pids.iter().all(|p| alive(*p)));
    let started = Instant::now();
    let status = server.terminate();
    assert!(status.success(), "exit status {status}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "shutdown took {:?}",
        started.elapsed()
    );
    // Killed before the exit (`cgroup.kill`, or SIGKILL to the group); a loaded machine may take a moment to
    // finish them. (Not killed, they would live for a minute.)
    wait_for("the call's processes to die", Duration::from_secs(2), || {
        !pids.iter().any(|p| alive(*p))
    });
    // The client got the call's answer (bash's own abort text, as pi's: the command had started) or saw the
    // stream end; it was not left hanging.
    let reply = call.join().unwrap();
    if let Some(message) = reply.messages().into_iter().find(|m| m["id"] == 7) {
        assert_eq!(message["result"]["isError"], true, "{message}");
        assert_eq!(
            message["result"]["content"][0]["text"], "Command aborted",
            "{message}"
        );
    }
}

#[test]
fn every_connected_session_hears_that_the_plugin_tools_changed() {
    let ws = workspace();
    let plugins = tempfile::tempdir().unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let server = start(
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
    let url = server.url.clone();
    let listeners: Vec<_> = (0..2)
        .map(|_| {
            let id = session(&url, &[]);
            let url = url.clone();
            std::thread::spawn(move || {
                send(
                    &url,
                    "GET",
                    "/mcp",
                    &[
                        ("Accept", "text/event-stream"),
                        ("mcp-session-id", &id),
                        ("mcp-protocol-version", "2025-11-25"),
                    ],
                    "",
                    Some("notifications/tools/list_changed"),
                )
            })
        })
        .collect();
    // Let both GET streams open before the change.
    std::thread::sleep(Duration::from_millis(500));
    let (_, wordcount) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap();
    std::fs::write(plugins.path().join("wordcount.wasm"), wordcount).unwrap();
    for listener in listeners {
        let reply = listener.join().unwrap();
        assert_eq!(reply.status, 200, "{}", reply.head);
        assert!(
            reply.body.contains("notifications/tools/list_changed"),
            "a session did not hear of the change: {}",
            reply.body
        );
    }
}

/// A 2026-07-28 client (stateless: no session) cancels a call by closing the request's stream: the server sees
/// the connection drop, cancels the call, and its processes die.
#[test]
fn a_stateless_call_is_cancelled_when_its_stream_closes_and_its_processes_die() {
    let ws = workspace();
    let server = start(ws.path(), &[]);
    let pidfile = ws.path().join("shell.pid");
    let command = format!(
        "echo $$ > {}; sleep 300 & echo $! >> {}; wait",
        pidfile.display(),
        pidfile.display()
    );
    let body = json!({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {
            "name": "bash", "arguments": {"command": command},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
            }
        }
    })
    .to_string();
    let authority = host_port(&server.url);
    let mut stream = TcpStream::connect(authority).unwrap();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: tools/call\r\nMcp-Name: bash\r\n\
         Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    let pids = loop {
        let pids: Vec<u32> = std::fs::read_to_string(&pidfile)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() == 2 || Instant::now() > until {
            break pids;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pids.len(), 2, "the command did not start");
    drop(stream);
    wait_for("the processes to die", Duration::from_secs(10), || {
        !pids.iter().any(|p| alive(i64::from(*p)))
    });
}

/// A server with the `nest` test program (`tests/programs/nested`) as a plugin: `nest` makes nested calls of
/// `leaf`, which logs.
fn start_with_nest(workspace: &Path, plugins: &Path, extra: &[&str]) -> HttpServer {
    std::fs::copy(toolwright_tests::programs::NESTED, plugins.join("nest.wasm")).unwrap();
    // `nest` may call its own `leaf`.
    let policy = plugins.join("policy.toml");
    std::fs::write(&policy, "[plugins.toolwright-test-nested]\ntools = [\"leaf\"]\n").unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut args = vec![
        "--policy",
        policy.to_str().unwrap(),
        "--plugins",
        plugins.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--watch-plugins",
        "0",
    ];
    args.extend_from_slice(extra);
    start(workspace, &args)
}

/// `nest` making two nested calls: a `leaf` that waits (so that the other client's call starts meanwhile), then
/// a `leaf` that logs `log-<tag>` and answers `leaf from-<tag>`.
fn nest_call(tag: &str, meta: Value) -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "nest",
        "arguments": {"calls": [
            {"name": "leaf", "arguments": {"sleepMs": 800}},
            {"name": "leaf", "arguments": {"text": format!("from-{tag}"), "log": format!("log-{tag}")}}
        ]},
        "_meta": meta
    }})
    .to_string()
}

/// A session's event stream (`GET /mcp`, where a 2025-11-25 session hears its log lines), read until `stop` is
/// set: what came.
fn listen(url: &str, session: &str, stop: &std::sync::atomic::AtomicBool) -> String {
    let authority = host_port(url);
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(Duration::from_millis(100))).unwrap();
    let request = format!(
        "GET /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: text/event-stream\r\n\
         mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let mut buffer = [0u8; 8192];
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        match stream.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => raw.extend_from_slice(&buffer[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&raw).into_owned()
}

/// The data of the `notifications/message` in an SSE body.
fn log_lines(body: &str) -> Vec<String> {
    body.lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "notifications/message")
        .map(|m| m["params"]["data"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// What a client got for its `nest` call: the nested record's arguments and the call's text.
fn answered(reply: &Reply) -> (Vec<Value>, String) {
    let messages = reply.messages();
    let result = messages
        .iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer to the call: {}{}", reply.head, reply.body));
    let record = &result["result"]["_meta"][toolwright::mcp::NESTED_CALLS_META]["calls"];
    let arguments = record
        .as_array()
        .unwrap_or_else(|| panic!("no nested record: {result}"))
        .iter()
        .map(|c| c["arguments"].clone())
        .collect();
    let text = toolwright_tests::text_of(&result["result"]["content"]);
    (arguments, text)
}

/// Two clients both send `tools/call` with id 7 at once (two 2025-11-25 sessions, then two stateless 2026-07-28
/// requests): each call runs under an id of the server's, so each client gets its own nested-call record and
/// only its own nested call's log line (regression: both ran as `mcp-7`; one got the other's record and log
/// line, the other neither).
#[test]
fn two_clients_with_the_same_request_ids_hear_only_their_own_calls() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let ws = workspace();
    let plugins = tempfile::tempdir().unwrap();
    let server = start_with_nest(ws.path(), plugins.path(), &[]);
    let url = server.url.clone();
    // A 2026-07-28 request hears log lines only when it sets a level.
    let stateless_meta = meta_2026(Some("info"));
    for revision in ["2025-11-25", "2026-07-28"] {
        let stop = Arc::new(AtomicBool::new(false));
        // A session hears log lines on its event stream; a stateless request on its response's.
        let clients: Vec<_> = ["A", "B"]
            .into_iter()
            .map(|tag| {
                let session = (revision == "2025-11-25").then(|| session(&url, &[]));
                let listener = session.clone().map(|id| {
                    let (url, stop) = (url.clone(), stop.clone());
                    std::thread::spawn(move || listen(&url, &id, &stop))
                });
                (tag, session, listener)
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300));
        let calls: Vec<_> = clients
            .into_iter()
            .map(|(tag, session, listener)| {
                let meta = if session.is_some() {
                    json!({})
                } else {
                    stateless_meta.clone()
                };
                let url = url.clone();
                let call = std::thread::spawn(move || {
                    let mut headers = vec![("mcp-protocol-version", revision)];
                    if let Some(id) = &session {
                        headers.push(("mcp-session-id", id.as_str()));
                    } else {
                        headers.extend([("Mcp-Method", "tools/call"), ("Mcp-Name", "nest")]);
                    }
                    post(&url, &headers, &nest_call(tag, meta))
                });
                (tag, call, listener)
            })
            .collect();
        let replies: Vec<_> = calls
            .into_iter()
            .map(|(tag, call, listener)| (tag, call.join().unwrap(), listener))
            .collect();
        // Log lines sent before the answer are on the event stream by now; give them a moment to be read.
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::SeqCst);
        for (tag, reply, listener) in replies {
            assert_eq!(
                reply.status, 200,
                "{revision} {tag}: {}{}",
                reply.head, reply.body
            );
            let heard = match listener {
                Some(listener) => listener.join().unwrap(),
                None => reply.body.clone(),
            };
            assert_eq!(
                log_lines(&heard),
                [format!("log-{tag}")],
                "{revision} {tag}: {heard}"
            );
            let (arguments, text) = answered(&reply);
            assert_eq!(
                arguments,
                [
                    json!({"sleepMs": 800}),
                    json!({"text": format!("from-{tag}"), "log": format!("log-{tag}")})
                ],
                "{revision} {tag}"
            );
            assert_eq!(
                text,
                format!("leaf ok ran: leaf \nleaf ok ran: leaf from-{tag}"),
                "{revision} {tag}"
            );
        }
    }
}

/// A value of the server's `/proc/PID/status` in kB (`VmHWM`, `VmRSS`).
fn status_kb(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {status}"))
}

/// How many files the server has open.
fn open_files(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count()
}

/// Regression: with a 1024 open-file limit, 1 100 half-open connections from a client without the token kept the
/// client with it out (`accept` failed at the limit, and the server never closed a silent connection). Here, at
/// 256 open files, 1 000 connections without the token idle (half send nothing, half the start of a request
/// head), and the client with the token is answered at once: the oldest of them make room.
#[test]
fn a_client_with_the_token_is_served_while_a_thousand_connections_without_it_idle() {
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), "s3cret-token-0123456789\n");
    let server = HttpServer::start_with_file_limit(
        Path::new(BINARY),
        256,
        &[
            "--cwd",
            ws.path().to_str().unwrap(),
            "--no-default-plugins",
            "--token-file",
            token.to_str().unwrap(),
        ],
    );
    let authority = host_port(&server.url).to_owned();
    let idle: Vec<TcpStream> = (0..1000)
        .map(|i| {
            let mut stream = TcpStream::connect(&authority).unwrap();
            if i % 2 == 1 {
                stream
                    .write_all(format!("POST /mcp HTTP/1.1\r\nHost: {authority}\r\n").as_bytes())
                    .unwrap();
            }
            stream
        })
        .collect();
    let auth = [("Authorization", "Bearer s3cret-token-0123456789")];
    let started = Instant::now();
    let id = session(&server.url, &auth);
    let reply = post(
        &server.url,
        &[
            auth[0],
            ("mcp-session-id", &id),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    );
    let elapsed = started.elapsed();
    let tools = &reply.messages()[0]["result"]["tools"];
    assert_eq!(tools[0]["name"], "read", "{}{}", reply.head, reply.body);
    assert!(elapsed < Duration::from_secs(5), "answered after {elapsed:?}");
    // The server stayed within its limit, and the oldest silent connections were closed.
    assert!(open_files(server.pid()) <= 256);
    let mut oldest = &idle[0];
    oldest.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
    assert_eq!(
        oldest.read(&mut [0u8; 64]).unwrap_or(0),
        0,
        "the oldest idle connection is still open"
    );
}

/// A client that sends nothing, or only the start of a request head, is closed after the header timeout; so is a
/// kept-alive connection that does not start its next request.
#[test]
fn silent_connections_are_closed_after_the_header_timeout() {
    let ws = workspace();
    let server = start(ws.path(), &["--header-timeout", "1"]);
    let authority = host_port(&server.url).to_owned();
    let silent = TcpStream::connect(&authority).unwrap();
    let mut slow = TcpStream::connect(&authority).unwrap();
    slow.write_all(b"POST /mcp HTTP/1.1\r\nHost: x\r\n").unwrap();
    let mut kept = TcpStream::connect(&authority).unwrap();
    let body = initialize_body();
    kept.write_all(
        format!(
            "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .unwrap();
    let started = Instant::now();
    for (what, mut stream) in [("silent", silent), ("slow", slow), ("kept-alive", kept)] {
        stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut received = Vec::new();
        let closed = loop {
            let mut buffer = [0u8; 4096];
            match stream.read(&mut buffer) {
                Ok(0) => break true,
                Ok(n) => received.extend_from_slice(&buffer[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break true,
                Err(_) => break false,
            }
        };
        assert!(
            closed,
            "the {what} connection is still open after {:?}",
            started.elapsed()
        );
        if what == "kept-alive" {
            assert!(String::from_utf8_lossy(&received).contains("\"serverInfo\""));
        }
    }
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    // The server goes on.
    assert_eq!(post(&server.url, &[], &initialize_body()).status, 200);
}

/// Regression: 6 000 `initialize` handshakes took the server from 26 MB to 817 MB (every session kept 5 minutes).
/// Beyond `--max-sessions` the least recently used session is closed: the first one is gone (404), the last one
/// answers, and the server's peak memory stays put.
#[test]
fn handshakes_beyond_the_session_bound_close_the_least_recently_used_sessions() {
    let ws = workspace();
    let server = start(ws.path(), &["--max-sessions", "20"]);
    let url = server.url.clone();
    let first = session(&url, &[]);
    let before = status_kb(server.pid(), "VmRSS");
    // Four clients at once, as a flood would come.
    let handshakes: Vec<_> = (0..4)
        .map(|_| {
            let url = url.clone();
            std::thread::spawn(move || {
                for _ in 0..400 {
                    assert_eq!(post(&url, &[], &initialize_body()).status, 200);
                }
            })
        })
        .collect();
    for handshake in handshakes {
        handshake.join().unwrap();
    }
    let last = session(&url, &[]);
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let headers = |id: &str| {
        vec![
            ("mcp-session-id", id.to_owned()),
            ("mcp-protocol-version", "2025-11-25".into()),
        ]
    };
    let ask = |id: &str| {
        let headers = headers(id);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post(&url, &headers, &list)
    };
    assert_eq!(
        ask(&first).status,
        404,
        "the first session outlived 1 600 newer ones"
    );
    let reply = ask(&last);
    assert_eq!(
        reply.messages()[0]["result"]["tools"][0]["name"],
        "read",
        "{}",
        reply.body
    );
    let peak = status_kb(server.pid(), "VmHWM");
    assert!(
        peak < before + 40 * 1024,
        "the server's peak memory grew from {before} kB to {peak} kB"
    );
}

#[test]
fn a_token_file_other_users_can_read_is_refused_at_start() {
    use std::os::unix::fs::PermissionsExt;
    let ws = workspace();
    let dir = tempfile::tempdir().unwrap();
    let token = token_file(dir.path(), "s3cret-token-0123456789\n");
    for mode in [0o644, 0o640, 0o604] {
        std::fs::set_permissions(&token, std::fs::Permissions::from_mode(mode)).unwrap();
        let out = std::process::Command::new(BINARY)
            .args([
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--no-default-plugins",
                "--token-file",
            ])
            .arg(&token)
            .arg("--cwd")
            .arg(ws.path())
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            stderr.trim_end(),
            format!(
                "toolwright: the token file {} is open to other users (mode {mode:04o}): `chmod 600` it",
                token.display()
            ),
            "{stderr}"
        );
        assert!(
            out.stdout.is_empty(),
            "it listened: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The `_meta` of a 2026-07-28 request: no log level unless `level` is given.
fn meta_2026(level: Option<&str>) -> Value {
    let mut meta = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    });
    if let Some(level) = level {
        meta["io.modelcontextprotocol/logLevel"] = json!(level);
    }
    meta
}

/// A stateless 2026-07-28 `tools/call` of `tool` (id 5) with the standard headers and `extra` ones.
fn call_2026(url: &str, tool: &str, arguments: Value, meta: Value, extra: &[(&str, &str)]) -> Reply {
    let body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": meta}})
    .to_string();
    let mut headers = vec![
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", tool),
    ];
    headers.extend_from_slice(extra);
    post(url, &headers, &body)
}

/// A server with the conformance fixtures (`tests/programs/conformance`) as plugins.
fn start_with_fixtures(workspace: &Path, plugins: &Path) -> HttpServer {
    std::fs::copy(
        toolwright_tests::programs::CONFORMANCE,
        plugins.join("conformance.wasm"),
    )
    .unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    start(
        workspace,
        &[
            "--plugins",
            plugins.to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
    )
}

/// 2026-07-28 forbids `notifications/message` for a request that set no log level in its `_meta`
/// (regression: the server sent them at `info`); with a level, the lines at or above it come, on the request's
/// own stream, which carries nothing but that request's notifications and its response.
#[test]
fn a_2026_07_28_call_hears_log_lines_only_at_the_level_its_meta_sets() {
    let ws = workspace();
    let plugins = tempfile::tempdir().unwrap();
    let server = start_with_fixtures(ws.path(), plugins.path());
    for (level, expected) in [
        (None, vec![]),
        (Some("warning"), vec!["a warning line", "an error line"]),
        (
            Some("debug"),
            vec!["a debug line", "an info line", "a warning line", "an error line"],
        ),
    ] {
        let reply = call_2026(&server.url, "test_log_levels", json!({}), meta_2026(level), &[]);
        assert_eq!(reply.status, 200, "{level:?}: {}{}", reply.head, reply.body);
        assert_eq!(log_lines(&reply.body), expected, "{level:?}: {}", reply.body);
        let messages = reply.messages();
        let (responses, others): (Vec<&Value>, Vec<&Value>) =
            messages.iter().partition(|m| m.get("method").is_none());
        assert!(
            others.iter().all(|m| m["method"] == "notifications/message"),
            "{level:?}: a message the request's stream may not carry: {others:?}"
        );
        assert_eq!(responses.len(), 1, "{level:?}: {messages:?}");
        assert_eq!(responses[0]["id"], 5, "{level:?}: {messages:?}");
        assert_eq!(
            toolwright_tests::text_of(&responses[0]["result"]["content"]),
            "logged at every level"
        );
    }
}

/// A tool parameter the plugin marks with `x-mcp-header` is listed with it, and a 2026-07-28 call must mirror it
/// in `Mcp-Param-<name>`: a header that contradicts the body, an invalid Base64 one, or a value in the body
/// without its header is refused with 400 and `HeaderMismatch` (-32020) before the plugin runs. A careless
/// plugin's mark (on an array parameter) keeps its tool out of 2026-07-28 listings.
#[test]
fn a_parameter_marked_x_mcp_header_must_match_its_mcp_param_header() {
    let ws = workspace();
    let plugins = tempfile::tempdir().unwrap();
    let server = start_with_fixtures(ws.path(), plugins.path());
    let body =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta_2026(None)}});
    let listed = post(
        &server.url,
        &[
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/list"),
        ],
        &body.to_string(),
    );
    let result = &listed.messages()[0]["result"];
    // 2026-07-28's caching hints.
    assert_eq!(
        (&result["ttlMs"], &result["cacheScope"]),
        (&json!(0), &json!("private")),
        "{result}"
    );
    let tools = result["tools"].clone();
    let tool = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "test_custom_headers")
        .unwrap_or_else(|| panic!("no test_custom_headers in {tools}"));
    assert_eq!(
        tool["inputSchema"]["properties"]["region"]["x-mcp-header"], "Region",
        "{tool}"
    );
    // A tool whose mark breaks SEP-2243's rules (on an array) is left out for 2026-07-28 clients, who must drop
    // it, and still listed to 2025-11-25 ones, for whom the mark means nothing.
    assert!(!tools.to_string().contains("test_bad_header_mark"), "{tools}");
    let id = session(&server.url, &[]);
    let older = post(
        &server.url,
        &[
            ("mcp-session-id", id.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string(),
    );
    assert!(older.body.contains("test_bad_header_mark"), "{}", older.body);

    let arguments = json!({"region": "us-west1", "query": "q"});
    let call = |headers: &[(&str, &str)]| {
        call_2026(
            &server.url,
            "test_custom_headers",
            arguments.clone(),
            meta_2026(None),
            headers,
        )
    };
    let reply = call(&[("Mcp-Param-Region", "us-west1")]);
    assert_eq!(reply.status, 200, "{}{}", reply.head, reply.body);
    assert!(
        reply.body.contains(r#"\"region\":\"us-west1\""#),
        "{}",
        reply.body
    );
    // Base64 as SEP-2243 wraps it.
    let reply = call(&[("Mcp-Param-Region", "=?base64?dXMtd2VzdDE=?=")]);
    assert_eq!(reply.status, 200, "{}{}", reply.head, reply.body);
    for headers in [
        vec![("Mcp-Param-Region", "eu-north1")],
        vec![("Mcp-Param-Region", "=?base64?dXMtd2VzdDE?=")],
        vec![],
    ] {
        let reply = call(&headers);
        assert_eq!(reply.status, 400, "{headers:?}: {}{}", reply.head, reply.body);
        assert_eq!(
            reply.messages()[0]["error"]["code"],
            -32020,
            "{headers:?}: {}",
            reply.body
        );
    }
}

/// A 2026-07-28 `subscriptions/listen` stream (id 3) asking for `notifications`, read on a thread until `until`
/// is heard (or the connection ends).
fn listen_2026(url: &str, notifications: Value, until: &'static str) -> std::thread::JoinHandle<Reply> {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen",
            "params": {"_meta": meta_2026(None), "notifications": notifications}});
        let headers = [
            ACCEPT,
            JSON,
            ("MCP-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "subscriptions/listen"),
        ];
        send(&url, "POST", "/mcp", &headers, &body.to_string(), Some(until))
    })
}

/// A `subscriptions/listen` stream that asked for `toolsListChanged` hears `notifications/tools/list_changed`
/// (tagged with its subscription id) when the plugins' tools change; one that asked only for prompts hears
/// `notifications/prompts/list_changed` (the plugins were loaded again) and no tool change.
#[test]
fn a_listen_stream_hears_the_tool_changes_it_asked_for_and_no_others() {
    let ws = workspace();
    let plugins = tempfile::tempdir().unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let server = start(
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
    let listen = |notifications: Value, until: &'static str| listen_2026(&server.url, notifications, until);
    let tools = listen(
        json!({"toolsListChanged": true}),
        "notifications/tools/list_changed",
    );
    // Read until the prompt change: nothing before it (the tools are told first) may name a tool change.
    let prompts = listen(
        json!({"promptsListChanged": true}),
        "notifications/prompts/list_changed",
    );
    std::thread::sleep(Duration::from_millis(500));
    let (_, wordcount) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap();
    std::fs::write(plugins.path().join("wordcount.wasm"), wordcount).unwrap();
    let heard = tools.join().unwrap();
    assert_eq!(heard.status, 200, "{}", heard.head);
    let messages = heard.messages();
    assert_eq!(
        messages[0]["method"], "notifications/subscriptions/acknowledged",
        "{messages:?}"
    );
    let changed = messages
        .iter()
        .find(|m| m["method"] == "notifications/tools/list_changed")
        .unwrap_or_else(|| panic!("no tools/list_changed on the listen stream: {messages:?}"));
    assert!(
        !changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_null(),
        "{changed}"
    );
    let heard = prompts.join().unwrap();
    assert!(
        heard.body.contains("notifications/prompts/list_changed"),
        "a prompts stream did not hear the reload: {}",
        heard.body
    );
    assert!(
        !heard.body.contains("notifications/tools/list_changed"),
        "a prompts-only stream heard a tool change: {}",
        heard.body
    );
    drop(server);
}

/// A `subscriptions/listen` stream's `resourceSubscriptions` are the resources it may read: a workspace file
/// is watched and its change heard on the stream; a file outside the workspace is left out of the acknowledged
/// filter and never heard of.
#[test]
fn a_listen_stream_hears_the_workspace_files_it_subscribed_to_and_no_others() {
    let ws = workspace();
    let outside = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    let secret = outside.path().canonicalize().unwrap().join("secret");
    std::fs::write(&secret, "outside").unwrap();
    let audit = outside.path().join("audit.jsonl");
    let server = start(&root, &["--audit-log", audit.to_str().unwrap()]);
    let inside = format!("file://{}", root.join("a.txt").display());
    let beyond = format!("file://{}", secret.display());
    let listening = listen_2026(
        &server.url,
        json!({"resourceSubscriptions": [inside, beyond]}),
        "notifications/resources/updated",
    );
    std::thread::sleep(Duration::from_millis(500));
    std::fs::write(&secret, "changed outside").unwrap();
    std::fs::write(root.join("a.txt"), "changed\n").unwrap();
    let heard = listening.join().unwrap();
    assert_eq!(heard.status, 200, "{}", heard.head);
    let messages = heard.messages();
    assert_eq!(
        messages[0]["params"]["notifications"]["resourceSubscriptions"],
        json!([inside]),
        "{messages:?}"
    );
    let updated: Vec<&Value> = messages
        .iter()
        .filter(|m| m["method"] == "notifications/resources/updated")
        .collect();
    assert_eq!(updated.len(), 1, "{messages:?}");
    assert_eq!(updated[0]["params"]["uri"], inside.as_str(), "{messages:?}");
    assert!(
        !updated[0]["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"].is_null(),
        "{messages:?}"
    );
    // Each URI checked is in the audit log: the file opened, the one outside refused.
    let checked: Vec<(String, String)> = std::fs::read_to_string(&audit)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|r| r["tool"] == "subscriptions/listen")
        .map(|r| {
            let step = &r["decision"][0];
            (
                step["reason"].as_str().unwrap().to_owned(),
                r["outcome"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        checked,
        [
            (inside.clone(), "ok".to_owned()),
            (beyond.clone(), "error".to_owned())
        ],
        "{checked:?}"
    );
}

/// A listen stream subscribed to a plugin's resource is acknowledged only what a plugin reads, and hears it
/// updated when the plugins are loaded again.
#[test]
fn a_listen_stream_hears_a_plugin_s_resource_updated_when_the_plugins_reload() {
    let ws = workspace();
    let plugins = tempfile::tempdir().unwrap();
    let server = start_with_fixtures(ws.path(), plugins.path());
    let listening = listen_2026(
        &server.url,
        json!({"resourceSubscriptions": ["test://watched-resource", "test://nobody-offers-it"]}),
        "notifications/resources/updated",
    );
    std::thread::sleep(Duration::from_millis(500));
    let (_, wordcount) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap();
    std::fs::write(plugins.path().join("wordcount.wasm"), wordcount).unwrap();
    let heard = listening.join().unwrap();
    let messages = heard.messages();
    assert_eq!(
        messages[0]["params"]["notifications"]["resourceSubscriptions"],
        json!(["test://watched-resource"]),
        "{messages:?}"
    );
    let updated = messages
        .iter()
        .find(|m| m["method"] == "notifications/resources/updated")
        .unwrap_or_else(|| panic!("no update heard: {messages:?}"));
    assert_eq!(
        updated["params"]["uri"], "test://watched-resource",
        "{messages:?}"
    );
}

/// The id of the last SSE event in `body`.
fn last_event_id(body: &str) -> Option<String> {
    body.lines()
        .filter_map(|line| line.strip_prefix("id:"))
        .map(|id| id.trim().to_owned())
        .next_back()
}

/// With `--poll-after 3`, a session's call still running after 3 s has its stream ended with no answer
/// (SEP-1699's polling); the answer, which came while the client was away, is on the session's reconnection with
/// `Last-Event-ID`, and on no other session's. A call that never outlasts the bound is answered on its stream.
#[test]
fn a_long_call_s_stream_is_closed_and_its_answer_comes_on_the_session_s_reconnection_only() {
    let ws = workspace();
    let server = start(ws.path(), &["--poll-after", "3"]);
    let url = server.url.clone();
    let id = session(&url, &[]);
    let other = session(&url, &[]);
    let headers = |session: &str| {
        vec![
            ("mcp-session-id", session.to_owned()),
            ("mcp-protocol-version", "2025-11-25".to_owned()),
        ]
    };
    let call = |session: &str, command: &str| {
        let headers = headers(session);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        post(
            &url,
            &headers,
            &json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                "params": {"name": "bash", "arguments": {"command": command}}})
            .to_string(),
        )
    };
    // The call waits for a file the test writes only after its stream was closed.
    let reply = call(
        &id,
        "while [ ! -e go ]; do sleep 0.05; done; echo polled-answer; touch done",
    );
    assert_eq!(reply.status, 200, "{}", reply.head);
    assert!(
        !reply.messages().iter().any(|m| m["id"] == 7),
        "the stream was closed before the answer: {}",
        reply.body
    );
    let last = last_event_id(&reply.body).unwrap_or_else(|| panic!("no event id: {}", reply.body));
    std::fs::write(ws.path().join("go"), "").unwrap();
    wait_for("the call to end", Duration::from_secs(10), || {
        ws.path().join("done").exists()
    });
    std::thread::sleep(Duration::from_millis(300));
    let resume = |session: &str| {
        let mut headers = headers(session);
        headers.push(("Accept", "text/event-stream".to_owned()));
        headers.push(("Last-Event-ID", last.clone()));
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        send(&url, "GET", "/mcp", &headers, "", Some("polled-answer"))
    };
    // Another session naming the event gets nothing of it (an empty stream).
    let foreign = resume(&other);
    assert!(!foreign.body.contains("polled-answer"), "{}", foreign.body);
    let resumed = resume(&id);
    assert_eq!(resumed.status, 200, "{}", resumed.head);
    let answer = resumed
        .messages()
        .into_iter()
        .find(|m| m["id"] == 7)
        .unwrap_or_else(|| panic!("no answer on the reconnection: {}", resumed.body));
    assert_eq!(
        answer["result"]["content"][0]["text"], "polled-answer\n",
        "{answer}"
    );
    // A quick call is answered on its own stream.
    let quick = call(&id, "echo quick");
    assert!(
        quick
            .messages()
            .iter()
            .any(|m| m["id"] == 7 && m["result"]["content"][0]["text"] == "quick\n"),
        "{}",
        quick.body
    );
}

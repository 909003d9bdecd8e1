//! Long calls as tasks (`io.modelcontextprotocol/tasks`) over `toolwright mcp --http`, at the HTTP level: a
//! `bash` call of a client that accepts tasks answers at once with a task; `tasks/get` shows it `working`, then
//! `completed` with the result inline; `tasks/cancel` kills its processes and the task ends `cancelled`; a task
//! outliving `--task-ttl` is cancelled and forgotten; a quick tool and a client that declared no tasks are
//! answered in place (so is a 2025-11-25 session's call: the extension is 2026-07-28's); and no session sees,
//! polls or cancels a stateless client's task, nor anyone a task whose id it guessed.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwright_tests::mcp::HttpServer;

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");
const TASKS: &str = "io.modelcontextprotocol/tasks";

fn start(workspace: &Path, extra: &[&str]) -> HttpServer {
    let mut args = vec!["--cwd", workspace.to_str().unwrap(), "--no-default-plugins"];
    args.extend_from_slice(extra);
    HttpServer::start(Path::new(BINARY), &args)
}

/// POST one JSON-RPC message with `Connection: close`; the status, headers and the JSON-RPC messages of the
/// reply (SSE or JSON).
fn post(url: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String, Vec<Value>) {
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = TcpStream::connect(authority).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let body = body.to_string();
    let mut request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n"
    );
    for (key, value) in headers {
        request.push_str(&format!("{key}: {value}\r\n"));
    }
    request.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = String::new();
    stream.read_to_string(&mut raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let messages = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: ").or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(Value::is_object)
        .collect();
    (status, head.to_owned(), messages)
}

/// A client of either revision: stateless 2026-07-28 requests, or a 2025-11-25 session.
enum Client {
    Stateless { tasks: bool },
    Session { id: String },
}

impl Client {
    /// A 2025-11-25 session that declared the tasks extension.
    fn session(url: &str) -> Client {
        let client = Client::handshake(url);
        let (status, head, _) = client.send(
            url,
            &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        );
        assert_eq!(status, 202, "{head}");
        client
    }

    /// A session answered `initialize` that has not sent `notifications/initialized` (yet).
    fn handshake(url: &str) -> Client {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {"extensions": {TASKS: {}}},
            "clientInfo": {"name": "raw", "version": "1"}}});
        let (status, head, _) = post(url, &[], &init);
        assert_eq!(status, 200, "{head}");
        let id = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| v.trim().to_owned())
            })
            .expect("a session id");
        Client::Session { id }
    }

    fn send(&self, url: &str, message: &Value) -> (u16, String, Vec<Value>) {
        let method = message["method"].as_str().unwrap().to_owned();
        match self {
            Client::Session { id } => post(
                url,
                &[("Mcp-Session-Id", id), ("MCP-Protocol-Version", "2025-11-25")],
                message,
            ),
            Client::Stateless { tasks } => {
                let mut message = message.clone();
                let capabilities = if *tasks {
                    json!({"extensions": {TASKS: {}}})
                } else {
                    json!({})
                };
                message["params"]["_meta"] = json!({
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": capabilities,
                    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
                });
                let params = &message["params"];
                let name = params["name"]
                    .as_str()
                    .or(params["taskId"].as_str())
                    .unwrap_or("")
                    .to_owned();
                let mut headers = vec![
                    ("MCP-Protocol-Version", "2026-07-28"),
                    ("Mcp-Method", method.as_str()),
                ];
                if !name.is_empty() {
                    headers.push(("Mcp-Name", name.as_str()));
                }
                post(url, &headers, &message)
            }
        }
    }

    /// One request's JSON-RPC response.
    fn request(&self, url: &str, method: &str, params: Value) -> Value {
        let (status, head, messages) = self.send(
            url,
            &json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}),
        );
        messages
            .into_iter()
            .find(|m| m.get("id") == Some(&json!(7)))
            .unwrap_or_else(|| panic!("no response to {method} ({status}): {head}"))
    }

    fn call(&self, url: &str, tool: &str, arguments: Value) -> Value {
        self.request(url, "tools/call", json!({"name": tool, "arguments": arguments}))
    }

    fn get(&self, url: &str, task: &str) -> Value {
        self.request(url, "tasks/get", json!({"taskId": task}))
    }

    fn cancel(&self, url: &str, task: &str) -> Value {
        self.request(url, "tasks/cancel", json!({"taskId": task}))
    }

    /// Poll `task` until its status is not `working`; its last state.
    fn settled(&self, url: &str, task: &str) -> Value {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let state = self.get(url, task);
            let status = state["result"]["status"]
                .as_str()
                .unwrap_or_else(|| panic!("{state}"))
                .to_owned();
            if status != "working" {
                return state["result"].clone();
            }
            assert!(Instant::now() < until, "the task is still working: {state}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A task's id from a `tools/call` response, which must be a task.
fn task_of(response: &Value) -> String {
    let result = &response["result"];
    assert_eq!(result["resultType"], "task", "{response}");
    assert_eq!(result["status"], "working", "{response}");
    assert!(result["ttlMs"].as_u64().is_some(), "{response}");
    assert!(result["pollIntervalMs"].as_u64().is_some(), "{response}");
    result["taskId"].as_str().unwrap().to_owned()
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).is_ok_and(|s| !s.contains("State:\tZ"))
}

/// The PIDs a command wrote to `file` once there are `count` of them.
fn pids(file: &Path, count: usize) -> Vec<u32> {
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let pids: Vec<u32> = std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if pids.len() >= count {
            return pids;
        }
        assert!(Instant::now() < until, "the command did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A shell that writes its PID and its `sleep`'s to `file`, then waits.
fn sleeper(file: &Path) -> String {
    format!(
        "echo $$ > {f}; sleep 300 & echo $! >> {f}; wait",
        f = file.display()
    )
}

fn is_not_found(response: &Value, task: &str) {
    assert_eq!(response["error"]["code"], -32602, "{response}");
    assert_eq!(
        response["error"]["message"],
        format!("unknown task: {task}"),
        "{response}"
    );
}

#[test]
fn a_bash_task_is_polled_cancelled_with_its_processes_and_a_finished_ones_result_fetched() {
    let ws = tempfile::tempdir().unwrap();
    let server = start(ws.path(), &[]);
    let url = &server.url;
    let client = Client::Stateless { tasks: true };

    let (status, head, messages) = post(
        url,
        &[],
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}}),
    );
    assert_eq!(status, 200, "{head}");
    assert_eq!(
        messages[0]["result"]["capabilities"]["extensions"][TASKS],
        json!({}),
        "the server declares the tasks extension: {messages:?}"
    );

    // A finished task's result.
    let task = task_of(&client.call(url, "bash", json!({"command": "sleep 0.3; echo built"})));
    assert_eq!(client.get(url, &task)["result"]["status"], "working");
    let done = client.settled(url, &task);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["content"][0]["text"], "built\n", "{done}");
    assert_eq!(done["result"]["isError"], false, "{done}");

    // Cancelled: its processes die, and it ends `cancelled`.
    let pidfile = ws.path().join("shell.pid");
    let task = task_of(&client.call(url, "bash", json!({"command": sleeper(&pidfile)})));
    let pids = pids(&pidfile, 2);
    assert_eq!(client.get(url, &task)["result"]["status"], "working");
    let ack = client.cancel(url, &task);
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let ended = client.settled(url, &task);
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let until = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < until,
            "the task's processes outlived its cancellation: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Cancelling a finished task changes nothing.
    assert_eq!(client.cancel(url, &task)["result"]["resultType"], "complete");
    assert_eq!(client.get(url, &task)["result"]["status"], "cancelled");

    // A quick tool answers in place; a client that declared no tasks gets no task.
    std::fs::write(ws.path().join("a.txt"), "hello\n").unwrap();
    let read = client.call(url, "read", json!({"path": "a.txt"}));
    assert_eq!(read["result"]["content"][0]["text"], "hello\n", "{read}");
    let plain = Client::Stateless { tasks: false };
    let answered = plain.call(url, "bash", json!({"command": "echo now"}));
    assert_eq!(answered["result"]["content"][0]["text"], "now\n", "{answered}");
    // Nor may it poll tasks.
    let refused = plain.get(url, &task);
    assert_eq!(refused["error"]["code"], -32021, "{refused}");
}

#[test]
fn a_task_past_its_ttl_is_cancelled_with_its_processes_and_forgotten() {
    let ws = tempfile::tempdir().unwrap();
    let server = start(ws.path(), &["--task-ttl", "2"]);
    let url = &server.url;
    let client = Client::Stateless { tasks: true };
    let pidfile = ws.path().join("shell.pid");
    let response = client.call(url, "bash", json!({"command": sleeper(&pidfile)}));
    assert_eq!(response["result"]["ttlMs"], 2000, "{response}");
    let task = task_of(&response);
    let pids = pids(&pidfile, 2);
    assert_eq!(client.get(url, &task)["result"]["status"], "working");
    let until = Instant::now() + Duration::from_secs(15);
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < until,
            "the processes outlived the task's TTL: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    is_not_found(&client.get(url, &task), &task);
}

#[test]
fn a_session_cannot_reach_a_stateless_task_nor_a_guess_any_and_gets_no_task_itself() {
    let ws = tempfile::tempdir().unwrap();
    let server = start(ws.path(), &[]);
    let url = &server.url;
    let owner = Client::Stateless { tasks: true };
    let pidfile = ws.path().join("shell.pid");
    let task = task_of(&owner.call(url, "bash", json!({"command": sleeper(&pidfile)})));
    let pids = pids(&pidfile, 2);

    // A 2025-11-25 session that declared the extension and knows the id: unknown to it, and the call runs on.
    let session = Client::session(url);
    is_not_found(&session.get(url, &task), &task);
    is_not_found(&session.cancel(url, &task), &task);
    is_not_found(
        &session.request(url, "tasks/update", json!({"taskId": task, "inputResponses": {}})),
        &task,
    );
    // Nor to one that has not yet sent `notifications/initialized` (handled apart from its requests: a session
    // is one from `initialize` on; regression: a request racing the notification was served as stateless).
    let early = Client::handshake(url);
    is_not_found(&early.get(url, &task), &task);
    // A guessed id is unknown to anyone.
    let guessed = "0".repeat(32);
    for client in [&session, &owner] {
        is_not_found(&client.get(url, &guessed), &guessed);
        is_not_found(&client.cancel(url, &guessed), &guessed);
    }
    assert!(
        pids.iter().all(|p| alive(*p)),
        "another client's cancel reached the call"
    );
    assert_eq!(owner.get(url, &task)["result"]["status"], "working");

    // The extension is 2026-07-28's: the session's own bash call is answered in place (as the MCP Inspector,
    // which declares it on every connection, expects).
    let answered = session.call(url, "bash", json!({"command": "echo in place"}));
    assert_eq!(
        answered["result"]["content"][0]["text"], "in place\n",
        "{answered}"
    );

    owner.cancel(url, &task);
    assert_eq!(owner.settled(url, &task)["status"], "cancelled");
    let until = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            Instant::now() < until,
            "the processes outlived the cancellation: {pids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_plugin_tool_runs_as_a_task_unless_it_says_it_is_quick_and_its_blocks_reach_the_client_whole() {
    // `raw` leaves `long-running` to the host (a plugin's tool: a task); `guarded` says it is quick. The task's
    // result carries the audio and embedded resources as the plugin returned them, not the model's view.
    let ws = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(toolwright_tests::programs::RAW, plugins.path().join("raw.wasm")).unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let server = start(
        ws.path(),
        &[
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
        ],
    );
    let url = &server.url;
    let client = Client::Stateless { tasks: true };
    let task = task_of(&client.call(url, "raw", json!({"want": "blocks"})));
    let done = client.settled(url, &task);
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(
        done["result"]["content"],
        toolwright_tests::programs::raw_blocks(),
        "{done}"
    );
    let quick = client.call(url, "guarded", json!({"name": "good"}));
    assert_eq!(quick["result"]["content"][0]["text"], "raw ok", "{quick}");
    assert!(quick["result"].get("task").is_none(), "{quick}");
}

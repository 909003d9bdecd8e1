//! Throughput of `toolwright mcp` over its two transports, side by side in one run: 1000 `read` calls of a
//! small file from 8 concurrent clients.
//!
//! - **stdio**: one client (stdio has one) keeping 8 calls in flight.
//! - **HTTP, 2025-11-25**: 8 clients, each with its own session and keep-alive connection, 125 calls each.
//! - **HTTP, 2026-07-28**: 8 stateless clients (no session; the revision travels with every request).
//! - **HTTP, 2025-11-25 with `--poll-after`**: as the sessions above, on a server that reads every request's
//!   stream itself to end it after the bound (none lasts it here): the cost of polling.
//!
//! Each transport is timed 5 times; the median, min and max wall time of the 1000 calls are printed.
//!
//! Run: `cargo bench -p toolwright-tests --bench mcp_transports`.

#![allow(clippy::unwrap_used, clippy::print_stdout)] // A benchmark binary.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwright_tests::mcp::HttpServer;

const CALLS: usize = 1000;
const CLIENTS: usize = 8;
const ROUNDS: usize = 5;

fn read_call(id: usize) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "read", "arguments": {"path": "a.txt"}}})
}

fn check(answer: &Value) {
    assert_eq!(answer["result"]["content"][0]["text"], "hello\n", "{answer}");
}

/// 1000 calls over stdio, 8 in flight.
fn stdio_round(workspace: &Path) -> Duration {
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args(["mcp", "--watch-plugins", "0", "--no-default-plugins", "--cwd"])
        .arg(workspace)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |message: &Value| {
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    };
    let mut next = || -> Value {
        loop {
            let mut line = String::new();
            assert!(stdout.read_line(&mut line).unwrap() > 0);
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                return message;
            }
        }
    };
    send(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    next();
    send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let started = Instant::now();
    let mut sent = 0;
    while sent < CLIENTS {
        sent += 1;
        send(&read_call(sent));
    }
    for _ in 0..CALLS {
        check(&next());
        if sent < CALLS {
            sent += 1;
            send(&read_call(sent));
        }
    }
    let elapsed = started.elapsed();
    drop(stdin);
    let _ = child.wait();
    elapsed
}

/// One keep-alive HTTP/1.1 connection that posts JSON-RPC and reads the SSE (chunked) or JSON answer.
struct Connection {
    stream: BufReader<TcpStream>,
    authority: String,
    headers: Vec<(String, String)>,
}

impl Connection {
    fn open(url: &str) -> Connection {
        let authority = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        let stream = TcpStream::connect(&authority).unwrap();
        stream.set_nodelay(true).unwrap();
        Connection {
            stream: BufReader::new(stream),
            authority,
            headers: Vec::new(),
        }
    }

    /// Post `body`; the response's headers and the JSON-RPC messages in its body.
    fn post(&mut self, body: &Value, extra: &[(&str, &str)]) -> (Vec<(String, String)>, Vec<Value>) {
        let body = body.to_string();
        let mut request = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n",
            self.authority,
            body.len()
        );
        for (key, value) in self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .chain(extra.iter().copied())
        {
            request.push_str(&format!("{key}: {value}\r\n"));
        }
        request.push_str("\r\n");
        request.push_str(&body);
        self.stream.get_mut().write_all(request.as_bytes()).unwrap();
        let mut status = String::new();
        self.stream.read_line(&mut status).unwrap();
        assert!(status.starts_with("HTTP/1.1 2"), "{status}");
        let mut headers = Vec::new();
        loop {
            let mut line = String::new();
            self.stream.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((k, v)) = line.split_once(':') {
                headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
            }
        }
        let header = |name: &str| headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        let mut payload = Vec::new();
        if header("transfer-encoding").is_some_and(|v| v == "chunked") {
            loop {
                let mut size = String::new();
                self.stream.read_line(&mut size).unwrap();
                let size = usize::from_str_radix(size.trim(), 16).unwrap();
                let mut chunk = vec![0; size + 2];
                self.stream.read_exact(&mut chunk).unwrap();
                if size == 0 {
                    break;
                }
                payload.extend_from_slice(&chunk[..size]);
            }
        } else if let Some(length) = header("content-length") {
            let mut body = vec![0; length.parse().unwrap()];
            self.stream.read_exact(&mut body).unwrap();
            payload = body;
        }
        let text = String::from_utf8(payload).unwrap();
        let messages = text
            .lines()
            .map(|l| l.strip_prefix("data: ").unwrap_or(l))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(Value::is_object)
            .collect();
        (headers, messages)
    }
}

/// A 2025-11-25 client: a session on its own connection.
fn legacy_client(url: &str) -> Connection {
    let mut connection = Connection::open(url);
    let (headers, _) = connection.post(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}),
        &[],
    );
    let session = headers
        .into_iter()
        .find(|(k, _)| k == "mcp-session-id")
        .unwrap()
        .1;
    connection.headers = vec![
        ("mcp-session-id".into(), session),
        ("mcp-protocol-version".into(), "2025-11-25".into()),
    ];
    connection.post(
        &json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        &[],
    );
    connection
}

/// A 2026-07-28 client: no session; the revision and the client's context travel with every request.
fn modern_client(url: &str) -> Connection {
    let mut connection = Connection::open(url);
    connection.headers = vec![
        ("mcp-protocol-version".into(), "2026-07-28".into()),
        ("mcp-method".into(), "tools/call".into()),
        ("mcp-name".into(), "read".into()),
    ];
    connection
}

fn modern_call(id: usize) -> Value {
    let mut call = read_call(id);
    call["params"]["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    call
}

/// 1000 calls over HTTP from 8 clients, 125 each.
fn http_round(url: &str, modern: bool) -> Duration {
    let mut clients: Vec<Connection> = (0..CLIENTS)
        .map(|_| {
            if modern {
                modern_client(url)
            } else {
                legacy_client(url)
            }
        })
        .collect();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for (c, client) in clients.iter_mut().enumerate() {
            scope.spawn(move || {
                for i in 0..CALLS / CLIENTS {
                    let id = c * 1000 + i + 1;
                    let call = if modern { modern_call(id) } else { read_call(id) };
                    let (_, messages) = client.post(&call, &[]);
                    let answer = messages.iter().find(|m| m["id"] == id).unwrap();
                    check(answer);
                }
            });
        }
    });
    started.elapsed()
}

fn report(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let median = times[times.len() / 2];
    println!(
        "{name:<28} median {:>7.1} ms  ({:>6.0} calls/s)  min {:>7.1}  max {:>7.1}",
        ms(median),
        CALLS as f64 / median.as_secs_f64(),
        ms(times[0]),
        ms(times[times.len() - 1]),
    );
}

fn main() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("a.txt"), "hello\n").unwrap();
    let binary = Path::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    let args = [
        "--watch-plugins",
        "0",
        "--no-default-plugins",
        "--cwd",
        workspace.path().to_str().unwrap(),
    ];
    let server = HttpServer::start(binary, &args);
    // The same with polling on (every session stream read by the server itself); no call lasts the bound.
    let polling_args: Vec<&str> = args.iter().copied().chain(["--poll-after", "60"]).collect();
    let polling = HttpServer::start(binary, &polling_args);
    // Warm up each path once.
    stdio_round(workspace.path());
    http_round(&server.url, false);
    http_round(&server.url, true);
    http_round(&polling.url, false);
    let (mut stdio, mut legacy, mut modern, mut polled) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    // Interleaved, so drift on this machine touches every transport alike.
    for _ in 0..ROUNDS {
        stdio.push(stdio_round(workspace.path()));
        legacy.push(http_round(&server.url, false));
        modern.push(http_round(&server.url, true));
        polled.push(http_round(&polling.url, false));
    }
    println!("{CALLS} `read` calls of a 6-byte file, {CLIENTS} concurrent clients, {ROUNDS} rounds:");
    report("stdio (8 in flight)", stdio);
    report("HTTP 2025-11-25 (sessions)", legacy);
    report("HTTP 2026-07-28 (stateless)", modern);
    report("HTTP 2025-11-25, --poll-after", polled);
}

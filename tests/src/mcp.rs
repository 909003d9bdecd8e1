//! Running `toolwright mcp` for a test (over stdio, and with `--http`), and the pinned Node tools that drive it:
//! Node 22, the official MCP conformance suite and the MCP Inspector (`tests/mcp/node/package.json` and its
//! lockfile).

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// A `toolwright mcp --http 127.0.0.1:0` process, killed when dropped.
pub struct HttpServer {
    child: Child,
    /// The endpoint it printed: `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl HttpServer {
    /// Start `binary mcp --http 127.0.0.1:0 ARGS…` and read the address it listens on.
    pub fn start(binary: &Path, args: &[&str]) -> HttpServer {
        let mut command = Command::new(binary);
        command.args(["mcp", "--http", "127.0.0.1:0"]).args(args);
        Self::start_command(command)
    }

    /// Start `binary mcp --http 127.0.0.1:0 ARGS…` with at most `files` open files (`ulimit -n`).
    pub fn start_with_file_limit(binary: &Path, files: u32, args: &[&str]) -> HttpServer {
        let mut command = Command::new("sh");
        command
            .args(["-c", &format!("ulimit -n {files} && exec \"$0\" \"$@\"")])
            .arg(binary)
            .args(["mcp", "--http", "127.0.0.1:0"])
            .args(args);
        Self::start_command(command)
    }

    /// Start `command` (a `toolwright mcp --http` that prints its address first) and read the address.
    pub fn start_command(mut command: Command) -> HttpServer {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start toolwright mcp --http");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("piped stdout");
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the address line");
        let url = line
            .trim()
            .strip_prefix("Listening on ")
            .unwrap_or_else(|| panic!("`toolwright mcp --http` printed {line:?}, not its address"))
            .to_owned();
        HttpServer { child, url }
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Send SIGTERM and wait for the exit; the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().expect("wait for the server")
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The directory (under `target_tmp`, an integration test's `CARGO_TARGET_TMPDIR`) with the pinned Node packages
/// installed (`npm ci`, once per lockfile), whose `node_modules/.bin` holds `node` (22), `conformance` and
/// `mcp-inspector`. Needs `npm` and the npm registry on first use.
pub fn node_tools(target_tmp: &Path) -> PathBuf {
    npm_packages(target_tmp, "mcp/node", "mcp-node")
}

/// The Node packages pinned by `tests/<manifest>/package{,-lock}.json`, installed with `npm ci` into
/// `target_tmp/<name>` once per lockfile: that directory. Needs `npm` and the npm registry on first use.
pub fn npm_packages(target_tmp: &Path, manifest: &str, name: &str) -> PathBuf {
    // The tests of one binary run in parallel: one installs, the others wait.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _installing = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest);
    let lock = std::fs::read(source.join("package-lock.json"))
        .unwrap_or_else(|e| panic!("tests/{manifest}/package-lock.json: {e}"));
    let dir = target_tmp.join(name);
    let stamp = dir.join("installed.lock");
    if std::fs::read(&stamp).is_ok_and(|installed| installed == lock) {
        return dir;
    }
    std::fs::create_dir_all(&dir).expect("make the Node packages' directory");
    for file in ["package.json", "package-lock.json"] {
        std::fs::copy(source.join(file), dir.join(file)).expect("copy the Node manifest");
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
        .current_dir(&dir)
        .status()
        .expect("run npm (install it: apt-get install npm)");
    assert!(
        status.success(),
        "`npm ci` in {} failed (the npm registry must be reachable)",
        dir.display()
    );
    std::fs::write(&stamp, lock).expect("mark the Node packages installed");
    dir
}

/// A Python virtual environment under `target_tmp/<name>` with `package` (a pip requirement such as
/// `componentize-py==0.25.1`) installed once: the environment's directory (`bin/python`, `bin/<script>`). Made
/// with `TOOLWRIGHT_PYTHON` when set, else `python3`. Needs PyPI on first use.
pub fn python_venv(target_tmp: &Path, name: &str, package: &str) -> PathBuf {
    // The tests of one binary run in parallel: one installs, the others wait.
    static INSTALLING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _installing = INSTALLING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let venv = target_tmp.join(name);
    let marker = venv.join(format!("{package}.installed"));
    if marker.exists() {
        return venv;
    }
    let base = std::env::var("TOOLWRIGHT_PYTHON").unwrap_or_else(|_| "python3".into());
    let status = Command::new(&base)
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .status()
        .unwrap_or_else(|e| panic!("cannot run `{base}` to make a virtual environment: {e}"));
    assert!(status.success(), "`{base} -m venv {}` failed", venv.display());
    let status = Command::new(venv.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            package,
        ])
        .status()
        .expect("run pip");
    assert!(
        status.success(),
        "`pip install {package}` failed (PyPI must be reachable)"
    );
    std::fs::write(&marker, "").expect("mark the virtual environment installed");
    venv
}

/// A command running one of the Node tools' binaries, with Node 22 first on `PATH`.
pub fn node_command(tools: &Path, binary: &str) -> Command {
    let bin = tools.join("node_modules/.bin");
    let path = std::env::var("PATH").unwrap_or_default();
    let mut command = Command::new(bin.join(binary));
    command.env("PATH", format!("{}:{path}", bin.display()));
    command
}

/// `toolwright mcp` over stdio, initialised (as a 2025-06-18 client), killed when dropped.
pub struct StdioServer {
    child: Child,
    stdin: Option<std::process::ChildStdin>,
    stdout: BufReader<std::process::ChildStdout>,
    /// Responses read while waiting for another one.
    early: std::collections::HashMap<i64, Value>,
    /// The notifications read so far.
    pub notifications: Vec<Value>,
}

impl StdioServer {
    /// Start `binary mcp --watch-plugins 0 ARGS…` and initialise it. `TOOLWRIGHT_TEST_LOG=debug` shows the
    /// server's log (its `TOOLWRIGHT_LOG`) on the test's stderr.
    pub fn start(binary: &Path, args: &[String]) -> StdioServer {
        Self::start_with(
            Command::new(binary)
                .args(["mcp", "--watch-plugins", "0"])
                .args(args),
        )
    }

    /// [`StdioServer::start`] for a command already given its arguments and environment.
    pub fn start_with(command: &mut Command) -> StdioServer {
        Self::start_as(command, "2025-06-18", json!({}))
    }

    /// [`StdioServer::start_with`], initialised at `revision` by a client that declares `capabilities`.
    pub fn start_as(command: &mut Command, revision: &str, capabilities: Value) -> StdioServer {
        let log = std::env::var_os("TOOLWRIGHT_TEST_LOG");
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match log {
                Some(_) => Stdio::inherit(),
                None => Stdio::null(),
            })
            .env(
                "TOOLWRIGHT_LOG",
                std::env::var_os("TOOLWRIGHT_TEST_LOG").unwrap_or_default(),
            )
            .spawn()
            .expect("toolwright mcp starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let mut server = StdioServer {
            child,
            stdin,
            stdout,
            early: Default::default(),
            notifications: Vec::new(),
        };
        server.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": capabilities,
            "clientInfo": {"name": "toolwright-tests", "version": "1"}}}),
        );
        let init = server.response(0);
        assert_eq!(init["result"]["serverInfo"]["name"], "toolwright", "{init}");
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    /// Send one message.
    pub fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").expect("the server reads its input");
        stdin.flush().expect("the server reads its input");
    }

    /// Send `tools/call` of `tool` with `args` as request `id`, without waiting.
    pub fn call(&mut self, id: i64, tool: &str, args: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}}));
    }

    /// The response with `id`, keeping notifications and other responses for later.
    pub fn response(&mut self, id: i64) -> Value {
        self.response_answering(id, &mut |method, _| {
            panic!("the server asked {method} of a client that answers nothing")
        })
    }

    /// [`StdioServer::response`], answering each request the server sends meanwhile with the result `answer`
    /// gives for its method and parameters.
    pub fn response_answering(&mut self, id: i64, answer: &mut dyn FnMut(&str, &Value) -> Value) -> Value {
        if let Some(message) = self.early.remove(&id) {
            return message;
        }
        loop {
            let mut line = String::new();
            let read = self
                .stdout
                .read_line(&mut line)
                .expect("the server's output reads");
            assert!(read > 0, "the server closed its output");
            let message: Value = serde_json::from_str(&line).expect("a JSON-RPC message per line");
            if let (Some(method), Some(request)) = (message["method"].as_str(), message.get("id")) {
                let result = answer(method, &message["params"]);
                let reply = json!({"jsonrpc": "2.0", "id": request, "result": result});
                self.send(&reply);
                continue;
            }
            match message["id"].as_i64() {
                Some(found) if found == id => return message,
                Some(other) => {
                    self.early.insert(other, message);
                }
                None => self.notifications.push(message),
            }
        }
    }

    /// Whether a `notifications/tools/list_changed` has been read so far.
    pub fn told_tools_changed(&self) -> bool {
        self.notifications
            .iter()
            .any(|n| n["method"] == "notifications/tools/list_changed")
    }

    /// Whether the response with `id` has come already (read while waiting for another one).
    pub fn has_answered(&self, id: i64) -> bool {
        self.early.contains_key(&id)
    }

    /// Call and wait: (isError, the text blocks joined by newlines).
    pub fn run(&mut self, id: i64, tool: &str, args: Value) -> (bool, String) {
        self.call(id, tool, args);
        let answer = self.response(id);
        let result = &answer["result"];
        assert!(result.is_object(), "{answer}");
        (result["isError"] == true, crate::text_of(&result["content"]))
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A workspace (`a.txt`), and a plugin directory holding the wasm conformance plugin (`tests/programs/conformance`),
/// for the official suite's runs against `toolwright mcp` (both suite versions).
pub fn conformance_fixture() -> (tempfile::TempDir, tempfile::TempDir) {
    let workspace = tempfile::tempdir().expect("a temporary workspace");
    std::fs::write(workspace.path().join("a.txt"), "one\ntwo\n").expect("the workspace's a.txt");
    // The user's grant that lets the plugin ask the client's model (the sampling fixtures).
    std::fs::write(
        workspace.path().join(ASK_POLICY),
        "[ask]\nsampling = [\"toolwright-test-conformance\"]\n",
    )
    .expect("the policy file");
    let plugins = tempfile::tempdir().expect("a temporary plugin directory");
    std::fs::copy(
        crate::programs::CONFORMANCE,
        plugins.path().join("conformance.wasm"),
    )
    .expect("the conformance plugin copied");
    (workspace, plugins)
}

/// The policy file of [`conformance_fixture`]'s workspace: `[ask] sampling` for the conformance plugin.
pub const ASK_POLICY: &str = "ask-policy.toml";

/// `toolwright mcp`'s arguments for [`conformance_fixture`]: that workspace and its policy file, only those
/// plugins, this cache.
pub fn conformance_server_args(workspace: &Path, plugins: &Path, cache: &Path) -> Vec<String> {
    let text = |p: &Path| p.to_str().expect("a UTF-8 temporary path").to_owned();
    vec![
        "--cwd".into(),
        text(workspace),
        "--no-default-plugins".into(),
        "--plugins".into(),
        text(plugins),
        "--cache-dir".into(),
        text(cache),
        "--policy".into(),
        text(&workspace.join(ASK_POLICY)),
    ]
}

/// POST one 2026-07-28 `tools/call` of `tool` (no arguments) to `url` with `params` merged into its parameters, its
/// `_meta` declaring `capabilities`: (the HTTP status, the JSON-RPC response).
pub fn call_2026(url: &str, tool: &str, params: Value, capabilities: Value) -> (u16, Value) {
    let mut params = params;
    if params.get("arguments").is_none() {
        params["arguments"] = json!({});
    }
    request_2026(url, "tools/call", tool, params, capabilities)
}

/// POST one 2026-07-28 request of `method` for `name` (a tool's, a prompt's; a resource's URI for
/// `resources/read`) to `url` with `params` merged into its parameters, its `_meta` declaring `capabilities`: (the
/// HTTP status, the JSON-RPC response).
pub fn request_2026(url: &str, method: &str, name: &str, params: Value, capabilities: Value) -> (u16, Value) {
    let mut body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    }}});
    let key = if method == "resources/read" { "uri" } else { "name" };
    body["params"][key] = json!(name);
    for (key, value) in params.as_object().expect("params as an object") {
        body["params"][key] = value.clone();
    }
    let authority = url.trim_start_matches("http://").trim_end_matches("/mcp");
    let mut stream = std::net::TcpStream::connect(authority).expect("connect to the server");
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .expect("a read timeout");
    let body = body.to_string();
    let request = format!(
        "POST /mcp HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nMCP-Protocol-Version: 2026-07-28\r\n\
         Mcp-Method: {method}\r\nMcp-Name: {name}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).expect("send the request");
    let mut raw = String::new();
    stream.read_to_string(&mut raw).expect("read the response");
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no HTTP status in {head}"));
    let response = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: ").or(Some(l)))
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no response in {raw}"));
    (status, response)
}

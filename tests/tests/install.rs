//! Installing plugins people can trust over time (issue 18), through the command line with a HOME of its own:
//! `toolwright plugins add` installs a file, grants what was chosen and pins it; `toolwright.lock` records the
//! approval; a plugin whose file, capabilities or tool surface changed afterwards is held (its tools withheld,
//! under `exec` and under `mcp`) until `plugins approve`; `auto-approve = "same-surface"` lets a rebuilt file
//! with the same surface through, and nothing else; `update` and `remove` complete the set; a broken lockfile
//! stops the load rather than approving anything. A real OCI registry on loopback (Debian's `docker-registry`, which
//! `.ci/run` installs) takes `plugins publish`, `plugins add oci://…` and `plugins update` end to end.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::programs::{IMPOSTOR, PROBE};

struct User {
    home: tempfile::TempDir,
    ws: tempfile::TempDir,
}

impl User {
    fn new() -> User {
        let user = User {
            home: tempfile::tempdir().unwrap(),
            ws: tempfile::tempdir().unwrap(),
        };
        std::fs::write(user.ws.path().join("readme"), "hello").unwrap();
        user
    }

    fn config(&self) -> PathBuf {
        self.home.path().join(".config/toolwright")
    }

    fn installed(&self) -> PathBuf {
        self.config().join("plugins/toolwright-test-probe.wasm")
    }

    fn lockfile(&self) -> PathBuf {
        self.config().join("toolwright.lock")
    }

    fn policy(&self) -> PathBuf {
        self.config().join("toolwright.toml")
    }

    /// `toolwright ARGS` as this user (no terminal: nothing is asked).
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .args(args)
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"))
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// `toolwright ARGS`, which must succeed: its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "toolwright {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn cache(&self) -> String {
        test_cache_dir().to_string_lossy().into_owned()
    }

    /// The probe reading the workspace's readme under `toolwright exec`: (isError, text) and stderr.
    fn read_readme(&self) -> ((bool, String), String) {
        self.read_readme_with(&[])
    }

    /// [`User::read_readme`], with `extra` arguments to `exec`.
    fn read_readme_with(&self, extra: &[&str]) -> ((bool, String), String) {
        let calls = self.ws.path().join("calls.json");
        let target = self.ws.path().join("readme");
        let call = json!({"toolCalls": [{"id": "1", "name": "probe",
            "arguments": {"action": "read", "target": target}}]});
        std::fs::write(&calls, call.to_string()).unwrap();
        let cwd = self.ws.path().to_string_lossy().into_owned();
        let cache = self.cache();
        let mut args = vec![
            "exec",
            calls.to_str().unwrap(),
            "--json",
            "--cwd",
            &cwd,
            "--cache-dir",
            &cache,
        ];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let end: Value = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["type"] == "tool_execution_end")
            .unwrap();
        let text = end["result"]["content"][0]["text"].as_str().unwrap().to_owned();
        (
            (end["isError"] == true, text),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    /// The tools `toolwright mcp` lists to a client.
    fn mcp_tools(&self) -> Vec<String> {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
        command
            .args([
                "mcp",
                "--watch-plugins",
                "0",
                "--cache-dir",
                &self.cache(),
                "--cwd",
            ])
            .arg(self.ws.path())
            .env("HOME", self.home.path())
            .env("XDG_CONFIG_HOME", self.home.path().join(".config"));
        let mut mcp = toolwright_tests::mcp::StdioServer::start_with(&mut command);
        mcp.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        mcp.response(2)["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    }

    fn listing(&self) -> Output {
        let cwd = self.ws.path().to_string_lossy().into_owned();
        self.run(&["plugins", "--cwd", &cwd, "--cache-dir", &self.cache()])
    }
}

fn add(user: &User, file: &Path, extra: &[&str]) -> String {
    let mut args = vec!["plugins", "add", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    let cache = user.cache();
    args.extend(["--cache-dir", &cache]);
    user.ok(&args)
}

fn held_message(user: &User) -> String {
    let out = user.listing();
    assert_eq!(out.status.code(), Some(1), "a held plugin makes `plugins` fail");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn an_added_plugin_runs_with_what_was_granted_and_is_held_once_it_changes() {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    let added = add(&user, &source, &["--grant", "read=."]);
    assert!(
        added.contains("requests: read files below . (because: reads what the test asks)"),
        "{added}"
    );
    assert!(added.contains("granted: read files below ."), "{added}");
    let policy = std::fs::read_to_string(user.policy()).unwrap();
    assert!(
        policy.contains("[plugins.toolwright-test-probe]\nread = [\".\"]\nsha256 = \""),
        "{policy}"
    );
    let lock = std::fs::read_to_string(user.lockfile()).unwrap();
    assert!(
        lock.contains("[plugins.toolwright-test-probe.tools.probe]"),
        "{lock}"
    );
    assert_eq!(user.read_readme().0, (false, "read 5 bytes".into()));
    // Adding it twice is refused.
    let again = user.run(&["plugins", "add", source.to_str().unwrap()]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("is already installed"));

    // A rebuilt file, same surface (a custom section appended): held, since the policy does not say otherwise.
    let mut rebuilt = std::fs::read(PROBE).unwrap();
    rebuilt.extend_from_slice(&custom_section("toolwright-test", b"rebuilt"));
    std::fs::write(user.installed(), &rebuilt).unwrap();
    let ((is_error, text), stderr) = user.read_readme();
    assert!(is_error);
    assert_eq!(text, "Tool probe not found");
    assert!(
        stderr.contains("plugin `toolwright-test-probe` changed since it was approved (file digest changed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("toolwright plugins approve toolwright-test-probe"),
        "{stderr}"
    );
    assert!(stderr.contains("toolwright: held: "), "{stderr}");
    // Held is not missing: its policy section is no stray (the held line says why it does not run).
    assert!(!stderr.contains("no plugin loaded is named"), "{stderr}");
    assert!(!user.mcp_tools().contains(&"probe".to_owned()));
    // With auto-approve = "same-surface" it runs, with its grant.
    let mut with_auto = std::fs::read_to_string(user.policy()).unwrap();
    with_auto.insert_str(0, "auto-approve = \"same-surface\"\n\n");
    std::fs::write(user.policy(), &with_auto).unwrap();
    assert_eq!(user.read_readme().0, (false, "read 5 bytes".into()));
    assert!(user.mcp_tools().contains(&"probe".to_owned()));

    // Another plugin under the same name (the impostor: other descriptions and schema): held even so.
    std::fs::write(user.installed(), std::fs::read(IMPOSTOR).unwrap()).unwrap();
    let listing = held_message(&user);
    assert!(
        listing.contains("tool `probe`'s description changed"),
        "{listing}"
    );
    // The same for programs: `plugins --json` lists what is held, what changed and how to approve it.
    let cwd = user.ws.path().to_string_lossy().into_owned();
    let json = user.run(&["plugins", "--json", "--cwd", &cwd, "--cache-dir", &user.cache()]);
    let report: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(report["held"][0]["name"], "toolwright-test-probe");
    assert_eq!(
        report["held"][0]["approve"],
        "toolwright plugins approve toolwright-test-probe"
    );
    let changes: Vec<&str> = report["held"][0]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(changes.contains(&"tool `probe`'s schema changed"), "{changes:?}");
    assert!(listing.contains("tool `probe`'s schema changed"), "{listing}");
    assert!(
        listing.contains("capability no longer requested: write ./out"),
        "{listing}"
    );
    assert_eq!(user.read_readme().0.1, "Tool probe not found");
    // Approved, it runs: its grants are what they were, the pin and the lockfile now the new file's.
    let cache = user.cache();
    let approved = user.ok(&[
        "plugins",
        "approve",
        "toolwright-test-probe",
        "--cache-dir",
        &cache,
    ]);
    assert!(
        approved.contains("changed: tool `probe`'s description changed"),
        "{approved}"
    );
    // It names what stays granted (the grant stays: an approval never takes one back).
    assert!(
        approved.contains("granted: read files below . (as before)")
            && !approved.contains("granted: nothing"),
        "{approved}"
    );
    assert!(user.listing().status.success());
    assert_ne!(user.read_readme().0.1, "Tool probe not found");

    // Removed: file, section and approval.
    let removed = user.ok(&["plugins", "remove", "toolwright-test-probe"]);
    assert!(removed.contains("removed toolwright-test-probe"), "{removed}");
    assert!(!user.installed().exists());
    assert!(
        !std::fs::read_to_string(user.policy())
            .unwrap()
            .contains("[plugins.toolwright-test-probe]")
    );
    assert!(
        !std::fs::read_to_string(user.lockfile())
            .unwrap()
            .contains("toolwright-test-probe")
    );
    let again = user.run(&["plugins", "remove", "toolwright-test-probe"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("toolwright-test-probe is not installed"));
}

#[test]
fn update_installs_the_new_file_held_and_shrunk_capabilities_approve_themselves_only_when_allowed() {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &["--yes"]);
    let cache = user.cache();
    assert!(
        user.ok(&["plugins", "update", "--cache-dir", &cache])
            .contains("toolwright-test-probe: up to date")
    );
    // The source changes (a new release claiming the name): update fetches it, and it is held.
    std::fs::copy(IMPOSTOR, &source).unwrap();
    let updated = user.ok(&[
        "plugins",
        "update",
        "toolwright-test-probe",
        "--cache-dir",
        &cache,
    ]);
    assert!(
        updated.contains("changed: tool `probe`'s description changed"),
        "{updated}"
    );
    assert!(
        updated.contains("held until approved: toolwright plugins approve toolwright-test-probe"),
        "{updated}"
    );
    assert_eq!(
        std::fs::read(user.installed()).unwrap(),
        std::fs::read(IMPOSTOR).unwrap()
    );
    assert_eq!(user.read_readme().0.1, "Tool probe not found");

    // Back to the approved file, but the lockfile recorded one capability more than it asks for now (it shrank).
    std::fs::copy(PROBE, user.installed()).unwrap();
    let lock = std::fs::read_to_string(user.lockfile()).unwrap();
    let shrunk = lock.replacen(
        "capabilities = [",
        "capabilities = [\n    \"env SECRET_TOKEN\",",
        1,
    );
    assert_ne!(lock, shrunk);
    std::fs::write(user.lockfile(), shrunk).unwrap();
    let listing = held_message(&user);
    assert!(
        listing.contains("capability no longer requested: env SECRET_TOKEN"),
        "{listing}"
    );
    let policy = std::fs::read_to_string(user.policy()).unwrap();
    std::fs::write(
        user.policy(),
        format!("auto-approve = \"same-surface\"\n{policy}"),
    )
    .unwrap();
    assert_eq!(user.read_readme().0, (false, "read 5 bytes".into()));
}

#[test]
fn a_broken_lockfile_stops_the_load_and_a_project_cannot_auto_approve() {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &[]);
    std::fs::write(
        user.lockfile(),
        "version = 1\n[plugins.toolwright-test-probe]\nsha256 = 7\n",
    )
    .unwrap();
    let out = user.listing();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&user.lockfile().display().to_string()),
        "{stderr}"
    );

    // A project's toolwright.toml cannot switch auto-approval on for itself.
    let project = toolwright::policy::Policy::load_with_project(
        &[],
        Some(&write_file(
            user.ws.path(),
            "toolwright.toml",
            "auto-approve = \"same-surface\"\n",
        )),
        &user.ws.path().to_string_lossy(),
        None,
    )
    .unwrap();
    assert_eq!(project.auto_approve, None);
    assert!(
        project.ignored[0].starts_with("auto-approve"),
        "{:?}",
        project.ignored
    );
}

fn write_file(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

/// A custom section (id 0) named `name`: appended to a component, it changes the file, not what it does.
fn custom_section(name: &str, payload: &[u8]) -> Vec<u8> {
    fn leb(mut n: usize, out: &mut Vec<u8>) {
        loop {
            let byte = (n & 0x7f) as u8;
            n >>= 7;
            if n == 0 {
                out.push(byte);
                break;
            }
            out.push(byte | 0x80);
        }
    }
    let mut body = Vec::new();
    leb(name.len(), &mut body);
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut section = vec![0];
    leb(body.len(), &mut section);
    section.extend(body);
    section
}

/// A `docker-registry` serving on a free loopback port for one test; stopped when dropped.
struct Registry {
    child: std::process::Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    fn start() -> Registry {
        let dir = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: 127.0.0.1:{port}\n",
                dir.path().join("data").display()
            ),
        )
        .unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("run docker-registry (Debian's docker-registry package; .ci/run installs it)");
        let registry = Registry {
            child,
            port,
            _dir: dir,
        };
        for _ in 0..100 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return registry;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        panic!("docker-registry did not listen on 127.0.0.1:{port}");
    }

    fn reference(&self, repo: &str) -> String {
        format!("oci://127.0.0.1:{}/{repo}", self.port)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_plugin_from_a_real_registry_is_installed_pinned_and_held_after_a_release_that_asks_for_more() {
    let registry = Registry::start();
    let user = User::new();
    let cache = user.cache();
    let tag = registry.reference("toolwright/probe:latest");
    // Release 1 (the impostor build: few capabilities), published with our own client.
    let first = user.home.path().join("release-1.wasm");
    std::fs::copy(IMPOSTOR, &first).unwrap();
    let published = user.ok(&[
        "plugins",
        "publish",
        first.to_str().unwrap(),
        &tag,
        "--cache-dir",
        &cache,
    ]);
    assert!(
        published.contains(&format!(
            "published toolwright-test-probe 0.1.0 to {tag} (sha256:"
        )),
        "{published}"
    );
    let added = user.ok(&["plugins", "add", &tag, "--yes", "--cache-dir", &cache]);
    assert!(added.contains("installed toolwright-test-probe"), "{added}");
    let lock = std::fs::read_to_string(user.lockfile()).unwrap();
    assert!(lock.contains(&format!("source = \"{tag}\"")), "{lock}");
    assert!(lock.contains("resolved = \"sha256:"), "{lock}");
    assert_eq!(
        std::fs::read(user.installed()).unwrap(),
        std::fs::read(IMPOSTOR).unwrap()
    );
    assert_ne!(user.read_readme().0.1, "Tool probe not found");
    // Pinned by digest: the same digest installs the same bytes.
    let digest = published
        .rsplit_once("(sha256:")
        .unwrap()
        .1
        .split(')')
        .next()
        .unwrap()
        .to_owned();
    let by_digest = registry.reference(&format!("toolwright/probe@sha256:{digest}"));
    let other = User::new();
    other.ok(&["plugins", "add", &by_digest, "--cache-dir", &cache]);
    assert_eq!(
        std::fs::read(other.installed()).unwrap(),
        std::fs::read(IMPOSTOR).unwrap()
    );

    // Release 2 under the same tag asks for more (writes, programs) and describes its tool otherwise.
    let second = user.home.path().join("release-2.wasm");
    std::fs::copy(PROBE, &second).unwrap();
    let republished = user.ok(&[
        "plugins",
        "publish",
        second.to_str().unwrap(),
        &tag,
        "--cache-dir",
        &cache,
    ]);
    let second_digest = republished
        .rsplit_once("(sha256:")
        .unwrap()
        .1
        .split(')')
        .next()
        .unwrap()
        .to_owned();
    let updated = user.ok(&["plugins", "update", "--cache-dir", &cache]);
    // The approval stays release 1's; where the tag resolves now waits for approval beside it.
    let lock = std::fs::read_to_string(user.lockfile()).unwrap();
    assert!(
        lock.contains(&format!("resolved = \"sha256:{digest}\"")),
        "{lock}"
    );
    assert!(lock.contains(".fetched]"), "{lock}");
    assert!(
        lock.contains(&format!("resolved = \"sha256:{second_digest}\"")),
        "{lock}"
    );
    assert!(
        updated.contains("changed: new capability: write ./out"),
        "{updated}"
    );
    assert!(
        updated.contains("changed: tool `probe`'s description changed"),
        "{updated}"
    );
    // Held: under exec and under mcp, until approved.
    let ((is_error, text), stderr) = user.read_readme();
    assert!(is_error && text == "Tool probe not found", "{text}");
    assert!(stderr.contains("new capability: spawn /bin/echo"), "{stderr}");
    assert!(!user.mcp_tools().contains(&"probe".to_owned()));
    let approved = user.ok(&[
        "plugins",
        "approve",
        "toolwright-test-probe",
        "--cache-dir",
        &cache,
    ]);
    // What was granted stays granted (release 1's `read /`), and the approval says so; the new requests are not
    // granted.
    assert!(
        approved.contains("granted: read files below / (as before)")
            && !approved.contains("granted: nothing"),
        "{approved}"
    );
    assert!(
        !approved.contains("granted: write files below ./out"),
        "{approved}"
    );
    let lock = std::fs::read_to_string(user.lockfile()).unwrap();
    assert!(
        lock.contains(&format!("resolved = \"sha256:{second_digest}\"")),
        "{lock}"
    );
    assert!(!lock.contains("fetched") && !lock.contains(&digest), "{lock}");
    assert_eq!(user.read_readme().0, (false, "read 5 bytes".into()));
    assert!(user.mcp_tools().contains(&"probe".to_owned()));
    // (Only a loopback registry is spoken to in plain HTTP: `oci::tests`, without leaving loopback.)
}

/// `toolwright exec` of `calls` as `user`, compiling into the cache `cache`, with its info log on stderr: the
/// `tool_execution_end` events, and stderr.
fn exec_logged(user: &User, calls: Value, cache: &Path) -> (Vec<Value>, String) {
    exec_logged_with(user, calls, cache, &[])
}

/// [`exec_logged`] with more arguments.
fn exec_logged_with(user: &User, calls: Value, cache: &Path, extra: &[&str]) -> (Vec<Value>, String) {
    let file = user.ws.path().join("calls.json");
    std::fs::write(&file, calls.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args(["exec", "--json"])
        .args(extra)
        .arg("--cwd")
        .arg(user.ws.path())
        .arg("--cache-dir")
        .arg(cache)
        .arg(&file)
        .env("HOME", user.home.path())
        .env("XDG_CONFIG_HOME", user.home.path().join(".config"))
        .env("TOOLWRIGHT_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let ends = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "tool_execution_end")
        .collect();
    (ends, String::from_utf8(out.stderr).unwrap())
}

/// (isError, text) of the call `id` among `ends`.
fn end_text<'a>(ends: &'a [Value], id: &str) -> (bool, &'a str) {
    let end = ends.iter().find(|e| e["toolCallId"] == id).unwrap();
    (
        end["isError"] == true,
        end["result"]["content"][0]["text"].as_str().unwrap(),
    )
}

const COMPILING: &str = "not in the cache: compiling in the background";
const WAITS: &str = "the batch waits for the plugins compiling in the background: toolwright-test-probe";

#[test]
fn an_installed_plugin_not_in_the_cache_compiles_in_the_background_and_only_batches_that_may_reach_it_wait() {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &["--grant", "read=."]);
    let probe_call = || {
        let target = user.ws.path().join("readme");
        json!({"id": "p", "name": "probe", "arguments": {"action": "read", "target": target}})
    };
    let ls = json!({"id": "l", "name": "ls", "arguments": {}});

    // A machine whose cache does not hold it (a new machine, a cleared cache, a new toolwright): a batch of
    // built-ins runs without it, and a call to a tool nobody has is `not found` at once, as it would be anyway.
    let cold = tempfile::tempdir().unwrap();
    let nobody = json!({"id": "n", "name": "nobody", "arguments": {}});
    let (ends, stderr) = exec_logged(&user, json!({"toolCalls": [ls, nobody]}), cold.path());
    assert!(stderr.contains(COMPILING), "{stderr}");
    assert!(!stderr.contains("the batch waits"), "{stderr}");
    assert!(!end_text(&ends, "l").0);
    assert!(end_text(&ends, "l").1.contains("readme"), "{ends:?}");
    assert_eq!(end_text(&ends, "n"), (true, "Tool nobody not found"));
    // exec finished the compile before it exited: the next start finds it cached and defers nothing.
    let (ends, stderr) = exec_logged(&user, json!({"toolCalls": [probe_call()]}), cold.path());
    assert!(!stderr.contains(COMPILING), "{stderr}");
    assert_eq!(end_text(&ends, "p"), (false, "read 5 bytes"));

    // A batch that calls its tool waits for it, and runs it as a cached start would, beside the built-ins.
    let cold = tempfile::tempdir().unwrap();
    let (ends, stderr) = exec_logged(&user, json!({"toolCalls": [ls, probe_call()]}), cold.path());
    assert!(stderr.contains(COMPILING) && stderr.contains(WAITS), "{stderr}");
    assert_eq!(end_text(&ends, "p"), (false, "read 5 bytes"));
    assert!(!end_text(&ends, "l").0);

    // A tool that may reach other tools (codemode, tool_search) waits too: nothing the batch runs meets a
    // toolset without the plugin.
    let cold = tempfile::tempdir().unwrap();
    let search = json!({"id": "s", "name": "tool_search", "arguments": {"query": "probe"}});
    let (_, stderr) = exec_logged(&user, json!({"toolCalls": [search]}), cold.path());
    assert!(stderr.contains(WAITS), "{stderr}");

    // A lockfile that calls the plugin a handler (an odd one: it is none) makes every batch wait for it, even one
    // of built-ins: a handler is in every call's path. It is loaded before the batch runs, and held for the
    // difference.
    let approved = std::fs::read_to_string(user.lockfile()).unwrap();
    assert!(approved.contains("handler = false"), "{approved}");
    std::fs::write(
        user.lockfile(),
        approved.replace("handler = false", "handler = true"),
    )
    .unwrap();
    let cold = tempfile::tempdir().unwrap();
    let (_, stderr) = exec_logged(&user, json!({"toolCalls": [ls]}), cold.path());
    assert!(stderr.contains(COMPILING) && stderr.contains(WAITS), "{stderr}");
    assert!(stderr.contains("it is no longer a handler plugin"), "{stderr}");
    std::fs::write(user.lockfile(), approved).unwrap();

    // The lockfile's word is taken only for the file it approved: another file under the plugin's name is
    // loaded (and held) before any call, whatever the cache holds.
    let mut rebuilt = std::fs::read(PROBE).unwrap();
    rebuilt.extend_from_slice(&custom_section("toolwright-test", b"background"));
    std::fs::write(user.installed(), &rebuilt).unwrap();
    let cold = tempfile::tempdir().unwrap();
    let (ends, stderr) = exec_logged(&user, json!({"toolCalls": [ls, probe_call()]}), cold.path());
    assert!(!stderr.contains(COMPILING), "{stderr}");
    assert!(
        stderr.contains("plugin `toolwright-test-probe` changed since it was approved"),
        "{stderr}"
    );
    assert_eq!(end_text(&ends, "p"), (true, "Tool probe not found"));
}

#[test]
fn a_plugin_whose_tool_takes_a_name_the_toolset_has_is_not_left_out_while_it_compiles() {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &["--grant", "read=."]);
    // Another plugin (not installed, so loaded at once) offers a tool of the same name: were the installed one
    // left out while it compiles, `probe` would mean the other plugin's tool first and its own later.
    let other = tempfile::tempdir().unwrap();
    std::fs::copy(IMPOSTOR, other.path().join("impostor.wasm")).unwrap();
    let cold = tempfile::tempdir().unwrap();
    let ls = json!({"id": "l", "name": "ls", "arguments": {}});
    let dir = other.path().to_str().unwrap();
    let (ends, stderr) = exec_logged_with(
        &user,
        json!({"toolCalls": [ls]}),
        cold.path(),
        &["--plugins", dir],
    );
    assert!(!end_text(&ends, "l").0);
    // Both were loaded before the batch: the clash between them is reported at start, the installed one first
    // in load order keeps the name.
    assert!(
        stderr.contains("is already loaded from") || stderr.contains("is already provided by"),
        "{stderr}"
    );
    assert!(stderr.contains("impostor.wasm"), "{stderr}");
}

/// A user with the probe installed (granted `read=.`) and `toolwright mcp` started for them on an empty component
/// cache (kept alive by the returned directory), watching its plugins every `watch_ms`: the probe compiles in the
/// background.
fn mcp_with_probe_compiling(watch_ms: u64) -> (User, tempfile::TempDir, toolwright_tests::mcp::StdioServer) {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &["--grant", "read=."]);
    let cold = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    command
        .args(["mcp", "--watch-plugins", &watch_ms.to_string(), "--cache-dir"])
        .arg(cold.path())
        .arg("--cwd")
        .arg(user.ws.path())
        .env("HOME", user.home.path())
        .env("XDG_CONFIG_HOME", user.home.path().join(".config"));
    let mcp = toolwright_tests::mcp::StdioServer::start_with(&mut command);
    (user, cold, mcp)
}

#[test]
fn an_mcp_server_answers_before_an_installed_plugin_compiles_and_lists_its_tools_once_it_has() {
    let (user, _cold, mut mcp) = mcp_with_probe_compiling(50);
    let names = |mcp: &mut toolwright_tests::mcp::StdioServer, id: i64| -> Vec<String> {
        mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
        mcp.response(id)["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names(&mut mcp, 1).contains(&"ls".to_owned()));
    // Its tools join the list once compiled (within a minute even on a loaded machine), and the client is told.
    let mut id = 2;
    while !names(&mut mcp, id).contains(&"probe".to_owned()) {
        assert!(id < 1200, "the probe's tools never joined the list");
        id += 1;
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let target = user.ws.path().join("readme");
    let (is_error, text) = mcp.run(id + 1, "probe", json!({"action": "read", "target": target}));
    assert_eq!((is_error, text.as_str()), (false, "read 5 bytes"));
    assert!(mcp.told_tools_changed(), "{:?}", mcp.notifications);
}

#[test]
fn an_mcp_call_of_a_plugin_still_compiling_waits_for_it_while_calls_of_built_ins_answer_at_once() {
    // The watcher's own pass comes only after a minute: the call must bring the plugin in itself.
    let (user, _cold, mut mcp) = mcp_with_probe_compiling(60_000);
    let target = user.ws.path().join("readme");
    mcp.call(1, "probe", json!({"action": "read", "target": target}));
    mcp.call(2, "ls", json!({}));
    mcp.call(3, "nobody", json!({}));
    // The built-in and the unknown tool answer while the probe compiles (a compile takes a tenth of a second
    // or more; an `ls` a millisecond).
    let ls = mcp.response(2);
    assert_eq!(ls["result"]["isError"], false, "{ls}");
    let nobody = mcp.response(3);
    assert_eq!(nobody["error"]["message"], "Tool nobody not found", "{nobody}");
    assert!(
        !mcp.has_answered(1),
        "the probe's call answered before the built-in's"
    );
    let probe = mcp.response(1);
    assert_eq!(probe["result"]["isError"], false, "{probe}");
    assert_eq!(
        toolwright_tests::text_of(&probe["result"]["content"]),
        "read 5 bytes"
    );
    // The plugin's tools joined the list when the call brought them in, and the client was told.
    mcp.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
    let names = mcp.response(4)["result"]["tools"].to_string();
    assert!(names.contains("\"probe\""), "{names}");
    assert!(mcp.told_tools_changed(), "{:?}", mcp.notifications);
}

#[test]
fn an_mcp_call_cancelled_while_it_waits_for_a_compile_leaves_the_server_serving() {
    let (user, _cold, mut mcp) = mcp_with_probe_compiling(60_000);
    let target = user.ws.path().join("readme");
    let read = json!({"action": "read", "target": target});
    // Cancelled at once, most likely while it waits for the compile (if the compile won the race, it answers).
    mcp.call(1, "probe", read.clone());
    mcp.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1, "reason": "the user moved on"}}));
    // The next call of the same tool waits for the same compile and runs; the built-ins answer throughout.
    let (is_error, text) = mcp.run(2, "ls", json!({}));
    assert!(!is_error && text.contains("readme"), "{text}");
    let (is_error, text) = mcp.run(3, "probe", read);
    assert_eq!((is_error, text.as_str()), (false, "read 5 bytes"));
}

/// A user with the `guard` handler (`plugins/examples/guard`) and the probe (granted `read=.`) installed.
fn user_with_guard_and_probe() -> User {
    let user = User::new();
    let (_, guard) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| *name == "toolwright-example-guard")
        .unwrap();
    let guard_file = user.home.path().join("guard.wasm");
    std::fs::write(&guard_file, guard).unwrap();
    add(&user, &guard_file, &[]);
    let probe_file = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &probe_file).unwrap();
    add(&user, &probe_file, &["--grant", "read=."]);
    user
}

/// Compiles into `cache` held up: the cache's compile lock taken, as another process compiling would hold it,
/// until the returned file is dropped. Compiles done ahead of need wait for it; nothing else does.
fn compiles_held(cache: &Path) -> std::fs::File {
    let lock = std::fs::File::create(cache.join(toolwright::wasm::COMPILE_LOCK_FILE)).unwrap();
    lock.lock().unwrap();
    lock
}

/// The compiled components in `cache`.
fn compiled(cache: &Path) -> Vec<String> {
    toolwright::wasm::cache_entries(cache)
        .unwrap()
        .into_iter()
        .map(|e| e.digest)
        .collect()
}

/// The names `tools/list` (request `id`) gives.
fn tool_names(mcp: &mut toolwright_tests::mcp::StdioServer, id: i64) -> Vec<String> {
    mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
    mcp.response(id)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect()
}

/// `toolwright mcp` for `user` on `cache`: a call waits at most a second for the plugins it needs, a listing
/// half a second after the start.
fn mcp_on(user: &User, cache: &Path) -> toolwright_tests::mcp::StdioServer {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    command
        .args([
            "mcp",
            "--watch-plugins",
            "50",
            "--call-wait",
            "1",
            "--list-wait",
            "500",
        ])
        .arg("--cache-dir")
        .arg(cache)
        .arg("--cwd")
        .arg(user.ws.path())
        .env("HOME", user.home.path())
        .env("XDG_CONFIG_HOME", user.home.path().join(".config"));
    toolwright_tests::mcp::StdioServer::start_with(&mut command)
}

/// Call `tool` with `args` (ids from `id` on) until it no longer answers that the plugins it waits for are
/// still compiling (a minute at most): its (isError, text).
fn run_once_compiled(
    mcp: &mut toolwright_tests::mcp::StdioServer,
    id: &mut i64,
    tool: &str,
    args: &Value,
) -> (bool, String) {
    for _ in 0..60 {
        *id += 1;
        let (is_error, text) = mcp.run(*id, tool, args.clone());
        if !text.contains("still compiling") {
            return (is_error, text);
        }
    }
    panic!("{tool} still waits for its plugins after a minute");
}

#[test]
fn a_cold_mcp_start_answers_at_once_with_a_handler_installed_and_calls_wait_for_it() {
    let user = user_with_guard_and_probe();
    let cold = tempfile::tempdir().unwrap();
    let held = compiles_held(cold.path());
    let target = user.ws.path().join("readme");
    let read = json!({"action": "read", "target": target});
    let delete = json!({"command": "rm -rf nothing"});

    // A new machine: nothing cached. The server answers `initialize` while every compile is held up, so no
    // compile came before it: neither the handler's (in every call's path) nor the probe's.
    let mut mcp = mcp_on(&user, cold.path());
    assert_eq!(compiled(cold.path()), Vec::<String>::new());
    // The probe's tools are not known before it compiles: the listing waits a while, then lists the rest.
    let names = tool_names(&mut mcp, 1);
    assert!(
        names.contains(&"ls".to_owned()) && !names.contains(&"probe".to_owned()),
        "{names:?}"
    );
    // A call waits for the handler, then says what it waits for.
    let (is_error, text) = mcp.run(2, "ls", json!({}));
    assert!(is_error, "{text}");
    assert!(
        text.starts_with(
            "The call of ls did not run: the plugins it waits for are still compiling after 1 s"
        ) && text.contains("toolwright-example-guard"),
        "{text}"
    );
    // Once compiles go on, the handler joins the calls' path, and the probe the list.
    drop(held);
    let mut id = 2;
    let (is_error, text) = run_once_compiled(&mut mcp, &mut id, "bash", &delete);
    assert_eq!(
        (is_error, text.as_str()),
        (true, "guard: recursive deletes are not allowed")
    );
    assert_eq!(
        run_once_compiled(&mut mcp, &mut id, "probe", &read),
        (false, "read 5 bytes".into())
    );
    assert!(tool_names(&mut mcp, id + 1).contains(&"probe".to_owned()));
    drop(mcp);
    assert_eq!(compiled(cold.path()).len(), 2);

    // A cleared cache (or a new engine): the plugins' descriptions stay, so their tools are listed at once,
    // while their code compiles (held up again, so nothing compiled before `initialize` or the listing).
    user.ok(&["cache", "clear", "--cache-dir", cold.path().to_str().unwrap()]);
    let held = compiles_held(cold.path());
    let mut mcp = mcp_on(&user, cold.path());
    assert_eq!(compiled(cold.path()), Vec::<String>::new());
    let names = tool_names(&mut mcp, 1);
    assert!(names.contains(&"probe".to_owned()), "{names:?}");
    let (is_error, text) = mcp.run(2, "probe", read.clone());
    assert!(is_error && text.contains("still compiling after 1 s"), "{text}");
    assert!(
        text.contains("toolwright-example-guard") && text.contains("toolwright-test-probe"),
        "{text}"
    );
    drop(held);
    let mut id = 2;
    assert_eq!(
        run_once_compiled(&mut mcp, &mut id, "probe", &read),
        (false, "read 5 bytes".into())
    );
    let (is_error, text) = run_once_compiled(&mut mcp, &mut id, "bash", &delete);
    assert_eq!(
        (is_error, text.as_str()),
        (true, "guard: recursive deletes are not allowed")
    );
}

#[test]
fn exec_on_a_cleared_cache_compiles_only_what_its_batch_calls() {
    let user = user_with_guard_and_probe();
    let cold = tempfile::tempdir().unwrap();
    let ls = json!({"id": "l", "name": "ls", "arguments": {}});
    let (ends, _) = exec_logged(&user, json!({"toolCalls": [ls]}), cold.path());
    assert!(!end_text(&ends, "l").0);
    assert_eq!(
        compiled(cold.path()).len(),
        2,
        "a new machine compiles what it installed"
    );
    user.ok(&["cache", "clear", "--cache-dir", cold.path().to_str().unwrap()]);
    // Described in the cache, neither plugin compiles at the start: `ls` meets the handler (compiled for it), and
    // nothing calls the probe.
    let (ends, stderr) = exec_logged(&user, json!({"toolCalls": [ls]}), cold.path());
    assert!(!end_text(&ends, "l").0);
    assert!(!stderr.contains(COMPILING), "{stderr}");
    assert_eq!(compiled(cold.path()).len(), 1);
}

/// The impostor component with its metadata name `toolwright-test-probe` replaced by `name` (as long), as a
/// hostile author would name a plugin.
fn renamed(name: &str) -> Vec<u8> {
    let claimed = b"toolwright-test-probe";
    assert_eq!(
        name.len(),
        claimed.len(),
        "{name:?} must be as long as the name it replaces"
    );
    let mut bytes = std::fs::read(IMPOSTOR).unwrap();
    let mut found = 0;
    let mut i = 0;
    while i + claimed.len() <= bytes.len() {
        if &bytes[i..i + claimed.len()] == claimed {
            bytes[i..i + claimed.len()].copy_from_slice(name.as_bytes());
            found += 1;
            i += claimed.len();
        } else {
            i += 1;
        }
    }
    assert!(found > 0, "the impostor no longer holds its claimed name");
    bytes
}

/// The files below `dir`, as sorted relative paths (links not followed).
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let path = entry.unwrap().path();
            out.push(path.strip_prefix(dir).unwrap().to_string_lossy().into_owned());
            if std::fs::symlink_metadata(&path).unwrap().is_dir() {
                stack.push(path);
            }
        }
    }
    out.sort();
    out
}

const BAD_NAME_RULES: &str = "(a plugin name is 1 to 128 ASCII letters, digits, `_` or `-`, as a tool name, and names its \
     file in the plugin directory)";

#[test]
fn a_plugin_whose_name_is_a_path_or_holds_a_newline_is_not_installed_anywhere() {
    let user = User::new();
    let before = tree(user.home.path());
    for (name, shown, why) in [
        ("../../escaped-by-name", "../../escaped-by-name", "it is a path"),
        (
            "x\ninstalled probe-ok ",
            "x\\ninstalled probe-ok ",
            "it holds control characters",
        ),
    ] {
        let source = user.ws.path().join("hostile.wasm");
        std::fs::write(&source, renamed(name)).unwrap();
        let cache = user.cache();
        let out = user.run(&[
            "plugins",
            "add",
            source.to_str().unwrap(),
            "--yes",
            "--cache-dir",
            &cache,
        ]);
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("toolwright: the plugin's name `{shown}` cannot be installed: {why} {BAD_NAME_RULES}\n")
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "");
    }
    // A source that never ends is not read.
    let out = user.run(&["plugins", "add", "/dev/zero"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "toolwright: /dev/zero is not a regular file\n"
    );
    // Nothing was written: not beside the plugin directory, not in it (its temporary file is gone), no policy.
    let after: Vec<String> = tree(user.home.path())
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(
        after,
        [".config", ".config/toolwright", ".config/toolwright/plugins"]
    );
    // The next installation works.
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    assert!(add(&user, &source, &[]).contains("installed toolwright-test-probe"));
}

/// A user with the probe installed into the project (`--project`): (user, the workspace as an argument).
fn project_with_probe() -> (User, String) {
    let user = User::new();
    let cwd = user.ws.path().to_string_lossy().into_owned();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &["--project", "--cwd", &cwd, "--grant", "read=."]);
    (user, cwd)
}

#[test]
fn a_project_lockfile_naming_another_file_makes_remove_and_update_touch_nothing() {
    let (user, cwd) = project_with_probe();
    let cache = user.cache();
    let lockfile = user.ws.path().join("toolwright.lock");
    let installed = user
        .ws
        .path()
        .join(".toolwright/plugins/toolwright-test-probe.wasm");
    let approved = std::fs::read_to_string(&lockfile).unwrap();
    let file_line = format!("file = \"{}\"", installed.display());
    assert!(approved.contains(&file_line), "{approved}");
    // The user's own file, and a plugin file planted in the user's trusted plugin directory.
    let victim = user.home.path().join("notes.txt");
    std::fs::write(&victim, "precious").unwrap();
    let planted = user.config().join("plugins/planted.wasm");
    for (target, command) in [(&victim, "remove"), (&planted, "update")] {
        let hostile = approved.replace(&file_line, &format!("file = \"{}\"", target.display()));
        std::fs::write(&lockfile, &hostile).unwrap();
        let policy = std::fs::read_to_string(user.ws.path().join("toolwright.toml")).unwrap();
        let mut args = vec!["plugins", command];
        if command == "remove" {
            args.push("toolwright-test-probe");
        }
        args.extend(["--project", "--cwd", &cwd, "--cache-dir", &cache]);
        let out = user.run(&args);
        assert!(!out.status.success(), "{command}");
        let said = format!(
            "toolwright-test-probe's entry in {} names the file {}, not {} where the installer puts \
             toolwright-test-probe: nothing was changed (edit or remove the entry by hand)",
            lockfile.display(),
            target.display(),
            installed.display()
        );
        let text = String::from_utf8_lossy(if command == "remove" {
            &out.stderr
        } else {
            &out.stdout
        });
        assert!(text.contains(&said), "{command}: {text}");
        // Nothing touched: the victim, the lockfile, the policy, the installed plugin; nothing planted.
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
        assert!(!planted.exists(), "{command} planted {}", planted.display());
        assert_eq!(std::fs::read_to_string(&lockfile).unwrap(), hostile);
        assert_eq!(
            std::fs::read_to_string(user.ws.path().join("toolwright.toml")).unwrap(),
            policy
        );
        assert_eq!(std::fs::read(&installed).unwrap(), std::fs::read(PROBE).unwrap());
    }
    // With its own entry back, remove removes what the installer installed.
    std::fs::write(&lockfile, &approved).unwrap();
    let removed = user.ok(&[
        "plugins",
        "remove",
        "toolwright-test-probe",
        "--project",
        "--cwd",
        &cwd,
    ]);
    assert!(
        removed.contains(&format!("deleted {}", installed.display())),
        "{removed}"
    );
    assert!(!installed.exists());
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious");
}

#[test]
fn links_a_project_ships_are_never_followed_by_the_installer() {
    let user = User::new();
    let cwd = user.ws.path().to_string_lossy().into_owned();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    // Temporary names the installer once used, as links to the user's files.
    let victims: Vec<PathBuf> = ["lock-victim", "toml-victim"]
        .iter()
        .map(|n| write_file(user.home.path(), n, "precious"))
        .collect();
    std::os::unix::fs::symlink(&victims[0], user.ws.path().join("toolwright.lock.tmp")).unwrap();
    std::os::unix::fs::symlink(&victims[1], user.ws.path().join("toolwright.toml.tmp")).unwrap();
    let added = add(&user, &source, &["--project", "--cwd", &cwd, "--grant", "read=."]);
    assert!(added.contains("installed toolwright-test-probe"), "{added}");
    for victim in &victims {
        assert_eq!(std::fs::read_to_string(victim).unwrap(), "precious");
    }
    let policy = std::fs::read_to_string(user.ws.path().join("toolwright.toml")).unwrap();
    assert!(policy.contains("[plugins.toolwright-test-probe]"), "{policy}");
    assert!(
        !std::fs::symlink_metadata(user.ws.path().join("toolwright.toml"))
            .unwrap()
            .is_symlink()
    );

    // The policy, the lockfile or the plugin directory as links (to the user's own policy, say): refused, and
    // what they point to is left as it was.
    let cache = user.cache();
    let users_policy = write_file(user.home.path(), "users-policy.toml", "# mine\n");
    for (link, target) in [
        ("toolwright.toml", users_policy.clone()),
        ("toolwright.lock", users_policy.clone()),
        (".toolwright", user.home.path().to_path_buf()),
    ] {
        let other = User::new();
        let cwd = other.ws.path().to_string_lossy().into_owned();
        let path = other.ws.path().join(link);
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let out = other.run(&[
            "plugins",
            "add",
            source.to_str().unwrap(),
            "--project",
            "--cwd",
            &cwd,
            "--yes",
            "--cache-dir",
            &cache,
        ]);
        assert_eq!(out.status.code(), Some(2), "{link}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!(
                "toolwright: {} is a symbolic link: the installer does not follow links in a project (replace it with \
                 the file or directory it points to)\n",
                path.display()
            ),
            "{link}"
        );
        assert_eq!(std::fs::read_to_string(&users_policy).unwrap(), "# mine\n");
        assert!(!user.home.path().join("plugins").exists());
    }
}

#[test]
fn a_plugin_from_a_registry_whose_name_is_a_path_is_not_installed() {
    let registry = Registry::start();
    let user = User::new();
    let cache = user.cache();
    let tag = registry.reference("toolwright/escaped:latest");
    let file = user.ws.path().join("hostile.wasm");
    std::fs::write(&file, renamed("../../escaped-by-name")).unwrap();
    let published = user.ok(&[
        "plugins",
        "publish",
        file.to_str().unwrap(),
        &tag,
        "--cache-dir",
        &cache,
    ]);
    assert!(
        published.starts_with("published ../../escaped-by-name 0.1.0 to "),
        "{published}"
    );
    let before = tree(user.home.path());
    let out = user.run(&["plugins", "add", &tag, "--yes", "--cache-dir", &cache]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "toolwright: the plugin's name `../../escaped-by-name` cannot be installed: it is a path {BAD_NAME_RULES}\n"
        )
    );
    let after: Vec<String> = tree(user.home.path())
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(
        after,
        [".config", ".config/toolwright", ".config/toolwright/plugins"]
    );
}

/// A registry stub on loopback that lies: its manifest declares a wasm layer of 1 000 bytes, and the layer's
/// blob streams without end (up to `limit` bytes, so that a client that reads it all still ends). Returns its
/// port and the count of layer bytes it managed to send.
fn lying_registry(limit: u64) -> (u16, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    use std::io::{BufRead, BufReader, Write};
    use std::sync::atomic::Ordering;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let sent = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counter = sent.clone();
    let config = b"{}";
    let config_digest = toolwright::trust::identity::hex(&sha256(config));
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.wasm.config.v0+json", "digest": format!("sha256:{config_digest}"), "size": 2},
        "layers": [{"mediaType": "application/wasm", "digest": format!("sha256:{}", "ab".repeat(32)), "size": 1000}],
    })
    .to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let manifest = manifest.clone();
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut request = String::new();
                reader.read_line(&mut request).unwrap();
                loop {
                    let mut header = String::new();
                    if reader.read_line(&mut header).unwrap() == 0 || header == "\r\n" {
                        break;
                    }
                }
                let path = request.split(' ').nth(1).unwrap_or_default().to_owned();
                if path.contains("/manifests/") {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/vnd.oci.image.manifest.v1+json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{manifest}",
                        manifest.len()
                    );
                } else if path.contains("/blobs/") {
                    // No length: the body ends when the connection does, which is never, unless the client hangs up.
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n"
                    );
                    let chunk = vec![0x61u8; 64 * 1024];
                    while counter.load(Ordering::Relaxed) < limit && stream.write_all(&chunk).is_ok() {
                        counter.fetch_add(chunk.len() as u64, Ordering::Relaxed);
                    }
                } else {
                    let _ = write!(
                        stream,
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{{}}"
                    );
                }
            });
        }
    });
    (port, sent)
}

#[test]
fn a_registry_that_declares_1000_bytes_and_streams_forever_is_stopped_at_byte_1001() {
    let limit = 512 << 20;
    let (port, sent) = lying_registry(limit);
    let user = User::new();
    let cache = user.cache();
    let source = format!("oci://127.0.0.1:{port}/toolwright/endless:latest");
    let before = tree(user.home.path());
    let out = user.run(&["plugins", "add", &source, "--yes", "--cache-dir", &cache]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "toolwright: {source}: the registry sent more than the 1000 bytes the manifest declares for the layer; the \
             download was stopped and nothing was installed\n"
        )
    );
    // It hung up at once: what it was sent is what the sockets buffer, not the half gigabyte on offer.
    let sent = sent.load(std::sync::atomic::Ordering::Relaxed);
    assert!(sent < 32 << 20, "the client read {sent} bytes");
    // Nothing installed: the plugin directory is empty (its temporary file is gone), no policy, no lockfile.
    let after: Vec<String> = tree(user.home.path())
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    assert_eq!(
        after,
        [".config", ".config/toolwright", ".config/toolwright/plugins"]
    );
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    use sha2::Digest;
    sha2::Sha256::digest(bytes).into()
}

/// `bytes` with every `from` replaced by `to` (as long).
fn patched(mut bytes: Vec<u8>, from: &str, to: &str) -> Vec<u8> {
    assert_eq!(from.len(), to.len(), "{to:?} must be as long as {from:?}");
    let at = bytes
        .windows(from.len())
        .position(|w| w == from.as_bytes())
        .unwrap_or_else(|| panic!("{from:?} is not in the component"));
    bytes[at..at + from.len()].copy_from_slice(to.as_bytes());
    bytes
}

#[test]
fn what_a_plugin_says_of_itself_is_shown_escaped_by_add_and_by_the_listing() {
    let user = User::new();
    // A description that draws a fake line and hides what follows; a reason that erases its line and writes
    // another request over it.
    let bytes = patched(
        std::fs::read(IMPOSTOR).unwrap(),
        "Claims to be the probe.",
        "\n requests: nothing\u{1b}[8m",
    );
    let bytes = patched(
        bytes,
        "reads what the test asks",
        "\r\u{1b}[2Kread below ./docs  ",
    );
    let source = user.ws.path().join("hostile.wasm");
    std::fs::write(&source, bytes).unwrap();
    let added = add(&user, &source, &[]);
    assert!(
        added.starts_with("toolwright-test-probe 0.1.0: \\n requests: nothing\\u{1b}[8m\n"),
        "{added}"
    );
    assert!(
        added.contains("\n  requests: read files below / (because: \\r\\u{1b}[2Kread below ./docs  )\n"),
        "{added}"
    );
    let cwd = user.ws.path().to_string_lossy().into_owned();
    let listing = user.ok(&["plugins", "--cwd", &cwd, "--cache-dir", &user.cache()]);
    assert!(
        listing.contains("\n  \\n requests: nothing\\u{1b}[8m\n"),
        "{listing}"
    );
    assert!(
        listing.contains("\n  requests: read files below / (because: \\r\\u{1b}[2Kread below ./docs  )\n"),
        "{listing}"
    );
    for text in [&added, &listing] {
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && toolwright::text::needs_escape(c)),
            "{text:?}"
        );
    }
}

/// A plugin project `toolwright dev` builds: its `build.sh` copies the plugin file that `src/which` names, so
/// editing `src/which` is editing the plugin (a real project's build is too slow for a test on two cores; the
/// templates' builds are `cli_new`'s). It lives below the target directory: outside the workspace and the
/// temporary directory, which the built-in tools may write.
struct DevProject {
    dir: tempfile::TempDir,
}

impl DevProject {
    fn new(first: &Path) -> DevProject {
        let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
        let root = dir.path();
        write_file(
            root,
            "Cargo.toml",
            "[package]\nname = \"toolwright-test-probe\"\n",
        );
        let build = write_file(
            root,
            "build.sh",
            "#!/bin/sh\nset -e\ncp \"$(cat src/which)\" toolwright_test_probe.wasm\necho built\n",
        );
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&build, std::fs::Permissions::from_mode(0o755)).unwrap();
        write_file(root, ".gitignore", "/*.wasm\n");
        std::fs::create_dir(root.join("src")).unwrap();
        let project = DevProject { dir };
        project.edit(first);
        project
    }

    /// Edit the plugin: its build now produces `next`.
    fn edit(&self, next: &Path) {
        std::fs::write(self.dir.path().join("src/which"), next.to_str().unwrap()).unwrap();
    }
}

/// `toolwright dev PROJECT` as `user`, in the workspace `cwd`, its temporary directory in the user's home.
fn dev_command(user: &User, project: &Path, cwd: &Path, extra: &[&str]) -> Command {
    let tmp = user.home.path().join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
    command
        .arg("dev")
        .arg(project)
        .arg("--cwd")
        .arg(cwd)
        .args(["--cache-dir", &user.cache()])
        .args(extra)
        .env("HOME", user.home.path())
        .env("XDG_CONFIG_HOME", user.home.path().join(".config"))
        .env("TMPDIR", &tmp);
    command
}

/// The description of the `probe` tool `mcp` lists (none: not listed), asking with request `id`.
fn probe_description(mcp: &mut toolwright_tests::mcp::StdioServer, id: i64) -> Option<String> {
    mcp.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}));
    mcp.response(id)["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "probe")
        .map(|t| t["description"].as_str().unwrap().to_owned())
}

/// Ask for the tools (request ids from `*id` on) until the `probe` tool's description is `until`; fails after a
/// minute.
fn wait_for_probe(mcp: &mut toolwright_tests::mcp::StdioServer, id: &mut i64, until: Option<&str>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        *id += 1;
        let now = probe_description(mcp, *id);
        if now.as_deref() == until {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the probe's description stayed {now:?}, not {until:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

const PROBE_SAYS: &str = "Try to cross a sandbox boundary.";
const IMPOSTOR_SAYS: &str = "Read a file, claiming to be the probe.";

#[test]
fn editing_a_plugin_under_dev_runs_the_new_code_with_no_other_command() {
    // Not installed: the dev build is an unknown plugin, granted what the user's own [plugins.NAME] says.
    let user = User::new();
    std::fs::create_dir_all(user.config()).unwrap();
    write_file(
        &user.config(),
        "toolwright.toml",
        "[plugins.toolwright-test-probe]\nread = [\"/\"]\n",
    );
    let project = DevProject::new(Path::new(PROBE));
    let readme = user.ws.path().join("readme");
    let read = json!({"action": "read", "target": readme});
    let mut mcp = toolwright_tests::mcp::StdioServer::start_with(&mut dev_command(
        &user,
        project.dir.path(),
        user.ws.path(),
        &[],
    ));
    assert_eq!(mcp.run(1, "probe", read.clone()), (false, "read 5 bytes".into()));

    // The edit: the build now makes another plugin of the name. No other command.
    project.edit(Path::new(IMPOSTOR));
    let mut id = 10;
    wait_for_probe(&mut mcp, &mut id, Some(IMPOSTOR_SAYS));
    assert!(mcp.told_tools_changed(), "{:?}", mcp.notifications);
    assert_eq!(
        mcp.run(100, "probe", read.clone()),
        (false, "the impostor read 5 bytes".into())
    );

    // A build that fails leaves the last good one served.
    project.edit(&user.home.path().join("missing.wasm"));
    std::thread::sleep(std::time::Duration::from_secs(2));
    assert_eq!(
        mcp.run(101, "probe", read),
        (false, "the impostor read 5 bytes".into())
    );
}

#[test]
fn a_dev_build_runs_ahead_of_the_installed_plugin_under_its_approved_grants_and_no_other_file_does() {
    let user = User::new();
    let source = user.home.path().join("probe.wasm");
    std::fs::copy(PROBE, &source).unwrap();
    add(&user, &source, &["--grant", "read=."]);
    let lock = std::fs::read_to_string(user.lockfile()).unwrap();
    // A rebuild: another file with the installed plugin's name, which `exec` would hold.
    let mut rebuilt = std::fs::read(PROBE).unwrap();
    rebuilt.extend_from_slice(&custom_section("toolwright-test", b"rebuilt"));
    let rebuilt_file = write_bytes(user.home.path(), "rebuilt.wasm", &rebuilt);
    let project = DevProject::new(&rebuilt_file);
    // A --plugins directory anyone may drop a plugin into while dev serves.
    let dropped = tempfile::tempdir().unwrap();
    let drop_dir = dropped.path().to_str().unwrap().to_owned();
    let mut mcp = toolwright_tests::mcp::StdioServer::start_with(&mut dev_command(
        &user,
        project.dir.path(),
        user.ws.path(),
        &["--plugins", &drop_dir],
    ));
    let readme = user.ws.path().join("readme");
    let read = json!({"action": "read", "target": readme});
    // The dev build runs in the installed plugin's place, with its grant, with no update or approve.
    assert_eq!(mcp.run(1, "probe", read.clone()), (false, "read 5 bytes".into()));

    // Another plugin under the name, dropped into a plugin directory: shadowed, it never runs.
    std::fs::copy(IMPOSTOR, dropped.path().join("impostor.wasm")).unwrap();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let mut id = 10;
    wait_for_probe(&mut mcp, &mut id, Some(PROBE_SAYS));
    assert_eq!(mcp.run(2, "probe", read.clone()), (false, "read 5 bytes".into()));

    // The dev build asks for more than the installed plugin was approved for (the impostor reads `/`): the new
    // code runs, without the grant.
    project.edit(Path::new(IMPOSTOR));
    wait_for_probe(&mut mcp, &mut id, Some(IMPOSTOR_SAYS));
    let (is_error, text) = mcp.run(3, "probe", read.clone());
    assert!(is_error && !text.contains("the impostor read"), "{text}");

    // Back to a build within the grant; then another file put where the dev build is loaded from (the
    // temporary directory, which tools may write): not the file the build wrote, so nothing runs from it.
    project.edit(&rebuilt_file);
    wait_for_probe(&mut mcp, &mut id, Some(PROBE_SAYS));
    assert_eq!(mcp.run(4, "probe", read.clone()), (false, "read 5 bytes".into()));
    let staged: Vec<PathBuf> = walk(&user.home.path().join("tmp"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "toolwright_test_probe.wasm"))
        .collect();
    assert_eq!(staged.len(), 2, "the last two builds: {staged:?}");
    let mut swapped = std::fs::read(PROBE).unwrap();
    swapped.extend_from_slice(&custom_section("toolwright-test", b"swapped"));
    for file in &staged {
        std::fs::write(file, &swapped).unwrap();
    }
    wait_for_probe(&mut mcp, &mut id, None);
    mcp.call(5, "probe", read);
    let answer = mcp.response(5);
    assert_eq!(answer["error"]["message"], "Tool probe not found", "{answer}");
    drop(mcp);

    // `exec --dev` runs one batch with a build of the project, the same way.
    let ((is_error, text), stderr) = user.read_readme_with(&["--dev", project.dir.path().to_str().unwrap()]);
    assert_eq!((is_error, text.as_str()), (false, "read 5 bytes"), "{stderr}");
    assert!(
        stderr.contains("plugin `toolwright-test-probe` is shadowed by its dev build"),
        "{stderr}"
    );
    assert!(!stderr.contains("skipped"), "{stderr}");
    // `--plugins` instead: the installed plugin runs, and the line that says so names the way to the build.
    let ((_, text), stderr) = user.read_readme_with(&["--plugins", project.dir.path().to_str().unwrap()]);
    assert_eq!(text, "read 5 bytes");
    assert!(
        stderr.contains("is already loaded from") && stderr.contains("toolwright exec --dev DIR"),
        "{stderr}"
    );

    // Nothing was approved on the way: the installed plugin and its approval are as they were.
    assert_eq!(std::fs::read_to_string(user.lockfile()).unwrap(), lock);
    assert_eq!(
        std::fs::read(user.installed()).unwrap(),
        std::fs::read(PROBE).unwrap()
    );
    assert_eq!(user.read_readme().0, (false, "read 5 bytes".into()));
}

#[test]
fn dev_refuses_a_workspace_where_the_tools_may_write_the_project() {
    let user = User::new();
    let project = DevProject::new(Path::new(PROBE));
    let inside = project.dir.path().to_str().unwrap().to_owned();
    let out = dev_command(&user, project.dir.path(), project.dir.path(), &[])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "the built-in tools may write {inside}, and so the plugin project"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("--tools-may-edit"), "{stderr}");
    // Nothing was built.
    assert!(!project.dir.path().join("toolwright_test_probe.wasm").exists());
}

fn write_bytes(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Every file below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(walk(&path));
        } else {
            files.push(path);
        }
    }
    files
}

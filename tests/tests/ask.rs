//! Grants asked through the MCP client (`[ask] grants = true`): `toolwright mcp` on stdio, driven by a client
//! written here that declares the `elicitation` capability (2025-11-25) and answers `elicitation/create` as each
//! test says. The plugin is the probe, listing a directory of the workspace through the SDK (which tells the host
//! of the refusal); it requests reading the workspace, and the policy grants it nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use toolwright_tests::terminal_execution_ends as execution_ends;

/// A workspace with `data/` (two files), a plugin directory with the probe, and a config home.
struct Setup {
    ws: tempfile::TempDir,
    plugins: tempfile::TempDir,
    config: tempfile::TempDir,
    audit: PathBuf,
    /// More arguments for the server.
    extra: Vec<&'static str>,
}

impl Setup {
    /// With `user_policy` as the user's policy file (none: no file).
    fn new(user_policy: Option<&str>) -> Setup {
        let ws = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(ws.path().join("data/inner")).unwrap();
        std::fs::write(ws.path().join("data/a.csv"), "a,b\n").unwrap();
        let plugins = tempfile::tempdir().unwrap();
        std::fs::copy(
            toolwright_tests::programs::PROBE,
            plugins.path().join("probe.wasm"),
        )
        .unwrap();
        let config = tempfile::tempdir().unwrap();
        if let Some(policy) = user_policy {
            std::fs::create_dir_all(config.path().join("toolwright")).unwrap();
            std::fs::write(config.path().join("toolwright/toolwright.toml"), policy).unwrap();
        }
        let audit = config.path().join("audit.jsonl");
        Setup {
            ws,
            plugins,
            config,
            audit,
            extra: Vec::new(),
        }
    }

    fn data(&self) -> String {
        self.ws.path().join("data").to_string_lossy().into_owned()
    }

    fn policy_file(&self) -> PathBuf {
        self.config.path().join("toolwright/toolwright.toml")
    }

    /// The audit log's records.
    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The records of questions: (their reason, their verdict).
    fn questions_audited(&self) -> Vec<(String, String)> {
        self.audit()
            .iter()
            .flat_map(|r| r["decision"].as_array().cloned().unwrap_or_default())
            .filter(|s| s["stage"] == "asked")
            .map(|s| {
                (
                    s["reason"].as_str().unwrap().to_owned(),
                    s["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    fn start(&self, elicits: bool) -> Client {
        self.start_at("2025-11-25", elicits)
    }

    fn start_at(&self, revision: &str, elicits: bool) -> Client {
        self.start_watching(revision, elicits, "0")
    }

    /// With `--watch-plugins WATCH`.
    fn start_watching(&self, revision: &str, elicits: bool, watch: &str) -> Client {
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
        let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .args([
                "mcp",
                "--no-default-plugins",
                "--no-default-mcp",
                "--watch-plugins",
                watch,
                "--cwd",
            ])
            .arg(self.ws.path())
            .arg("--plugins")
            .arg(self.plugins.path())
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--audit-log")
            .arg(&self.audit)
            .args(&self.extra)
            .env("XDG_CONFIG_HOME", self.config.path())
            .env(
                "TOOLWRIGHT_LOG",
                std::env::var_os("TOOLWRIGHT_TEST_LOG").unwrap_or_default(),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(match std::env::var_os("TOOLWRIGHT_TEST_LOG") {
                Some(_) => Stdio::inherit(),
                None => Stdio::null(),
            })
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut client = Client {
            child,
            stdin,
            stdout,
            questions: Vec::new(),
        };
        let capabilities = if elicits {
            json!({ "elicitation": { "form": {} } })
        } else {
            json!({})
        };
        client.send(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": revision, "capabilities": capabilities,
            "clientInfo": {"name": "toolwright-tests", "version": "1"}}}),
        );
        let init = client.next();
        assert_eq!(init["result"]["serverInfo"]["name"], "toolwright", "{init}");
        client.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        client
    }
}

/// A client of the server: answers the questions it is asked as a test says.
struct Client {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: BufReader<std::process::ChildStdout>,
    /// The questions asked so far (`elicitation/create` params).
    questions: Vec<Value>,
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Client {
    fn send(&mut self, message: &Value) {
        writeln!(self.stdin, "{message}").unwrap();
        self.stdin.flush().unwrap();
    }

    fn next(&mut self) -> Value {
        let mut line = String::new();
        assert!(
            self.stdout.read_line(&mut line).unwrap() > 0,
            "the server closed its output"
        );
        serde_json::from_str(&line).unwrap()
    }

    /// Call the probe with `args` as request `id`; each question is answered with what `answer` returns (the
    /// messages to send). The result: (isError, text).
    fn call(&mut self, id: i64, args: Value, answer: &mut dyn FnMut(&Value) -> Vec<Value>) -> (bool, String) {
        self.call_tool(id, "probe", args, answer)
    }

    /// [`Client::call`] of the tool `name`.
    fn call_tool(
        &mut self,
        id: i64,
        name: &str,
        args: Value,
        answer: &mut dyn FnMut(&Value) -> Vec<Value>,
    ) -> (bool, String) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": name, "arguments": args}}));
        loop {
            let message = self.next();
            match (message.get("method").and_then(Value::as_str), message.get("id")) {
                (Some("elicitation/create"), Some(_)) => {
                    self.questions.push(message["params"].clone());
                    for reply in answer(&message) {
                        self.send(&reply);
                    }
                }
                (Some(method), Some(request)) => {
                    let request = request.clone();
                    self.send(&json!({"jsonrpc": "2.0", "id": request,
                        "error": {"code": -32601, "message": format!("{method} is not supported")}}));
                }
                (None, Some(found)) if found == &json!(id) => {
                    let result = &message["result"];
                    assert!(result.is_object(), "{message}");
                    return (
                        result["isError"] == true,
                        toolwright_tests::text_of(&result["content"]),
                    );
                }
                _ => {}
            }
        }
    }

    /// [`Client::call`] listing `dir` through the SDK.
    fn list(&mut self, id: i64, dir: &str, answer: &mut dyn FnMut(&Value) -> Vec<Value>) -> (bool, String) {
        self.call(id, json!({"action": "files-list", "target": dir}), answer)
    }
}

/// Another plugin (wordcount) arrives in `setup`'s plugin directory: wait until `client` is told the tools changed
/// (the server, watching, loaded the plugins and the policy again).
fn plugin_arrives(setup: &Setup, client: &mut Client) {
    let (_, bytes) = toolwright_tests::programs::EXAMPLES
        .iter()
        .find(|(name, _)| name.ends_with("wordcount"))
        .unwrap();
    std::fs::write(setup.plugins.path().join("wordcount.wasm"), bytes).unwrap();
    loop {
        let message = client.next();
        if message["method"] == "notifications/tools/list_changed" {
            break;
        }
    }
}

/// The values of the choices a question (`elicitation/create` params) offers.
fn choices(question: &Value) -> Vec<&str> {
    question["requestedSchema"]["properties"]["answer"]["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["const"].as_str().unwrap())
        .collect()
}

/// Answer a question with `action` (and, on accept, `{"answer": choice}`).
fn reply(question: &Value, action: &str, choice: Option<&str>) -> Value {
    let mut result = json!({ "action": action });
    if let Some(choice) = choice {
        result["content"] = json!({ "answer": choice });
    }
    json!({"jsonrpc": "2.0", "id": question["id"], "result": result})
}

fn answering(choice: &'static str) -> impl FnMut(&Value) -> Vec<Value> {
    move |q| vec![reply(q, "accept", Some(choice))]
}

fn never_asked(q: &Value) -> Vec<Value> {
    panic!("asked {q}");
}

const ASK: &str = "[ask]\ngrants = true\n";

/// The refusal as the model sees it without a question.
fn is_refusal(text: &str, dir: &str) -> bool {
    text.contains(&format!("Permission denied: read access to {dir} is not granted"))
}

#[test]
fn a_refused_read_asks_once_and_allowed_for_the_session_later_calls_do_not_ask() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start(true);
    let (error, text) = client.list(1, &data, &mut answering("session"));
    assert!(!error, "{text}");
    assert_eq!(text, "2 entries");
    assert_eq!(client.questions.len(), 1);
    let message = client.questions[0]["message"].as_str().unwrap().to_owned();
    assert_eq!(
        message,
        format!(
            "plugin `toolwright-test-probe` wants to read `{data}` (because: reads what the test asks). Allowing grants read \
             access to the directory `{data}`."
        )
    );
    assert_eq!(
        choices(&client.questions[0]),
        ["once", "session", "always", "deny"]
    );
    // Later calls, of the directory and below it, are not asked about.
    assert_eq!(
        client.list(2, &data, &mut never_asked),
        (false, "2 entries".into())
    );
    let inner = format!("{data}/inner");
    assert_eq!(
        client.list(3, &inner, &mut never_asked),
        (false, "0 entries".into())
    );
    drop(client);
    // The question and the answer are in the audit log, and the call run again with the grant.
    let asked = setup.questions_audited();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].0.starts_with(&message), "{asked:?}");
    assert!(
        asked[0]
            .0
            .contains("Answer: allowed for this session. The call runs again as mcp-2."),
        "{asked:?}"
    );
    assert_eq!(asked[0].1, "allowed");
    let records = setup.audit();
    let rerun = records.iter().find(|r| r["id"] == "mcp-2").unwrap();
    assert_eq!(rerun["outcome"], "ok", "{rerun}");
    assert!(
        rerun["source"]["grants"]
            .as_array()
            .unwrap()
            .iter()
            .any(|g| g.as_str().unwrap().contains(&data)),
        "{rerun}"
    );
    // Nothing was written to the user's policy.
    assert_eq!(std::fs::read_to_string(setup.policy_file()).unwrap(), ASK);
}

#[test]
fn asking_is_off_by_default_and_a_projects_ask_section_does_not_turn_it_on() {
    for project in [false, true] {
        let setup = Setup::new(None);
        if project {
            std::fs::write(setup.ws.path().join("toolwright.toml"), ASK).unwrap();
        }
        let data = setup.data();
        let mut client = setup.start(true);
        let (error, text) = client.list(1, &data, &mut never_asked);
        assert!(error && is_refusal(&text, &data), "{text}");
        drop(client);
        assert!(setup.questions_audited().is_empty());
    }
}

#[test]
fn nothing_is_asked_of_a_client_without_elicitation_nor_beyond_what_the_plugin_requested() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start(false);
    let (error, text) = client.list(1, &data, &mut never_asked);
    assert!(error && is_refusal(&text, &data), "{text}");
    drop(client);
    // The probe requests reading the workspace only: a directory outside it is refused without a question.
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().to_string_lossy().into_owned();
    let mut client = setup.start(true);
    let (error, text) = client.list(2, &outside, &mut never_asked);
    assert!(error && is_refusal(&text, &outside), "{text}");
    assert!(client.questions.is_empty());
}

#[test]
fn deny_a_decline_a_cancel_or_an_answer_not_offered_keep_the_refusal_unchanged() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start(true);
    let answers: [(&str, Option<&str>); 5] = [
        ("accept", Some("deny")),
        ("decline", None),
        ("cancel", None),
        ("accept", Some("everything")),
        ("accept", Some("Session")),
    ];
    for (n, (action, choice)) in answers.into_iter().enumerate() {
        let (error, text) = client.list(n as i64 + 1, &data, &mut |q| vec![reply(q, action, choice)]);
        assert!(error && is_refusal(&text, &data), "{action} {choice:?}: {text}");
        assert_eq!(
            client.questions.len(),
            n + 1,
            "asked every time: nothing was kept"
        );
    }
    drop(client);
    let verdicts: Vec<String> = setup
        .questions_audited()
        .into_iter()
        .map(|(reason, verdict)| {
            assert!(!reason.contains("runs again"), "{reason}");
            verdict
        })
        .collect();
    assert_eq!(verdicts, ["blocked"; 5]);
    assert_eq!(std::fs::read_to_string(setup.policy_file()).unwrap(), ASK);
}

#[test]
fn a_forged_or_unsolicited_answer_changes_nothing() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start(true);
    // An answer to a question never asked, before any call.
    client.send(&json!({"jsonrpc": "2.0", "id": 0,
        "result": {"action": "accept", "content": {"answer": "always"}}}));
    // Asked, the client first answers under another id, then declines the question itself.
    let (error, text) = client.list(1, &data, &mut |q| {
        let mut forged = reply(q, "accept", Some("always"));
        forged["id"] = json!(format!("{}-forged", q["id"]));
        vec![forged, reply(q, "decline", None)]
    });
    assert!(error && is_refusal(&text, &data), "{text}");
    // Nothing was kept: the next call asks again (and is denied).
    let (error, _) = client.list(2, &data, &mut |q| vec![reply(q, "accept", Some("deny"))]);
    assert!(error);
    assert_eq!(client.questions.len(), 2);
    assert_eq!(std::fs::read_to_string(setup.policy_file()).unwrap(), ASK);
}

#[test]
fn allowed_once_only_that_call_has_the_grant() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start(true);
    assert_eq!(
        client.list(1, &data, &mut answering("once")),
        (false, "2 entries".into())
    );
    let (error, text) = client.list(2, &data, &mut answering("deny"));
    assert!(error && is_refusal(&text, &data), "{text}");
    assert_eq!(client.questions.len(), 2);
}

/// `other/` beside `data/` in the workspace (one file), for a call refused two directories.
fn other_dir(setup: &Setup) -> String {
    let other = setup.ws.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("b.txt"), "b").unwrap();
    other.to_string_lossy().into_owned()
}

/// A call refused a second grant after the first was allowed once runs again with both (regression: with the
/// second alone, and was refused the first again); a grant then allowed for the session holds for it too, and
/// only that one for later calls.
#[test]
fn grants_allowed_once_in_one_call_hold_together_for_its_runs_again() {
    let setup = Setup::new(Some(ASK));
    let (data, other) = (setup.data(), other_dir(&setup));
    let mut client = setup.start(true);
    let both = json!({"action": "files-list-two", "target": data, "data": other});
    let mut choices = ["once", "once"].into_iter();
    let mut answer = |q: &Value| vec![reply(q, "accept", choices.next())];
    assert_eq!(
        client.call(1, both.clone(), &mut answer),
        (false, "2 and 1 entries".into())
    );
    assert_eq!(client.questions.len(), 2, "{:?}", client.questions);
    // Both answers are in the audit log, and the first again beside the run that had it with the second.
    let audited = setup.questions_audited();
    assert_eq!(audited.len(), 3, "{audited:?}");
    assert!(
        audited[2].0.contains(&data) && audited[2].1 == "allowed",
        "{audited:?}"
    );
    let mut choices = ["once", "session"].into_iter();
    let mut answer = |q: &Value| vec![reply(q, "accept", choices.next())];
    assert_eq!(
        client.call(2, both.clone(), &mut answer),
        (false, "2 and 1 entries".into())
    );
    assert_eq!(client.questions.len(), 4, "{:?}", client.questions);
    // `other` was allowed for the session: a later call is asked about `data` alone.
    assert_eq!(
        client.call(3, both, &mut answering("once")),
        (false, "2 and 1 entries".into())
    );
    assert_eq!(client.questions.len(), 5, "{:?}", client.questions);
    let last = client.questions[4]["message"].as_str().unwrap();
    assert!(last.contains(&data) && !last.contains(&other), "{last}");
}

#[test]
fn allowed_always_writes_the_users_policy_file_pinned_to_the_plugin() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start(true);
    assert_eq!(
        client.list(1, &data, &mut answering("always")),
        (false, "2 entries".into())
    );
    assert_eq!(
        client.list(2, &data, &mut never_asked),
        (false, "2 entries".into())
    );
    drop(client);
    let written = std::fs::read_to_string(setup.policy_file()).unwrap();
    let policy = toolwright::policy::Policy::parse(&setup.policy_file(), &written).unwrap();
    let probe = &policy.plugins["toolwright-test-probe"];
    assert_eq!(probe.read, std::slice::from_ref(&data), "{written}");
    assert_eq!(probe.sha256.len(), 1, "{written}");
    assert_eq!(probe.sha256[0].len(), 64, "{written}");
    assert!(policy.ask.grants(), "what was there is kept: {written}");
    // A new server (nothing kept in memory) has the grant from the file, and asks nothing.
    let mut client = setup.start(true);
    assert_eq!(
        client.list(3, &data, &mut never_asked),
        (false, "2 entries".into())
    );
}

/// `toolwright exec --ask` in `setup`'s workspace with `calls`, its standard input `stdin`: (success, stdout,
/// stderr). Through `script` when `tty` (a terminal, answered with `stdin`).
fn exec_ask(setup: &Setup, tty: bool, stdin: &str) -> (bool, String, String) {
    exec_ask_to(setup, "files-list", tty, stdin)
}

/// Likewise, for the probe's `action`.
fn exec_ask_to(setup: &Setup, action: &str, tty: bool, stdin: &str) -> (bool, String, String) {
    let arguments = json!({"action": action, "target": setup.data()});
    exec_ask_with(setup, &arguments, tty, stdin)
}

/// Likewise, for the probe's `arguments`.
fn exec_ask_with(setup: &Setup, arguments: &Value, tty: bool, stdin: &str) -> (bool, String, String) {
    exec_ask_call(setup, "probe", arguments, tty, stdin)
}

/// Likewise, for the tool `name` with `arguments`.
fn exec_ask_call(
    setup: &Setup,
    name: &str,
    arguments: &Value,
    tty: bool,
    stdin: &str,
) -> (bool, String, String) {
    let calls = setup.config.path().join("calls.json");
    std::fs::write(
        &calls,
        json!([{"id": "c1", "name": name, "arguments": arguments}]).to_string(),
    )
    .unwrap();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let args: Vec<String> = [
        env!("CARGO_BIN_EXE_toolwright-cli"),
        "exec",
        "--ask",
        "--json",
        "--no-default-plugins",
        "--no-default-mcp",
        "--cwd",
        &setup.ws.path().to_string_lossy(),
        "--plugins",
        &setup.plugins.path().to_string_lossy(),
        "--cache-dir",
        &cache.to_string_lossy(),
        "--audit-log",
        &setup.audit.to_string_lossy(),
        &calls.to_string_lossy(),
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    let mut command = if tty {
        let mut script = Command::new("script");
        script.args(["-q", "-e", "-c", &shell_words(&args), "/dev/null"]);
        script
    } else {
        let mut direct = Command::new(&args[0]);
        direct.args(&args[1..]);
        direct
    };
    let mut child = command
        .env("XDG_CONFIG_HOME", setup.config.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `args` quoted for `sh -c`.
fn shell_words(args: &[String]) -> String {
    args.iter()
        .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn exec_ask_without_a_terminal_is_an_error() {
    let setup = Setup::new(Some(ASK));
    let (success, _, stderr) = exec_ask(&setup, false, "");
    assert!(!success);
    assert!(
        stderr.contains("--ask asks on the terminal: standard input must be one"),
        "{stderr}"
    );
}

#[test]
fn exec_ask_on_a_terminal_asks_and_runs_the_call_again_when_allowed() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let (success, out, _) = exec_ask(&setup, true, "s\n");
    assert!(success, "{out}");
    assert!(
        out.contains(&format!("plugin `toolwright-test-probe` wants to read `{data}`")),
        "{out}"
    );
    let ends = execution_ends(&out);
    assert_eq!(ends.len(), 2, "refused, then run again: {out}");
    assert_eq!(ends[0]["isError"], true);
    assert_eq!(ends[1]["isError"], false, "{out}");
    let asked = setup.questions_audited();
    assert_eq!(asked.len(), 1);
    assert!(asked[0].0.contains("allowed for this session"), "{asked:?}");
}

#[test]
fn exec_ask_puts_the_plugins_questions_on_the_terminal_in_the_call_run_again_too() {
    let setup = Setup::new(Some(ASK));
    // The probe asks why (a form field), is refused the list, is granted it, and asks again in the call run again.
    let (success, out, _) = exec_ask_to(&setup, "ask-then-list", true, "first\ns\nsecond\n");
    assert!(success, "{out}");
    let ends = execution_ends(&out);
    assert_eq!(ends.len(), 2, "refused, then run again: {out}");
    assert_eq!(ends[0]["isError"], true, "{out}");
    assert_eq!(
        toolwright_tests::text_of(&ends[1]["result"]["content"]),
        "second: 2 entries",
        "{out}"
    );
}

#[test]
fn a_refused_program_is_asked_for_by_name_only() {
    let setup = Setup::new(Some(ASK));
    let mut client = setup.start(true);
    let spawn = |program: &str| json!({"action": "spawn", "target": program, "args": ["asked"]});
    let (error, text) = client.call(1, spawn("echo"), &mut answering("session"));
    assert!(!error && text.contains("asked"), "{text}");
    assert_eq!(
        client.questions[0]["message"],
        "plugin `toolwright-test-probe` wants to start the program `echo` (because: starts echo by name). \
         Allowing grants starting `echo`."
    );
    assert!(!client.call(2, spawn("echo"), &mut never_asked).0);
    // A path the plugin chose is never asked for (the probe requests /bin/echo too).
    let (error, _) = client.call(3, spawn("/bin/echo"), &mut never_asked);
    assert!(error);
    // Nor a program it did not request.
    let (error, _) = client.call(4, spawn("ls"), &mut never_asked);
    assert!(error);
    assert_eq!(client.questions.len(), 1);
}

/// A one-connection-at-a-time server on a free local port that says `hello` to every client.
fn greeter() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.write_all(b"hello");
        }
    });
    port
}

#[test]
fn a_refused_connection_or_name_is_asked_for_as_the_plugin_requested_it() {
    // The probe requests `127.0.0.1:*` and `localhost:*`; the policy grants it no network at all, so its sockets
    // refuse everything (no lookup leaves the host) and what it tries is asked about.
    let setup = Setup::new(Some(ASK));
    let port = greeter();
    let mut client = setup.start(true);
    let connect = |target: String| json!({"action": "connect", "target": target});
    let (error, text) = client.call(1, connect(format!("127.0.0.1:{port}")), &mut answering("once"));
    assert_eq!((error, text.as_str()), (false, "connected: hello"));
    assert_eq!(
        client.questions[0]["message"],
        format!(
            "plugin `toolwright-test-probe` wants to connect to `127.0.0.1:{port}` (a service on this machine) \
             (because: connects to local servers). Allowing grants connections to `127.0.0.1:{port}`."
        )
    );
    // Allowed once: the next call is refused and asked again; denied, the refusal stands.
    let (error, text) = client.call(2, connect(format!("127.0.0.1:{port}")), &mut answering("deny"));
    assert!(error && text.contains("PermissionDenied"), "{text}");
    assert_eq!(client.questions.len(), 2);
    // By name: the lookup refused is asked for as the plugin requested the name, and the call then connects.
    let (error, text) = client.call(3, connect(format!("localhost:{port}")), &mut answering("session"));
    assert_eq!((error, text.as_str()), (false, "connected: hello"));
    assert_eq!(
        client.questions[2]["message"],
        "plugin `toolwright-test-probe` wants to connect to `localhost` (a service on this machine) (because: \
         connects to local servers by name). Allowing grants connections to `localhost:*`."
    );
    assert_eq!(client.questions.len(), 3);
    // A name it did not request is never asked for.
    let (error, _) = client.call(4, connect("example.invalid:80".into()), &mut never_asked);
    assert!(error);
}

/// A local HTTP server that answers every request `200 hello`.
fn web_greeter() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut head = [0u8; 4096];
            let _ = std::io::Read::read(&mut stream, &mut head);
            let _ = stream.write_all(b"HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\nhello");
        }
    });
    port
}

/// The probe's arguments for python3 fetching `http://localhost:PORT/` through the sandbox's proxy.
fn fetch_from(port: u16) -> Value {
    json!({"action": "spawn", "target": "/usr/bin/python3", "strict": true, "args": ["-c",
        format!("import os, urllib.request; [os.environ.pop(k, None) for k in ('NO_PROXY', 'no_proxy')]; \
                 print(urllib.request.urlopen('http://localhost:{port}/', timeout=20).read().decode())")]})
}

#[test]
fn a_host_the_proxy_refused_a_plugin_s_program_is_asked_for_and_then_reached() {
    // The probe may start python3 but reach no host; it requests `localhost:*`. Its program reaches hosts only
    // through the sandbox's proxy, which refuses `localhost:PORT`: that is asked about, and once allowed the call
    // runs again and the program gets through.
    let policy = format!("{ASK}[plugins.toolwright-test-probe]\nspawn = [\"/usr/bin/python3\"]\n");
    let setup = Setup::new(Some(&policy));
    let port = web_greeter();
    let mut client = setup.start(true);
    // (`localhost` inside the sandbox is its own loopback, which `NO_PROXY` names: the program asks the proxy
    // for the host's, as it would for any other name.)
    let fetch = fetch_from(port);
    let (error, text) = client.call(1, fetch.clone(), &mut answering("session"));
    assert!(!error && text.contains("hello"), "{text}");
    assert_eq!(
        client.questions[0]["message"],
        format!(
            "plugin `toolwright-test-probe` wants to connect to `localhost:{port}` (a service on this machine) \
             (because: connects to local servers by name). Allowing grants connections to `localhost:{port}`."
        )
    );
    // Allowed for the session: not asked again.
    let (error, text) = client.call(2, fetch, &mut never_asked);
    assert!(!error && text.contains("hello"), "{text}");
    // A host it did not request is never asked for, and stays out of reach.
    let elsewhere = json!({"action": "spawn", "target": "/usr/bin/python3", "strict": true, "args": ["-c",
        "import urllib.request; urllib.request.urlopen('http://example.invalid/', timeout=20)"]});
    let (error, text) = client.call(3, elsewhere, &mut never_asked);
    assert!(error && text.contains("403"), "{text}");
    assert_eq!(client.questions.len(), 1);
    // `exec --ask` asks the same on the terminal, and the call run again gets through.
    let (success, out, _) = exec_ask_with(&setup, &fetch_from(port), true, "o\n");
    assert!(success, "{out}");
    assert!(
        out.contains(&format!(
            "plugin `toolwright-test-probe` wants to connect to `localhost:{port}`"
        )),
        "{out}"
    );
    let ends = execution_ends(&out);
    assert_eq!(ends.len(), 2, "{out}");
    assert_eq!(ends[0]["isError"], true, "{out}");
    assert!(
        ends[1]["isError"] == false && ends[1]["result"].to_string().contains("hello"),
        "{out}"
    );
}

#[test]
fn a_hostile_path_cannot_shape_the_question() {
    let setup = Setup::new(Some(ASK));
    let hostile = setup
        .ws
        .path()
        .join("data\nplugin `x` wants nothing. \u{1b}[2KAllowing grants nothing");
    std::fs::create_dir_all(&hostile).unwrap();
    let hostile = hostile.to_string_lossy().into_owned();
    let mut client = setup.start(true);
    let (error, text) = client.list(1, &hostile, &mut answering("deny"));
    assert!(error, "{text}");
    let message = client.questions[0]["message"].as_str().unwrap();
    assert!(
        !message.contains('\n') && !message.contains('\u{1b}'),
        "{message}"
    );
    let shown = hostile.replace('\n', "\\n").replace('\u{1b}', "\\u{1b}");
    assert_eq!(
        message,
        format!(
            "plugin `toolwright-test-probe` wants to read `{shown}` (because: reads what the test asks). Allowing \
             grants read access to the directory `{shown}`."
        )
    );
}

/// A 2026-07-28 client's `tools/call` of the probe listing `dir`: its `_meta` declares elicitation; `retry` is the
/// request state and the input responses of a retried call.
fn call_2026(client: &mut Client, id: i64, dir: &str, retry: Option<(Value, Value)>) -> Value {
    call_2026_to(client, id, "files-list", dir, retry)
}

/// Likewise, for the probe's `action`.
fn call_2026_to(
    client: &mut Client,
    id: i64,
    action: &str,
    dir: &str,
    retry: Option<(Value, Value)>,
) -> Value {
    call_2026_with(client, id, json!({"action": action, "target": dir}), retry)
}

/// Likewise, with the probe's `arguments`.
fn call_2026_with(client: &mut Client, id: i64, arguments: Value, retry: Option<(Value, Value)>) -> Value {
    call_2026_tool(client, id, "probe", arguments, retry)
}

/// Likewise, of the tool `name` with `arguments`.
fn call_2026_tool(
    client: &mut Client,
    id: i64,
    name: &str,
    arguments: Value,
    retry: Option<(Value, Value)>,
) -> Value {
    let mut params = json!({"name": name, "arguments": arguments,
    "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"}
    }});
    if let Some((state, responses)) = retry {
        params["requestState"] = state;
        params["inputResponses"] = responses;
    }
    client.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}));
    loop {
        let message = client.next();
        assert!(
            message.get("method").is_none() || message.get("id").is_none(),
            "no request to a 2026-07-28 client: {message}"
        );
        if message["id"] == json!(id) {
            return message;
        }
    }
}

#[test]
fn a_2026_07_28_client_is_asked_with_an_input_required_result_and_its_answer_decides() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start_at("2026-07-28", true);
    let first = call_2026(&mut client, 1, &data, None);
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let question = &result["inputRequests"]["grant"];
    assert_eq!(question["method"], "elicitation/create", "{first}");
    assert!(
        question["params"]["message"]
            .as_str()
            .unwrap()
            .contains(&format!("wants to read `{data}`"))
    );
    let state = result["requestState"].clone();
    assert_eq!(state.as_str().unwrap().len(), 32);
    let accept = |choice: &str| json!({"grant": {"action": "accept", "content": {"answer": choice}}});
    // A forged state, or the real one for other arguments, is no answer: the call runs as any other (and asks).
    let forged = call_2026(
        &mut client,
        2,
        &data,
        Some((json!("0123456789abcdef0123456789abcdef"), accept("always"))),
    );
    assert_eq!(forged["result"]["resultType"], "input_required", "{forged}");
    let other = format!("{data}/inner");
    let mismatched = call_2026(&mut client, 3, &other, Some((state.clone(), accept("always"))));
    assert_eq!(
        mismatched["result"]["resultType"], "input_required",
        "{mismatched}"
    );
    // The answer to the question asked: the call runs again with the grant.
    let answered = call_2026(&mut client, 4, &data, Some((state.clone(), accept("session"))));
    assert_eq!(answered["result"]["isError"], false, "{answered}");
    assert_eq!(
        toolwright_tests::text_of(&answered["result"]["content"]),
        "2 entries"
    );
    // The state was used up; later calls do not ask.
    let later = call_2026(&mut client, 5, &data, Some((state, accept("always"))));
    assert_eq!(later["result"]["isError"], false, "{later}");
    drop(client);
    assert_eq!(std::fs::read_to_string(setup.policy_file()).unwrap(), ASK);
    let asked = setup.questions_audited();
    assert_eq!(
        asked.iter().filter(|(_, verdict)| verdict == "allowed").count(),
        1,
        "{asked:?}"
    );
}

#[test]
fn a_2026_07_28_client_that_denies_gets_the_refusal_unchanged() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start_at("2026-07-28", true);
    let first = call_2026(&mut client, 1, &data, None);
    let state = first["result"]["requestState"].clone();
    let deny = json!({"grant": {"action": "accept", "content": {"answer": "deny"}}});
    let denied = call_2026(&mut client, 2, &data, Some((state, deny)));
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert!(
        is_refusal(&toolwright_tests::text_of(&denied["result"]["content"]), &data),
        "{denied}"
    );
}

#[test]
fn a_2026_07_28_call_keeps_its_plugins_answers_through_the_grants_question() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start_at("2026-07-28", true);
    // The probe asks why, then lists (refused): its question, then ours.
    let first = call_2026_to(&mut client, 1, "ask-then-list", &data, None);
    assert!(first["result"]["inputRequests"]["why"].is_object(), "{first}");
    let why = json!({"why": {"action": "accept", "content": {"why": "to count"}}});
    let state = first["result"]["requestState"].clone();
    let second = call_2026_to(&mut client, 2, "ask-then-list", &data, Some((state, why)));
    let asked = &second["result"]["inputRequests"];
    assert!(
        asked["grant"].is_object() && asked.get("why").is_none(),
        "{second}"
    );
    // Allowed: the call runs again with the answer the probe was given, not asking it again.
    let state = second["result"]["requestState"].clone();
    let accept = json!({"grant": {"action": "accept", "content": {"answer": "session"}}});
    let third = call_2026_to(&mut client, 3, "ask-then-list", &data, Some((state, accept)));
    assert_eq!(third["result"]["isError"], false, "{third}");
    assert_eq!(
        toolwright_tests::text_of(&third["result"]["content"]),
        "to count: 2 entries"
    );
}

#[test]
fn a_2026_07_28_grant_allowed_once_holds_for_the_call_s_later_rounds_and_no_other_call() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start_at("2026-07-28", true);
    // The probe lists (refused: our question), then asks why (its question).
    let first = call_2026_to(&mut client, 1, "list-then-ask", &data, None);
    assert!(first["result"]["inputRequests"]["grant"].is_object(), "{first}");
    let once = json!({"grant": {"action": "accept", "content": {"answer": "once"}}});
    let state = first["result"]["requestState"].clone();
    let second = call_2026_to(&mut client, 2, "list-then-ask", &data, Some((state, once)));
    let asked = &second["result"]["inputRequests"];
    assert!(
        asked["why"].is_object() && asked.get("grant").is_none(),
        "{second}"
    );
    // The next round runs with the grant allowed once, not asking for it again.
    let state = second["result"]["requestState"].clone();
    let why = json!({"why": {"action": "accept", "content": {"why": "to count"}}});
    let third = call_2026_to(
        &mut client,
        3,
        "list-then-ask",
        &data,
        Some((state.clone(), why.clone())),
    );
    assert_eq!(
        toolwright_tests::text_of(&third["result"]["content"]),
        "to count: 2 entries",
        "{third}"
    );
    // The grant was this call's: the same state again has nothing left, and another call is asked again.
    let again = call_2026_to(&mut client, 4, "list-then-ask", &data, Some((state, why)));
    assert!(again["result"]["inputRequests"]["grant"].is_object(), "{again}");
    let other = call_2026_to(&mut client, 5, "list-then-ask", &data, None);
    assert!(other["result"]["inputRequests"]["grant"].is_object(), "{other}");
}

/// A 2026-07-28 call refused a second grant after the first was allowed once (a round each) runs again with both.
#[test]
fn a_2026_07_28_call_s_grants_allowed_once_in_two_rounds_hold_together() {
    let setup = Setup::new(Some(ASK));
    let (data, other) = (setup.data(), other_dir(&setup));
    let mut client = setup.start_at("2026-07-28", true);
    let once = json!({"grant": {"action": "accept", "content": {"answer": "once"}}});
    let both = json!({"action": "files-list-two", "target": data, "data": other});
    let call = |client: &mut Client, id: i64, retry: Option<(Value, Value)>| {
        call_2026_with(client, id, both.clone(), retry)
    };
    let first = call(&mut client, 1, None);
    let asked = |reply: &Value| reply["result"]["inputRequests"]["grant"]["params"]["message"].clone();
    assert!(asked(&first).as_str().unwrap().contains(&data), "{first}");
    let second = call(
        &mut client,
        2,
        Some((first["result"]["requestState"].clone(), once.clone())),
    );
    assert!(asked(&second).as_str().unwrap().contains(&other), "{second}");
    let third = call(
        &mut client,
        3,
        Some((second["result"]["requestState"].clone(), once)),
    );
    assert_eq!(
        toolwright_tests::text_of(&third["result"]["content"]),
        "2 and 1 entries",
        "{third}"
    );
}

#[test]
fn a_grant_allowed_for_the_session_outlives_a_reload_of_the_plugins() {
    let setup = Setup::new(Some(ASK));
    let data = setup.data();
    let mut client = setup.start_watching("2025-11-25", true, "100");
    assert_eq!(
        client.list(1, &data, &mut answering("session")),
        (false, "2 entries".into())
    );
    // Another plugin arrives: the plugins are loaded again, the probe's grant with them.
    plugin_arrives(&setup, &mut client);
    assert_eq!(
        client.list(2, &data, &mut never_asked),
        (false, "2 entries".into())
    );
    assert_eq!(client.questions.len(), 1);
}

/// `bash`'s arguments for python3 fetching `http://localhost:PORT/` through the sandbox's proxy (as
/// [`fetch_from`]).
fn bash_fetch(port: u16) -> Value {
    json!({"command": format!("env -u NO_PROXY -u no_proxy python3 -c \"import urllib.request; \
        print(urllib.request.urlopen('http://localhost:{port}/', timeout=20).read().decode())\"")})
}

/// The question about `localhost:PORT` for the built-ins.
fn builtins_question(port: u16) -> String {
    format!(
        "a command of the built-in tools wants to connect to `localhost:{port}` (a service on this machine). Allowing \
         lets the built-ins' commands connect to `localhost:{port}` through the sandbox's proxy (the command is not \
         run again)."
    )
}

#[test]
fn a_host_the_proxy_refused_bash_is_asked_for_the_session_and_the_command_is_not_run_again() {
    asked_for_the_session(Setup::new(Some(ASK)));
}

#[test]
fn the_wasm_bash_is_asked_for_its_host_as_the_native_one() {
    let mut setup = Setup::new(Some(ASK));
    setup.extra = vec!["--builtins", "wasm"];
    asked_for_the_session(setup);
}

/// A host refused bash's program, asked about in `setup`: once (not offered), for the session, denied.
fn asked_for_the_session(setup: Setup) {
    let port = web_greeter();
    let mut client = setup.start(true);
    // "Once" is not offered about the built-ins: answered anyway, it is no answer.
    let (error, text) = client.call_tool(1, "bash", bash_fetch(port), &mut answering("once"));
    assert!(
        error && text.contains("403") && !text.contains("The user allowed"),
        "{text}"
    );
    assert_eq!(client.questions.len(), 1);
    assert_eq!(client.questions[0]["message"], builtins_question(port));
    assert_eq!(choices(&client.questions[0]), ["session", "always", "deny"]);
    // Allowed for the session: the refused call's result stands, with a line saying so; not run again.
    let (error, text) = client.call_tool(2, "bash", bash_fetch(port), &mut answering("session"));
    assert!(error && text.contains("403"), "{text}");
    assert!(
        text.ends_with(&format!(
            "The user allowed the built-ins' commands to connect to `localhost:{port}` for this session. The command \
             was not run again: run it again to reach the host."
        )),
        "{text}"
    );
    // The next call reaches the host, and is not asked about.
    let (error, text) = client.call_tool(3, "bash", bash_fetch(port), &mut never_asked);
    assert!(!error && text.contains("hello"), "{text}");
    // Another host stays refused (and is asked about: it is another grant).
    let other = web_greeter();
    let (error, text) = client.call_tool(4, "bash", bash_fetch(other), &mut answering("deny"));
    assert!(error && text.contains("403"), "{text}");
    assert_eq!(client.questions.len(), 3);
    drop(client);
    // Every question and answer is in the audit log; none ran the call again; nothing was written.
    let asked = setup.questions_audited();
    assert_eq!(asked.len(), 3, "{asked:?}");
    assert!(asked[0].0.ends_with("Answer: not answered."), "{asked:?}");
    assert!(
        asked[1].0.ends_with("Answer: allowed for this session."),
        "{asked:?}"
    );
    assert!(asked[2].0.ends_with("Answer: denied."), "{asked:?}");
    assert_eq!(
        asked.iter().map(|a| a.1.as_str()).collect::<Vec<_>>(),
        ["blocked", "allowed", "blocked"]
    );
    assert_eq!(std::fs::read_to_string(setup.policy_file()).unwrap(), ASK);
}

#[test]
fn a_host_allowed_always_for_bash_is_written_to_the_builtins_network_and_keeps_their_default_grants() {
    let setup = Setup::new(Some(ASK));
    let port = web_greeter();
    let mut client = setup.start(true);
    let (error, text) = client.call_tool(1, "bash", bash_fetch(port), &mut answering("always"));
    assert!(
        error && text.contains("from now on (written to the policy file)"),
        "{text}"
    );
    drop(client);
    let written = std::fs::read_to_string(setup.policy_file()).unwrap();
    let policy = toolwright::policy::Policy::parse(&setup.policy_file(), &written).unwrap();
    let builtins = policy.builtins.as_ref().unwrap();
    assert_eq!(builtins.network, [format!("localhost:{port}")], "{written}");
    assert!(!builtins.replaces_builtin_defaults(), "{written}");
    assert!(policy.ask.grants(), "what was there is kept: {written}");
    // A new server has the host from the file and asks nothing; bash still writes the workspace.
    let mut client = setup.start(true);
    let (error, text) = client.call_tool(2, "bash", bash_fetch(port), &mut never_asked);
    assert!(!error && text.contains("hello"), "{text}");
    let write = json!({"command": "echo kept > written.txt && cat written.txt"});
    let (error, text) = client.call_tool(3, "bash", write, &mut never_asked);
    assert!(!error && text.contains("kept"), "{text}");
}

#[test]
fn bash_is_asked_about_only_when_asking_is_on_and_never_for_a_plugin_s_nested_call() {
    // Asking off: the proxy does not even serve (no host is granted), and nothing is asked.
    let setup = Setup::new(None);
    let port = web_greeter();
    let mut client = setup.start(true);
    let (error, text) = client.call_tool(1, "bash", bash_fetch(port), &mut never_asked);
    assert!(error && text.contains("Connection refused"), "{text}");
    drop(client);
    // A plugin that may call bash has it fetch: the refusal is the plugin's call's, and nothing is asked for the
    // built-ins (nor for the plugin, which the host refused nothing).
    let policy = format!(
        "{ASK}[plugins.toolwright-test-probe]\ntools = [\"bash\"]\nread = [\".\"]\n\
         spawn = [\"sh\", \"env\", \"python3\"]\n"
    );
    // The native bash and the wasm one alike.
    for builtins in ["native", "wasm"] {
        let mut setup = Setup::new(Some(&policy));
        setup.extra = vec!["--builtins", builtins];
        let mut client = setup.start(true);
        let nested = json!({"action": "call", "tool": "bash", "arguments": bash_fetch(port)});
        let (_, text) = client.call(1, nested, &mut never_asked);
        assert!(
            text.starts_with("error: ") && text.contains("HTTP Error 403"),
            "{builtins}: {text}"
        );
        assert!(client.questions.is_empty());
    }
}

#[test]
fn a_2026_07_28_client_is_asked_about_bash_s_host_and_gets_the_call_s_result_with_the_answer() {
    let setup = Setup::new(Some(ASK));
    let port = web_greeter();
    let mut client = setup.start_at("2026-07-28", true);
    let call = |client: &mut Client, id: i64, retry: Option<(Value, Value)>| {
        call_2026_tool(client, id, "bash", bash_fetch(port), retry)["result"].clone()
    };
    let first = call(&mut client, 1, None);
    assert_eq!(first["resultType"], "input_required", "{first}");
    let question = &first["inputRequests"]["grant"]["params"];
    assert_eq!(question["message"], builtins_question(port), "{first}");
    let answer = json!({"grant": {"action": "accept", "content": {"answer": "session"}}});
    let second = call(&mut client, 2, Some((first["requestState"].clone(), answer)));
    let text = toolwright_tests::text_of(&second["content"]);
    assert!(second["isError"] == true && text.contains("403"), "{second}");
    assert!(
        text.contains("for this session. The command was not run again"),
        "{text}"
    );
    let third = call(&mut client, 3, None);
    let text = toolwright_tests::text_of(&third["content"]);
    assert!(third["isError"] != true && text.contains("hello"), "{third}");
}

#[test]
fn exec_ask_asks_about_bash_s_host_on_the_terminal_and_does_not_run_the_command_again() {
    let setup = Setup::new(Some(ASK));
    let port = web_greeter();
    // Only always or deny: `exec` runs one batch, so the session would allow nothing; `s` is no answer.
    let (success, out, _) = exec_ask_call(&setup, "bash", &bash_fetch(port), true, "s\n");
    assert!(success, "{out}");
    assert!(out.contains(&builtins_question(port)), "{out}");
    assert!(
        out.contains("[a]lways (written to your policy file), [d]eny?") && !out.contains("[s]ession"),
        "{out}"
    );
    assert!(!out.contains("The user allowed"), "{out}");
    assert_eq!(std::fs::read_to_string(setup.policy_file()).unwrap(), ASK);
    // Nor is `o`: not offered, it is recorded as no answer, never as allowed once.
    let (success, out, _) = exec_ask_call(&setup, "bash", &bash_fetch(port), true, "o\n");
    assert!(success && !out.contains("The user allowed"), "{out}");
    let asked = setup.questions_audited();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked
            .iter()
            .all(|(reason, verdict)| reason.ends_with("Answer: not answered.") && verdict == "blocked"),
        "{asked:?}"
    );
    let (success, out, _) = exec_ask_call(&setup, "bash", &bash_fetch(port), true, "a\n");
    assert!(success, "{out}");
    assert!(
        out.contains(&format!(
            "The user allowed the built-ins' commands to connect to `localhost:{port}` from now on (written to the \
             policy file)."
        )),
        "{out}"
    );
    let ends = execution_ends(&out);
    assert_eq!(ends.len(), 1, "not run again: {out}");
    assert_eq!(ends[0]["isError"], true, "{out}");
    let written = std::fs::read_to_string(setup.policy_file()).unwrap();
    assert!(
        written.contains(&format!("network = [\"localhost:{port}\"]")),
        "{written}"
    );
    // The next run reaches the host, and asks nothing.
    let (success, out, _) = exec_ask_call(&setup, "bash", &bash_fetch(port), true, "");
    assert!(
        success && out.contains("hello") && !out.contains("wants to"),
        "{out}"
    );
}

#[test]
fn an_approval_keeps_the_built_ins_exposure_and_the_policy_the_server_started_with() {
    let mut setup = Setup::new(Some(ASK));
    setup.extra = vec!["--expose", "write=hidden"];
    let port = web_greeter();
    let mut client = setup.start_watching("2025-11-25", true, "100");
    // While serving, the user's policy turns the built-ins' sandbox off (a command could have written it), and a
    // plugin arrives: the plugins are loaded again under it.
    std::fs::write(
        setup.policy_file(),
        format!("{ASK}[builtins]\nsandbox = \"off\"\n"),
    )
    .unwrap();
    plugin_arrives(&setup, &mut client);
    let (error, text) = client.call_tool(1, "bash", bash_fetch(port), &mut answering("session"));
    assert!(error && text.contains("for this session"), "{text}");
    assert!(
        client
            .call_tool(2, "bash", bash_fetch(port), &mut never_asked)
            .1
            .contains("hello")
    );
    // The built-ins were made again from the policy the server started with, plus the host: still sandboxed, so
    // another host is refused by the proxy (unsandboxed, bash would reach it directly).
    let other = web_greeter();
    let (error, text) = client.call_tool(3, "bash", bash_fetch(other), &mut answering("deny"));
    assert!(error && text.contains("403") && !text.contains("hello"), "{text}");
    // And `write` stays hidden.
    client.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"}));
    let listed = loop {
        let message = client.next();
        if message["id"] == 4 {
            break message;
        }
    };
    let names: Vec<&str> = listed["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"bash") && !names.contains(&"write"), "{names:?}");
}

#[test]
fn a_host_the_builtins_section_denies_is_never_asked_about() {
    let port = web_greeter();
    // The default grants written out, and the host denied.
    let policy = format!(
        "{ASK}[builtins]\nread = [\"/\"]\nwrite = [\".\"]\nspawn = [\"*\"]\nenv = [\"*\"]\n\
         deny = {{ network = [\"localhost:{port}\"] }}\n"
    );
    let setup = Setup::new(Some(&policy));
    let mut client = setup.start(true);
    let (error, text) = client.call_tool(1, "bash", bash_fetch(port), &mut never_asked);
    assert!(error && text.contains("403"), "{text}");
    // Another host is asked about: the denial is the reason, not asking being off.
    let other = web_greeter();
    let (error, _) = client.call_tool(2, "bash", bash_fetch(other), &mut answering("deny"));
    assert!(error);
    assert_eq!(client.questions.len(), 1);
    assert_eq!(client.questions[0]["message"], builtins_question(other));
}

#[test]
fn asking_turned_off_while_serving_stops_the_built_ins_questions_too() {
    let setup = Setup::new(Some(ASK));
    let port = web_greeter();
    let mut client = setup.start_watching("2025-11-25", true, "100");
    let (error, _) = client.call_tool(1, "bash", bash_fetch(port), &mut answering("deny"));
    assert!(error);
    assert_eq!(client.questions.len(), 1);
    // The user turns asking off; a plugin arrives, so the reload is seen.
    std::fs::write(setup.policy_file(), "[ask]\ngrants = false\n").unwrap();
    plugin_arrives(&setup, &mut client);
    let (error, text) = client.call_tool(2, "bash", bash_fetch(port), &mut never_asked);
    assert!(error && text.contains("403"), "{text}");
}

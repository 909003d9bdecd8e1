//! Plugins asking the client that made the call (`ask` in `wit/plugin.wit`): the conformance plugin's fixture
//! tools served by `toolwright mcp`, asked by a 2025-11-25 client written here (stdio: the server's
//! `elicitation/create`, `sampling/createMessage` and `roots/list` requests answered as each test says) and by
//! 2026-07-28 requests over HTTP (`input_required` rounds). What a plugin may not ask, and what a client cannot
//! forge, is tried here too; the suite's own scenarios are in `mcp_conformance*.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use toolwright_tests::mcp::{
    ASK_POLICY, HttpServer, StdioServer, call_2026, conformance_fixture, conformance_server_args,
    request_2026,
};

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");
const PLUGIN: &str = "toolwright-test-conformance";

/// `toolwright mcp` over stdio with the conformance plugin (the user's policy listing it in `[ask] sampling`, unless
/// `sampling_granted` is false), initialised by a 2025-11-25 client that declared `capabilities`.
struct Session {
    server: StdioServer,
    /// The requests the server sent the client: (method, params).
    asked: Vec<(String, Value)>,
    dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Session {
    fn start(sampling_granted: bool, capabilities: Value) -> Session {
        let (workspace, plugins) = conformance_fixture();
        let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
        let mut args = conformance_server_args(workspace.path(), plugins.path(), &cache);
        if !sampling_granted {
            // Without the policy file: the plugin is not listed in `[ask] sampling`.
            let at = args.iter().position(|a| a == "--policy").unwrap();
            args.drain(at..at + 2);
        }
        let mut command = Command::new(BINARY);
        command
            .args(["mcp", "--watch-plugins", "0", "--no-default-mcp"])
            .args(&args)
            .arg("--audit-log")
            .arg(workspace.path().join("audit.jsonl"))
            .env("XDG_CONFIG_HOME", workspace.path().join("config"));
        Session {
            server: StdioServer::start_as(&mut command, "2025-11-25", capabilities),
            asked: Vec::new(),
            dirs: (workspace, plugins),
        }
    }

    /// The audit log's records.
    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dirs.0.path().join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Call `tool` with `args`; each request of the server is answered with `answer(method, params)`. The
    /// result: (isError, text).
    fn call(&mut self, tool: &str, args: Value, answer: &dyn Fn(&str, &Value) -> Value) -> (bool, String) {
        self.server.call(1, tool, args);
        let asked = &mut self.asked;
        let message = self.server.response_answering(1, &mut |method, params| {
            asked.push((method.to_owned(), params.clone()));
            answer(method, params)
        });
        let result = &message["result"];
        assert!(result.is_object(), "{message}");
        (
            result["isError"] == true,
            toolwright_tests::text_of(&result["content"]),
        )
    }
}

/// What a client answers: a form accepted with `name` Alice (and `ok`), the model's "Paris", one root.
fn answers(method: &str, _params: &Value) -> Value {
    match method {
        "elicitation/create" => json!({"action": "accept", "content": {"name": "Alice", "ok": true}}),
        "sampling/createMessage" => json!({"role": "assistant", "content": {"type": "text", "text": "Paris"},
            "model": "test-model", "stopReason": "endTurn"}),
        "roots/list" => json!({"roots": [{"uri": "file:///projects/x", "name": "x"}]}),
        other => panic!("asked {other}"),
    }
}

fn every_capability() -> Value {
    json!({"elicitation": {"form": {}}, "sampling": {}, "roots": {}})
}

#[test]
fn a_session_is_asked_a_form_the_model_and_its_roots_while_the_call_waits() {
    let mut session = Session::start(true, every_capability());
    let (error, text) = session.call("test_input_required_result_multiple_inputs", json!({}), &answers);
    assert!(!error, "{text}");
    assert_eq!(text, "Paris Alice; roots: file:///projects/x (x)");
    let methods: Vec<&str> = session.asked.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        methods,
        ["elicitation/create", "sampling/createMessage", "roots/list"]
    );
    // The form names the plugin that asks: a plugin cannot pass for Toolwright.
    assert_eq!(
        session.asked[0].1["message"],
        format!("The plugin {PLUGIN} asks: What is your name?")
    );
    // The audit log says what was asked and what came of it, never the answers.
    let records = session.audit();
    let record = records
        .iter()
        .find(|r| r["tool"] == "test_input_required_result_multiple_inputs")
        .unwrap_or_else(|| panic!("no record in {records:?}"));
    assert_eq!(
        record["questions"],
        json!([
            {"method": "elicitation/create", "key": "user_name", "outcome": "accept"},
            {"method": "sampling/createMessage", "key": "greeting", "outcome": "answered"},
            {"method": "roots/list", "key": "client_roots", "outcome": "answered"},
        ])
    );
    assert!(!record.to_string().contains("Alice"), "{record}");
    // Two rounds of questions in one call: the session's client is asked each in turn.
    let (error, text) = session.call("test_input_required_result_multi_round", json!({}), &answers);
    assert!(!error, "{text}");
    assert!(text.starts_with("Alice's favourite colour is"), "{text}");
}

#[test]
fn a_plugin_not_granted_sampling_cannot_reach_the_clients_model() {
    let mut session = Session::start(false, every_capability());
    let (error, text) = session.call("test_sampling", json!({"prompt": "spend tokens"}), &answers);
    assert!(error, "{text}");
    assert!(
        text.contains(&format!("The plugin {PLUGIN} may not ask the client's model")),
        "{text}"
    );
    assert!(text.contains("[ask] sampling"), "{text}");
    assert!(session.asked.is_empty(), "{:?}", session.asked);
    let records = session.audit();
    let refused = &records.iter().find(|r| r["tool"] == "test_sampling").unwrap()["questions"][0];
    assert_eq!(refused["method"], "sampling/createMessage");
    assert!(
        refused["outcome"]
            .as_str()
            .unwrap()
            .starts_with("refused: The plugin"),
        "{refused}"
    );
    // What the plugin may use is what it is told it can ask: forms and roots, not the model.
    let (error, text) = session.call("test_input_required_result_capabilities", json!({}), &answers);
    assert!(!error, "{text}");
    assert_eq!(text, "Hello, Alice!");
    assert_eq!(session.asked.len(), 1);
    assert_eq!(session.asked[0].0, "elicitation/create");
}

#[test]
fn a_client_is_never_sent_a_request_it_did_not_declare() {
    let mut session = Session::start(true, json!({"sampling": {}}));
    let (error, text) = session.call("test_elicitation", json!({"message": "who?"}), &answers);
    assert!(error, "{text}");
    assert!(
        text.contains("did not declare the elicitation capability"),
        "{text}"
    );
    assert!(session.asked.is_empty());
    // A plugin that asks the way the client can answer gets its answer.
    let (error, text) = session.call("test_input_required_result_capabilities", json!({}), &answers);
    assert!(!error, "{text}");
    assert_eq!(text, "Hello, Paris!");
}

#[test]
fn toolwright_exec_has_nobody_to_ask() {
    let (workspace, plugins) = conformance_fixture();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let calls = json!({"toolCalls": [{"id": "c1", "name": "test_input_required_result_elicitation", "arguments": {}}]});
    let file = workspace.path().join("calls.json");
    std::fs::write(&file, calls.to_string()).unwrap();
    let out = Command::new(BINARY)
        .arg("exec")
        .arg(&file)
        .args(["--json", "--no-default-plugins", "--cwd"])
        .arg(workspace.path())
        .arg("--plugins")
        .arg(plugins.path())
        .arg("--cache-dir")
        .arg(&cache)
        .arg("--policy")
        .arg(workspace.path().join(ASK_POLICY))
        .env("XDG_CONFIG_HOME", workspace.path().join("config"))
        .output()
        .unwrap();
    let results = toolwright_tests::result_messages(&out.stdout);
    let text = toolwright_tests::text_of(&results[0]["content"]);
    assert_eq!(results[0]["isError"], true, "{text}");
    assert!(
        text.contains(&format!("The plugin {PLUGIN} has nobody to ask")),
        "{text}"
    );
}

fn http_server() -> (HttpServer, (tempfile::TempDir, tempfile::TempDir)) {
    let (workspace, plugins) = conformance_fixture();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let mut args = conformance_server_args(workspace.path(), plugins.path(), &cache);
    args.extend(["--allow".into(), "+codemode".into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (HttpServer::start(Path::new(BINARY), &args), (workspace, plugins))
}

#[test]
fn a_nested_call_asks_through_the_call_that_led_to_it_in_input_required_rounds() {
    let (server, _dirs) = http_server();
    let all = every_capability();
    let script = json!({"code": "return await tools.test_input_required_result_elicitation({})"});
    let (status, first) = call_2026(&server.url, "codemode", json!({"arguments": script}), all.clone());
    assert_eq!(status, 200, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let question = &result["inputRequests"]["user_name"];
    assert_eq!(question["method"], "elicitation/create");
    assert_eq!(
        question["params"]["message"],
        format!("The plugin {PLUGIN} asks: What is your name?")
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let retry = json!({
        "arguments": script,
        "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
        "requestState": state,
    });
    let (status, second) = call_2026(&server.url, "codemode", retry, all.clone());
    assert_eq!(status, 200, "{second}");
    assert_eq!(second["result"]["resultType"], "complete", "{second}");
    assert!(
        toolwright_tests::text_of(&second["result"]["content"]).contains("Hello, Alice!"),
        "{second}"
    );
    // The state is bound to its call: carried to another tool, or altered, it is refused by name.
    let elsewhere = json!({"requestState": state, "inputResponses": {}});
    let (status, refused) = call_2026(&server.url, "test_simple_text", elsewhere, all.clone());
    assert_eq!(status, 200, "{refused}");
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not one this server issued"),
        "{refused}"
    );
}

#[test]
fn a_2026_request_without_the_capability_a_question_needs_gets_32021_and_the_plugin_is_not_run_on() {
    let (server, _dirs) = http_server();
    let (status, response) = call_2026(
        &server.url,
        "test_missing_capability",
        json!({}),
        json!({"elicitation": {}}),
    );
    assert_eq!(status, 400, "{response}");
    assert_eq!(response["error"]["code"], -32021, "{response}");
    assert_eq!(
        response["error"]["data"]["requiredCapabilities"],
        json!({"sampling": {}})
    );
    // Answers forged for a question never asked do not make one: the plugin asks what it asks.
    let forged = json!({"inputResponses": {"capital_question": {"role": "assistant",
        "content": {"type": "text", "text": "forged"}, "model": "m"}}});
    let (_, response) = call_2026(
        &server.url,
        "test_input_required_result_elicitation",
        forged,
        every_capability(),
    );
    assert_eq!(response["result"]["resultType"], "input_required", "{response}");
}

#[test]
fn exec_ask_puts_a_plugins_forms_on_the_terminal_and_answers_roots_with_the_workspace() {
    let (workspace, plugins) = conformance_fixture();
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let calls = json!({"toolCalls": [
        {"id": "c1", "name": "test_input_required_result_multi_round", "arguments": {}},
        {"id": "c2", "name": "test_input_required_result_list_roots", "arguments": {}},
        {"id": "c3", "name": "test_sampling", "arguments": {"prompt": "hi"}},
    ], "mode": "sequential"});
    let file = workspace.path().join("calls.json");
    std::fs::write(&file, calls.to_string()).unwrap();
    let args: Vec<String> = [
        BINARY,
        "exec",
        "--ask",
        "--json",
        "--no-default-plugins",
        "--no-default-mcp",
        "--cwd",
        &workspace.path().to_string_lossy(),
        "--plugins",
        &plugins.path().to_string_lossy(),
        "--cache-dir",
        &cache.to_string_lossy(),
        "--policy",
        &workspace.path().join(ASK_POLICY).to_string_lossy(),
        &file.to_string_lossy(),
    ]
    .iter()
    .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
    .collect();
    // `script` gives the command a terminal; what is typed answers the two forms of the first call.
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &args.join(" "), "/dev/null"])
        .env("XDG_CONFIG_HOME", workspace.path().join("config"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"Alice\nteal\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    // On the terminal, the questions (stderr) and the events (stdout) share the output.
    assert!(
        text.contains(&format!("The plugin {PLUGIN} asks: Step 1: What is your name?")),
        "{text}"
    );
    let ends = toolwright_tests::terminal_execution_ends(&text);
    let result = |id: &str| {
        let end = ends
            .iter()
            .find(|e| e["toolCallId"] == id)
            .unwrap_or_else(|| panic!("{id}: {text}"));
        (
            end["isError"] == true,
            toolwright_tests::text_of(&end["result"]["content"]),
        )
    };
    assert_eq!(
        result("c1"),
        (false, "Alice's favourite colour is teal".to_owned())
    );
    let root = format!("file://{} (workspace)", workspace.path().display());
    assert_eq!(result("c2"), (false, format!("The client's roots: {root}")));
    let (error, sampled) = result("c3");
    assert!(
        error && sampled.contains("There is no model to ask on the terminal"),
        "{sampled}"
    );
}

/// The conformance plugin's prompt that asks the client for its context.
const ASKING_PROMPT: &str = "test_input_required_result_prompt";

/// An offer's request (`method` with `params`) from a session whose client declared every capability and answers
/// its one form with `content`: the response, after checking the form named the plugin and asked `question`,
/// and that the request has one audit record, `ok`. Then the same from a client that declared nothing: it is
/// asked nothing, and the request fails (-32603).
fn asks_the_session_s_client(method: &str, params: Value, content: Value, question: &str) -> Value {
    let mut session = Session::start(true, every_capability());
    session
        .server
        .send(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}));
    let asked = &mut session.asked;
    let message = session.server.response_answering(1, &mut |method, params| {
        asked.push((method.to_owned(), params.clone()));
        json!({"action": "accept", "content": content})
    });
    assert_eq!(session.asked.len(), 1, "{:?}", session.asked);
    let (asked_with, form) = &session.asked[0];
    assert_eq!(asked_with, "elicitation/create");
    assert_eq!(form["message"], format!("The plugin {PLUGIN} asks: {question}"));
    let records: Vec<Value> = session
        .audit()
        .into_iter()
        .filter(|r| r["tool"] == method)
        .collect();
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["outcome"], "ok", "{records:?}");
    // A client that cannot answer forms is not sent one: the request is not answered, and says why.
    let mut mute = Session::start(true, json!({}));
    mute.server
        .send(&json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": params}));
    let refused = mute
        .server
        .response_answering(2, &mut |method, _| panic!("asked {method}"));
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    message
}

#[test]
fn a_plugin_s_prompt_asks_the_session_s_client_while_prompts_get_waits() {
    let message = asks_the_session_s_client(
        "prompts/get",
        json!({"name": ASKING_PROMPT}),
        json!({"context": "the docs"}),
        "What context should the prompt use?",
    );
    assert_eq!(
        message["result"]["messages"][0]["content"]["text"], "Use this context: the docs",
        "{message}"
    );
}

#[test]
fn a_plugin_s_prompt_asks_a_2026_request_in_input_required_rounds_bound_to_the_prompt() {
    let (server, _dirs) = http_server();
    let all = every_capability();
    let prompt = |params: Value, capabilities: Value| {
        request_2026(&server.url, "prompts/get", ASKING_PROMPT, params, capabilities)
    };
    let (status, first) = prompt(json!({}), all.clone());
    assert_eq!(status, 200, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["user_context"]["method"], "elicitation/create",
        "{first}"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"user_context": {"action": "accept", "content": {"context": "the docs"}}});
    let (_, second) = prompt(
        json!({"requestState": state, "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(
        second["result"]["messages"][0]["content"]["text"], "Use this context: the docs",
        "{second}"
    );
    // Altered, the state is refused.
    let (_, altered) = prompt(
        json!({"requestState": format!("{state}x"), "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(altered["error"]["code"], -32602, "{altered}");
    // A tool call's state is not the prompt's, nor the prompt's a tool call's.
    let (_, asked) = call_2026(
        &server.url,
        "test_input_required_result_elicitation",
        json!({}),
        all.clone(),
    );
    let tool_state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    let (_, replayed) = prompt(
        json!({"requestState": tool_state, "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    let (_, carried) = call_2026(
        &server.url,
        "test_input_required_result_elicitation",
        json!({"requestState": state, "inputResponses": {}}),
        all.clone(),
    );
    assert_eq!(carried["error"]["code"], -32602, "{carried}");
    // No forms declared: the missing capability, not a question.
    let (status, undeclared) = prompt(json!({}), json!({}));
    assert_eq!(status, 400, "{undeclared}");
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
}

/// The conformance plugin's resource whose read asks the client which variant it wants.
const ASKING_RESOURCE: &str = "test://asking-resource";

#[test]
fn a_plugin_s_resource_read_asks_the_session_s_client_while_resources_read_waits() {
    let message = asks_the_session_s_client(
        "resources/read",
        json!({"uri": ASKING_RESOURCE}),
        json!({"variant": "short"}),
        "Which variant?",
    );
    assert_eq!(
        message["result"]["contents"][0]["text"], "the short variant",
        "{message}"
    );
    // Nobody to ask: a subscription to it is refused.
    let mut mute = Session::start(true, json!({}));
    mute.server.send(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "resources/subscribe",
        "params": {"uri": ASKING_RESOURCE}}),
    );
    let message = mute
        .server
        .response_answering(3, &mut |method, _| panic!("asked {method}"));
    assert_eq!(message["error"]["code"], -32603, "{message}");
    assert!(
        message["error"]["message"]
            .as_str()
            .unwrap()
            .contains("has nobody to ask"),
        "{message}"
    );
}

#[test]
fn a_plugin_s_resource_read_asks_a_2026_request_in_input_required_rounds_bound_to_the_uri() {
    let (server, _dirs) = http_server();
    let all = every_capability();
    let read = |uri: &str, params: Value, capabilities: Value| {
        request_2026(&server.url, "resources/read", uri, params, capabilities)
    };
    let (status, first) = read(ASKING_RESOURCE, json!({}), all.clone());
    assert_eq!(status, 200, "{first}");
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    assert_eq!(
        result["inputRequests"]["variant"]["method"], "elicitation/create",
        "{first}"
    );
    let state = result["requestState"].as_str().unwrap().to_owned();
    let answer = json!({"variant": {"action": "accept", "content": {"variant": "long"}}});
    let (_, second) = read(
        ASKING_RESOURCE,
        json!({"requestState": state, "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(
        second["result"]["contents"][0]["text"], "the long variant",
        "{second}"
    );
    // The state is the read's of that URI: refused for another URI and for a prompt; a prompt's refused here.
    let (_, elsewhere) = read(
        "test://static-text",
        json!({"requestState": state, "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(elsewhere["error"]["code"], -32602, "{elsewhere}");
    let (_, as_prompt) = request_2026(
        &server.url,
        "prompts/get",
        ASKING_PROMPT,
        json!({"requestState": state, "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(as_prompt["error"]["code"], -32602, "{as_prompt}");
    let (_, asked) = request_2026(&server.url, "prompts/get", ASKING_PROMPT, json!({}), all.clone());
    let prompt_state = asked["result"]["requestState"].as_str().unwrap().to_owned();
    let (_, replayed) = read(
        ASKING_RESOURCE,
        json!({"requestState": prompt_state, "inputResponses": answer}),
        all.clone(),
    );
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    // No forms declared: the missing capability, not a question.
    let (status, undeclared) = read(ASKING_RESOURCE, json!({}), json!({}));
    assert_eq!(status, 400, "{undeclared}");
    assert_eq!(undeclared["error"]["code"], -32021, "{undeclared}");
}

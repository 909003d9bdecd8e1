//! The `toolwright` binary's contract (`spec/cli-contract.md`): JSON lines on stdout, exit code 0 whenever the
//! batch ran, pi's texts for unknown tools, wrong types and coercible arguments.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::process::{Command, Stdio};

use serde_json::{Value, json};

/// [`exec`] that must succeed: its events (the workspace is gone).
fn exec_ok(calls: &Value, extra: &[&str]) -> Vec<Value> {
    let (out, _ws) = exec(calls, extra);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines(&out)
}

fn exec(calls: &Value, extra: &[&str]) -> (std::process::Output, tempfile::TempDir) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let calls_dir = tempfile::tempdir().unwrap();
    let calls_path = calls_dir.path().join("calls.json");
    std::fs::write(&calls_path, calls.to_string()).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg("--cwd")
        .arg(ws.path())
        .arg(&calls_path)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (out, ws)
}

fn lines(out: &std::process::Output) -> Vec<Value> {
    String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn end_text(events: &[Value], id: &str) -> String {
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
        .unwrap();
    end["result"]["content"][0]["text"].as_str().unwrap().to_owned()
}

#[test]
fn prints_pi_texts_for_unknown_tools_wrong_types_and_coercible_arguments() {
    let calls = json!({"toolCalls": [
        {"id": "c1", "name": "nope", "arguments": {}},
        {"id": "c2", "name": "read", "arguments": {"path": "a.txt", "offset": [2]}},
        {"id": "c3", "name": "read", "arguments": {"path": "a.txt", "offset": "2", "limit": true}}
    ]});
    let (out, _ws) = exec(&calls, &[]);
    assert_eq!(out.status.code(), Some(0));
    let events = lines(&out);
    assert_eq!(end_text(&events, "c1"), "Tool nope not found");
    assert_eq!(
        end_text(&events, "c2"),
        "Validation failed for tool \"read\":\n  - offset: expected number, got array\n\nReceived arguments:\n{\n  \"path\": \"a.txt\",\n  \"offset\": [\n    2\n  ]\n}"
    );
    assert_eq!(
        end_text(&events, "c3"),
        "two\n\n[2 more lines in file. Use offset=3 to continue.]"
    );
    let start = events
        .iter()
        .find(|e| e["type"] == "tool_execution_start" && e["toolCallId"] == "c3")
        .unwrap();
    assert_eq!(
        start["args"],
        json!({"path": "a.txt", "offset": "2", "limit": true}),
        "start events show raw arguments"
    );
    let unknown_end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "c1")
        .unwrap();
    assert!(
        unknown_end.get("durationMs").is_none(),
        "no durationMs when execute never ran"
    );
}

/// Events are written while the batch runs, not when it ends: a reader that acts on a start event (here, by
/// creating the file the running call waits for) sees it while the call still runs. `exec` gathers event lines
/// for at most a millisecond before writing them.
#[test]
fn events_reach_stdout_while_the_batch_runs() {
    use std::io::{BufRead, BufReader};
    let ws = tempfile::tempdir().unwrap();
    let calls = json!({"mode": "sequential", "toolCalls": [
        {"id": "r", "name": "read", "arguments": {"path": "a.txt"}},
        {"id": "w", "name": "bash", "arguments": {
            "command": "while [ ! -f go ]; do sleep 0.02; done; echo released", "timeout": 30}},
    ]});
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let calls_path = ws.path().join("calls.json");
    std::fs::write(&calls_path, calls.to_string()).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args(["exec", "--json", "--cwd"])
        .arg(ws.path())
        .arg(&calls_path)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut seen = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if event["type"] == "tool_execution_start" && event["toolCallId"] == "w" {
            // The read's end and messages came before this start, and nothing of the bash call's end yet.
            std::fs::write(ws.path().join("go"), "").unwrap();
        }
        seen.push(event);
    }
    assert!(child.wait().unwrap().success());
    assert!(
        ws.path().join("go").exists(),
        "the start event of the waiting call never arrived"
    );
    assert_eq!(end_text(&seen, "w").trim(), "released");
    let at = |kind: &str, id: &str| {
        seen.iter()
            .position(|e| e["type"] == kind && e["toolCallId"] == id)
            .unwrap()
    };
    assert!(at("tool_execution_end", "r") < at("tool_execution_start", "w"));
}

#[test]
fn sequential_flag_and_length_guard() {
    let calls = json!({"toolCalls": [{"id": "c1", "name": "read", "arguments": {"path": "a.txt"}}], "stopReason": "length"});
    let (out, _ws) = exec(&calls, &["--sequential"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        end_text(&lines(&out), "c1"),
        "Tool call \"read\" was not executed: the response hit the output token limit, so its arguments may be truncated. Re-issue the tool call with complete arguments."
    );
}

#[test]
fn the_last_line_is_the_batchs_terminate_decision() {
    // After every pi event, `batch_end` says whether pi's agent loop would stop: only when every result votes so.
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(toolwright_tests::programs::RAW, plugins.path().join("raw.wasm")).unwrap();
    let args = plugin_args(plugins.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    for (arguments, terminate) in [
        (vec!["terminate", "terminate"], true),
        (vec!["terminate", "fine"], false),
    ] {
        let calls: Vec<Value> = arguments
            .iter()
            .enumerate()
            .map(|(i, a)| json!({"id": format!("t{i}"), "name": "raw", "arguments": a}))
            .collect();
        let events = exec_ok(&json!({ "toolCalls": calls }), &args);
        assert_eq!(end_text(&events, "t1"), "raw ok");
        let last = events.last().unwrap();
        assert_eq!(
            last,
            &json!({"type": "batch_end", "terminate": terminate}),
            "{events:?}"
        );
        assert_eq!(events.iter().filter(|e| e["type"] == "batch_end").count(), 1);
    }
}

#[test]
fn a_bad_calls_file_is_a_cli_error_naming_the_file() {
    let ws = tempfile::tempdir().unwrap();
    let bad = ws.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("is not a valid calls file"), "{stderr}");
}

#[test]
fn guard_and_redactor_handlers_work_in_exec_on_native_and_wasm_builtins() {
    let plugins = tempfile::tempdir().unwrap();
    for (name, bytes) in toolwright_tests::programs::EXAMPLES {
        if name.ends_with("guard") || name.ends_with("redact") {
            std::fs::write(plugins.path().join(format!("{name}.wasm")), bytes).unwrap();
        }
    }
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let calls = json!({"toolCalls": [
        {"id": "g1", "name": "bash", "arguments": {"command": "rm -rf ./everything"}},
        {"id": "g2", "name": "bash", "arguments": {"command": "echo SECRET=hunter2"}},
        {"id": "g3", "name": "read", "arguments": {"path": "a.txt"}}
    ]});
    for builtins in ["native", "wasm"] {
        let args = [
            "--no-default-plugins",
            "--plugins",
            plugins.path().to_str().unwrap(),
            "--cache-dir",
            cache.to_str().unwrap(),
            "--builtins",
            builtins,
        ];
        let events = exec_ok(&calls, &args);
        assert_eq!(
            end_text(&events, "g1"),
            "guard: recursive deletes are not allowed",
            "{builtins}"
        );
        assert_eq!(end_text(&events, "g2"), "SECRET=[redacted]\n", "{builtins}");
        assert_eq!(end_text(&events, "g3"), "one\ntwo\nthree\n", "{builtins}");
    }
}

#[test]
fn plugins_lists_what_an_untrusted_project_policy_may_not_grant() {
    let ws = tempfile::tempdir().unwrap();
    let config = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    std::fs::write(
        ws.path().join("toolwright.toml"),
        "[plugins.toolwright-example-todos]\nread = [\".\", \"/etc\"]\nspawn = [\"sh\"]\n",
    )
    .unwrap();
    for (name, bytes) in toolwright_tests::programs::EXAMPLES {
        if name.ends_with("todos") {
            std::fs::write(plugins.path().join(format!("{name}.wasm")), bytes).unwrap();
        }
    }
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let plugins_out = |config_text: &str| {
        std::fs::create_dir_all(config.path().join("toolwright")).unwrap();
        std::fs::write(config.path().join("toolwright/toolwright.toml"), config_text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
            .args(["plugins", "--no-default-plugins", "--plugins"])
            .arg(plugins.path())
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--cwd")
            .arg(ws.path())
            .env("XDG_CONFIG_HOME", config.path())
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = plugins_out("");
    assert!(text.contains("    granted: read files below "), "{text}");
    assert!(
        text.contains("\n  limits: 60000 ms per call, 256 MiB of memory\n"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "ignored from the project's toolwright.toml (the project is not trusted; `toolwright trust` trusts it as \
             it is now, or grant these in your own toolwright.toml):\n  \
             [plugins.toolwright-example-todos] read = \"/etc\" (outside the workspace)\n  \
             [plugins.toolwright-example-todos] spawn = \"sh\"\n"
        ),
        "{text}"
    );
    let text = plugins_out(&format!("trusted-projects = [{:?}]\n", ws.path()));
    assert!(!text.contains("ignored from"), "{text}");
}

/// `exec`'s arguments for the plugins of `dir` alone, compiled into the tests' shared cache.
fn plugin_args(dir: &std::path::Path) -> Vec<String> {
    let cache = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    [
        "--no-default-plugins",
        "--plugins",
        dir.to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
    ]
    .map(String::from)
    .to_vec()
}

/// The content of the result message of call `id` (what the model sees).
fn message_content(events: &[Value], id: &str) -> Vec<Value> {
    let end = events
        .iter()
        .find(|e| e["type"] == "message_end" && e["message"]["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no message for {id}: {events:?}"));
    end["message"]["content"].as_array().unwrap().clone()
}

/// The texts (images as `<MIME>`) of `blocks`; a binary resource's saved file removed, named `<saved>`.
fn shown(blocks: &[Value]) -> Vec<String> {
    blocks
        .iter()
        .map(|b| match b["type"].as_str().unwrap() {
            "text" => {
                let text = b["text"].as_str().unwrap();
                match text.split_once(" saved to ") {
                    Some((head, path)) => {
                        std::fs::remove_file(path.trim_end_matches(']')).unwrap();
                        format!("{head} saved to <saved>]")
                    }
                    None => text.to_owned(),
                }
            }
            "image" => format!("<{}>", b["mimeType"].as_str().unwrap()),
            other => panic!("the model sees only text and images, not {other}: {b}"),
        })
        .collect()
}

/// A plugin directory with `raw` (toolwright:plugin@0.2.0) and `legacy` (built against the frozen 0.1.0).
fn legacy_plugins() -> tempfile::TempDir {
    let plugins = tempfile::tempdir().unwrap();
    for (program, file) in [
        (toolwright_tests::programs::RAW, "raw.wasm"),
        (toolwright_tests::programs::LEGACY, "legacy.wasm"),
    ] {
        std::fs::copy(program, plugins.path().join(file)).unwrap();
    }
    plugins
}

#[test]
fn audio_and_embedded_resources_reach_the_model_as_pi_shows_them_and_0_1_plugins_still_run() {
    // `raw` (toolwright:plugin@0.2.0) returns text, audio and two embedded resources; `legacy` was built against
    // the frozen 0.1.0 (a tool and a `tool_result` handler). The model sees pi's blocks; the result keeps its own
    // (`tool_execution_end`); a 0.1 plugin sees the model's view, and leaving a result alone keeps its blocks.
    let plugins = legacy_plugins();
    let policy = plugins.path().join("policy.toml");
    std::fs::write(&policy, "[plugins.toolwright-test-legacy]\ntools = [\"raw\"]\n").unwrap();
    let mut args = plugin_args(plugins.path());
    args.extend([
        "--policy".into(),
        policy.to_str().unwrap().into(),
        "--sequential".into(),
    ]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let calls = json!({"toolCalls": [
        {"id": "r1", "name": "raw", "arguments": "blocks"},
        {"id": "r2", "name": "raw", "arguments": "bad-audio"},
        {"id": "l1", "name": "legacy", "arguments": "nested"},
        {"id": "l2", "name": "legacy", "arguments": "plain"},
        {"id": "l3", "name": "legacy", "arguments": "callable"},
    ]});
    let (out, _ws) = exec(&calls, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = lines(&out);
    let model = [
        "raw ok",
        "[audio audio/wav omitted]",
        "embedded text",
        "[Binary resource raw://clip.ogg (audio/ogg, 3B) omitted]",
    ];
    assert_eq!(shown(&message_content(&events, "r1")), model);
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "r1")
        .unwrap();
    assert_eq!(end["result"]["content"], toolwright_tests::programs::raw_blocks());
    // The 0.1 handler saw the model's view, and changed only the details.
    let saw: Vec<String> = end["result"]["details"]["legacySaw"]
        .as_array()
        .unwrap_or_else(|| panic!("{end}"))
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        saw,
        [
            "text:raw ok",
            "text:[audio audio/wav omitted]",
            "text:embedded text",
            "text:[Binary resource raw://clip.ogg (audio/ogg, 3B) omitted]"
        ]
    );
    // A block that is not what it says is the plugin's error, named.
    let bad = message_content(&events, "r2");
    let bad = bad[0]["text"].as_str().unwrap();
    assert!(
        bad.contains("an audio block's `data` is not valid base64"),
        "{bad}"
    );
    // A 0.1 tool: a nested call's audio and resources come to it as the model's view.
    let nested = shown(&message_content(&events, "l1"));
    assert_eq!(nested[0], "nested: false", "{nested:?}");
    assert_eq!(nested[1..], model);
    assert_eq!(
        shown(&message_content(&events, "l2")),
        ["legacy ok", "<image/png>"]
    );
    let updates: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_execution_update" && e["toolCallId"] == "l2")
        .collect();
    assert_eq!(
        updates[0]["partialResult"]["content"][0]["text"], "legacy partial",
        "{events:?}"
    );
    let callable = shown(&message_content(&events, "l3"));
    assert!(
        callable[0].split(',').any(|t| t == "raw") && callable[0].split(',').any(|t| t == "legacy"),
        "{callable:?}"
    );
}

#[test]
fn a_0_1_plugin_gets_no_more_through_the_old_interfaces_than_a_0_2_one() {
    // The 0.1.0 imports are served by the current ones: the same grants, the same refusals.
    let plugins = legacy_plugins();
    let args = plugin_args(plugins.path());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let calls = json!({"toolCalls": [
        {"id": "s", "name": "legacy", "arguments": "spawn"},
        {"id": "r", "name": "legacy", "arguments": "read"},
        {"id": "n", "name": "legacy", "arguments": "nested"},
    ]});
    let events = exec_ok(&calls, &args);
    let spawned = shown(&message_content(&events, "s")).remove(0);
    assert!(
        spawned.starts_with(
            "refused: Permission denied: starting sh is not granted to the plugin toolwright-test-legacy"
        ),
        "{spawned}"
    );
    let read = shown(&message_content(&events, "r")).remove(0);
    assert!(read.starts_with("refused: "), "{read}");
    assert!(
        read.contains("; Permission denied: read access to ") && read.contains("a.txt is not granted"),
        "{read}"
    );
    let nested = shown(&message_content(&events, "n"));
    assert_eq!(nested[0], "nested: true", "{nested:?}");
    assert!(
        nested[1]
            .starts_with("Permission denied: the plugin toolwright-test-legacy may not call the tool raw."),
        "{nested:?}"
    );
    // Granted the workspace, the same read succeeds: the refusal above was the sandbox's.
    let policy = plugins.path().join("policy.toml");
    std::fs::write(&policy, "[plugins.toolwright-test-legacy]\nread = [\".\"]\n").unwrap();
    let mut args = plugin_args(plugins.path());
    args.extend(["--policy".into(), policy.to_str().unwrap().into()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (out, _ws) = exec(
        &json!({"toolCalls": [{"id": "r", "name": "legacy", "arguments": "read"}]}),
        &args,
    );
    let events = lines(&out);
    assert_eq!(shown(&message_content(&events, "r")), ["read: one\ntwo\nthree\n"]);
}

//! Codemode (spec §11) end to end: scripts run by the Boa engine inside the codemode wasm component, reaching the
//! built-in tools only through nested calls of the session.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use toolwright::codemode::CodemodeOptions;
use toolwright::registry::Selection;
use toolwright::toolset::{Toolset, ToolsetOptions};
use toolwright::{AssistantMessage, Dispatcher, EventLog, ToolCall, ToolResultMessage};

struct Session {
    dispatcher: Dispatcher,
    _toolset: Toolset,
}

fn cache_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("codemode-cache")
}

fn session(cwd: &Path, tools: &[&str], timeout: Duration) -> Session {
    let mut options = ToolsetOptions::new(cwd);
    options.plugin_dirs = Vec::new();
    options.policy_files = Vec::new();
    options.cache_dir = Some(cache_dir());
    let mut toolset = Toolset::load(&options).unwrap();
    toolset.codemode = Some(toolwright::codemode::definition(CodemodeOptions {
        cwd: cwd.to_owned(),
        cache_dir: Some(cache_dir()),
        hosts: options.hosts.clone(),
        timeout: Some(timeout),
        settings: Default::default(),
    }));
    let selection = Selection {
        tools: Some(tools.iter().map(|t| t.to_string()).collect()),
        ..Default::default()
    };
    let registry = toolset.registry(&selection, Vec::new()).unwrap();
    Session {
        dispatcher: Dispatcher::new(registry, toolset.pipeline(), cwd),
        _toolset: toolset,
    }
}

impl Session {
    async fn run(&self, calls: Vec<ToolCall>) -> Vec<ToolResultMessage> {
        let message = AssistantMessage {
            tool_calls: calls,
            ..Default::default()
        };
        self.dispatcher
            .run(&message, &EventLog::new(), &CancellationToken::new())
            .await
            .messages
    }

    async fn script(&self, code: &str) -> ToolResultMessage {
        self.run(vec![ToolCall::new("cm", "codemode", json!({ "code": code }))])
            .await
            .remove(0)
    }
}

fn texts(message: &ToolResultMessage) -> Vec<String> {
    message
        .content
        .iter()
        .filter_map(|c| c.as_text().map(str::to_owned))
        .collect()
}

/// The output after the header block, which carries the wall time.
fn output(message: &ToolResultMessage) -> String {
    let texts = texts(message);
    let header = &texts[0];
    let status = if message.is_error {
        "Script failed"
    } else {
        "Script completed"
    };
    assert!(header.starts_with(&format!("{status}\nWall time ")), "{header}");
    assert!(header.ends_with(" seconds\nOutput:\n"), "{header}");
    texts[1..].join("")
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("one.txt"), "apple\nbanana\n").unwrap();
    std::fs::write(dir.path().join("two.txt"), "cherry\nbanana split\n").unwrap();
    std::fs::write(dir.path().join("three.txt"), "date\n").unwrap();
    dir
}

const ALL: [&str; 8] = ["read", "bash", "edit", "write", "grep", "find", "ls", "codemode"];

#[tokio::test]
async fn a_script_reads_greps_and_summarises_in_one_call_with_the_same_results_as_separate_calls() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(60));
    let script = r#"
const files = ["one.txt", "two.txt", "three.txt"];
const contents = await Promise.all(files.map((path) => tools.read({ path })));
const hits = await tools.grep({ pattern: "banana" });
text(contents.join("---\n"));
text(hits);
console.log("files", files.length);
return { files: files.length, matches: hits.split("\n").length };
"#;
    let message = s.script(script).await;
    assert!(!message.is_error, "{:?}", texts(&message));
    let record = message.nested_calls.as_ref().unwrap();
    let calls: Vec<(&str, &str, &str)> = record
        .calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.status.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("cm/1", "read", "ok"),
            ("cm/2", "read", "ok"),
            ("cm/3", "read", "ok"),
            ("cm/4", "grep", "ok")
        ]
    );
    assert!(record.complete);
    assert_eq!(record.calls[0].arguments, Some(json!({"path": "one.txt"})));

    // The same calls issued by the model, one message each.
    let separate = s
        .run(vec![
            ToolCall::new("r1", "read", json!({"path": "one.txt"})),
            ToolCall::new("r2", "read", json!({"path": "two.txt"})),
            ToolCall::new("r3", "read", json!({"path": "three.txt"})),
            ToolCall::new("g1", "grep", json!({"pattern": "banana"})),
        ])
        .await;
    let results: Vec<String> = separate.iter().map(|m| texts(m).join("\n")).collect();
    assert_eq!(
        output(&message),
        format!(
            "==> text 1/3 <==\n{}---\n{}---\n{}==> text 2/3 <==\n{}\n==> text 3/3 <==\n{{\"files\":3,\"matches\":2}}\n\
             <console_output>\nfiles 3\n</console_output>",
            results[0], results[1], results[2], results[3]
        )
    );
    assert_eq!(results[3], "one.txt:2: banana\ntwo.txt:2: banana split");
}

#[tokio::test]
async fn a_script_cannot_reach_what_the_session_does_not_make_callable() {
    let dir = workspace();
    // grep is not active: not callable, not in `tools`.
    let s = session(dir.path(), &["read", "codemode"], Duration::from_secs(60));
    let message = s.script("return await tools.grep({ pattern: 'x' })").await;
    assert!(message.is_error);
    assert_eq!(
        output(&message),
        "Script error:\nTypeError: tools.grep does not exist. Available: read. ALL_TOOLS lists every tool; \
         searchTools(query) finds tools by topic. Check for a member with \"grep\" in tools.\n\nNo tool calls were made."
    );
    // codemode is model-only: a script cannot start a script.
    let message = s.script("return typeof tools.codemode").await;
    assert!(output(&message).starts_with("Script error:\nTypeError: tools.codemode does not exist."));
    // The host answers a raw call to a tool that is not callable with pi's error; the script sees it thrown.
    let message = s
        .script("try { await tools.read({ path: '/definitely/not/here' }) } catch (e) { return 'caught: ' + e.message }")
        .await;
    assert!(!message.is_error);
    assert!(
        output(&message).starts_with("caught: ENOENT"),
        "{}",
        output(&message)
    );
    assert_eq!(message.nested_calls.as_ref().unwrap().calls[0].status, "error");
}

#[tokio::test]
async fn scripts_fail_with_pis_texts() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(60));
    let cases = [
        (
            "throw new TypeError('bad')",
            "Script error:\nTypeError: bad\n\nNo tool calls were made.",
        ),
        (
            "await tools.read({ path: 'one.txt' }); throw 'plain'",
            "Script error:\nError: plain\n\nTool calls made before the failure (they are not undone): read (ok)",
        ),
        (
            "await new Promise(() => {})",
            "Script error:\nError: The script is waiting on a promise that can never settle: no tool call is \
             pending, and timers do not exist here.\n\nNo tool calls were made.",
        ),
    ];
    for (code, expected) in cases {
        let message = s.script(code).await;
        assert!(message.is_error, "{code}");
        assert_eq!(output(&message), expected, "{code}");
    }
    // Source errors are thrown: an ordinary error result without the script header.
    let message = s.script("x\n// @options: {}").await;
    assert_eq!(
        texts(&message),
        ["The // @options: line must be the first line of the input; found one on line 2"]
    );
    // exit() ends the script successfully, output so far kept.
    let message = s.script("text('kept'); exit(); text('never')").await;
    assert!(!message.is_error);
    assert_eq!(output(&message), "kept");
}

#[tokio::test]
async fn the_output_budget_cuts_the_middle_and_saves_the_whole() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(60));
    let message = s
        .script("// @options: {\"max_output_tokens\": 10}\ntext('a'.repeat(30) + 'b'.repeat(30))")
        .await;
    let out = output(&message);
    assert!(
        out.starts_with(&format!(
            "Warning: truncated output (original token count: 15)\nTotal output lines: 1\n\n{}…5 tokens truncated…{}\n\n[Full output: ",
            "a".repeat(20),
            "b".repeat(20)
        )),
        "{out}"
    );
    let path = message.details.as_ref().unwrap()["fullOutputPath"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        format!("{}{}", "a".repeat(30), "b".repeat(30))
    );
    std::fs::remove_file(path).unwrap();
}

#[tokio::test]
async fn a_script_that_loops_forever_is_stopped_at_its_deadline_and_the_host_goes_on() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(2));
    let started = Instant::now();
    let message = s.script("console.log('before'); while (true) {}").await;
    let elapsed = started.elapsed();
    // pi's result for a script stopped by its deadline: what it printed, the error, the calls it made.
    assert!(message.is_error);
    assert_eq!(
        output(&message),
        "<console_output>\nbefore\n</console_output>\nScript error:\nScript timed out: Execution timed out after \
         2000 ms\n\nNo tool calls were made."
    );
    // The first call also compiles the component when the cache is cold.
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}");
    let message = s.script("return 1 + 1").await;
    assert_eq!(output(&message), "2");
}

#[tokio::test]
async fn a_scripts_own_timeout_stops_it_with_pis_result_and_its_calls() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(60));
    // Compile (or map) the component first: the deadline below is the script's alone.
    s.script("return 0").await;
    let started = Instant::now();
    let message = s
        .script(
            "// @options: {\"timeout_ms\": 300}\nconst listing = await tools.ls({});\ntext(listing);\n\
             tools.bash({ command: 'sleep 5' });\nwhile (true) {}",
        )
        .await;
    let elapsed = started.elapsed();
    assert!(message.is_error);
    assert_eq!(
        output(&message),
        "one.txt\nthree.txt\ntwo.txt\nScript error:\nScript timed out: Execution timed out after 300 ms\n\n\
         Tool calls made before the failure (they are not undone): ls (ok), bash (cancelled)"
    );
    let calls = &message.details.as_ref().unwrap()["calls"];
    assert_eq!(calls[0]["id"], "cm/1");
    assert_eq!(calls[0]["status"], "ok");
    assert_eq!(calls[1]["name"], "bash");
    assert_eq!(calls[1]["status"], "cancelled");
    // Stopped by its own deadline, not the plugin's 60 s (docs/performance.md has the measured overshoot).
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    let message = s.script("return 'after'").await;
    assert_eq!(output(&message), "after");
}

#[tokio::test]
async fn a_flood_of_calls_from_a_script_hits_the_record_limits_and_the_host_stays_responsive() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(120));
    let message = s
        .script(
            "const all = await Promise.allSettled(Array.from({ length: 300 }, () => tools.ls({}))); \
             return all.filter((r) => r.status === 'fulfilled').length",
        )
        .await;
    assert!(!message.is_error, "{:?}", texts(&message));
    assert_eq!(output(&message), "300");
    let record = message.nested_calls.as_ref().unwrap();
    assert_eq!(record.calls.len(), 256);
    assert!(!record.complete);
    let details: &Value = message.details.as_ref().unwrap();
    assert_eq!(details["calls"].as_array().unwrap().len(), 300);
    assert_eq!(details["calls"][299]["id"], "cm/300");
    let next = s.run(vec![ToolCall::new("n", "ls", json!({}))]).await;
    assert!(!next[0].is_error);
}

/// A 1×1 PNG (70 bytes), as a script would show one.
const PIXEL_PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";

/// `toolwright exec --allow +codemode`, as a user runs it: two scripts in one batch (in turn), the first using
/// `store`, `image`, `searchTools`, `describeTool` and `describeNamespace`, the second loading what the first
/// stored.
#[test]
fn scripts_under_toolwright_exec_have_every_global() {
    let dir = workspace();
    let first = format!(
        "store('seen', {{ files: 3 }});\nimage('data:image/png;base64,{PIXEL_PNG}');\n\
         const found = await searchTools('list directory contents');\n\
         text(found.map((t) => t.name).slice(0, 1));\n\
         text((await describeTool('read')).split('\\n')[0]);\n\
         text(String(await describeNamespace('nothing')));"
    );
    let batch = json!({
        "mode": "sequential",
        "toolCalls": [
            {"id": "a", "name": "codemode", "arguments": {"code": first}},
            {"id": "b", "name": "codemode", "arguments": {"code": "return load('seen')"}},
        ]
    });
    let file = dir.path().join("calls.json");
    std::fs::write(&file, batch.to_string()).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg("exec")
        .arg(&file)
        .arg("--json")
        .args(["--no-default-plugins", "--allow", "+codemode", "--cache-dir"])
        .arg(cache_dir())
        .current_dir(dir.path())
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let messages: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["type"] == "message_end" && e["message"]["role"] == "toolResult")
        .map(|e| e["message"].clone())
        .collect();
    assert_eq!(messages.len(), 2, "{}", String::from_utf8_lossy(&out.stdout));
    let first = &messages[0]["content"];
    assert_eq!(messages[0]["isError"], false, "{first}");
    let label = first[1]["text"].as_str().unwrap();
    let saved = regex::Regex::new(r"^\[Image saved to (/\S+\.png) \(image/png, 70B\)\]$").unwrap();
    let path = saved.captures(label).unwrap_or_else(|| panic!("{label}"))[1].to_owned();
    assert_eq!(std::fs::read(&path).unwrap().len(), 70);
    std::fs::remove_file(&path).unwrap();
    assert_eq!(first[2]["type"], "image");
    assert_eq!(first[2]["mimeType"], "image/png");
    assert_eq!(
        first[3]["text"],
        "==> text 1/3 <==\n[\"ls\"]\n==> text 2/3 <==\nRead the contents of a file. Supports text files and images \
         (jpg, png, gif, webp, bmp). Images are sent as attachments. For text files, output is truncated to 2000 \
         lines or 50KB (whichever is hit first). Use offset/limit for large files. When you need the full file, \
         continue with offset until complete.\n==> text 3/3 <==\nundefined"
    );
    assert_eq!(messages[1]["content"][1]["text"], "{\"files\":3}");
}

/// The host holds the session's store and checks pi's limits itself: a script that tampers with the prelude's
/// `Map` to report writes its checks never saw gets none of them kept.
#[tokio::test]
async fn store_writes_past_the_limits_are_dropped_by_the_host_even_from_a_tampered_prelude() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(60));
    let message = s
        .script(
            "store('kept', 1);\n\
             Map.prototype[Symbol.iterator] = function* () { yield ['big', 'x'.repeat(300000)]; };\n\
             return 'tampered'",
        )
        .await;
    assert!(!message.is_error, "{:?}", texts(&message));
    let message = s.script("return [load('kept'), load('big')]").await;
    assert_eq!(output(&message), "[null,null]");
}

/// A script stopped by its deadline between two awaits answers `Script timed out`, not `Script aborted`.
#[tokio::test]
async fn a_deadline_between_awaits_is_a_timeout() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(60));
    let message = s
        .script("// @options: {\"timeout_ms\": 300}\nwhile (true) { await tools.ls({}); }")
        .await;
    assert!(message.is_error);
    let out = output(&message);
    assert!(
        out.starts_with("Script error:\nScript timed out: Execution timed out after 300 ms\n\n"),
        "{out}"
    );
}

/// A thousand calls in one `Promise.all`: every one settles, within the host's caps.
#[tokio::test]
async fn a_thousand_calls_in_one_script_all_settle() {
    let dir = workspace();
    let s = session(dir.path(), &ALL, Duration::from_secs(120));
    let message = s
        .script("const all = await Promise.all(Array.from({ length: 1000 }, () => tools.ls({}))); return all.length")
        .await;
    assert!(!message.is_error, "{:?}", texts(&message));
    assert_eq!(output(&message), "1000");
    // A query far longer than the ranker reads answers at once.
    let message = s
        .script("return (await searchTools('word '.repeat(200000))).length")
        .await;
    assert_eq!(output(&message), "0");
}

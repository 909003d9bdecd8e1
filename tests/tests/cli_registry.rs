//! `toolwright tools`, `prompt` and `declarations`, and `exec` honouring the active set: the built-ins plus
//! example plugins, with `--allow` / `--deny`, natively and with the built-ins as wasm plugins.

#![allow(clippy::unwrap_used)] // Test code: a panic is a failure with a message.

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

fn toolwright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_toolwright-cli"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn stdout(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// A plugin directory with the `wordcount` and `todos` example plugins.
fn example_plugins() -> tempfile::TempDir {
    let plugins = tempfile::tempdir().unwrap();
    for (name, bytes) in toolwright_tests::programs::EXAMPLES {
        if name.ends_with("wordcount") || name.ends_with("todos") {
            std::fs::write(plugins.path().join(format!("{name}.wasm")), bytes).unwrap();
        }
    }
    plugins
}

fn cache() -> String {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("component-cache")
        .display()
        .to_string()
}

fn exec(ws: &Path, calls: &Value, extra: &[&str]) -> Vec<Value> {
    let file = ws.join("calls.json");
    std::fs::write(&file, calls.to_string()).unwrap();
    let mut args = vec!["exec", "--no-default-plugins", "--cwd", ws.to_str().unwrap()];
    args.extend(extra);
    args.push(file.to_str().unwrap());
    stdout(&toolwright(&args))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|e: &Value| e["type"] == "tool_execution_end")
        .collect()
}

fn text_of<'a>(ends: &'a [Value], id: &str) -> &'a str {
    ends.iter().find(|e| e["toolCallId"] == id).unwrap()["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
}

#[test]
fn exec_runs_only_active_tools_and_deny_beats_allow() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("a.txt"), "one\n").unwrap();
    let calls = json!({"toolCalls": [
        {"id": "r", "name": "read", "arguments": {"path": "a.txt"}},
        {"id": "b", "name": "bash", "arguments": {"command": "echo hi"}},
        {"id": "e", "name": "edit", "arguments": {"path": "a.txt", "edits": [{"oldText": "one", "newText": "two"}]}},
        {"id": "s", "name": "tool_search", "arguments": {"query": "weather"}}
    ]});
    let ends = exec(ws.path(), &calls, &["--deny", "bash,e*"]);
    assert_eq!(text_of(&ends, "r"), "one\n");
    assert_eq!(text_of(&ends, "b"), "Tool bash not found");
    assert_eq!(text_of(&ends, "e"), "Tool edit not found");
    // tool_search is registered but inactive until named, as in pi.
    assert_eq!(text_of(&ends, "s"), "Tool tool_search not found");

    let ends = exec(
        ws.path(),
        &calls,
        &["--allow", "+tool_search", "--deny", "bash,edit"],
    );
    assert_eq!(text_of(&ends, "s"), "No matching tools found.");
    assert_eq!(text_of(&ends, "b"), "Tool bash not found");

    let ends = exec(ws.path(), &calls, &["--allow", "re*,bash", "--deny", "bash"]);
    assert_eq!(text_of(&ends, "r"), "one\n");
    assert_eq!(text_of(&ends, "b"), "Tool bash not found");
    assert_eq!(text_of(&ends, "s"), "Tool tool_search not found");
}

#[test]
fn a_selection_that_mixes_names_and_modifiers_is_refused() {
    let ws = tempfile::tempdir().unwrap();
    let out = toolwright(&[
        "tools",
        "--no-default-plugins",
        "--cwd",
        ws.path().to_str().unwrap(),
        "--allow",
        "read,+grep",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr).trim(),
        "toolwright: Invalid tools option: tool names cannot be mixed with +name or -name entries"
    );
}

#[test]
fn tools_prompt_and_declarations_show_builtins_and_plugins_alike_natively_and_as_wasm() {
    let ws = tempfile::tempdir().unwrap();
    let plugins = example_plugins();
    let cache = cache();
    let mut declared = Vec::new();
    for builtins in ["native", "wasm"] {
        let args = |command: &'static str| {
            vec![
                command.to_owned(),
                "--no-default-plugins".into(),
                "--cwd".into(),
                ws.path().display().to_string(),
                "--plugins".into(),
                plugins.path().display().to_string(),
                "--cache-dir".into(),
                cache.clone(),
                "--builtins".into(),
                builtins.into(),
            ]
        };
        let run = |command: &'static str, extra: &[&str]| {
            let mut a = args(command);
            a.extend(extra.iter().map(|s| s.to_string()));
            let a: Vec<&str> = a.iter().map(String::as_str).collect();
            stdout(&toolwright(&a))
        };

        let tools: Vec<Value> = serde_json::from_str(&run("tools", &["--json"])).unwrap();
        let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(
            names,
            [
                "read",
                "bash",
                "powershell",
                "edit",
                "write",
                "grep",
                "find",
                "ls",
                "codemode",
                "tool_search",
                "todos",
                "word_count"
            ]
        );
        let by_name = |n: &str| tools.iter().find(|t| t["name"] == n).unwrap();
        assert_eq!(
            by_name("read")["sourceInfo"],
            json!({"path": "builtin:read", "source": "builtin"})
        );
        assert_eq!(by_name("read")["grants"], Value::Null);
        let search = by_name("tool_search");
        assert_eq!(
            (&search["exposure"], &search["active"], &search["callable"]),
            (&json!("model-only"), &json!(false), &json!(false))
        );
        let count = by_name("word_count");
        assert_eq!(count["sourceInfo"]["source"], "plugin");
        assert_eq!(
            (&count["active"], &count["declared"], &count["callable"]),
            (&json!(true), &json!(true), &json!(true))
        );
        assert_eq!(count["grants"]["plugin"], "toolwright-example-wordcount");

        // MCP's annotations, in the JSON as the spec gives them and in the table's source column.
        assert_eq!(
            by_name("read")["annotations"],
            json!({"readOnlyHint": true, "destructiveHint": false, "idempotentHint": true, "openWorldHint": false})
        );
        assert_eq!(by_name("bash")["annotations"]["openWorldHint"], true);
        assert_eq!(by_name("codemode")["annotations"]["destructiveHint"], true);

        let table = run("tools", &[]);
        assert!(table.starts_with("TOOL "), "{table}");
        assert!(table.contains("tool_search  model-only   inactive"), "{table}");
        let line = |name: &str| {
            table
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("no {name} in {table}"))
                .to_owned()
        };
        assert!(
            line("read").ends_with("[read-only, idempotent]"),
            "{}",
            line("read")
        );
        assert!(
            line("bash").ends_with("[destructive, open-world]"),
            "{}",
            line("bash")
        );

        let prompt = run("prompt", &["--allow", "read,word_count"]);
        assert_eq!(
            prompt,
            "<tools>\n- read: Read file contents\n- word_count: Count words, lines and characters\n\n\
             Additional tools may be available.\n</tools>\n\n<rules>\n\
             - Use read to examine files instead of cat or sed.\n- Be concise in your responses\n\
             - Show file paths clearly when working with files\n</rules>\n"
        );

        let declarations: Value = serde_json::from_str(&run("declarations", &[])).unwrap();
        let names: Vec<&str> = declarations
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["name"].as_str().unwrap())
            .collect();
        assert_eq!(
            names,
            [
                "read",
                "bash",
                "edit",
                "write",
                "grep",
                "find",
                "ls",
                "todos",
                "word_count"
            ]
        );
        declared.push(declarations);
    }
    assert_eq!(
        declared[0], declared[1],
        "wasm built-ins declare exactly what native ones do"
    );
}

//! The example plugins in Python and JavaScript (`plugins/examples/py-todos`, `py-guard`, `js-wordcount`), built
//! from their sources as their authors would (componentize-py 0.25.1 from PyPI, componentize-js 0.23.0 from npm,
//! with the SDKs of `sdk/`), pass their own unit tests, and give the same results as the Rust examples they port
//! (`todos`, `guard` and `redact`, `wordcount`) under `toolwright exec`: the same texts and structured content, the same
//! decisions, and, for a plugin without its grant, the same refusal.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};
use toolwright_tests::programs::EXAMPLES;

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

fn ok(out: Output, what: &str) -> Output {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// componentize-py, installed once into a virtual environment under the target directory.
fn componentize_py() -> PathBuf {
    toolwright_tests::mcp::python_venv(&tmp(), "componentize-py-venv", "componentize-py==0.25.1")
        .join("bin/componentize-py")
}

/// A project directory for example `name` as its author has it: the example's files, the SDK beside them, and
/// the WIT tree from `toolwright wit`.
fn project(name: &str, sdk: &str) -> PathBuf {
    let dir = tmp().join("polyglot").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let source = root().join("plugins/examples").join(name);
    if source.exists() {
        for entry in std::fs::read_dir(source).unwrap() {
            let path = entry.unwrap().path();
            std::fs::copy(&path, dir.join(path.file_name().unwrap())).unwrap();
        }
    }
    let sdk = root().join(sdk);
    std::fs::copy(&sdk, dir.join(sdk.file_name().unwrap())).unwrap();
    ok(
        Command::new(BINARY)
            .args(["wit", "--out"])
            .arg(dir.join("wit"))
            .output()
            .unwrap(),
        "toolwright wit --out",
    );
    dir
}

/// Build the Python example `name` for `world` (after its unit tests): the component's path.
fn python_example(name: &str, world: &str) -> PathBuf {
    python_project(name, world, &[])
}

/// Build the Python project `name` for `world`: the example of that name, or these `files` (after its unit tests,
/// if it has them): the component's path.
fn python_project(name: &str, world: &str, files: &[(&str, &str)]) -> PathBuf {
    let (wasm, out) = python_build(name, world, files);
    ok(out, &format!("componentize-py of {name}"));
    wasm
}

/// [`python_project`], the build's output left to the caller: the component's path and componentize-py's output.
fn python_build(name: &str, world: &str, files: &[(&str, &str)]) -> (PathBuf, Output) {
    let dir = project(name, "sdk/python/toolwright_plugin.py");
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    if dir.join("test_app.py").exists() {
        ok(
            Command::new("python3")
                .args(["-m", "unittest"])
                .current_dir(&dir)
                .output()
                .unwrap(),
            &format!("{name}'s unit tests"),
        );
    }
    let wasm = dir.join(format!("{}.wasm", name.replace('-', "_")));
    let out = Command::new(componentize_py())
        .args(["-d", "wit", "-w", world, "componentize", "app", "-p", ".", "-o"])
        .arg(&wasm)
        .current_dir(&dir)
        .output()
        .unwrap();
    (wasm, out)
}

/// Build the JavaScript example `name` (after its unit tests): the component's path.
fn js_example(name: &str) -> PathBuf {
    js_project(name, &[])
}

/// Build the JavaScript project `name`: the example of that name, or these `files` with the entry and build
/// script of `js-wordcount` (after its unit tests, if it has them): the component's path.
fn js_project(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = project(name, "sdk/js/toolwright.js");
    let wasm = format!("{}.wasm", name.replace('-', "_"));
    if !files.is_empty() {
        let example = root().join("plugins/examples/js-wordcount");
        std::fs::copy(example.join("component.js"), dir.join("component.js")).unwrap();
        let build = std::fs::read_to_string(example.join("build.mjs")).unwrap();
        std::fs::write(dir.join("build.mjs"), build.replace("js_wordcount.wasm", &wasm)).unwrap();
    }
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    let modules =
        toolwright_tests::mcp::npm_packages(&tmp(), "plugins/js", "componentize-js").join("node_modules");
    std::os::unix::fs::symlink(modules, dir.join("node_modules")).unwrap();
    if dir.join("test.mjs").exists() {
        ok(
            Command::new("node")
                .args(["--test", "test.mjs"])
                .current_dir(&dir)
                .output()
                .unwrap(),
            &format!("{name}'s unit tests"),
        );
    }
    ok(
        Command::new("node")
            .arg("build.mjs")
            .current_dir(&dir)
            .output()
            .unwrap(),
        &format!("componentize-js of {name}"),
    );
    dir.join(wasm)
}

fn example(package: &str) -> &'static [u8] {
    EXAMPLES.iter().find(|(p, _)| *p == package).unwrap().1
}

/// `toolwright exec` of `calls` in `workspace` with the plugins of `plugins` (and `policy`, if any): the end
/// events by call id, as (isError, text, structuredContent).
fn run(plugins: &Path, workspace: &Path, policy: Option<&str>, calls: &Value) -> Vec<(bool, String, Value)> {
    run_in(&mut Command::new(BINARY), plugins, workspace, policy, calls)
}

/// [`run`] with `command` (the binary, given its environment).
fn run_in(
    command: &mut Command,
    plugins: &Path,
    workspace: &Path,
    policy: Option<&str>,
    calls: &Value,
) -> Vec<(bool, String, Value)> {
    let file = workspace.join("calls.json");
    std::fs::write(&file, calls.to_string()).unwrap();
    command
        .arg("exec")
        .arg(&file)
        .args(["--json", "--no-default-plugins", "--plugins"])
        .arg(plugins)
        .arg("--cwd")
        .arg(workspace)
        .arg("--cache-dir")
        .arg(tmp().join("component-cache"));
    let policy_file = workspace.join("policy.toml");
    std::fs::write(&policy_file, policy.unwrap_or("")).unwrap();
    command.arg("--policy").arg(&policy_file);
    let out = ok(command.output().unwrap(), "toolwright exec");
    std::fs::remove_file(&file).unwrap();
    std::fs::remove_file(&policy_file).unwrap();
    let events: Vec<Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    calls["toolCalls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|call| {
            let end = events
                .iter()
                .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == call["id"])
                .unwrap_or_else(|| panic!("no end for {call}: {events:?}"));
            (
                end["isError"] == true,
                end["result"]["content"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                end["result"]["structuredContent"].clone(),
            )
        })
        .collect()
}

fn calls(list: &[(&str, Value)]) -> Value {
    let calls: Vec<Value> = list
        .iter()
        .enumerate()
        .map(|(i, (name, args))| json!({"id": format!("c{i}"), "name": name, "arguments": args}))
        .collect();
    json!({ "toolCalls": calls })
}

/// A workspace with TODOs in nested files, a dot-file and a file without any.
fn workspace() -> tempfile::TempDir {
    let ws = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(ws.path().join("src/deep")).unwrap();
    std::fs::write(ws.path().join("notes.md"), "# Notes\nTODO: write them\n").unwrap();
    std::fs::write(
        ws.path().join("src/main.rs"),
        "fn main() {}\n// TODO(ana): errors\r\n",
    )
    .unwrap();
    std::fs::write(
        ws.path().join("src/deep/x.py"),
        "x = 1  # TODO  trailing   \n\nTODO",
    )
    .unwrap();
    std::fs::write(ws.path().join(".hidden"), "TODO never\n").unwrap();
    std::fs::write(ws.path().join("clean.txt"), "nothing to do\n").unwrap();
    ws
}

#[test]
fn the_python_and_javascript_examples_give_the_rust_examples_results() {
    let (py_todos, py_guard, js_wordcount) = (
        python_example("py-todos", "tool-plugin"),
        python_example("py-guard", "handler-plugin"),
        js_example("js-wordcount"),
    );
    let (rust, ported) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    for (file, package) in [
        ("todos.wasm", "toolwright-example-todos"),
        ("guard.wasm", "toolwright-example-guard"),
        ("wordcount.wasm", "toolwright-example-wordcount"),
        ("redact.wasm", "toolwright-example-redact"),
    ] {
        std::fs::write(rust.path().join(file), example(package)).unwrap();
    }
    for wasm in [&py_todos, &py_guard, &js_wordcount] {
        std::fs::copy(wasm, ported.path().join(wasm.file_name().unwrap())).unwrap();
    }
    let ws = workspace();
    let texts = [
        "one two\nthree\n",
        "",
        "naïve café\r\nok",
        "  spaced   out  \n\n\n",
        "日本語 テキスト",
    ];
    let batch = |todos: &str, word_count: &str| {
        let mut list: Vec<(&str, Value)> = texts.iter().map(|t| (word_count, json!({"text": t}))).collect();
        list.push((todos, json!({})));
        list.push((todos, json!({"path": "src"})));
        list.push((todos, json!({"path": "missing"})));
        list.push(("bash", json!({"command": "rm -rf ./nothing"})));
        list.push(("bash", json!({"command": "sudo echo rewritten"})));
        list.push(("bash", json!({"command": "echo __guard_fail__"})));
        list.push(("bash", json!({"command": "echo allowed"})));
        list.push((
            "bash",
            json!({"command": "echo SECRET=hunter2 AKIAABCDEFGHIJKLMNOP AKIAshort; echo SECRET="}),
        ));
        calls(&list)
    };
    let grant_rust = "[plugins.toolwright-example-todos]\nread = [\".\"]\n\
                      [plugins.toolwright-example-guard]\nrewrite = [\"bash\"]\n";
    let grant_ported = "[plugins.py-todos]\nread = [\".\"]\n[plugins.py-guard]\nrewrite = [\"bash\"]\n";
    let expected = run(
        rust.path(),
        ws.path(),
        Some(grant_rust),
        &batch("todos", "word_count"),
    );
    let got = run(
        ported.path(),
        ws.path(),
        Some(grant_ported),
        &batch("py_todos", "js_word_count"),
    );
    assert_eq!(expected.len(), got.len());
    // The Rust examples' answers are what they should be (the comparison below is only as good as they are).
    assert_eq!(
        expected[texts.len()].1,
        "notes.md:2: TODO: write them\nsrc/deep/x.py:1: TODO  trailing\nsrc/deep/x.py:3: TODO\nsrc/main.rs:2: TODO(ana): errors"
    );
    let bash = texts.len() + 3;
    let said = |r: &(bool, String, Value)| (r.0, r.1.clone());
    assert_eq!(
        said(&expected[bash]),
        (true, "guard: recursive deletes are not allowed".into())
    );
    assert_eq!(said(&expected[bash + 1]), (false, "rewritten\n".into()));
    assert_eq!(said(&expected[bash + 3]), (false, "allowed\n".into()));
    assert_eq!(
        said(&expected[bash + 4]),
        (
            false,
            "SECRET=[redacted] [redacted] AKIAshort\nSECRET=[redacted]\n".into()
        )
    );
    for (i, (want, have)) in expected.iter().zip(&got).enumerate() {
        if i == texts.len() + 2 {
            // A missing directory: each language's own words for it.
            assert!(want.0 && have.0, "{want:?} / {have:?}");
        } else if i == bash + 2 {
            // A failing handler blocks the call in both, with its message alone, as pi shows a throwing
            // extension's (tests/fixtures/handlers/failures.json).
            assert_eq!(said(want), (true, "guard asked to fail".into()));
            assert_eq!(said(have), said(want));
        } else if i >= bash {
            // bash's structured content has its wall time: the texts and error flags are what the guards decide.
            assert_eq!(said(want), said(have), "call {i}");
        } else {
            assert_eq!(want, have, "call {i}");
        }
    }

    // Without their grant, the Rust and the Python plugin are refused the same way, in the native built-ins'
    // words (naming the grant that would allow it).
    let refused =
        |plugins: &Path, todos: &str| run(plugins, ws.path(), None, &calls(&[(todos, json!({}))])).remove(0);
    let (rust_refusal, python_refusal) = (refused(rust.path(), "todos"), refused(ported.path(), "py_todos"));
    let workspace = ws.path().canonicalize().unwrap();
    assert_eq!(
        rust_refusal,
        (
            true,
            format!(
                "Permission denied: read access to {} is not granted (granted for read: none). A read-only or \
                 read-write grant of {} in the policy file (toolwright.toml) would allow it.",
                workspace.display(),
                workspace.display()
            ),
            Value::Null
        )
    );
    assert_eq!(python_refusal, rust_refusal);

    // The same under `toolwright mcp`, where an MCP client is the caller: the refusal is the call's error result.
    assert_eq!(
        mcp_call(ported.path(), ws.path(), "py_todos", json!({})),
        (true, rust_refusal.1.clone())
    );
    assert_eq!(
        mcp_call(ported.path(), ws.path(), "js_word_count", json!({"text": "a b"})),
        (false, "2 words, 1 lines, 3 characters".to_owned())
    );
}

/// One `tools/call` to `toolwright mcp` over stdio with the plugins of `plugins` and no policy: (isError, text).
fn mcp_call(plugins: &Path, workspace: &Path, tool: &str, args: Value) -> (bool, String) {
    let args_line = vec![
        "--no-default-plugins".to_owned(),
        "--plugins".to_owned(),
        plugins.to_string_lossy().into_owned(),
        "--cwd".to_owned(),
        workspace.to_string_lossy().into_owned(),
        "--cache-dir".to_owned(),
        tmp().join("component-cache").to_string_lossy().into_owned(),
    ];
    let mut mcp = toolwright_tests::mcp::StdioServer::start(Path::new(BINARY), &args_line);
    mcp.call(2, tool, args);
    let reply = mcp.response(2);
    (
        reply["result"]["isError"] == true,
        reply["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// A Python tool that writes a file with `open` and calls other tools (`ctx.tools()`, `ctx.call_tool`).
const PY_NESTED: &str = r#"
import json
from toolwright_plugin import Audio, Embedded, Image, Plugin, Read, Result, Write

plugin = Plugin("py-nested", "0.1.0", "Writes files and calls tools.",
                capabilities=[Read(".", "reads the workspace"), Write(".", "writes notes")])

@plugin.tool(name="py_write", description="Write a file.",
             parameters={"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                         "required": ["path", "text"]})
def py_write(args, ctx):
    with open(args["path"], "w") as f:
        f.write(args["text"])
    return "wrote " + args["path"]

@plugin.tool(name="py_nested", description="List the callable tools and run one.",
             parameters={"type": "object", "properties": {"tool": {"type": "string"}, "args": {"type": "object"}},
                         "required": ["tool", "args"]})
def py_nested(args, ctx):
    tools = ctx.tools()
    names = [t["name"] for t in tools]
    ls = next(t for t in tools if t["name"] == "ls")
    text, is_error = ctx.call_tool(args["tool"], args["args"])
    return json.dumps({"names": names, "ls_exposure": ls["exposure"], "ls_schema": ls["parameters"]["type"],
                       "text": text, "is_error": is_error})

@plugin.tool(name="py_blocks", description="Return every kind of block.", parameters={"type": "object"},
             long_running=False)
def py_blocks(args, ctx):
    return Result("blocks", blocks=[Image(b"\x89PNG", "image/png"), Audio(b"RIFF", "audio/wav"),
                                    Embedded("py://notes", text="noted", mime_type="text/plain"),
                                    Embedded("py://raw", blob=b"\x00\x01")])

try:
    Tool = plugin.export()
except ImportError:
    pass
"#;

/// The same two tools in JavaScript, with `node:fs`'s `writeFileSync` through the SDK's `ctx.fs`.
const JS_NESTED: &str = r#"
import { Plugin, audio, embedded, image, read, result, write } from "./toolwright.js";

export const plugin = new Plugin({
  name: "js-nested",
  version: "0.1.0",
  description: "Writes files and calls tools.",
  capabilities: [read(".", "reads the workspace"), write(".", "writes notes")],
});

plugin.tool(
  {
    name: "js_write",
    description: "Write a file.",
    parameters: { type: "object", properties: { path: { type: "string" }, text: { type: "string" } }, required: ["path", "text"] },
  },
  (args, ctx) => {
    ctx.fs.writeFileSync(args.path, args.text);
    return `wrote ${args.path}`;
  },
);

plugin.tool(
  {
    name: "js_nested",
    description: "List the callable tools and run one.",
    parameters: { type: "object", properties: { tool: { type: "string" }, args: { type: "object" } }, required: ["tool", "args"] },
  },
  (args, ctx) => {
    const tools = ctx.tools();
    const ls = tools.find((t) => t.name === "ls");
    const { text, isError } = ctx.callTool(args.tool, args.args);
    return JSON.stringify({
      names: tools.map((t) => t.name), ls_exposure: ls.exposure, ls_schema: ls.parameters.type, text, is_error: isError,
    });
  },
);

plugin.tool(
  { name: "js_blocks", description: "Return every kind of block.", parameters: { type: "object" }, longRunning: false },
  () => result("blocks", { blocks: [image("iVBORw==", "image/png"), audio("UklGRg==", "audio/wav"),
    embedded("js://notes", { text: "noted", mimeType: "text/plain" }), embedded("js://raw", { blob: new Uint8Array([0, 1]) })] }),
);
"#;

/// The entry of `JS_NESTED`, with the filesystem.
const JS_NESTED_ENTRY: &str = r#"
import * as host from "toolwright:plugin/host@0.2.0";
import * as preopens from "wasi:filesystem/preopens@0.2.12";
import { plugin } from "./app.js";

export const tool = plugin.exports({ host, preopens });
"#;

#[test]
fn python_and_javascript_plugins_write_only_what_they_are_granted_and_make_nested_calls() {
    let py = python_project("py-nested", "tool-plugin", &[("app.py", PY_NESTED)]);
    let js = js_project(
        "js-nested",
        &[("app.js", JS_NESTED), ("component.js", JS_NESTED_ENTRY)],
    );
    let plugins = tempfile::tempdir().unwrap();
    for wasm in [&py, &js] {
        std::fs::copy(wasm, plugins.path().join(wasm.file_name().unwrap())).unwrap();
    }
    let ws = workspace();
    let workspace = ws.path().canonicalize().unwrap();
    let notes = workspace.join("notes");
    std::fs::create_dir(&notes).unwrap();
    // Granted reads of the workspace, writes of `notes/` only.
    // Their nested `ls` runs within their own grants (`read = ["."]`).
    let policy = "[plugins.py-nested]\nread = [\".\"]\nwrite = [\"notes\"]\ntools = [\"ls\"]\n\
                  [plugins.js-nested]\nread = [\".\"]\nwrite = [\"notes\"]\ntools = [\"ls\"]\n";
    for (lang, write, nested) in [
        ("python", "py_write", "py_nested"),
        ("js", "js_write", "js_nested"),
    ] {
        let mut batch = calls(&[
            (write, json!({"path": "notes/ok.txt", "text": lang})),
            (write, json!({"path": "outside.txt", "text": "should not exist"})),
            (nested, json!({"tool": "ls", "args": {"path": "notes"}})),
            (nested, json!({"tool": nested, "args": {}})),
        ]);
        // In turn: the nested `ls` must see the file the first call wrote (in parallel it may run first).
        batch["mode"] = json!("sequential");
        let out = run(plugins.path(), ws.path(), Some(policy), &batch);
        assert!(!out[0].0, "{lang}: {:?}", out[0]);
        assert_eq!(std::fs::read_to_string(notes.join("ok.txt")).unwrap(), lang);
        // The refused write: the native built-ins' words, and nothing on disk.
        assert_eq!(
            out[1],
            (
                true,
                format!(
                    "Permission denied: write access to {} is not granted (granted for write: {}). A read-write \
                     grant of {} in the policy file (toolwright.toml) would allow it.",
                    workspace.join("outside.txt").display(),
                    notes.display(),
                    workspace.display(),
                ),
                Value::Null
            ),
            "{lang}"
        );
        assert!(
            !workspace.join("outside.txt").exists(),
            "{lang} wrote outside its grant"
        );
        // ctx.tools(): the callable tools with their exposure and schemas; the nested call ran ls.
        let report: Value =
            serde_json::from_str(&out[2].1).unwrap_or_else(|_| panic!("{lang}: {:?}", out[2]));
        let names: Vec<&str> = report["names"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        for tool in ["read", "bash", "ls", write, nested] {
            assert!(names.contains(&tool), "{lang}: {names:?}");
        }
        assert_eq!(report["ls_exposure"], "direct", "{lang}");
        assert_eq!(report["ls_schema"], "object", "{lang}");
        assert_eq!(report["text"], "ok.txt", "{lang}: {report}");
        assert_eq!(report["is_error"], false, "{lang}");
        // A nested call with arguments its schema refuses is an error outcome, not a trap.
        let report: Value =
            serde_json::from_str(&out[3].1).unwrap_or_else(|_| panic!("{lang}: {:?}", out[3]));
        assert_eq!(report["is_error"], true, "{lang}: {report}");
        std::fs::remove_file(notes.join("ok.txt")).unwrap();
    }
    // Audio and embedded resources (`toolwright:plugin@0.2.0`) reach an MCP client as the plugin returned them;
    // both tools say they are quick (`long_running`), so even a client that accepts tasks gets them at once.
    let args_line = vec![
        "--no-default-plugins".to_owned(),
        "--plugins".to_owned(),
        plugins.path().to_string_lossy().into_owned(),
        "--cwd".to_owned(),
        ws.path().to_string_lossy().into_owned(),
        "--cache-dir".to_owned(),
        tmp().join("component-cache").to_string_lossy().into_owned(),
    ];
    let mut mcp = toolwright_tests::mcp::StdioServer::start(Path::new(BINARY), &args_line);
    for (id, (tool, scheme)) in [(2, ("py_blocks", "py")), (3, ("js_blocks", "js"))] {
        mcp.call(id, tool, json!({}));
        let reply = mcp.response(id);
        assert_eq!(
            reply["result"]["content"],
            json!([
                {"type": "text", "text": "blocks"},
                {"type": "image", "data": "iVBORw==", "mimeType": "image/png"},
                {"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": format!("{scheme}://notes"), "mimeType": "text/plain",
                                                  "text": "noted"}},
                {"type": "resource", "resource": {"uri": format!("{scheme}://raw"), "blob": "AAE="}},
            ]),
            "{reply}"
        );
    }
    let server = toolwright_tests::mcp::HttpServer::start(
        Path::new(BINARY),
        &args_line.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    for tool in ["py_blocks", "js_blocks"] {
        let (status, reply) = toolwright_tests::mcp::call_2026(
            &server.url,
            tool,
            json!({}),
            json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
        );
        assert_eq!(status, 200, "{reply}");
        assert_eq!(reply["result"]["resultType"], "complete", "{tool}: {reply}");
        assert_eq!(reply["result"]["content"][2]["type"], "audio", "{tool}: {reply}");
    }
}

/// A Python tool that reports where it starts, reads a file by a relative path, and leaves for another directory.
const PY_WANDER: &str = r#"
import os

from toolwright_plugin import Plugin, Read

plugin = Plugin("py-wander", "0.1.0", "Leaves the workspace.", capabilities=[Read(".", "reads the workspace")])


@plugin.tool(description="Report the directory, read notes.md by a relative path, go to src.",
             parameters={"type": "object", "properties": {}})
def py_wander(args, ctx):
    start = os.getcwd()
    with open("notes.md") as f:
        first = f.readline().strip()
    os.chdir("src")
    return f"{start}|{first}|{os.getcwd()}"


try:
    Tool = plugin.export()
except ImportError:
    pass
"#;

#[test]
fn every_python_call_starts_in_the_workspace_even_after_a_call_left_it() {
    // The SDK skips `chdir` when a reused instance is already in the workspace: one that left must be brought back.
    let wasm = python_project("py-wander", "tool-plugin", &[("app.py", PY_WANDER)]);
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&wasm, plugins.path().join("py_wander.wasm")).unwrap();
    let ws = workspace();
    let workspace = ws.path().canonicalize().unwrap();
    let mut batch = calls(&[
        ("py_wander", json!({})),
        ("py_wander", json!({})),
        ("py_wander", json!({})),
    ]);
    batch["mode"] = json!("sequential");
    let expected = format!(
        "{}|# Notes|{}",
        workspace.display(),
        workspace.join("src").display()
    );
    for instance in ["", "instance = \"reuse\"\n"] {
        let policy = format!("[plugins.py-wander]\nread = [\".\"]\n{instance}");
        let out = run(plugins.path(), &workspace, Some(&policy), &batch);
        for (i, (is_error, text, _)) in out.iter().enumerate() {
            assert!(!is_error, "{instance} call {i}: {text}");
            assert_eq!(text, &expected, "{instance} call {i}");
        }
    }
}

/// A JavaScript tool with warm-up arguments that reach for the host, which is not there as the component is built.
const JS_WARM: &str = r#"
import { Plugin, read } from "./toolwright.js";

export const plugin = new Plugin({
  name: "js-warm",
  version: "0.1.0",
  description: "Counts its runs.",
  capabilities: [read(".", "reads the workspace")],
});

let runs = 0;

plugin.tool(
  {
    name: "js_warm",
    description: "Read a file, and say how many times this instance's module ran the tool.",
    parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"] },
    warmUp: [{ path: "notes.md" }, { path: "src/main.rs" }],
  },
  (args, ctx) => {
    runs += 1;
    ctx.log(`run ${runs}`);
    return `${runs}: ${ctx.fs.readFileSync(args.path, "utf8").split("\n")[0]}`;
  },
);
"#;

#[test]
fn a_javascript_tool_s_warm_up_runs_once_at_build_without_a_host_and_every_fresh_instance_starts_after_it() {
    let js = js_project(
        "js-warm",
        &[("app.js", JS_WARM), ("component.js", JS_NESTED_ENTRY)],
    );
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&js, plugins.path().join("js_warm.wasm")).unwrap();
    let ws = workspace();
    let policy = "[plugins.js-warm]\nread = [\".\"]\n";
    let mut batch = calls(&[
        ("js_warm", json!({"path": "notes.md"})),
        ("js_warm", json!({"path": "src/main.rs"})),
        ("js_warm", json!({"path": "notes.md"})),
    ]);
    batch["mode"] = json!("sequential");
    let results = run(plugins.path(), ws.path(), Some(policy), &batch);
    // The two warm-up runs counted (the file reads failed without a host, and the build went on); each call has
    // an instance of its own, starting from the memory they left.
    let texts: Vec<(bool, &str)> = results.iter().map(|(e, t, _)| (*e, t.as_str())).collect();
    assert_eq!(
        texts,
        [
            (false, "3: # Notes"),
            (false, "3: fn main() {}"),
            (false, "3: # Notes")
        ]
    );
}

/// A JavaScript handler whose hooks throw (an `Error`, a string) or return `fail(…)`, and redact otherwise.
const JS_FAILING_HANDLER: &str = r#"
import { Plugin, block, fail, result as make } from "./toolwright.js";

export const plugin = new Plugin({ name: "js-failing", version: "0.1.0", description: "Fails on request." });

plugin.onToolCall((tool, args) => {
  const input = JSON.stringify(args);
  if (input.includes("__guard_fail__")) throw new Error("guard asked to fail");
  if (input.includes("__guard_throw_string__")) throw "guard threw a string";
  if (input.includes("__guard_returns_fail__")) return fail("guard returned a failure");
  if (tool === "bash" && String(args.command ?? "").includes("rm -rf")) {
    return block("guard: recursive deletes are not allowed");
  }
  return undefined;
});

plugin.onToolResult((tool, args, result) => {
  if (result.text.includes("__redact_fail__")) throw new Error("redact asked to fail");
  // A replacement that keeps the result's other blocks (audio, embedded resources).
  if (tool === "raw") return make(`redacted ${result.blocks.length}`, { blocks: result.blocks });
  return undefined;
});
"#;

const JS_HANDLER_ENTRY: &str = r#"
import { plugin } from "./app.js";

export const handler = plugin.handlerExports();
"#;

/// The Python twin of [`JS_FAILING_HANDLER`] (a Python handler cannot raise anything but an exception).
const PY_FAILING_HANDLER: &str = r#"
import json
from toolwright_plugin import Block, Fail, Plugin, Result

plugin = Plugin("py-failing", "0.1.0", "Fails on request.")

@plugin.on_tool_call
def guard(tool, args):
    text = json.dumps(args)
    if "__guard_fail__" in text:
        raise RuntimeError("guard asked to fail")
    if "__guard_returns_fail__" in text:
        return Fail("guard returned a failure")
    if tool == "bash" and "rm -rf" in args.get("command", ""):
        return Block("guard: recursive deletes are not allowed")
    return None

@plugin.on_tool_result
def redact(tool, args, result):
    if "__redact_fail__" in result.text:
        raise ValueError("redact asked to fail")
    # A replacement that keeps the result's other blocks (audio, embedded resources).
    if tool == "raw":
        return Result(f"redacted {len(result.blocks)}", blocks=result.blocks)
    return None

try:
    Handler = plugin.export_handler()
except ImportError:
    pass
"#;

/// A Python tool that imports the standard library only inside its functions, and opens a file with a BOM, as
/// authors write them: componentize-py keeps only the modules imported during its build, so without the SDK's
/// bundling each call here failed in the component (`ModuleNotFoundError: No module named 'statistics'`,
/// `LookupError: unknown encoding: utf-8-sig`, `unknown encoding: idna`) while passing natively.
const PY_LAZY: &str = r#"
import json

from toolwright_plugin import Plugin, Read

plugin = Plugin("py-lazy", "0.1.0", "Imports inside its functions.", capabilities=[Read(".", "reads the numbers")])


@plugin.tool(description="The mean and sum of the numbers in a file.", label="Number statistics",
             parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
def py_stats(args, ctx):
    import statistics
    from decimal import Decimal
    from fractions import Fraction

    try:
        import a_module_nobody_has  # optional: the build goes on without it
    except ImportError:
        pass
    with open(ctx.resolve(args["path"]), encoding="utf-8-sig") as f:
        numbers = f.read().split()
    return f"mean {statistics.mean(Decimal(n) for n in numbers)}, sum {sum(Fraction(n) for n in numbers)}"


@plugin.tool(description="A host name in IDNA, where ~/x resolves, and the Python inside.",
             parameters={"type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]})
def py_where(args, ctx):
    import datetime
    import platform

    day = datetime.datetime.strptime("2026-12-06", "%Y-%m-%d").strftime("%d/%m")
    return json.dumps({"idna": args["host"].encode("idna").decode(), "home": ctx.resolve("~/x"),
                       "python": platform.python_version(), "day": day, "cp437": "é".encode("cp437").hex()})


try:
    Tool = plugin.export()
except ImportError:
    pass
"#;

#[test]
fn python_and_javascript_handlers_that_fail_give_pi_s_texts() {
    let fixture: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("tests/fixtures/handlers/failures.json")).unwrap(),
    )
    .unwrap();
    let recorded = |id: &str| {
        let r = fixture["recorded"]["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["id"] == id)
            .unwrap();
        (
            r["isError"] == true,
            r["content"][0]["text"].as_str().unwrap().to_owned(),
        )
    };
    let build = r#"
import { componentize } from "@bytecodealliance/componentize-js";
import { writeFile } from "node:fs/promises";
const { component } = await componentize({
  sourcePath: "component.js", witPath: "wit", worldName: "handler-plugin",
  disableFeatures: ["http", "fetch-event"],
});
await writeFile("js_failing.wasm", component);
"#;
    let js = js_project(
        "js-failing",
        &[
            ("app.js", JS_FAILING_HANDLER),
            ("component.js", JS_HANDLER_ENTRY),
            ("build.mjs", build),
        ],
    );
    let py = python_project("py-failing", "handler-plugin", &[("app.py", PY_FAILING_HANDLER)]);
    let ws = workspace();
    for (wasm, ids) in [
        (&js, &["f1", "f2", "f3", "f4", "f5"][..]),
        (&py, &["f1", "f3", "f4", "f5"][..]),
    ] {
        let plugins = tempfile::tempdir().unwrap();
        std::fs::copy(wasm, plugins.path().join(wasm.file_name().unwrap())).unwrap();
        let list: Vec<(&str, Value)> = fixture["scenario"]["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| ids.contains(&c["id"].as_str().unwrap()))
            .map(|c| ("bash", c["arguments"].clone()))
            .chain([("bash", json!({"command": "echo __guard_returns_fail__"}))])
            .collect();
        let got = run(plugins.path(), ws.path(), None, &calls(&list));
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                (got[i].0, got[i].1.clone()),
                recorded(id),
                "{} call {id}",
                wasm.display()
            );
        }
        assert_eq!(
            (got[ids.len()].0, got[ids.len()].1.as_str()),
            (true, "guard returned a failure"),
            "{}",
            wasm.display()
        );
        // A handler that replaces the text of a result with audio and embedded resources can keep them.
        std::fs::copy(toolwright_tests::programs::RAW, plugins.path().join("raw.wasm")).unwrap();
        let file = ws.path().join("calls.json");
        std::fs::write(
            &file,
            json!({"toolCalls": [{"id": "b", "name": "raw", "arguments": "blocks"}]}).to_string(),
        )
        .unwrap();
        let out = ok(
            Command::new(BINARY)
                .arg("exec")
                .arg(&file)
                .args(["--json", "--no-default-plugins", "--plugins"])
                .arg(plugins.path())
                .arg("--cwd")
                .arg(ws.path())
                .arg("--cache-dir")
                .arg(tmp().join("component-cache"))
                .output()
                .unwrap(),
            "toolwright exec",
        );
        std::fs::remove_file(&file).unwrap();
        let end = String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .find(|e| e["type"] == "tool_execution_end")
            .unwrap();
        let kinds: Vec<&str> = end["result"]["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            ["text", "audio", "resource", "resource"],
            "{}: {end}",
            wasm.display()
        );
        assert_eq!(
            end["result"]["content"][0]["text"],
            "redacted 3",
            "{}",
            wasm.display()
        );
        assert_eq!(
            end["result"]["content"][1]["data"],
            "UklGRg==",
            "{}",
            wasm.display()
        );
    }
}

#[test]
fn a_python_plugin_s_lazy_imports_and_codecs_are_in_its_component_and_an_unimportable_one_stops_the_build() {
    let wasm = python_project("py-lazy", "tool-plugin", &[("app.py", PY_LAZY)]);
    let plugins = tempfile::tempdir().unwrap();
    std::fs::copy(&wasm, plugins.path().join("py_lazy.wasm")).unwrap();
    let ws = workspace();
    let workspace = ws.path().canonicalize().unwrap();
    std::fs::write(workspace.join("numbers.txt"), "\u{feff}1.5 2.5\n5\n").unwrap();
    let home = tempfile::tempdir().unwrap();
    let home = home.path().canonicalize().unwrap();
    let batch = calls(&[
        ("py_stats", json!({"path": "numbers.txt"})),
        ("py_where", json!({"host": "bücher.example"})),
        ("py_stats", json!({"path": "missing.txt"})),
    ]);
    let exec = |home: &Path| {
        let mut command = Command::new(BINARY);
        command.env("HOME", home);
        let policy = "[plugins.py-lazy]\nread = [\".\"]\n";
        run_in(&mut command, plugins.path(), &workspace, Some(policy), &batch)
    };
    let out = exec(&home);
    assert_eq!(out[0].1, "mean 3, sum 9", "{:?}", out[0]);
    let said: Value = serde_json::from_str(&out[1].1).unwrap_or_else(|_| panic!("{:?}", out[1]));
    assert_eq!(said["idna"], "xn--bcher-kva.example");
    assert_eq!(said["day"], "06/12");
    assert_eq!(said["cp437"], "82");
    // The Python the docs name (docs/writing-plugins.md).
    assert!(said["python"].as_str().unwrap().starts_with("3.14."), "{said}");
    // Without a granted directory at, in or above the home, the plugin does not learn it: `~` is a plain name.
    assert_eq!(said["home"], workspace.join("~/x").to_str().unwrap());
    assert!(
        out[2].0 && out[2].1.starts_with("FileNotFoundError"),
        "{:?}",
        out[2]
    );
    // With one (the workspace inside the home), `~` is the home, as for the native tools.
    let out = exec(workspace.parent().unwrap());
    let said: Value = serde_json::from_str(&out[1].1).unwrap();
    assert_eq!(
        said["home"],
        workspace.parent().unwrap().join("x").to_str().unwrap()
    );

    // A tool's exception is the model's error result, not the host's: logged at debug with its message, and
    // without colour codes when stderr is not a terminal. The batch here comes from standard input, as a bare
    // array of calls.
    let policy = workspace.join("lazy-policy.toml");
    std::fs::write(&policy, "[plugins.py-lazy]\nread = [\".\"]\n").unwrap();
    let mut child = Command::new(BINARY)
        .args(["exec", "-", "--json", "--no-default-plugins", "--plugins"])
        .arg(plugins.path())
        .arg("--cwd")
        .arg(&workspace)
        .arg("--cache-dir")
        .arg(tmp().join("component-cache"))
        .arg("--policy")
        .arg(&policy)
        .env("TOOLWRIGHT_LOG", "debug")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(
        &mut child.stdin.take().unwrap(),
        br#"[{"id": "s1", "name": "py_stats", "arguments": {"path": "missing.txt"}}]"#,
    )
    .unwrap();
    let out = ok(child.wait_with_output().unwrap(), "toolwright exec -");
    let events = String::from_utf8_lossy(&out.stdout);
    assert!(
        events.contains(r#""toolCallId":"s1","toolName":"py_stats","result":{"content":[{"type":"text","text":"FileNotFoundError"#),
        "{events}"
    );
    let log = String::from_utf8_lossy(&out.stderr);
    let line = log
        .lines()
        .find(|l| l.contains("py_stats failed: FileNotFoundError: [Errno 44] No such file or directory"))
        .unwrap_or_else(|| panic!("{log}"));
    assert!(line.contains(" DEBUG "), "{line}");
    assert!(!log.contains(" ERROR ") && !log.contains('\x1b'), "{log}");

    // The label is the tool's title for an MCP client.
    let args = [
        "--no-default-plugins",
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--cwd",
        workspace.to_str().unwrap(),
        "--cache-dir",
        tmp().join("component-cache").to_str().unwrap(),
    ]
    .map(str::to_owned);
    let mut mcp = toolwright_tests::mcp::StdioServer::start(Path::new(BINARY), &args);
    mcp.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let listed = mcp.response(2);
    let tools = listed["result"]["tools"].as_array().unwrap();
    let title = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| t["title"].clone())
    };
    assert_eq!(title("py_stats"), Some(json!("Number statistics")), "{listed}");
    assert_eq!(title("py_where"), Some(json!("py_where")), "{listed}");

    // A module imported inside a function that the build cannot import: the build fails, naming it and where.
    let missing = PY_LAZY.replace(
        "    import statistics\n",
        "    import statistics\n    import no_such_module_here\n",
    );
    let (_, out) = python_build("py-lazy-missing", "tool-plugin", &[("app.py", &missing)]);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains(
            "BuildError: app.py:13 imports `no_such_module_here`, which cannot be imported while \
                       componentize-py builds the component (ModuleNotFoundError: No module named \
                       'no_such_module_here')"
        ),
        "{said}"
    );
}

/// A Python tool asking the client: what it may ask, a question it may not (the model), then a form and the roots.
const PY_ASK: &str = r#"
import json
from toolwright_plugin import Plugin, form, roots, sample

plugin = Plugin("py-ask", "0.1.0", "Asks the client.")

@plugin.tool(name="py_ask", description="Ask the user's name and the client's roots.",
             parameters={"type": "object", "properties": {}})
def py_ask(args, ctx):
    try:
        ctx.ask(sample("s", {"messages": [], "maxTokens": 1}))
        refused = None
    except RuntimeError as error:
        refused = str(error)
    name, where = ctx.ask(form("name", "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}),
                          roots("where"))
    return json.dumps({"can": ctx.client_answers(), "refused": refused, "name": name["content"]["name"],
                       "root": where["roots"][0]["uri"]})

try:
    Tool = plugin.export()
except ImportError:
    pass
"#;

/// The same tool in JavaScript.
const JS_ASK: &str = r#"
import { Plugin, form, roots, sample } from "./toolwright.js";

export const plugin = new Plugin({ name: "js-ask", version: "0.1.0", description: "Asks the client.", capabilities: [] });

plugin.tool(
  { name: "js_ask", description: "Ask the user's name and the client's roots.", parameters: { type: "object", properties: {} } },
  (args, ctx) => {
    let refused = null;
    try {
      ctx.ask(sample("s", { messages: [], maxTokens: 1 }));
    } catch (error) {
      refused = error.message;
    }
    const [name, where] = ctx.ask(
      form("name", "Your name?", { type: "object", properties: { name: { type: "string" } } }),
      roots("where"),
    );
    return JSON.stringify({ can: ctx.clientAnswers(), refused, name: name.content.name, root: where.roots[0].uri });
  },
);
"#;

#[test]
fn python_and_javascript_plugins_ask_the_client_in_input_required_rounds() {
    let py = python_project("py-ask", "tool-plugin", &[("app.py", PY_ASK)]);
    let js = js_project("js-ask", &[("app.js", JS_ASK), ("component.js", JS_NESTED_ENTRY)]);
    let plugins = tempfile::tempdir().unwrap();
    for wasm in [&py, &js] {
        std::fs::copy(wasm, plugins.path().join(wasm.file_name().unwrap())).unwrap();
    }
    let ws = workspace();
    let cache = tmp().join("component-cache");
    let args = [
        "--no-default-plugins",
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--cwd",
        ws.path().to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--allow",
        "+codemode",
    ];
    let server = toolwright_tests::mcp::HttpServer::start(Path::new(BINARY), &args);
    let capabilities = json!({"elicitation": {}, "sampling": {}, "roots": {}});
    for (lang, tool, plugin) in [("python", "py_ask", "py-ask"), ("js", "js_ask", "js-ask")] {
        let (_, first) = toolwright_tests::mcp::call_2026(&server.url, tool, json!({}), capabilities.clone());
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{lang}: {first}");
        let keys: Vec<&String> = result["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["name", "where"], "{lang}");
        let retry = json!({
            "requestState": result["requestState"],
            "inputResponses": {
                "name": {"action": "accept", "content": {"name": "Alice"}},
                "where": {"roots": [{"uri": "file:///projects/x"}]},
            },
        });
        let (_, second) = toolwright_tests::mcp::call_2026(&server.url, tool, retry, capabilities.clone());
        let text = toolwright_tests::text_of(&second["result"]["content"]);
        let report: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("{lang}: {second}"));
        assert_eq!(report["name"], "Alice", "{lang}");
        assert_eq!(report["root"], "file:///projects/x", "{lang}");
        // Not listed in `[ask] sampling`: the model is neither offered nor reachable, and the plugin is told why.
        assert_eq!(
            report["can"],
            json!(["elicitation/create", "roots/list"]),
            "{lang}"
        );
        let refused = report["refused"]
            .as_str()
            .unwrap_or_else(|| panic!("{lang}: {report}"));
        assert!(
            refused.contains(&format!("The plugin {plugin} may not ask the client's model")),
            "{lang}: {refused}"
        );
    }
    // Through another: a script calls the Python tool (its questions answered in round two), then the JavaScript
    // one, which asks under the same keys: the answers are the Python plugin's, and the JavaScript one is refused
    // them, not given them.
    let script = json!({"code": "const a = await tools.py_ask({}); let b; \
        try { b = await tools.js_ask({}); } catch (e) { b = String(e); } return JSON.stringify([a, b]);"});
    let (_, first) = toolwright_tests::mcp::call_2026(
        &server.url,
        "codemode",
        json!({"arguments": script}),
        capabilities.clone(),
    );
    let result = &first["result"];
    assert_eq!(result["resultType"], "input_required", "{first}");
    let retry = json!({
        "arguments": script,
        "requestState": result["requestState"],
        "inputResponses": {
            "name": {"action": "accept", "content": {"name": "Alice"}},
            "where": {"roots": [{"uri": "file:///projects/x"}]},
        },
    });
    let (_, second) = toolwright_tests::mcp::call_2026(&server.url, "codemode", retry, capabilities);
    let text = toolwright_tests::text_of(&second["result"]["content"]);
    assert!(text.contains("Alice"), "{second}");
    assert!(
        text.contains("js-ask asked under the key") && text.contains("which names another plugin's question"),
        "{text}"
    );
}

/// A Python plugin offering MCP resources, a template and a prompt beside its tool (world `tool-offers-plugin`).
const PY_OFFERS: &str = r##"
from toolwright_plugin import Plugin, form

plugin = Plugin("py-offers", "0.1.0", "Offers notes.")

@plugin.tool(name="py_noop", description="Nothing.", parameters={"type": "object", "properties": {}})
def py_noop(args, ctx):
    return "ok"

@plugin.resource("py://today", mime_type="text/markdown", description="Today's note")
def today(uri):
    return "# Today in Python"

@plugin.resource("py://pixel", mime_type="image/png")
def pixel(uri):
    return bytes([137, 80, 78, 71])

@plugin.resource_template("py://day/{date}")
def day(uri, date):
    if date == "never":
        raise ValueError("no such day")
    return f"note of {date}"

@plugin.resource_template("py://why/{topic}")
def why_about(uri, topic, ctx):
    answer, = ctx.ask(form("why", "Why?", {"type": "object", "properties": {"why": {"type": "string"}}}))
    return f"{topic}: because {answer['content']['why']}"

@plugin.prompt(description="Summarise a topic.", arguments=[("topic", "what to summarise", True)])
def summarise(args):
    return [f"Summarise {args['topic']}.", {"role": "assistant", "content": {"type": "text", "text": "Sure."}}]

@plugin.prompt(description="Asks the client why.", name="py_why")
def why(args, ctx):
    answer, = ctx.ask(form("why", "Why?", {"type": "object", "properties": {"why": {"type": "string"}}}))
    return f"Because {answer['content']['why']}."

try:
    Tool = plugin.export()
    Offers = plugin.export_offers()
except ImportError:
    pass
"##;

/// The same offers in JavaScript.
const JS_OFFERS: &str = r##"
import { Plugin, form } from "./toolwright.js";

export const plugin = new Plugin({ name: "js-offers", description: "Offers notes." });
plugin.tool({ name: "js_noop", description: "Nothing.", parameters: { type: "object", properties: {} } }, () => "ok");
plugin.resource({ uri: "js://today", name: "today", mimeType: "text/markdown" }, () => "# Today in JavaScript");
plugin.resource({ uri: "js://pixel", name: "pixel", mimeType: "image/png" }, () => new Uint8Array([137, 80, 78, 71]));
plugin.resourceTemplate({ uriTemplate: "js://day/{date}", name: "day" }, (uri, { date }) => {
  if (date === "never") throw new Error("no such day");
  return `note of ${date}`;
});
plugin.resourceTemplate({ uriTemplate: "js://why/{topic}", name: "why" }, (uri, { topic }, ctx) => {
  const [answer] = ctx.ask(form("why", "Why?", { type: "object", properties: { why: { type: "string" } } }));
  return `${topic}: because ${answer.content.why}`;
});
plugin.prompt(
  { name: "summarise_js", description: "Summarise a topic.", arguments: [{ name: "topic", required: true }] },
  (args) => [`Summarise ${args.topic}.`, { role: "assistant", content: { type: "text", text: "Sure." } }],
);
plugin.prompt({ name: "js_why", description: "Asks the client why." }, (args, ctx) => {
  const [answer] = ctx.ask(form("why", "Why?", { type: "object", properties: { why: { type: "string" } } }));
  return `Because ${answer.content.why}.`;
});
"##;

const JS_OFFERS_ENTRY: &str = r#"
import * as host from "toolwright:plugin/host@0.2.0";
import { plugin } from "./app.js";

export const tool = plugin.exports({ host });
const offered = plugin.offersExports({ host });
export const offers = {
  ...offered,
  // Greedy: asks the reader of every other plugin's resource, then says it has none.
  readResource(uri) {
    if (uri.startsWith("py://")) {
      const form = { message: "Mine?", requestedSchema: { type: "object", properties: {} } };
      try {
        host.ask([{ key: "greedy", method: "elicitation/create", params: JSON.stringify(form) }]);
      } catch {}
      throw { tag: "not-found" };
    }
    return offered.readResource(uri);
  },
};
"#;

const JS_OFFERS_BUILD: &str = r#"
import { componentize } from "@bytecodealliance/componentize-js";
import { writeFile } from "node:fs/promises";

const { component } = await componentize({
  sourcePath: "component.js",
  witPath: "wit",
  worldName: "tool-offers-plugin",
  disableFeatures: ["http", "fetch-event"],
});
await writeFile("js_offers.wasm", component);
"#;

#[test]
fn python_and_javascript_plugins_offer_resources_and_prompts() {
    let py = python_project("py-offers", "tool-offers-plugin", &[("app.py", PY_OFFERS)]);
    let js = js_project(
        "js-offers",
        &[
            ("app.js", JS_OFFERS),
            ("component.js", JS_OFFERS_ENTRY),
            ("build.mjs", JS_OFFERS_BUILD),
        ],
    );
    let plugins = tempfile::tempdir().unwrap();
    for wasm in [&py, &js] {
        std::fs::copy(wasm, plugins.path().join(wasm.file_name().unwrap())).unwrap();
    }
    let ws = workspace();
    let cache = tmp().join("component-cache");
    let args: Vec<String> = [
        "--no-default-plugins",
        "--plugins",
        plugins.path().to_str().unwrap(),
        "--cwd",
        ws.path().to_str().unwrap(),
        "--cache-dir",
        cache.to_str().unwrap(),
        "--no-resources",
    ]
    .iter()
    .map(|a| a.to_string())
    .collect();
    // `--no-resources` turns them off; without it, both languages' offers are served.
    let mut off = toolwright_tests::mcp::StdioServer::start(Path::new(BINARY), &args);
    off.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "prompts/list"}));
    assert_eq!(off.response(1)["error"]["code"], -32601);
    drop(off);
    let mut server = toolwright_tests::mcp::StdioServer::start(Path::new(BINARY), &args[..args.len() - 1]);
    let mut request = |id: i64, method: &str, params: Value| {
        server.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        server.response(id)
    };
    let listed = request(1, "resources/list", json!({}));
    let uris: Vec<&str> = listed["result"]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap())
        .collect();
    for uri in ["py://today", "py://pixel", "js://today", "js://pixel"] {
        assert!(uris.contains(&uri), "{uri}: {listed}");
    }
    // The JavaScript plugin comes first: it is asked to read the Python plugin's resources before it.
    let at = |uri: &str| uris.iter().position(|u| *u == uri).unwrap();
    assert!(at("js://today") < at("py://today"), "{uris:?}");
    let templates = request(2, "resources/templates/list", json!({}));
    let templates: Vec<&str> = templates["result"]["resourceTemplates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["uriTemplate"].as_str().unwrap())
        .collect();
    assert!(
        templates.contains(&"py://day/{date}") && templates.contains(&"js://day/{date}"),
        "{templates:?}"
    );
    let mut id = 10;
    for (lang, prefix, prompt) in [
        ("Python", "py", "summarise"),
        ("JavaScript", "js", "summarise_js"),
    ] {
        let mut read = |uri: String| {
            id += 1;
            request(id, "resources/read", json!({"uri": uri}))
        };
        let today = read(format!("{prefix}://today"));
        assert_eq!(
            today["result"]["contents"][0]["text"],
            format!("# Today in {lang}"),
            "{today}"
        );
        assert_eq!(today["result"]["contents"][0]["mimeType"], "text/markdown");
        let pixel = read(format!("{prefix}://pixel"));
        assert_eq!(pixel["result"]["contents"][0]["blob"], "iVBORw==", "{pixel}");
        let day = read(format!("{prefix}://day/2026-12-06"));
        assert_eq!(
            day["result"]["contents"][0]["text"], "note of 2026-12-06",
            "{day}"
        );
        let never = read(format!("{prefix}://day/never"));
        assert_eq!(never["error"]["code"], -32603, "{never}");
        assert!(
            never["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no such day"),
            "{never}"
        );
        let nothing = read(format!("{prefix}://nothing"));
        assert_eq!(nothing["error"]["code"], -32602, "{nothing}");
        id += 1;
        let filled = request(
            id,
            "prompts/get",
            json!({"name": prompt, "arguments": {"topic": "wasm"}}),
        );
        assert_eq!(
            filled["result"]["messages"],
            json!([
                {"role": "user", "content": {"type": "text", "text": "Summarise wasm."}},
                {"role": "assistant", "content": {"type": "text", "text": "Sure."}},
            ]),
            "{lang}: {filled}"
        );
    }
    drop(server);
    // A prompt that asks the client: a 2026-07-28 request in rounds, in both languages.
    let args: Vec<&str> = args[..args.len() - 1].iter().map(String::as_str).collect();
    let http = toolwright_tests::mcp::HttpServer::start(Path::new(BINARY), &args);
    let forms = json!({"elicitation": {}});
    for prompt in ["py_why", "js_why"] {
        let (_, first) =
            toolwright_tests::mcp::request_2026(&http.url, "prompts/get", prompt, json!({}), forms.clone());
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{prompt}: {first}");
        assert_eq!(
            result["inputRequests"]["why"]["method"], "elicitation/create",
            "{prompt}: {first}"
        );
        let retry = json!({
            "requestState": result["requestState"],
            "inputResponses": {"why": {"action": "accept", "content": {"why": "testing"}}},
        });
        let (_, second) =
            toolwright_tests::mcp::request_2026(&http.url, "prompts/get", prompt, retry, forms.clone());
        assert_eq!(
            second["result"]["messages"][0]["content"]["text"], "Because testing.",
            "{prompt}: {second}"
        );
    }
    // A resource read that asks the client (a template's, with its variables), likewise; the JavaScript plugin,
    // which asks the reader of every `py://` resource before saying it has none, never gets the client: only the
    // plugin that offers the URI asks.
    for uri in ["py://why/wasm", "js://why/wasm"] {
        let (_, first) =
            toolwright_tests::mcp::request_2026(&http.url, "resources/read", uri, json!({}), forms.clone());
        let result = &first["result"];
        assert_eq!(result["resultType"], "input_required", "{uri}: {first}");
        let keys: Vec<&String> = result["inputRequests"].as_object().unwrap().keys().collect();
        assert_eq!(keys, ["why"], "{uri}: {first}");
        let retry = json!({
            "requestState": result["requestState"],
            "inputResponses": {"why": {"action": "accept", "content": {"why": "it is fast"}}},
        });
        let (_, second) =
            toolwright_tests::mcp::request_2026(&http.url, "resources/read", uri, retry, forms.clone());
        assert_eq!(
            second["result"]["contents"][0]["text"], "wasm: because it is fast",
            "{uri}: {second}"
        );
    }
}

//! `toolwright new` as a new plugin author meets it: the project it writes builds with its one command, passes
//! its own tests and `toolwright check`, and runs under `toolwright exec --plugins .` in its directory, with the
//! grant its `toolwright.toml` gives. For a tool plugin and a handler plugin, in Rust, Python and JavaScript. Each
//! tool reads a granted file with its language's own file API, and a path outside its grant gets the same refusal
//! in every language: the native built-ins' text, naming the grant that would allow it.
//!
//! The Rust projects build with cargo from crates.io into a target directory under this crate's, shared by both;
//! the Python ones with componentize-py 0.25.1 from PyPI, installed once into a virtual environment there; the
//! JavaScript ones with componentize-js 0.23.0 from npm (pinned by `tests/plugins/js`), installed once there too.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BINARY: &str = env!("CARGO_BIN_EXE_toolwright-cli");

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
fn componentize_py() -> std::path::PathBuf {
    toolwright_tests::mcp::python_venv(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "componentize-py-venv",
        "componentize-py==0.25.1",
    )
    .join("bin/componentize-py")
}

/// componentize-js, installed once (`npm ci`) under the target directory: its `node_modules`.
fn componentize_js() -> std::path::PathBuf {
    toolwright_tests::mcp::npm_packages(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        "plugins/js",
        "componentize-js",
    )
    .join("node_modules")
}

/// `toolwright new NAME ARGS… --dir DIR`, then `./build.sh`: the project's directory.
fn new_and_build(dir: &Path, name: &str, args: &[&str]) -> std::path::PathBuf {
    let out = ok(
        Command::new(BINARY)
            .args(["new", name, "--dir"])
            .arg(dir)
            .args(args)
            .output()
            .unwrap(),
        "toolwright new",
    );
    let project = dir.join(name);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains(&format!("next: cd {} && ./build.sh", project.display())),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    if args.contains(&"js") {
        // What `npm install` would put there, shared by the tests' projects.
        std::os::unix::fs::symlink(componentize_js(), project.join("node_modules")).unwrap();
    }
    let package_js = std::fs::read_to_string(project.join("package.js")).ok();
    build(&project, args);
    // The build writes package.js from package.json: as `new` wrote it, until package.json changes.
    assert_eq!(
        std::fs::read_to_string(project.join("package.js")).ok(),
        package_js
    );
    project
}

/// `./build.sh` in `project`: its output.
fn build(project: &Path, args: &[&str]) -> Output {
    // One build at a time: two componentize-py runs at once (on their first use, at least) crash with a bus
    // error, and the JavaScript builds take 800 MB each.
    static BUILDING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _building = BUILDING.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    ok(
        Command::new("./build.sh")
            .current_dir(project)
            .env(
                "CARGO_TARGET_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("new-projects"),
            )
            .env("COMPONENTIZE_PY", componentize_py_if(args))
            .output()
            .unwrap(),
        "./build.sh",
    )
}

/// The componentize-py a Python project's build uses (an empty value for the others).
fn componentize_py_if(args: &[&str]) -> std::ffi::OsString {
    if args.contains(&"python") {
        componentize_py().into_os_string()
    } else {
        std::ffi::OsString::new()
    }
}

fn exec(project: &Path) -> Vec<Value> {
    exec_calls(project, "calls.json")
}

/// `toolwright exec CALLS` in the project, with its plugin and its policy: the events.
fn exec_calls(project: &Path, calls: &str) -> Vec<Value> {
    let out = ok(
        Command::new(BINARY)
            .args([
                "exec",
                calls,
                "--json",
                "--plugins",
                ".",
                "--no-default-plugins",
                "--cwd",
            ])
            .arg(project)
            .arg("--cache-dir")
            .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"))
            .current_dir(project)
            .output()
            .unwrap(),
        "toolwright exec",
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn end_text(events: &[Value], id: &str) -> (bool, String) {
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == id)
        .unwrap_or_else(|| panic!("no end event for {id}: {events:?}"));
    (
        end["isError"] == true,
        end["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

fn check(wasm: &Path) -> String {
    let out = ok(
        Command::new(BINARY)
            .arg("check")
            .arg(wasm)
            .arg("--cache-dir")
            .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"))
            .output()
            .unwrap(),
        "toolwright check",
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The new handler plugin `name` in `project` passes `check` as a handler, and under `exec` blocks the example's
/// recursive delete with its reason and lets `echo` through.
fn assert_blocks_recursive_deletes(project: &Path, name: &str) {
    let report = check(&project.join(format!("{}.wasm", name.replace('-', "_"))));
    assert!(
        report.starts_with(&format!("ok: {name} 0.1.0, a handler plugin")),
        "{report}"
    );
    let events = exec(project);
    assert_eq!(
        end_text(&events, "1"),
        (true, format!("{name}: recursive deletes are not allowed"))
    );
    assert_eq!(end_text(&events, "2"), (false, "allowed\n".to_owned()));
}

/// `toolwright exec --human` of the project's calls shows the template tool's own rendering of the call and of
/// its result (pi's renderCall / renderResult), and the default rendering of the error it leaves alone.
fn assert_renders_its_own_call_and_result(project: &Path) {
    let out = ok(
        Command::new(BINARY)
            .args([
                "exec",
                "calls.json",
                "--human",
                "--plugins",
                ".",
                "--no-default-plugins",
                "--cwd",
            ])
            .arg(project)
            .arg("--cache-dir")
            .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"))
            .current_dir(project)
            .output()
            .unwrap(),
        "toolwright exec --human",
    );
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(
        shown.contains("\x1b[0m count lines, words and bytes of README.md\n"),
        "{shown}"
    );
    assert!(
        shown.contains(&format!("\n  counted {}\n", readme_counted(project))),
        "{shown}"
    );
    assert!(
        shown.contains("\x1b[0m count lines, words and bytes of missing.txt\n"),
        "{shown}"
    );
    assert!(
        shown.contains("\n  ENOENT: no such file or directory, open 'missing.txt'")
            || shown.contains("\n  FileNotFoundError"),
        "{shown}"
    );
}

/// The new tool `tool` in `project` asked for a file outside its grant: the refusal, the same for every language
/// (and the text the native built-ins give), which names what is granted and the grant that would allow it.
fn assert_refuses_outside_its_grant(project: &Path, tool: &str) {
    let calls =
        serde_json::json!({"toolCalls": [{"id": "1", "name": tool, "arguments": {"path": "/etc/passwd"}}]});
    std::fs::write(project.join("outside.json"), calls.to_string()).unwrap();
    let granted = project.canonicalize().unwrap();
    assert_eq!(
        end_text(&exec_calls(project, "outside.json"), "1"),
        (
            true,
            format!(
                "Permission denied: read access to /etc/passwd is not granted (granted for read: {}). A read-only \
                 or read-write grant of /etc/passwd in the policy file (toolwright.toml) would allow it.",
                granted.display()
            )
        )
    );
}

/// `python3 -m unittest` in a new Python project, built: natively, and its component under this `toolwright`.
fn python_unit_tests(project: &Path) {
    let out = ok(
        Command::new("python3")
            .args(["-m", "unittest", "-v"])
            .current_dir(project)
            .env("TOOLWRIGHT", BINARY)
            .env(
                "TOOLWRIGHT_CACHE_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache"),
            )
            .output()
            .unwrap(),
        "python3 -m unittest in the new project",
    );
    // The template's tests ran the component too, and passed (unittest reports on stderr).
    let report = String::from_utf8_lossy(&out.stderr);
    assert!(report.contains("ComponentTest"), "{report}");
}

/// What the template's counter says about the project's README.
fn readme_counted(project: &Path) -> String {
    let readme = std::fs::read_to_string(project.join("README.md")).unwrap();
    format!(
        "README.md: {} lines, {} words, {} bytes",
        readme.lines().count(),
        readme.split_whitespace().count(),
        readme.len()
    )
}

#[test]
fn a_new_rust_tool_plugin_builds_tests_checks_and_runs_with_its_grant() {
    let dir = tempfile::tempdir().unwrap();
    let project = new_and_build(dir.path(), "line-counter", &["--lang", "rust"]);
    let tested = ok(
        Command::new("cargo")
            .arg("test")
            .current_dir(&project)
            .env(
                "CARGO_TARGET_DIR",
                Path::new(env!("CARGO_TARGET_TMPDIR")).join("new-projects"),
            )
            .output()
            .unwrap(),
        "cargo test in the new project",
    );
    // Without a warning: a new author's first `cargo test` should be clean.
    let said = String::from_utf8_lossy(&tested.stderr);
    assert!(!said.contains("warning"), "{said}");
    let report = check(&project.join("line_counter.wasm"));
    assert!(
        report.starts_with("ok: line-counter 0.1.0, a tool plugin"),
        "{report}"
    );
    assert!(
        report.contains("requests: read files below . (because: reads the file it is asked to count)"),
        "{report}"
    );
    let size = std::fs::metadata(project.join("line_counter.wasm"))
        .unwrap()
        .len();
    assert!(size < 1 << 20, "the release profile keeps it small: {size} bytes");

    let events = exec(&project);
    assert_eq!(end_text(&events, "1"), (false, readme_counted(&project)));
    assert_eq!(
        end_text(&events, "2"),
        (
            true,
            "ENOENT: no such file or directory, open 'missing.txt'".to_owned()
        )
    );
    assert_refuses_outside_its_grant(&project, "count");
    assert_renders_its_own_call_and_result(&project);
}

#[test]
fn a_new_rust_handler_plugin_blocks_what_it_should_and_lets_the_rest_through() {
    let dir = tempfile::tempdir().unwrap();
    let project = new_and_build(dir.path(), "delete-guard", &["--handler"]);
    assert_blocks_recursive_deletes(&project, "delete-guard");
}

#[test]
fn a_new_python_tool_plugin_builds_tests_checks_and_runs_with_python_s_own_file_api() {
    let dir = tempfile::tempdir().unwrap();
    let project = new_and_build(dir.path(), "py-counter", &["--lang", "python"]);
    python_unit_tests(&project);
    let report = check(&project.join("py_counter.wasm"));
    assert!(
        report.starts_with("ok: py-counter 0.1.0, a tool plugin"),
        "{report}"
    );
    let events = exec(&project);
    assert_eq!(end_text(&events, "1"), (false, readme_counted(&project)));
    // An uncaught exception is an error result with its message, and the traceback in details.
    let (is_error, text) = end_text(&events, "2");
    assert!(is_error);
    assert!(
        text.starts_with("FileNotFoundError: [Errno 44] No such file or directory: "),
        "{text}"
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "2")
        .unwrap();
    let traceback = end["result"]["details"]["traceback"].as_str().unwrap();
    assert!(
        traceback.starts_with("Traceback (most recent call last):"),
        "{traceback}"
    );
    assert!(!text.contains("a Rust plugin panicked"));
    assert_refuses_outside_its_grant(&project, "count");
    assert_renders_its_own_call_and_result(&project);
}

#[test]
fn a_new_python_handler_plugin_blocks_what_it_should_and_lets_the_rest_through() {
    let dir = tempfile::tempdir().unwrap();
    let project = new_and_build(dir.path(), "py-guard", &["--lang", "python", "--handler"]);
    python_unit_tests(&project);
    assert_blocks_recursive_deletes(&project, "py-guard");
}

/// `node --test test.mjs` in a new JavaScript project.
fn node_unit_tests(project: &Path) {
    ok(
        Command::new("node")
            .args(["--test", "test.mjs"])
            .current_dir(project)
            .output()
            .unwrap(),
        "node --test in the new project",
    );
}

#[test]
fn a_new_javascript_tool_plugin_builds_tests_checks_and_runs_with_the_sdk_s_file_api() {
    let dir = tempfile::tempdir().unwrap();
    let project = new_and_build(dir.path(), "js-counter", &["--lang", "js"]);
    node_unit_tests(&project);
    let report = check(&project.join("js_counter.wasm"));
    assert!(
        report.starts_with("ok: js-counter 0.1.0, a tool plugin"),
        "{report}"
    );
    assert!(
        report.contains("requests: read files below . (because: reads the file it is asked to count)"),
        "{report}"
    );
    let events = exec(&project);
    assert_eq!(end_text(&events, "1"), (false, readme_counted(&project)));
    // A thrown Error is an error result with its message, and the stack in details.
    assert_eq!(
        end_text(&events, "2"),
        (
            true,
            "ENOENT: no such file or directory, open 'missing.txt'".to_owned()
        )
    );
    let end = events
        .iter()
        .find(|e| e["type"] == "tool_execution_end" && e["toolCallId"] == "2")
        .unwrap();
    let stack = end["result"]["details"]["stack"].as_str().unwrap();
    assert!(stack.contains("readFileSync"), "{stack}");
    assert_refuses_outside_its_grant(&project, "count");
    assert_renders_its_own_call_and_result(&project);

    // The build names what the engine inside lacks and Node has, with the line (a `\p{…}` literal would also fail
    // it: gaps.js is not imported here).
    std::fs::write(
        project.join("gaps.js"),
        "export const f = (s) => s.normalize(\"NFC\");\nexport const g = (s) => /\\p{L}/u.test(s);\n",
    )
    .unwrap();
    let built = build(&project, &["--lang", "js"]);
    let said = String::from_utf8_lossy(&built.stderr);
    assert!(
        said.contains("warning: gaps.js:1: the component's engine has no String.prototype.normalize\n")
            && said.contains(
                "warning: gaps.js:2: the component's engine has no Unicode property escapes (\\p{…}) in regular \
                 expressions\n"
            ),
        "{said}"
    );
}

#[test]
fn a_new_javascript_handler_plugin_blocks_what_it_should_and_lets_the_rest_through() {
    let dir = tempfile::tempdir().unwrap();
    let project = new_and_build(dir.path(), "js-guard", &["--lang", "js", "--handler"]);
    node_unit_tests(&project);
    assert_blocks_recursive_deletes(&project, "js-guard");
    // The name, version and description are package.json's.
    let manifest = std::fs::read_to_string(project.join("package.json")).unwrap();
    let manifest = manifest.replace("\"version\": \"0.1.0\"", "\"version\": \"2.5.0\"");
    std::fs::write(project.join("package.json"), manifest).unwrap();
    build(&project, &["--lang", "js"]);
    let report = check(&project.join("js_guard.wasm"));
    assert!(
        report.starts_with("ok: js-guard 2.5.0, a handler plugin"),
        "{report}"
    );
}

#[test]
fn new_refuses_a_bad_name_and_an_existing_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BINARY)
        .args(["new", "My_Tool", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot name a plugin"));
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    let out = Command::new(BINARY)
        .args(["new", "taken", "--dir"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("already exists"));
}

//! `toolwright mcp` driven by a client no one here wrote: the official MCP Python SDK (`mcp` 2.3.0 from PyPI),
//! through `tests/mcp/python_client.py`: initialize, list, a built-in, a validation error, an unknown tool,
//! `tool_search` and `tools/list_changed`, a wasm plugin tool, progress from a long bash, cancelling it (no process
//! left behind), and the next call.
//!
//! Over streamable HTTP (`tests/mcp/python_http_client.py`), as a 2025-11-25 client (a session) and as a
//! 2026-07-28 one (stateless): annotations, structured results as each revision has them, a wasm plugin's tool,
//! its logs and its progress, cancelling a long bash (no process left behind), and a clean exit on SIGTERM.
//!
//! Long calls as tasks (`tests/mcp/python_tasks_client.py`), as a 2026-07-28 client of the tasks extension: a bash
//! call polled and its result fetched, another cancelled (no process left behind), neither seen by another client.
//!
//! A plugin's questions for the client (`tests/mcp/python_ask_client.py`), answered by the SDK's callbacks: sent to
//! a 2025-11-25 session while the call waits, and as `input_required` rounds its driver answers at 2026-07-28.
//!
//! The SDK is installed once into a virtual environment under the target directory (`python3 -m venv`, then
//! `pip install mcp==2.3.0`); set `TOOLWRIGHT_PYTHON` to use another interpreter.

#![allow(clippy::unwrap_used, clippy::expect_used)] // Test code: a panic is a failure with a message.

use std::path::{Path, PathBuf};
use std::process::Command;

const SDK: &str = "mcp==2.3.0";

/// The virtual environment's interpreter, made on first use.
fn python() -> PathBuf {
    toolwright_tests::mcp::python_venv(Path::new(env!("CARGO_TARGET_TMPDIR")), "mcp-python-venv", SDK)
        .join("bin/python")
}

/// Run `tests/mcp/SCRIPT TOOLWRIGHT WORKSPACE PLUGIN_DIR CACHE_DIR EXTRA…` with the plugin directory holding the
/// examples whose names end with one of `examples` (and the conformance fixtures when `fixtures`); it must pass.
fn run_client(script: &str, examples: &[&str], fixtures: bool, extra: &[&str]) {
    let python = python();
    let workspace = tempfile::tempdir().unwrap();
    let plugins = tempfile::tempdir().unwrap();
    for (name, bytes) in toolwright_tests::programs::EXAMPLES {
        if examples.iter().any(|e| name.ends_with(e)) {
            std::fs::write(plugins.path().join(format!("{name}.wasm")), bytes).unwrap();
        }
    }
    if fixtures {
        std::fs::copy(
            toolwright_tests::programs::CONFORMANCE,
            plugins.path().join("conformance.wasm"),
        )
        .unwrap();
    }
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("component-cache");
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/mcp")
        .join(script);
    let out = Command::new(python)
        .arg(&script)
        .arg(env!("CARGO_BIN_EXE_toolwright-cli"))
        .arg(workspace.path())
        .arg(plugins.path())
        .arg(&cache)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{} {extra:?} failed:\n{}\n{}",
        script.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all checks passed"));
}

#[test]
fn the_official_python_client_drives_toolwright_mcp() {
    run_client("python_client.py", &["wordcount", "todos"], false, &[]);
}

fn http_client(mode: &str) {
    run_client("python_http_client.py", &["wordcount"], true, &[mode]);
}

#[test]
fn the_official_python_client_drives_toolwright_mcp_over_http_as_a_2025_11_25_client() {
    http_client("legacy");
}

#[test]
fn the_official_python_client_drives_toolwright_mcp_over_http_as_a_2026_07_28_client() {
    http_client("modern");
}

#[test]
fn the_official_python_client_polls_cancels_and_fetches_bash_tasks_over_http() {
    run_client("python_tasks_client.py", &[], false, &[]);
}

/// A plugin's questions (`ask`) answered by the SDK's callbacks: a session's requests (2025-11-25), and the SDK's
/// multi-round-trip driver on `input_required` results (2026-07-28).
#[test]
fn the_official_python_client_answers_a_plugins_questions_over_http_in_both_revisions() {
    run_client("python_ask_client.py", &[], true, &["legacy"]);
    run_client("python_ask_client.py", &[], true, &["modern"]);
}
